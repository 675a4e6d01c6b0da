"""ttgt.einsum against numpy.einsum: specs, dtypes, layouts, out, alpha and beta."""

from __future__ import annotations

import numpy as np
import pytest
import ttgt
from conftest import DTYPES, assert_close, random

SPECS = [
    ("ij,jk->ik", [(5, 6), (6, 7)]),
    ("ij,jk", [(5, 6), (6, 7)]),
    ("abcd,dbef->acef", [(4, 5, 6, 7), (7, 5, 3, 2)]),
    ("akci,kjcb->ijab", [(19, 5, 19, 5), (5, 5, 19, 19)]),
    ("ldkc,ilda->akic", [(5, 19, 5, 19), (5, 5, 19, 19)]),
    ("kibc,ka->abic", [(5, 5, 19, 19), (5, 19)]),
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
    ("bij,bjk->bik", [(1, 4, 5), (3, 5, 2)]),
    ("ii->i", [(6, 6)]),
    ("ii", [(6, 6)]),
    ("iij->j", [(4, 4, 3)]),
    ("ij->", [(4, 7)]),
    ("ij->ji", [(4, 7)]),
    ("ij", [(4, 7)]),
    ("ba", [(4, 7)]),
    ("i,j->ij", [(4,), (5,)]),
    ("i,i", [(9,), (9,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 6)]),
    ("i...,i...->...", [(3, 2, 4), (3, 1, 4)]),
    ("ij,jk,kl->il", [(3, 30), (30, 20), (20, 4)]),
    ("pi,qj,pqrs,rk,sl->ijkl", [(6, 3), (6, 4), (6, 6, 6, 6), (6, 2), (6, 5)]),
    ("kcld,ic,ld->ki", [(5, 7, 5, 7), (4, 7), (5, 7)]),
    ("ij,jk->ik", [(0, 3), (3, 4)]),
    ("ij,jk->ik", [(3, 0), (0, 4)]),
    ("aB,Bc->ca", [(3, 4), (4, 5)]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spec,shapes", SPECS)
def test_specs_match_numpy(spec, shapes, dtype, rng):
    ops = [random(rng, s, dtype) for s in shapes]
    assert_close(ttgt.einsum(spec, *ops), np.einsum(spec, *ops), dtype)


def _layouts(x: np.ndarray, rng: np.random.Generator):
    """The same values in other layouts: Fortran order, a sliced view, negative strides."""
    yield x
    yield np.asfortranarray(x)
    big = np.zeros(tuple(2 * d + 1 for d in x.shape), x.dtype)
    view = big[tuple(slice(1, None, 2) for _ in x.shape)]
    view[...] = x
    yield view
    rev = np.ascontiguousarray(x[tuple(slice(None, None, -1) for _ in x.shape)])
    yield rev[tuple(slice(None, None, -1) for _ in x.shape)]
    ro = x.copy()
    ro.flags.writeable = False
    yield ro


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spec,shapes", [SPECS[2], SPECS[3], SPECS[8], SPECS[20]])
def test_layouts(spec, shapes, dtype, rng):
    ops = [random(rng, s, dtype) for s in shapes]
    want = np.einsum(spec, *ops)
    for k in range(len(ops)):
        for v in _layouts(ops[k], rng):
            args = list(ops)
            args[k] = v
            assert_close(ttgt.einsum(spec, *args), want, dtype)


def test_zero_strides_broadcast(rng):
    a = np.broadcast_to(rng.standard_normal((1, 6)), (5, 6))
    b = rng.standard_normal((6, 4))
    assert a.strides[0] == 0
    assert_close(ttgt.einsum("ij,jk->ik", a, b), np.einsum("ij,jk->ik", a, b), np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_out_alpha_beta(dtype, rng):
    a, b = random(rng, (6, 5, 7), dtype), random(rng, (7, 5, 3), dtype)
    e = np.einsum("abc,cbd->ad", a, b)
    alpha, beta = (2 - 1j, 0.5 + 0.25j) if np.dtype(dtype).kind == "c" else (2.0, 0.5)
    for order in "CF":
        c0 = random(rng, (6, 3), dtype)
        out = np.array(c0, order=order)
        r = ttgt.einsum("abc,cbd->ad", a, b, out=out, alpha=alpha, beta=beta)
        assert r is out
        assert_close(out, alpha * e + beta * c0, dtype)
    big = random(rng, (12, 7), dtype)
    view = big[::2, 1:4]
    keep = big.copy()
    ttgt.einsum("abc,cbd->ad", a, b, out=view)
    assert_close(view, e, dtype)
    mask = np.ones(big.shape, bool)
    mask[::2, 1:4] = False
    assert (big[mask] == keep[mask]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_out_with_real_scalars_reversed_views_and_bad_outs(dtype, rng):
    a, b = random(rng, (5, 4, 6), dtype), random(rng, (6, 4, 3), dtype)
    e = np.einsum("abc,cbd->ad", a, b)
    big = random(rng, (5, 6), dtype)
    out = big[::-1, ::-2]
    c0 = out.copy()
    r = ttgt.einsum("abc,cbd->ad", a, b, out=out, alpha=3, beta=-0.5)
    assert r is out
    assert_close(out, 3 * e - 0.5 * c0, dtype)
    with pytest.raises(ValueError):
        ttgt.einsum("abc,cbd->ad", a, b, out=np.zeros((3, 5), dtype))
    square = random(rng, (4, 4), dtype)
    with pytest.raises((ValueError, TypeError)):
        ttgt.einsum("ij,jk->ik", square, square, out=square)
    frozen = np.zeros((5, 3), dtype)
    frozen.flags.writeable = False
    with pytest.raises(ValueError):
        ttgt.einsum("abc,cbd->ad", a, b, out=frozen)


def test_beta_zero_never_reads_out(rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    out = np.full((4, 3), np.nan)
    ttgt.einsum("ij,jk->ik", a, b, out=out, beta=0)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("optimize", [False, True, "greedy", "optimal", ("greedy", 10**6), "auto"])
def test_optimize_forms(optimize, rng):
    ops = [rng.standard_normal(s) for s in [(3, 30), (30, 20), (20, 4), (4, 6)]]
    spec = "ij,jk,kl,lm->im"
    assert_close(ttgt.einsum(spec, *ops, optimize=optimize), np.einsum(spec, *ops), np.float64)


def test_explicit_numpy_path(rng):
    ops = [rng.standard_normal(s) for s in [(3, 30), (30, 20), (20, 4)]]
    path, _ = np.einsum_path("ij,jk,kl->il", *ops, optimize="optimal")
    assert_close(ttgt.einsum("ij,jk,kl->il", *ops, optimize=path), np.einsum("ij,jk,kl->il", *ops), np.float64)
    mine, report = ttgt.einsum_path("ij,jk,kl->il", *ops)
    assert mine[0] == "einsum_path" and "FLOPs" in report
    assert_close(ttgt.einsum("ij,jk,kl->il", *ops, optimize=mine), np.einsum("ij,jk,kl->il", *ops), np.float64)


def test_sublist_form(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    assert_close(ttgt.einsum(a, [0, 1], b, [1, 2], [0, 2]), a @ b, np.float64)
    c = rng.standard_normal((4, 3))
    assert_close(ttgt.einsum(a, [Ellipsis, 1], c, [1, Ellipsis]), np.einsum(a, [Ellipsis, 1], c, [1, Ellipsis]), np.float64)


def test_promotion_and_dtype_argument(rng):
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3))
    r = ttgt.einsum("ij,jk->ik", a, b)
    assert r.dtype == np.float64
    assert_close(r, np.einsum("ij,jk->ik", a, b), np.float64)
    c = (rng.standard_normal((5, 3)) * 1j).astype(np.complex64)
    assert ttgt.einsum("ij,jk->ik", a, c).dtype == np.complex64
    r32 = ttgt.einsum("ij,jk->ik", a, b, dtype=np.float32, casting="same_kind")
    assert r32.dtype == np.float32
    with pytest.raises(TypeError):
        ttgt.einsum("ij,jk->ik", a, b, dtype=np.float32)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.uint8])
def test_other_dtypes_fall_back_to_numpy(dtype, rng):
    a = (rng.standard_normal((4, 5)) * 3).astype(dtype)
    b = (rng.standard_normal((5, 3)) * 3).astype(dtype)
    got = ttgt.einsum("ij,jk->ik", a, b)
    want = np.einsum("ij,jk->ik", a, b)
    assert got.dtype == want.dtype
    assert (got == want).all()
    d = ttgt.explain("ij,jk->ik", a, b, as_dict=True)
    assert d["backend"] == "numpy"


def test_out_of_another_dtype_is_cast_as_numpy_does(rng):
    a, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    out = np.zeros((4, 3), np.float64)
    ttgt.einsum("ij,jk->ik", a, b, out=out)
    assert_close(out, np.einsum("ij,jk->ik", a, b), np.float32)
    with pytest.raises(TypeError):
        ttgt.einsum("ij,jk->ik", a.astype(np.float64), b, out=np.zeros((4, 3), np.float32))


def test_scalar_result_is_a_numpy_scalar():
    r = ttgt.einsum("i,i", np.ones(3), np.ones(3))
    assert isinstance(r, np.float64) and r == 3.0


def test_misaligned_and_byteswapped_operands_are_copied(rng):
    raw = np.zeros(8 * 20 + 1, np.uint8)[1:].view(np.float64).reshape(4, 5)
    assert not raw.flags.aligned
    raw[...] = rng.standard_normal((4, 5))
    swapped = rng.standard_normal((5, 3)).astype(">f8")
    assert_close(ttgt.einsum("ij,jk->ik", raw, swapped), np.einsum("ij,jk->ik", raw, swapped), np.float64)


@pytest.mark.parametrize("seed", range(6))
def test_random_specs(seed):
    rng = np.random.default_rng(seed)
    letters = "abcdefg"
    for _ in range(25):
        n_ops = int(rng.integers(1, 4))
        ext = {c: int(rng.integers(1, 6)) for c in letters}
        terms = []
        for _ in range(n_ops):
            k = int(rng.integers(0, 5))
            terms.append("".join(rng.choice(list(letters), size=k, replace=True)))
        seen = sorted(set("".join(terms)))
        out = "".join(c for c in seen if rng.random() < 0.5)
        spec = ",".join(terms) + "->" + out
        dtype = DTYPES[int(rng.integers(0, 4))]
        ops = []
        for t in terms:
            x = random(rng, tuple(ext[c] for c in t), dtype)
            if x.ndim and rng.random() < 0.3:
                x = x[tuple(slice(None, None, -1) for _ in t)]
            ops.append(x)
        assert_close(ttgt.einsum(spec, *ops), np.einsum(spec, *ops), dtype)
