"""tensordot, transpose, contract, einsum_path, Plan, threads, no copies on entry, and bad
inputs: each raises ValueError or TypeError, none crashes."""

from __future__ import annotations

import threading
import time
import tracemalloc

import numpy as np
import pytest
import ttgt
from conftest import DTYPES, assert_close, random
from ttgt import _arrays


TENSORDOT = [
    ((4, 5, 6), (2, 3), 0),
    ((4, 5, 6), (6, 3), 1),
    ((4, 5, 6), (5, 6, 3), 2),
    ((4, 5, 6), (5, 4, 2), ([1, 0], [0, 1])),
    ((4, 5, 6), (6, 2), ([2], [0])),
    ((4, 5, 6), (3, 6, 4), ([-1, 0], [1, 2])),
    ((4, 5, 6), (6, 3), (2, 0)),
]


@pytest.mark.parametrize("sa,sb,axes", TENSORDOT)
def test_tensordot(sa, sb, axes, rng):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    assert_close(ttgt.tensordot(a, b, axes), np.tensordot(a, b, axes), np.float64)


def test_tensordot_errors(rng):
    with pytest.raises(ValueError):
        ttgt.tensordot(np.ones((2, 3)), np.ones((4, 5)), 1)
    with pytest.raises(ValueError):
        ttgt.tensordot(np.ones((2, 3)), np.ones((3, 5)), ([0, 1], [0]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(dtype, rng):
    a = random(rng, (3, 4, 5, 6), dtype)
    for axes in [(3, 1, 0, 2), (0, 1, 2, 3), None, (-1, 0, 1, 2)]:
        want = np.transpose(a, axes)
        got = ttgt.transpose(a, axes)
        assert got.flags.c_contiguous
        assert_close(got, want, dtype)
    out = np.array(random(rng, (6, 4, 3, 5), dtype), order="F")
    old = out.copy()
    ttgt.transpose(a[:, :, ::-1], (3, 1, 0, 2), out=out, alpha=2, beta=-1)
    assert_close(out, 2 * np.transpose(a[:, :, ::-1], (3, 1, 0, 2)) - old, dtype)
    with pytest.raises(ValueError):
        ttgt.transpose(a, (0, 0, 1, 2))
    assert (ttgt.transpose(np.arange(6).reshape(2, 3)) == np.arange(6).reshape(2, 3).T).all()


def test_contract_is_pyscf_meaning(rng):
    a, b = rng.standard_normal((4, 5, 6)), rng.standard_normal((6, 5, 3))
    out = rng.standard_normal((4, 3))
    want = 0.5 * np.einsum("ijk,kjl->il", a, b) + 2.0 * out
    r = ttgt.contract("ijk,kjl->il", a, b, alpha=0.5, beta=2.0, out=out)
    assert r is out
    assert_close(out, want, np.float64)


def test_plan_reuse_and_explain(rng):
    a, b = rng.standard_normal((8, 9, 10)), rng.standard_normal((10, 9, 7))
    plan = ttgt.Plan("abc,cbd->ad", a, b)
    for _ in range(3):
        a, b = rng.standard_normal((8, 9, 10)), rng.standard_normal((10, 9, 7))
        assert_close(plan(a, b), np.einsum("abc,cbd->ad", a, b), np.float64)
    out = np.zeros((8, 7))
    plan(a, b, out=out, alpha=2.0)
    assert_close(out, 2 * np.einsum("abc,cbd->ad", a, b), np.float64)
    text = plan.explain()
    assert "GEMM" in text and "measured" in text
    d = plan.explain(as_dict=True)
    assert d["backend"] == "ttgt" and d["measured"]["total"] > 0 and d["predicted_seconds"] > 0
    with pytest.raises(ValueError):
        plan(np.asfortranarray(a), b)
    with pytest.raises(ValueError):
        plan(a.astype(np.float32), b)
    with pytest.raises(ValueError):
        plan(a, b, out=np.zeros((7, 8)))


def test_plan_of_three_operands(rng):
    ops = [rng.standard_normal(s) for s in [(3, 30), (30, 20), (20, 4)]]
    plan = ttgt.Plan("ij,jk,kl->il", *ops)
    assert_close(plan(*ops), np.einsum("ij,jk,kl->il", *ops), np.float64)
    d = plan.explain(as_dict=True)
    assert d["kind"] == "path" and len(d["steps"]) == 2
    assert all(s["measured_seconds"] is not None for s in d["steps"])


def test_plan_with_strided_out(rng):
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    big = np.zeros((12, 9))
    plan = ttgt.Plan("ij,jk->ik", a, b, out=big[::2, 1:5])
    plan(a, b, out=big[::2, 1:5])
    assert_close(big[::2, 1:5], a @ b, np.float64)
    with pytest.raises(ValueError):
        plan(a, b)


def test_threads_setting_and_context(rng):
    assert ttgt.get_num_threads() >= 1
    ttgt.set_num_threads(1)
    try:
        assert ttgt.get_num_threads() == 1
        with ttgt.num_threads(2):
            assert ttgt.get_num_threads() == 2
            a, b = rng.standard_normal((60, 70)), rng.standard_normal((70, 50))
            assert_close(ttgt.einsum("ij,jk->ik", a, b), a @ b, np.float64)
        assert ttgt.get_num_threads() == 1
        plan = ttgt.Plan("ij,jk->ik", np.ones((3, 4)), np.ones((4, 5)), threads=2)
        assert plan.explain(as_dict=True)["threads"] == 2
    finally:
        ttgt.set_num_threads(None)
    with pytest.raises(ValueError):
        ttgt.set_num_threads(-1)
    with pytest.raises(ValueError):
        with ttgt.num_threads(0):
            pass


def test_two_python_threads_contract_at_once():
    """The GIL is released: two calls from two Python threads overlap in time."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((96, 96, 96)), rng.standard_normal((96, 96, 96))
    want = np.einsum("abc,cbd->ad", a, b)
    spans, results, errors = [], [], []
    start_together = threading.Barrier(2)

    def work():
        try:
            start_together.wait(timeout=60)
            for _ in range(4):
                start = time.perf_counter()
                r = ttgt.einsum("abc,cbd->ad", a, b)
                spans.append((start, time.perf_counter()))
                results.append(r)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        assert_close(r, want, np.float64)
    spans.sort()
    assert any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1)), "no two calls overlapped"


def test_operands_are_not_copied_on_entry(rng):
    base = rng.standard_normal((64, 64, 64))
    views = [base[::2, 3:50, ::-1], np.asfortranarray(base[:32]), base[:, ::3].T]
    ro = base[5:40]
    ro.flags.writeable = False
    views.append(ro)
    for v in views:
        assert _arrays.operand(v, np.dtype(np.float64)) is v
    b = rng.standard_normal((47, 16))
    v = base[::2, 3:50, ::-1]
    out = np.empty((32, 16, 64))
    tracemalloc.start()
    ttgt.einsum("abc,bd->adc", v, b, out=out)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < v.nbytes // 8, f"numpy allocated {peak} bytes during the call"
    assert_close(out, np.einsum("abc,bd->adc", v, b), np.float64)


BAD_CALLS = [
    (ValueError, lambda: ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5)))),
    (ValueError, lambda: ttgt.einsum("ij,jk->iz", np.ones((2, 3)), np.ones((3, 5)))),
    (ValueError, lambda: ttgt.einsum("ij,jk", np.ones((2, 3)))),
    (ValueError, lambda: ttgt.einsum("ij->ii", np.ones((2, 3)))),
    (ValueError, lambda: ttgt.einsum("i$", np.ones((2, 3)))),
    (ValueError, lambda: ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 5)), out=np.ones((5, 2)))),
    (ValueError, lambda: ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 5)), optimize="fastest")),
    (ValueError, lambda: ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 5)), optimize=["einsum_path", (0, 5)])),
    (TypeError, lambda: ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 5)), out=[[0.0]])),
    (TypeError, lambda: ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 5)), alpha="x")),
    (TypeError, lambda: ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 5)), alpha=1j, out=np.ones((2, 5)))),
    (TypeError, lambda: ttgt.einsum()),
    (ValueError, lambda: ttgt.transpose(np.ones((2, 3)), (0, 2))),
    (ValueError, lambda: ttgt.Plan("ij,jk->ik", np.ones((2, 3)), np.ones((3, 4)))(np.ones((2, 3)), np.ones((3, 5)))),
]


@pytest.mark.parametrize("exc,call", BAD_CALLS)
def test_bad_input_raises(exc, call):
    with pytest.raises(exc):
        call()


def test_failed_call_leaves_out_unchanged():
    out = np.arange(10.0).reshape(2, 5)
    keep = out.copy()
    with pytest.raises(ValueError):
        ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5)), out=out)
    with pytest.raises(ValueError):
        ttgt.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 5)), out=out[:, ::-1][:, :5].T.T[:, :4])
    assert (out == keep).all()


def test_out_sharing_memory_with_an_operand_raises():
    a = np.ones((4, 4))
    with pytest.raises(ValueError):
        ttgt.einsum("ij,jk->ik", a, np.ones((4, 4)), out=a)
    with pytest.raises(ValueError):
        ttgt.transpose(a, (1, 0), out=a)
    ro = np.zeros((4, 4))
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        ttgt.einsum("ij,jk->ik", np.ones((4, 4)), np.ones((4, 4)), out=ro)


def test_einsum_path_matches_numpy_form(rng):
    ops = [rng.standard_normal(s) for s in [(2, 30), (30, 40), (40, 5)]]
    path, _ = ttgt.einsum_path("ij,jk,kl->il", *ops)
    assert path == ["einsum_path", (1, 2), (0, 1)]
    path1, _ = ttgt.einsum_path("ii->i", np.ones((3, 3)))
    assert path1 == ["einsum_path", (0,)]


def test_calibrate_checks_its_arguments():
    with pytest.raises(ValueError):
        ttgt.calibrate("everything", store=False)


def test_release_workspace_returns_bytes(rng):
    ttgt.einsum("abc,cbd->ad", rng.standard_normal((30, 20, 40)), rng.standard_normal((40, 20, 30)))
    assert ttgt.release_workspace() >= 0


def test_workspace_retention_bounds_the_pool(rng):
    old = ttgt.workspace_retention()
    try:
        assert ttgt.workspace_retention(0) == 0
        a, b = rng.standard_normal((30, 20, 40)), rng.standard_normal((40, 20, 30))
        want = np.einsum("abc,cbd->ad", a, b)
        np.testing.assert_allclose(ttgt.einsum("abc,cbd->ad", a, b), want, rtol=1e-12)
        assert ttgt.release_workspace() == 0  # nothing was kept
        with pytest.raises(ValueError):
            ttgt.workspace_retention(-1)
    finally:
        assert ttgt.workspace_retention(old) == old


@pytest.mark.parametrize("order", ["C", "F"])
def test_large_results_start_on_a_cache_line(order, rng):
    # 2 MiB results from einsum, transpose and a Plan: 64-byte aligned, in the asked order,
    # writable, equal to numpy's; small ones are plain numpy arrays
    a = rng.standard_normal((512, 256))
    b = rng.standard_normal((256, 512))
    got = ttgt.einsum("ij,jk->ik", a, b, order=order)
    assert got.ctypes.data % 64 == 0
    assert got.flags.c_contiguous if order == "C" else got.flags.f_contiguous
    assert got.flags.writeable and got.shape == (512, 512)
    assert_close(got, a @ b, np.float64)
    t = ttgt.transpose(a, (1, 0))
    assert t.ctypes.data % 64 == 0 and t.flags.c_contiguous
    assert np.array_equal(t, a.T)
    p = ttgt.Plan("ij,jk->ik", a, b)
    r = p(a, b)
    assert r.ctypes.data % 64 == 0
    assert_close(r, a @ b, np.float64)
    for shape, dt in [((1 << 17,), np.float64), ((3, 5, 7), np.complex64), ((), np.float32)]:
        e = _arrays.empty(shape, dt, order=order)
        assert e.shape == shape and e.dtype == dt
        if e.nbytes >= _arrays.ALIGNED_MIN_BYTES:
            assert e.ctypes.data % 64 == 0
