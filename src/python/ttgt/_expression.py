"""Einsum expressions planned once and evaluated many times (opt_einsum's
``contract_expression``), with constant operands whose steps are evaluated once."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from . import _arrays, _spec, _ttgt
from ._api import Scalar
from ._plan import _Planned
from ._threads import _requested


class Expression(_Planned):
    """An einsum planned for operands of given shapes and one dtype, some of them held
    constant: each call passes the other operands, in order, and runs only the steps of the
    path that need them (the steps among constants ran once, when the expression was made).

    Made by :func:`einsum_expression`.
    """

    def __init__(
        self,
        subscripts: str,
        shapes: Sequence[Sequence[int]],
        constants: Sequence[Any],
        positions: Sequence[int],
        dtype: np.dtype,
        optimize: Any,
        threads: Optional[int],
    ) -> None:
        self._spec = subscripts
        self._dtype = dtype
        self._shapes = [tuple(int(d) for d in s) for s in shapes]
        held = set(positions)
        self._given = [s for k, s in enumerate(self._shapes) if k not in held]
        name, path, limit = _spec.strategy(optimize)
        n = threads if threads is not None else _requested()
        if n < 0:
            raise ValueError(f"threads must be positive, not {n}")
        consts = [_arrays.operand(np.asarray(c), dtype) for c in constants]
        for k, c in zip(positions, consts):
            if tuple(c.shape) != self._shapes[k]:
                raise ValueError(f"constant operand {k} has shape {c.shape}, not {self._shapes[k]}")
        self._native = _ttgt.Expression(
            subscripts,
            [list(s) for s in self._shapes],
            list(positions),
            consts,
            dtype.char,
            name or "auto",
            path,
            limit,
            n,
        )
        self._out_shape = tuple(self._native.shape)

    @property
    def num_operands(self) -> int:
        """How many operands each call takes (the spec's, less the constants)."""
        return len(self._given)

    @property
    def precomputed_steps(self) -> int:
        """Steps of the path evaluated when the expression was made (among constants)."""
        return int(self._native.precomputed_steps)

    def __call__(self, *operands: Any, out: Optional[np.ndarray] = None, alpha: Scalar = 1, beta: Scalar = 0) -> np.ndarray:
        """``out = alpha * einsum(subscripts, *all operands) + beta * out``, the constants
        supplied by the expression; ``operands`` are the others, in spec order."""
        if len(operands) != len(self._given):
            raise ValueError(f"the expression takes {len(self._given)} operands, {len(operands)} given")
        arrays: List[np.ndarray] = []
        for k, (x, s) in enumerate(zip(operands, self._given)):
            a = _arrays.operand(np.asarray(x), self._dtype)
            if tuple(a.shape) != s:
                raise ValueError(f"operand {k} has shape {a.shape}, the expression was made for {s}")
            arrays.append(a)
        if out is None:
            result = _arrays.empty(self._out_shape, self._dtype)
            b: complex = 0j
        else:
            result = _arrays.check_out(out, self._out_shape)
            if result.dtype != self._dtype:
                raise ValueError(f"out must have dtype {self._dtype}, as the expression")
            b = _arrays.scalar(beta, self._dtype)
        self._native.execute(arrays, result, _arrays.scalar(alpha, self._dtype), b)
        return result

    def explain(self) -> str:
        """The path, each step's predicted time, the FLOP-optimal path's, and how many steps
        were evaluated once among the constants."""
        return str(self._native.explain())

    def __repr__(self) -> str:
        return f"ttgt.Expression({self._spec!r}, {len(self._given)} operands, dtype={self._dtype})"


def einsum_expression(
    subscripts: str,
    *shapes_or_constants: Any,
    constants: Sequence[int] = (),
    dtype: Any = None,
    optimize: Any = "auto",
    threads: Optional[int] = None,
) -> Expression:
    """An einsum planned once for operands of these shapes (opt_einsum's
    ``contract_expression``). Each positional argument after the subscripts is a shape, or,
    at the positions listed in ``constants``, the constant array itself. The path is ttgt's
    (the fewest predicted seconds unless ``optimize`` says otherwise), searched once.

    >>> import numpy as np, ttgt
    >>> w = np.full((5, 6), 0.5)
    >>> e = ttgt.einsum_expression("ij,jk,kl->il", (4, 5), w, (6, 3), constants=[1])
    >>> r = e(np.ones((4, 5)), np.full((6, 3), 2.0))
    >>> float(r[0, 0]), e.num_operands
    (30.0, 2)
    """
    spec, args = _spec.split_operands((subscripts, *shapes_or_constants))
    held = sorted(set(int(k) for k in constants))
    if any(k < 0 or k >= len(args) for k in held):
        raise ValueError(f"constants name positions out of range for {len(args)} operands")
    shapes: List[tuple] = []
    consts: List[np.ndarray] = []
    for k, x in enumerate(args):
        if k in held:
            a = np.asarray(x)
            consts.append(a)
            shapes.append(tuple(a.shape))
        else:
            shapes.append(tuple(int(d) for d in x))
    dt = _arrays.result_dtype(consts, dtype, 1, 0) if consts or dtype is not None else np.dtype(np.float64)
    if not _arrays.supported(dt):
        raise TypeError(f"ttgt expressions compute in float16, bfloat16, float32, float64, complex64 and complex128, not {dt}")
    return Expression(spec, shapes, consts, held, dt, optimize, threads)
