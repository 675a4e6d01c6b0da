"""numpy's einsum, tensordot and transpose, PySCF's contract, and planned einsums, computed
by ttgt for float32, float64, complex64 and complex128, by numpy for every other dtype."""

from __future__ import annotations

from typing import Any, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays, _spec, _ttgt
from ._threads import _local, _requested

Scalar = Union[int, float, complex, np.generic]
Casting = Literal["no", "equiv", "safe", "same_kind", "unsafe"]
Order = Literal["K", "A", "C", "F"]

def _output_shape(spec: str, operands: Sequence[np.ndarray]) -> Tuple[int, ...]:
    """The result's shape (cached by the extension per spec and shapes)."""
    return tuple(_ttgt.output_shape(spec, [list(x.shape) for x in operands]))


def _numpy_optimize(optimize: Any) -> Any:
    return True if optimize == "auto" else optimize


def _numpy_einsum(
    spec: str,
    operands: Sequence[Any],
    out: Optional[np.ndarray],
    alpha: Any,
    beta: Any,
    dtype: Any,
    order: Order,
    casting: Casting,
    optimize: Any,
) -> Any:
    """numpy.einsum with alpha and beta, for the dtypes ttgt does not compute in."""
    r = np.einsum(spec, *operands, dtype=dtype, order=order, casting=casting, optimize=_numpy_optimize(optimize))
    if not (isinstance(alpha, (int, float)) and alpha == 1):
        r = r * alpha
    if out is None:
        return r
    if isinstance(beta, (int, float)) and beta == 0:
        np.copyto(out, r, casting=casting)
    else:
        np.copyto(out, beta * out + r, casting=casting)
    return out


def einsum(
    *operands: Any,
    out: Optional[np.ndarray] = None,
    dtype: Any = None,
    order: Order = "K",
    casting: Casting = "safe",
    optimize: Any = False,
    alpha: Scalar = 1,
    beta: Scalar = 0,
) -> Any:
    """``out = alpha * numpy.einsum(subscripts, *operands) + beta * out``, computed by ttgt.

    Takes everything :func:`numpy.einsum` takes: the subscripts string or the interleaved
    (operand, sublist, ...) form, implicit outputs, ``...``, traces, diagonals, broadcasting
    (of ``...`` and of any index of extent 1), one to any number of operands, ``out``,
    ``dtype``, ``order``, ``casting`` and ``optimize`` (False, True or 'auto': ttgt's search,
    'greedy', 'optimal', ``('greedy', memory_limit)`` or an explicit path as
    :func:`numpy.einsum_path` returns it). ``alpha`` and ``beta`` scale the result and the
    old contents of ``out`` (``beta`` is ignored without ``out``; with ``beta == 0`` out is
    never read).

    Operands are read in place, whatever their strides; only misaligned, byte-swapped or
    oddly strided arrays, and operands of another dtype than the result's, are copied.
    float16 and bfloat16 (``ml_dtypes.bfloat16``) operands are widened to float32, contracted
    with float32 accumulation and the result rounded once (numpy accumulates float16 sums in
    float16 when it does not go through BLAS). Other dtypes than these, float32, float64,
    complex64 and complex128 are computed by :func:`numpy.einsum`, with numpy's results.

    >>> import numpy as np, ttgt
    >>> a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    >>> np.allclose(ttgt.einsum("ij,jk->ik", a, b), a @ b)
    True
    """
    if out is None and alpha == 1 and dtype is None and type(alpha) is int and operands \
            and type(operands[0]) is str and (optimize is False or optimize is True) and order != "F":
        # the common call: one dtype, arrays usable in place, a new result
        stack = _local.stack
        r = _ttgt.einsum_new(operands[0], operands[1:], stack[-1] if stack else 0)
        if r is not None:
            return r if r.ndim else r[()]
    if type(out) is np.ndarray and dtype is None and isinstance(alpha, (int, float)) \
            and isinstance(beta, (int, float)) and operands and type(operands[0]) is str \
            and (optimize is False or optimize is True):
        # the common call into an existing result: one dtype, arrays usable in place
        stack = _local.stack
        if _ttgt.einsum_out(operands[0], operands[1:], out, (alpha, beta), stack[-1] if stack else 0):
            return out
    ops: Sequence[Any]
    if operands and type(operands[0]) is str:
        spec, ops = operands[0], operands[1:]
    else:
        spec, ops = _spec.split_operands(operands)
    arrays = [x if type(x) is np.ndarray else np.asarray(x) for x in ops]
    dt = _arrays.result_dtype(arrays, dtype, alpha, beta)
    if not _arrays.supported(dt) or (out is not None and getattr(out, "dtype", dt) != dt) \
            or any(x.ndim > _arrays.MAX_NDIM for x in arrays):
        if out is not None and not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, not {type(out).__name__}")
        if out is not None and _arrays.supported(dt) and np.can_cast(dt, out.dtype, casting) \
                and all(x.ndim <= _arrays.MAX_NDIM for x in arrays):
            # computed by ttgt in the result's dtype, then cast into out as numpy would
            tmp = einsum(spec, *arrays, dtype=dt, optimize=optimize, alpha=alpha)
            if not (isinstance(beta, (int, float)) and beta == 0):
                tmp = tmp + beta * out
            np.copyto(out, tmp, casting=casting)
            return out
        return _numpy_einsum(spec, arrays, out, alpha, beta, dtype, order, casting, optimize)
    if dtype is not None and casting != "unsafe":
        for x in arrays:
            if not np.can_cast(x.dtype, dt, casting):
                raise TypeError(f"cannot cast operand of dtype {x.dtype} to {dt} under casting={casting!r}")
    arrays = [_arrays.operand(x, dt) for x in arrays]
    shape = _output_shape(spec, arrays)
    a = 1 + 0j if type(alpha) is int and alpha == 1 else _arrays.scalar(alpha, dt)
    if out is None:
        b = 0j
        result = _arrays.empty(shape, dt, order="F" if order == "F" else "C")
    else:
        result = _arrays.check_out(out, shape)
        b = _arrays.scalar(beta, dt)
        if not _arrays.usable(result):
            raise ValueError("out must be aligned, in native byte order, with strides of whole elements")
    name, path, limit = (None, None, None) if optimize is False else _spec.strategy(optimize)
    _ttgt.einsum_into(spec, arrays, result, a, b, dt.char, name, path, limit, _requested())
    if out is None and result.ndim == 0:
        return result[()]
    return result


