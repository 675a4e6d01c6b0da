"""Subscripts of an einsum over dask arrays, made explicit: ``...`` spelled out with unused
letters, the implicit output written, extent-1 broadcasting resolved."""

from __future__ import annotations

import string
from collections import Counter
from typing import Dict, List, Sequence, Tuple

_LETTERS = string.ascii_uppercase + string.ascii_lowercase


def explicit(subscripts: str, ndims: Sequence[int]) -> Tuple[List[str], str]:
    """The operands' subscripts and the output's, with ``...`` replaced by letters the
    subscripts do not use (numpy's broadcasting: the ellipsis axes align at the right) and
    the implicit output of numpy's rule (the ellipsis axes, then the letters that appear
    once, in sorted order).

    >>> explicit("...ij,...jk", [3, 2])
    (['Aij', 'jk'], 'Aik')
    >>> explicit("ij,jk", [2, 2])
    (['ij', 'jk'], 'ik')
    """
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        lhs, out = spec.split("->", 1)
        if "->" in out:
            raise ValueError(f"subscripts {subscripts!r} have more than one '->'")
    else:
        lhs, out = spec, None
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"subscripts {subscripts!r} name {len(terms)} operands, {len(ndims)} were given")
    for t in terms + ([out] if out is not None else []):
        rest = t.replace("...", "", 1)
        bad = [c for c in rest if c not in _LETTERS]
        if bad:
            raise ValueError(f"subscripts {subscripts!r}: {bad[0]!r} is not a letter (or one '...')")
    used = {c for c in spec if c in _LETTERS}
    free = [c for c in _LETTERS if c not in used]
    widths = []
    for t, n in zip(terms, ndims):
        letters = len(t.replace("...", "", 1))
        if "..." in t:
            if n < letters:
                raise ValueError(f"operand with subscripts {t!r} has {n} axes, fewer than its letters")
            widths.append(n - letters)
        elif letters != n:
            raise ValueError(f"operand with subscripts {t!r} has {n} axes, not {letters}")
        else:
            widths.append(0)
    width = max(widths, default=0)
    if width > len(free):
        raise ValueError(f"subscripts {subscripts!r}: too many '...' axes for the letters left")
    ell = "".join(free[:width])
    expanded = [t.replace("...", ell[width - w :], 1) for t, w in zip(terms, widths)]
    if out is None:
        counts = Counter(c for t in expanded for c in t if c not in ell)
        out_letters = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    else:
        if "..." not in out and any("..." in t for t in terms) and width:
            raise ValueError(f"subscripts {subscripts!r}: the output must name '...' when operands do")
        out_letters = out.replace("...", ell, 1)
        seen = set()
        for c in out_letters:
            if c in seen:
                raise ValueError(f"subscripts {subscripts!r}: output letter {c!r} appears twice")
            seen.add(c)
            if not any(c in t for t in expanded):
                raise ValueError(f"subscripts {subscripts!r}: output letter {c!r} names no operand axis")
    return expanded, out_letters


def extents(terms: Sequence[str], shapes: Sequence[Sequence[int]]) -> Tuple[Dict[str, int], List[List[int]]]:
    """Each letter's extent, and per operand the axes of extent 1 that broadcast against a
    larger extent of the same letter elsewhere (numpy's rule); unequal extents otherwise are
    an error.

    >>> extents(["ij", "jk"], [(2, 3), (1, 4)])
    ({'i': 2, 'j': 3, 'k': 4}, [[], [0]])
    """
    ext: Dict[str, int] = {}
    for t, shape in zip(terms, shapes):
        for c, n in zip(t, shape):
            if n != 1 or c not in ext:
                if c in ext and ext[c] != 1 and ext[c] != n:
                    raise ValueError(f"index {c!r} has extents {ext[c]} and {n}")
                ext[c] = max(ext.get(c, 1), n)
    stretched = [[ax for ax, (c, n) in enumerate(zip(t, shape)) if n == 1 and ext[c] > 1] for t, shape in zip(terms, shapes)]
    return ext, stretched
