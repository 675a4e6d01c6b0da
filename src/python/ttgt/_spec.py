"""Argument forms of numpy's einsum: the subscripts string, the interleaved
(operand, sublist, ...) form, and the `optimize` argument."""

from __future__ import annotations

import string
from typing import Any, List, Optional, Sequence, Tuple

_LETTERS = string.ascii_uppercase + string.ascii_lowercase


def _sublist(sub: Sequence[Any]) -> str:
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
            continue
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < len(_LETTERS):
            raise ValueError(f"subscript labels in the sublist form are ints 0..51 or Ellipsis, not {s!r}")
        out.append(_LETTERS[s])
    return "".join(out)


def split_operands(args: Sequence[Any]) -> Tuple[str, List[Any]]:
    """(subscripts, operands) from einsum's positional arguments in either form."""
    if not args:
        raise TypeError("einsum needs the subscripts and at least one operand")
    if isinstance(args[0], str):
        return args[0], list(args[1:])
    operands = list(args[0::2])
    subs = list(args[1::2])
    output = None
    if len(args) % 2 == 1:
        output = operands.pop()
    spec = ",".join(_sublist(s) for s in subs)
    if output is not None:
        spec += "->" + _sublist(output)
    return spec, operands


Strategy = Tuple[Optional[str], Optional[List[List[int]]], Optional[int]]


def strategy(optimize: Any) -> Strategy:
    """(strategy name, explicit path, memory limit) for the Rust layer from numpy's
    `optimize`: False, True, None and 'auto' give ttgt's own search (fewest predicted
    seconds); 'greedy' and 'optimal' name numpy's two (fewest FLOPs); a list
    ``['einsum_path', (0, 1), ...]`` is an explicit path; a tuple (name, memory_limit)
    bounds the intermediates (elements): ('auto', limit) slices the network where no
    order fits, the others fail."""
    if optimize is None or isinstance(optimize, bool) or optimize == "auto":
        return None, None, None
    if isinstance(optimize, str):
        if optimize in ("greedy", "optimal"):
            return optimize, None, None
        raise ValueError(f"optimize must be a bool, 'greedy', 'optimal', 'auto', a path or a tuple, not {optimize!r}")
    if isinstance(optimize, tuple) and len(optimize) == 2 and isinstance(optimize[0], str):
        name, _, _ = strategy(optimize[0])
        limit = optimize[1]
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 0:
            raise ValueError(f"the memory limit of optimize must be a non-negative number, not {limit!r}")
        return name, None, int(limit)
    if isinstance(optimize, (list, tuple)) and optimize and optimize[0] == "einsum_path":
        steps = []
        for step in optimize[1:]:
            if not isinstance(step, (list, tuple)) or not step:
                raise ValueError(f"each step of an explicit path is a tuple of positions, not {step!r}")
            for p in step:
                if isinstance(p, bool) or not isinstance(p, int) or p < 0:
                    raise ValueError(f"path positions are non-negative ints, not {p!r}")
            steps.append([int(p) for p in step])
        return None, steps, None
    raise ValueError(f"optimize must be a bool, 'greedy', 'optimal', 'auto', a path or a tuple, not {optimize!r}")