def contract(
    subscripts: str,
    a: Any,
    b: Any,
    alpha: Scalar = 1,
    beta: Scalar = 0,
    out: Optional[np.ndarray] = None,
) -> Any:
    """``out = alpha * einsum(subscripts, a, b) + beta * out``: PySCF's ``lib.contract``.

    >>> import numpy as np, ttgt
    >>> c = np.ones((2, 4))
    >>> r = ttgt.contract("ij,jk->ik", np.ones((2, 3)), np.ones((3, 4)), alpha=2, beta=1, out=c)
    >>> float(r[0, 0]), r is c
    (7.0, True)
    """
    return einsum(subscripts, a, b, out=out, alpha=alpha, beta=beta)


def tensordot(a: Any, b: Any, axes: Any = 2) -> np.ndarray:
    """:func:`numpy.tensordot`: sums over ``axes`` (an int N: the last N axes of ``a`` with
    the first N of ``b``; or two sequences of axes); the result has ``a``'s free axes, then
    ``b``'s.

    >>> import numpy as np, ttgt
    >>> ttgt.tensordot(np.ones((3, 4, 5)), np.ones((4, 5, 6)), 2).shape
    (3, 6)
    """
    x, y = np.asarray(a), np.asarray(b)
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0 or n > min(x.ndim, y.ndim):
            raise ValueError(f"axes={n} does not fit operands of {x.ndim} and {y.ndim} dimensions")
        ax, ay = list(range(x.ndim - n, x.ndim)), list(range(n))
    else:
        try:
            ax_in, ay_in = axes
        except (TypeError, ValueError):
            raise ValueError("axes must be an int or a pair of axis sequences") from None
        ax = [int(ax_in)] if isinstance(ax_in, (int, np.integer)) else list(ax_in)
        ay = [int(ay_in)] if isinstance(ay_in, (int, np.integer)) else list(ay_in)
        if len(ax) != len(ay):
            raise ValueError("shape-mismatch for sum: the two axis lists differ in length")
    ax = [_axis(i, x.ndim) for i in ax]
    ay = [_axis(i, y.ndim) for i in ay]
    if len(set(ax)) != len(ax) or len(set(ay)) != len(ay):
        raise ValueError("repeated axis in tensordot's axes")
    for i, j in zip(ax, ay):
        if x.shape[i] != y.shape[j]:
            raise ValueError(f"shape-mismatch for sum: axis {i} of a has {x.shape[i]}, axis {j} of b has {y.shape[j]}")
    if x.ndim + y.ndim - len(ax) > 52:
        return np.tensordot(x, y, axes=(ax, ay))
    letters = _spec._LETTERS
    sx = [letters[i] for i in range(x.ndim)]
    sy = [letters[x.ndim + j] for j in range(y.ndim)]
    for i, j in zip(ax, ay):
        sy[j] = sx[i]
    out = [c for k, c in enumerate(sx) if k not in ax] + [c for k, c in enumerate(sy) if k not in ay]
    spec = "".join(sx) + "," + "".join(sy) + "->" + "".join(out)
    r = einsum(spec, x, y)
    return np.asarray(r)


