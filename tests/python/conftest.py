"""Shared helpers of the Python package's tests."""

from __future__ import annotations

import importlib
import os

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


def need(name: str):
    """The module ``name``; skips the test when it is not installed, except under
    TTGT_REQUIRE_PEERS=1 (the README's test command and CI), where that fails the run."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("TTGT_REQUIRE_PEERS") == "1":
            raise
        pytest.skip(f"{name} is not installed")
