"""ttgt.dask: dask.array's per-block engine and distributed einsums, against numpy.

Needs Dask (``dask[array]``, and ``distributed`` for the cluster tests); with
TTGT_REQUIRE_PEERS=1 (the README's test command and CI) a missing one fails the run."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import DTYPES, assert_close, need, random


@pytest.fixture(scope="module")
def da():
    need("dask")
    return importlib.import_module("dask.array")


@pytest.fixture(scope="module")
def td(da):
    return importlib.import_module("ttgt.dask")


@pytest.fixture
def sync():
    dask = importlib.import_module("dask")
    with dask.config.set(scheduler="synchronous"):
        yield


CASES = [
    ("ik,kj->ij", [(37, 23), (23, 19)]),
    ("abcd,dbef->acef", [(6, 5, 7, 8), (8, 5, 4, 3)]),
    ("akci,kjcb->ijab", [(19, 5, 19, 5), (5, 5, 19, 19)]),
    ("bij,bjk->bik", [(4, 9, 7), (4, 7, 6)]),
    ("ij,jk", [(5, 6), (6, 7)]),
    ("i,j->ij", [(5,), (6,)]),
    ("ij,ij->", [(8, 9), (8, 9)]),
    ("...ij,jk->...ik", [(2, 3, 5, 6), (6, 4)]),
    ("ij,jk,kl->il", [(6, 7), (7, 8), (8, 5)]),
    ("abc,cd,bd->a", [(5, 6, 7), (7, 8), (6, 8)]),
    ("iij,jk->ik", [(5, 5, 6), (6, 4)]),
    ("ijk->kj", [(4, 5, 6)]),
    ("ij,j->i", [(7, 1), (4,)]),
]


@pytest.mark.parametrize("spec,shapes", CASES)
@pytest.mark.parametrize("chunk", [3, 100])
def test_einsum_matches_numpy(da, td, sync, rng, spec, shapes, chunk):
    ops = [rng.standard_normal(s) for s in shapes]
    got = td.einsum(spec, *[da.from_array(x, chunks=chunk) for x in ops]).compute()
    assert_close(got, np.einsum(spec, *ops), np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_numpy_operands(da, td, sync, rng, dtype):
    a, b = random(rng, (12, 7, 9), dtype), random(rng, (9, 7, 5), dtype)
    got = td.einsum("abc,cbd->ad", da.from_array(a, chunks=4), b)
    assert got.dtype == np.dtype(dtype)
    assert_close(got.compute(), np.einsum("abc,cbd->ad", a, b), dtype)


def test_mixed_dtypes_promote_as_numpy(da, td, sync, rng):
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4))
    got = td.einsum("ij,jk->ik", da.from_array(a, chunks=2), da.from_array(b, chunks=2))
    assert got.dtype == np.float64
    assert_close(got.compute(), a.astype(np.float64) @ b, np.float64)


def test_tensordot_matches_numpy(da, td, sync, rng):
    a, b = rng.standard_normal((5, 6, 7)), rng.standard_normal((6, 7, 3))
    got = td.tensordot(da.from_array(a, chunks=3), da.from_array(b, chunks=3)).compute()
    assert_close(got, np.tensordot(a, b), np.float64)
    got = td.tensordot(a, b, axes=([1], [0])).compute()
    assert_close(got, np.tensordot(a, b, axes=([1], [0])), np.float64)
    with pytest.raises(ValueError):
        td.tensordot(a, b, axes=4)


def test_bad_input_raises_clear_errors(da, td):
    a, b = da.ones((3, 4)), da.ones((5, 6))
    with pytest.raises(ValueError, match="extents"):
        td.einsum("ij,jk->ik", a, b)
    with pytest.raises(ValueError, match="operands"):
        td.einsum("ij,jk->ik", a)
    with pytest.raises(ValueError, match="not a letter"):
        td.einsum("i1,jk->ik", a, b)
    with pytest.raises(ValueError, match="names no operand"):
        td.einsum("ij->z", a)
    with pytest.raises(TypeError):
        td.einsum(a, [0, 1])


def test_blocks_fit_the_memory_limit_and_split_contracted_indices(da, td, sync, rng):
    blocks = importlib.import_module("ttgt.dask._blocks")
    a, b = rng.standard_normal((40, 3000)), rng.standard_normal((3000, 30))
    limit = 200_000
    p = td.plan("ik,kj->ij", da.from_array(a), da.from_array(b), memory_limit=limit)
    (step,) = p.steps
    c = step.choice
    block_bytes = 8 * (c.blocks["i"] * c.blocks["k"] + c.blocks["k"] * c.blocks["j"] + c.blocks["i"] * c.blocks["j"])
    slots = p.cluster.slots
    assert 2 * block_bytes <= limit // slots * blocks.MEMORY_SHARE
    assert c.grid["k"] > 1 and c.sums == c.tasks
    assert "partial sums" in p.explain()
    got = td.einsum("ik,kj->ij", da.from_array(a), da.from_array(b), memory_limit=limit)
    assert_close(got.compute(), a @ b, np.float64)
    with pytest.raises(ValueError, match="fits"):
        td.plan("ik,kj->ij", da.from_array(a), da.from_array(b), memory_limit=16)


def test_grid_prefers_fewer_tasks_when_one_block_fits(da, td):
    p = td.plan("ij,jk->ik", da.ones((64, 64), chunks=8), da.ones((64, 64), chunks=8), memory_limit=1 << 30)
    assert p.steps[0].choice.tasks <= p.cluster.slots
    assert p.steps[0].choice.rechunk == (True, True)


def test_split_group_and_lower_bound(td):
    blocks = importlib.import_module("ttgt.dask._blocks")
    assert blocks.split_group("ab", {"a": 100, "b": 30}, 4) == {"a": 25, "b": 30}
    assert blocks.split_group("a", {"a": 3}, 16) == {"a": 1}
    pair = blocks.Pair("ik", "kj", "ij", {"i": 1000, "j": 1000, "k": 1000}, 8)
    assert blocks.lower_bound_bytes(pair, 1) == 0.0
    # 8 workers: each touches >= 3 (1e9 / 8)^(2/3) elements, holds 3e6 / 8
    want = 8 * (3 * (1e9 / 8) ** (2 / 3) - 3e6 / 8) * 8
    assert blocks.lower_bound_bytes(pair, 8) == pytest.approx(want)


def test_register_routes_dask_blocks_through_ttgt(da, td, sync, rng, monkeypatch):
    dispatch = importlib.import_module("dask.array.dispatch")
    api = importlib.import_module("ttgt._api")
    calls = {"einsum": 0, "tensordot": 0}
    inner_e, inner_t = api.einsum, api.tensordot

    def counted_einsum(*args, **kwargs):
        calls["einsum"] += 1
        return inner_e(*args, **kwargs)

    def counted_tensordot(*args, **kwargs):
        calls["tensordot"] += 1
        return inner_t(*args, **kwargs)

    monkeypatch.setattr(api, "einsum", counted_einsum)
    monkeypatch.setattr(api, "tensordot", counted_tensordot)
    a, b = rng.standard_normal((9, 8, 7)), rng.standard_normal((7, 8, 6))
    x, y = da.from_array(a, chunks=4), da.from_array(b, chunks=4)
    td.register()
    try:
        assert td.registered()
        td.register()  # idempotent
        got = da.einsum("abc,cbd->ad", x, y, optimize=True).compute()
        assert_close(got, np.einsum("abc,cbd->ad", a, b), np.float64)
        got = da.tensordot(x, y, axes=([1, 2], [1, 0])).compute()
        assert_close(got, np.tensordot(a, b, axes=([1, 2], [1, 0])), np.float64)
    finally:
        td.unregister()
    assert calls["einsum"] > 0 and calls["tensordot"] > 0
    assert not td.registered()
    assert dispatch.einsum_lookup.dispatch(np.ndarray) is np.einsum
    assert dispatch.tensordot_lookup.dispatch(np.ndarray) is np.tensordot
    seen = dict(calls)
    da.einsum("abc,cbd->ad", x, y).compute()
    assert calls == seen


def test_threaded_scheduler(da, td, rng):
    dask = importlib.import_module("dask")
    a, b = rng.standard_normal((50, 40, 30)), rng.standard_normal((30, 40, 20))
    with dask.config.set(scheduler="threads", num_workers=2):
        p = td.plan("abc,cbd->ad", da.from_array(a, chunks=10), b, memory_limit=1 << 20)
        assert p.cluster.slots == 2 and not p.cluster.distributed
        got = td.einsum("abc,cbd->ad", da.from_array(a, chunks=10), b, memory_limit=1 << 20).compute()
    assert_close(got, np.einsum("abc,cbd->ad", a, b), np.float64)


def test_docstring_examples(td):
    import doctest

    for name in ("ttgt.dask", "ttgt.dask._blocks", "ttgt.dask._spec"):
        r = doctest.testmod(importlib.import_module(name))
        assert r.attempted > 0 and r.failed == 0, name


@pytest.fixture(scope="module")
def client(td):
    distributed = need("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=False, memory_limit="1GB", dashboard_address=":0"
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_distributed_cluster_plan_and_result(da, td, client, rng):
    a, b = rng.standard_normal((30, 20, 40)), rng.standard_normal((40, 20, 25))
    x, y = da.from_array(a, chunks=10), da.from_array(b, chunks=10)
    p = td.plan("abc,cbd->ad", x, y)
    assert p.cluster.distributed and p.cluster.workers == 2 and p.cluster.slots == 4
    assert p.cluster.memory_per_slot == 10**9 // 2
    assert "2 worker(s)" in p.explain()
    got = client.compute(td.einsum("abc,cbd->ad", x, y)).result()
    assert_close(got, np.einsum("abc,cbd->ad", a, b), np.float64)


def test_threads_follow_the_workers_threads(td, client):
    # one task running on a worker of two threads: ttgt gets both
    assert client.submit(td._task_threads, pure=False).result() == 2
    assert td._task_threads() == 0  # outside a worker: ttgt's own default


def test_memory_bounded_contraction_on_a_small_worker(da, td):
    """Operands and result together larger than the worker's spill threshold: the blocks
    fit a task's share, the worker spills as Dask does, and the result is right (its column
    sums against A's column sums times B)."""
    distributed = need("distributed")
    n = 3000  # each operand and the result: 72 MB; the worker: 300 MB, spilling from 180 MB
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, memory_limit="300MB", dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as c:
        a = da.random.RandomState(1).random_sample((n, n), chunks=500)
        b = da.random.RandomState(2).random_sample((n, n), chunks=500)
        p = td.plan("ik,kj->ij", a, b)
        blk = p.steps[0].choice.blocks
        assert 8 * (blk["i"] * blk["k"] + blk["k"] * blk["j"] + blk["i"] * blk["j"]) <= 300e6 / 8
        got, want = c.compute([td.einsum("ik,kj->ij", a, b).sum(axis=0), a.sum(axis=0) @ b])
        assert_close(got.result(), want.result(), np.float64)
        # register() reaches the worker processes (a worker plugin), unregister() too
        td.register(c)
        try:
            assert all(c.run(td.registered).values())
            x = da.from_array(np.arange(12.0).reshape(3, 4), chunks=2)
            got = da.einsum("ij,kj->ik", x, x).compute()
            assert_close(got, np.einsum("ij,kj->ik", x.compute(), x.compute()), np.float64)
        finally:
            td.unregister(c)
        assert not any(c.run(td.registered).values())
        assert not td.registered()

