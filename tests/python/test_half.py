"""float16 and bfloat16: ttgt widens them to float32, accumulates in float32 and rounds the
result once, so every result is within a few units of the storage type's roundoff of the
exact value (computed here in float64 from the same stored operands)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import ttgt
from conftest import need

SPECS = [
    ("ij,jk->ik", [(5, 6), (6, 7)]),
    ("abcd,dbef->acef", [(4, 5, 6, 7), (7, 5, 3, 2)]),
    ("akci,kjcb->ijab", [(19, 5, 19, 5), (5, 5, 19, 19)]),
    ("kibc,ka->abic", [(5, 5, 19, 19), (5, 19)]),
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
    ("ii->i", [(6, 6)]),
    ("ij->", [(40, 70)]),
    ("ij->ji", [(4, 7)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 6)]),
    ("kcld,ic,ld->ki", [(5, 7, 5, 7), (4, 7), (5, 7)]),
    ("pi,qj,pqrs,rk,sl->ijkl", [(6, 3), (6, 4), (6, 6, 6, 6), (6, 2), (6, 5)]),
]

#: unit roundoff of the storage types
ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}


def half_dtypes():
    """float16, and bfloat16 when ml_dtypes is installed (required under
    TTGT_REQUIRE_PEERS=1, as every peer is)."""
    out = [np.dtype(np.float16)]
    try:
        import ml_dtypes

        out.append(np.dtype(ml_dtypes.bfloat16))
    except ImportError:
        if os.environ.get("TTGT_REQUIRE_PEERS") == "1":
            raise
    return out


def exact(spec, ops):
    """The contraction in float64 of the stored values, and the sum of the magnitudes of
    each result element's terms (the scale of its rounding errors)."""
    wide = [o.astype(np.float64) for o in ops]
    return np.einsum(spec, *wide), np.einsum(spec, *[np.abs(w) for w in wide])


def check(got, want, scale, dt, steps=1):
    """Within `steps` roundings to the storage type of the magnitude plus float32
    accumulation, and the subnormal spacing of float16."""
    got = np.asarray(got).astype(np.float64)
    u = ROUNDOFF[dt.name]
    n = 1 + 64  # float32 sums of at most a few hundred terms: far below u
    allowed = (steps * 2 * u + n * 2.0**-24) * scale + 2.0**-23
    err = np.abs(got - want)
    assert (err <= allowed).all(), f"max error {err.max()} against allowed {allowed.max()}"


@pytest.mark.parametrize("dt", half_dtypes(), ids=lambda d: d.name)
@pytest.mark.parametrize("spec,shapes", SPECS)
def test_specs_against_the_exact_value(spec, shapes, dt, rng):
    ops = [rng.standard_normal(s).astype(dt) for s in shapes]
    got = ttgt.einsum(spec, *ops)
    assert np.asarray(got).dtype == dt
    want, scale = exact(spec, ops)
    check(got, want, scale, dt, steps=len(ops) - 1 if len(ops) > 2 else 1)


@pytest.mark.parametrize("dt", half_dtypes(), ids=lambda d: d.name)
def test_strided_operands_out_alpha_beta(dt, rng):
    base_a = rng.standard_normal((12, 9, 14)).astype(dt)
    base_b = rng.standard_normal((14, 10)).astype(dt)
    a = base_a[::-2, :, 1:13]  # negative and sliced strides
    b = base_b.T[::2].T[:12]  # a strided view, shape (12, 5)
    out = rng.standard_normal((5, 6, 9)).astype(dt).transpose(1, 2, 0)
    before = out.astype(np.float64)
    ttgt.einsum("ijk,kl->ijl", a, b, out=out, alpha=0.5, beta=-2.0)
    want, scale = exact("ijk,kl->ijl", [a, b])
    check(out, 0.5 * want - 2.0 * before, 0.5 * scale + 2.0 * np.abs(before), dt, steps=2)


@pytest.mark.parametrize("dt", half_dtypes(), ids=lambda d: d.name)
def test_transpose_plan_expression_tensordot(dt, rng):
    a = rng.standard_normal((5, 6, 7)).astype(dt)
    t = ttgt.transpose(a, (2, 0, 1))
    assert t.dtype == dt and (t == a.transpose(2, 0, 1)).all()  # moved, not recomputed
    b = rng.standard_normal((7, 4)).astype(dt)
    plan = ttgt.Plan("abc,cd->abd", a, b)
    want, scale = exact("abc,cd->abd", [a, b])
    check(plan(a, b), want, scale, dt)
    assert "f32" in plan.explain()
    e = ttgt.einsum_expression("abc,cd->abd", a.shape, b.shape, dtype=dt)
    check(e(a, b), want, scale, dt)
    td = ttgt.tensordot(a, b, axes=([2], [0]))
    check(td, want, scale, dt)


def test_float16_is_more_accurate_than_a_float16_accumulation(rng):
    # a long sum: float16 accumulation loses digits, float32 accumulation does not
    a = rng.random((4, 4096)).astype(np.float16)
    b = rng.random((4096, 4)).astype(np.float16)
    want, scale = exact("ij,jk->ik", [a, b])
    got = ttgt.einsum("ij,jk->ik", a, b).astype(np.float64)
    assert np.abs(got - want).max() <= 2.0**-11 * np.abs(want).max() * 1.01


def test_mixed_half_types_promote_as_numpy_does(rng):
    ml = need("ml_dtypes")
    a = rng.standard_normal((3, 4)).astype(np.float16)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    assert ttgt.einsum("ij,jk->ik", a, b).dtype == np.float32
    c = rng.standard_normal((4, 5)).astype(ml.bfloat16)
    assert ttgt.einsum("ij,jk->ik", c.T, b).dtype == np.float32
    # float16 with bfloat16: numpy's result type where it has one (ml_dtypes 0.7 promotes
    # them to float32), else the same error as numpy's (earlier ml_dtypes have none)
    try:
        want = np.einsum("ij,jk->ik", a, c)
    except Exception as theirs:
        with pytest.raises(type(theirs)):
            ttgt.einsum("ij,jk->ik", a, c)
    else:
        got = ttgt.einsum("ij,jk->ik", a, c)
        assert got.dtype == want.dtype
        scale = np.abs(a.astype(np.float64)) @ np.abs(c.astype(np.float64))
        assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= 1e-2 * scale)
