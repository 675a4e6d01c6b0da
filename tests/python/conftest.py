"""Shared helpers of the Python package's tests."""

from __future__ import annotations

import numpy as np
import pytest

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def tolerance(dtype) -> float:
    return 2e-4 if np.dtype(dtype).char in "fF" else 1e-11


def random(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def assert_close(got, want, dtype) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    err = float(np.abs(got - want).max(initial=0.0))
    assert err <= tolerance(dtype) * scale, f"max error {err} (scale {scale})"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
