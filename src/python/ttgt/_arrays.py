"""numpy arrays as ttgt operands: the computation dtype, and copies of the arrays that
cannot be used in place."""

from __future__ import annotations

import numbers
from typing import Any, Literal, Sequence, cast

import numpy as np

#: numpy type characters of the dtypes ttgt computes in: float16 (``e``), float32, float64,
#: complex64, complex128, and ``E``, ml_dtypes' bfloat16 (float16 and bfloat16 are computed
#: in float32 and rounded once).
SUPPORTED = frozenset("efdFDE")

#: numpy allows up to 64 dimensions; the bindings view up to 32 (numpy computes the rest).
MAX_NDIM = 32


def result_dtype(operands: Sequence[np.ndarray], dtype: Any, alpha: Any, beta: Any) -> np.dtype:
    """The dtype numpy's einsum would compute in, widened to hold alpha and beta (Python
    ints and floats never widen it: numpy takes them as weak scalars)."""
    if dtype is not None:
        dt = np.dtype(dtype)
    elif operands:
        dt = operands[0].dtype
        for x in operands:
            if x.dtype != dt:
                dt = np.result_type(*operands)
                break
    else:
        dt = np.dtype(float)
    for s in (alpha, beta):
        if type(s) is not int and type(s) is not float:
            if not isinstance(s, (numbers.Number, np.generic, np.ndarray)) or isinstance(s, (bool, np.bool_)):
                raise TypeError(f"alpha and beta must be numbers, not {type(s).__name__}")
            dt = np.result_type(dt, cast(Any, s))
    return dt


#: Results of at least this many bytes start on a 64-byte cache line (:func:`empty`).
ALIGNED_MIN_BYTES = 1 << 20


def empty(shape: Sequence[int], dtype: Any, order: Literal["C", "F"] = "C") -> np.ndarray:
    """An uninitialized result array, as ``np.empty``, whose data starts on a 64-byte cache
    line when it holds at least :data:`ALIGNED_MIN_BYTES`.

    numpy's large arrays start 16 bytes past a line (the system allocator's header), where
    rows of whole lines cannot be written with streaming stores; such results are a view of
    a slightly larger byte buffer instead (``result.base`` holds it)."""
    dt = np.dtype(dtype)
    count = 1
    for d in shape:
        count *= int(d)
    nbytes = count * dt.itemsize
    if nbytes < ALIGNED_MIN_BYTES:
        return np.empty(tuple(shape), dtype=dt, order=order)
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + nbytes].view(dt).reshape(tuple(shape), order=order)


def supported(dt: np.dtype) -> bool:
    # "E" is bfloat16 only when ml_dtypes defines it
    return dt.char in SUPPORTED and (dt.char != "E" or dt.name == "bfloat16")


def usable(a: np.ndarray) -> bool:
    """Whether ttgt can read or write `a` where it is: aligned, native byte order, strides
    that are whole elements (a C- or Fortran-contiguous array has them)."""
    flags = a.flags
    if not (flags.aligned and a.dtype.isnative):
        return False
    if flags.c_contiguous or flags.f_contiguous:
        return True
    size = a.dtype.itemsize
    return all(s % size == 0 for s in a.strides)


def operand(a: Any, dt: np.dtype) -> np.ndarray:
    """`a` as an array of `dt` that ttgt reads in place: the same array whenever it already
    is one (any strides, negative, zero, sliced, read-only, Fortran order); otherwise a copy
    (another dtype, misaligned, byte-swapped, strides that are not whole elements)."""
    x = a if type(a) is np.ndarray else np.asarray(a)
    if x.dtype != dt:
        x = x.astype(dt)
    if not usable(x):
        x = np.array(x, dtype=dt, order="K", copy=True)
        if not usable(x):
            x = np.ascontiguousarray(x)
    return x


def scalar(s: Any, dt: np.dtype) -> complex:
    """alpha or beta as a Python complex, checked against the computation dtype."""
    if isinstance(s, np.ndarray):
        if s.ndim != 0:
            raise TypeError(f"alpha and beta must be scalars, not arrays of shape {s.shape}")
        s = s[()]
    if not isinstance(s, (numbers.Number, np.generic)) or isinstance(s, (bool, np.bool_)):
        raise TypeError(f"alpha and beta must be numbers, not {type(s).__name__}")
    c = complex(cast(Any, s))
    if c.imag != 0 and dt.kind != "c":
        raise TypeError(f"a complex alpha or beta ({s!r}) needs a complex dtype, not {dt}")
    return c


def check_out(out: Any, shape: Sequence[int]) -> np.ndarray:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, not {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}; the result's shape is {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    return out
