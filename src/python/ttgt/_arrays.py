"""numpy arrays as ttgt operands: the computation dtype, and copies of the arrays that
cannot be used in place."""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

#: numpy type characters of the dtypes ttgt computes in.
SUPPORTED = frozenset("fdFD")

#: numpy allows up to 64 dimensions; the bindings view up to 32.
MAX_NDIM = 32


def result_dtype(operands: Sequence[np.ndarray], dtype: Any, alpha: Any, beta: Any) -> np.dtype:
    """The dtype numpy's einsum would compute in, widened to hold alpha and beta."""
    if dtype is not None:
        dt = np.dtype(dtype)
    else:
        dt = np.result_type(*operands) if operands else np.dtype(float)
    for s in (alpha, beta):
        if isinstance(s, (numbers.Complex, np.generic)) and not _is_default_scalar(s):
            dt = np.result_type(dt, s)
    return dt


def _is_default_scalar(s: Any) -> bool:
    return isinstance(s, (int, float)) and not isinstance(s, bool) and s in (0, 1)


def supported(dt: np.dtype) -> bool:
    return dt.char in SUPPORTED


def usable(a: np.ndarray) -> bool:
    """Whether ttgt can read or write `a` where it is: aligned, native byte order, strides
    that are whole elements, a rank the bindings view."""
    if not (a.flags.aligned and a.dtype.isnative and a.ndim <= MAX_NDIM):
        return False
    size = a.dtype.itemsize
    return all(s % size == 0 for s in a.strides)


def operand(a: Any, dt: np.dtype) -> np.ndarray:
    """`a` as an array of `dt` that ttgt reads in place: the same array whenever it already
    is one (any strides, negative, zero, sliced, read-only, Fortran order); otherwise a copy
    (another dtype, misaligned, byte-swapped, strides that are not whole elements)."""
    x = np.asarray(a)
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
    c = complex(s)
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
