"""Plans made once for given shapes, strides and dtype, called many times."""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

import numpy as np

from . import _arrays, _spec, _ttgt
from ._api import Scalar, _numpy_einsum, _output_shape
from ._threads import _requested


class _Planned:
    """What a planned call is fixed to: its spec, dtype and result shape."""

    _spec: str
    _dtype: np.dtype
    _out_shape: Any

    @property
    def subscripts(self) -> str:
        """The spec it was made for."""
        return self._spec

    @property
    def dtype(self) -> np.dtype:
        """The dtype it computes in."""
        return self._dtype

    @property
    def shape(self) -> tuple:
        """The result's shape."""
        return tuple(self._out_shape)


class Plan(_Planned):
    """An einsum planned once: ttgt's choice of packs, GEMM calls and write-backs (or path,
    for three or more operands) for operands of exactly these shapes, strides and dtype,
    executed again and again on new arrays.

    ``operands`` are arrays (their shapes, strides and dtype are what the plan is made for;
    their values are not read) or :class:`numpy.ndarray`-like templates; ``out`` an output
    template (default: a C-ordered result, allocated on each call that passes no ``out``).

    >>> import numpy as np, ttgt
    >>> a, b = np.ones((8, 9, 10)), np.ones((10, 9, 7))
    >>> plan = ttgt.Plan("abc,cbd->ad", a, b)
    >>> c = plan(a, b)
    >>> float(c[0, 0])
    90.0
    >>> plan.explain(as_dict=True)["backend"]
    'ttgt'
    """

    def __init__(
        self,
        subscripts: str,
        *operands: Any,
        out: Optional[np.ndarray] = None,
        dtype: Any = None,
        optimize: Any = True,
        threads: Optional[int] = None,
        workspace_limit: Optional[int] = None,
    ) -> None:
        spec, ops = _spec.split_operands((subscripts, *operands))
        arrays = [np.asarray(x) for x in ops]
        self._spec = spec
        self._dtype = _arrays.result_dtype(arrays, dtype, 1, 0)
        self._shapes = [x.shape for x in arrays]
        self._optimize = optimize
        self._fallback: Optional[str] = None
        if not _arrays.supported(self._dtype):
            self._fallback = f"dtype {self._dtype} is computed by numpy.einsum"
            self._out_shape = _output_shape(spec, arrays)
            self._native = None
            return
        templates = [_arrays.operand(x, self._dtype) for x in arrays]
        self._out_shape = _output_shape(spec, templates)
        if out is None:
            # strides of the array __call__ allocates (pages not touched here)
            out_strides = _element_strides(np.empty(self._out_shape, self._dtype))
        else:
            out_strides = _element_strides(_arrays.check_out(out, self._out_shape))
        self._out_given = out is not None
        name, path, limit = _spec.strategy(optimize)
        n = threads if threads is not None else _requested()
        if n < 0:
            raise ValueError(f"threads must be positive, not {n}")
        self._native = _ttgt.Plan(
            spec,
            [list(s) for s in self._shapes],
            [_element_strides(t) for t in templates],
            list(self._out_shape),
            out_strides,
            self._dtype.char,
            name or "auto",
            path,
            limit,
            n,
            workspace_limit,
        )

    def __call__(
        self,
        *operands: Any,
        out: Optional[np.ndarray] = None,
        alpha: Scalar = 1,
        beta: Scalar = 0,
    ) -> np.ndarray:
        """``out = alpha * einsum(subscripts, *operands) + beta * out`` on arrays of the
        planned shapes, strides and dtype (anything else is a ValueError)."""
        if self._native is None:
            return _numpy_einsum(self._spec, operands, out, alpha, beta, None, "K", "safe", self._optimize)
        arrays = []
        for k, x in enumerate(operands):
            if not isinstance(x, np.ndarray) or x.dtype != self._dtype:
                raise ValueError(f"operand {k} must be a numpy array of dtype {self._dtype}, as planned")
            arrays.append(x)
        if out is None:
            if self._out_given:
                raise ValueError("the plan was made for a given out layout: pass out=")
            result = _arrays.empty(self._out_shape, self._dtype)
            b = 0j
        else:
            result = _arrays.check_out(out, self._out_shape)
            if result.dtype != self._dtype:
                raise ValueError(f"out must have dtype {self._dtype}, as planned")
            b = _arrays.scalar(beta, self._dtype)
        self._native.execute(arrays, result, _arrays.scalar(alpha, self._dtype), b)
        return result

    def explain(self, as_dict: bool = False) -> Union[str, Dict[str, Any]]:
        """What the plan does: the chosen candidate or path, each step's predicted time
        and, after a call, its measured time; as text, or as a dict (``backend`` is
        ``'ttgt'``, or ``'numpy'`` for a dtype numpy computes)."""
        if self._native is None:
            d = {"spec": self._spec, "dtype": str(self._dtype), "backend": "numpy", "reason": self._fallback}
            return d if as_dict else f"{self._spec} ({self._dtype}): numpy.einsum fallback: {self._fallback}"
        if as_dict:
            d = dict(self._native.explain_dict())
            d["dtype"] = str(self._dtype)
            return d
        return str(self._native.explain())

    def __repr__(self) -> str:
        shapes = ", ".join(str(tuple(s)) for s in self._shapes)
        return f"ttgt.Plan({self._spec!r}, {shapes}, dtype={self._dtype})"


def _element_strides(a: np.ndarray) -> list:
    size = a.dtype.itemsize
    return [s // size for s in a.strides]


def explain(subscripts: str, *operands: Any, as_dict: bool = False, **kwargs: Any) -> Union[str, Dict[str, Any]]:
    """The plan :func:`ttgt.einsum` would follow for these operands (see :meth:`Plan.explain`).

    >>> import numpy as np, ttgt
    >>> ttgt.explain("ij,jk->ik", np.ones((2, 3), int), np.ones((3, 4), int), as_dict=True)["backend"]
    'numpy'
    """
    return Plan(subscripts, *operands, **kwargs).explain(as_dict=as_dict)