def _axis(i: Any, ndim: int) -> int:
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
        raise TypeError(f"axes must be ints, not {i!r}")
    j = int(i) + ndim if i < 0 else int(i)
    if not 0 <= j < ndim:
        raise np.exceptions.AxisError(int(i), ndim) if hasattr(np, "exceptions") else ValueError(f"axis {i} out of range")
    return j


def transpose(
    a: Any,
    axes: Optional[Sequence[int]] = None,
    out: Optional[np.ndarray] = None,
    alpha: Scalar = 1,
    beta: Scalar = 0,
) -> np.ndarray:
    """``out = alpha * a.transpose(axes) + beta * out``, materialised: numpy's meaning of
    ``axes`` (axis ``i`` of the result is axis ``axes[i]`` of ``a``; None reverses them,
    negative axes count from the end), written into a new C-ordered array or into any
    strided ``out``. Unlike :func:`numpy.transpose`, which returns a view, this moves the
    data, at the speed of a copy.

    >>> import numpy as np, ttgt
    >>> a = np.arange(24.0).reshape(2, 3, 4)
    >>> bool((ttgt.transpose(a, (2, 0, 1)) == a.transpose(2, 0, 1)).all())
    True
    """
    x = np.asarray(a)
    perm = list(range(x.ndim))[::-1] if axes is None else [_axis(i, x.ndim) for i in axes]
    if len(perm) != x.ndim or sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"axes {list(axes) if axes is not None else None} is not a permutation of {x.ndim} axes")
    shape = tuple(x.shape[p] for p in perm)
    dt = x.dtype if out is None else out.dtype
    if not _arrays.supported(dt) or not _arrays.supported(x.dtype) or (out is not None and not np.can_cast(x.dtype, dt, "same_kind")):
        r = x.transpose(perm)
        if not (isinstance(alpha, (int, float)) and alpha == 1):
            r = r * alpha
        if out is None:
            return np.array(r, order="C")
        _arrays.check_out(out, shape)
        if isinstance(beta, (int, float)) and beta == 0:
            np.copyto(out, r, casting="same_kind")
        else:
            np.copyto(out, beta * out + r, casting="same_kind")
        return out
    dt = _arrays.result_dtype([x] if out is None else [np.empty(0, dt)], None, alpha, beta)
    src = _arrays.operand(x, dt)
    if out is None:
        result = _arrays.empty(shape, dt)
        b = 0j
    else:
        result = _arrays.check_out(out, shape)
        if result.dtype != dt:
            raise TypeError(f"out has dtype {result.dtype}; the result's dtype is {dt}")
        if not _arrays.usable(result):
            raise ValueError("out must be aligned, in native byte order, with strides of whole elements")
        b = _arrays.scalar(beta, dt)
    _ttgt.transpose_into(src, perm, result, _arrays.scalar(alpha, dt), b, dt.char, _requested())
    return result


def einsum_path(*operands: Any, optimize: Any = "greedy", einsum_call: bool = False) -> Tuple[List[Any], str]:
    """:func:`numpy.einsum_path`: the pairwise order ttgt follows for these operands, as
    ``(['einsum_path', (i, j), ...], report)``; the path can be given back to
    :func:`einsum` as ``optimize``. The report states the FLOPs, the largest intermediate
    and every step.

    >>> import numpy as np, ttgt
    >>> path, report = ttgt.einsum_path("ij,jk,kl->il", np.ones((2, 30)), np.ones((30, 40)), np.ones((40, 5)))
    >>> path
    ['einsum_path', (1, 2), (0, 1)]
    """
    if einsum_call:
        raise ValueError("einsum_call is numpy's internal form; ttgt does not return it")
    spec, ops = _spec.split_operands(operands)
    shapes = [list(np.shape(x)) for x in ops]
    name, path, limit = _spec.strategy(optimize)
    steps, report, _, _, _ = _ttgt.einsum_path(spec, shapes, name or "auto", path, limit)
    return ["einsum_path", *[tuple(s) for s in steps]], report
