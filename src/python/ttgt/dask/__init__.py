"""Contractions on Dask: ttgt as dask.array's per-block engine, and distributed einsums whose
block shapes ttgt's cost models choose.

Two ways in:

- :func:`register` makes dask.array's own ``einsum`` and ``tensordot`` compute each numpy
  block with ttgt (dask looks the per-block function up in ``einsum_lookup`` and
  ``tensordot_lookup``); :func:`unregister` gives them back to numpy.
- :func:`einsum` (and :func:`tensordot`) contracts dask arrays pairwise along ttgt's path; each
  pair is rechunked to the grid the models predict fastest on the cluster at hand (block
  contractions that are large, GEMM-friendly ttgt calls; contracted-index blocks summed as a
  tree; blocks that fit a task's memory), and :func:`plan` reports that choice without
  computing anything.

Inside a task, ttgt runs on the threads the worker gives it: on a distributed worker, the
worker's threads divided among its running tasks; under the threaded scheduler, this
process's cores divided among the ttgt calls in flight; so processes × threads never exceeds
the cores.

>>> import dask.array as da, numpy as np, ttgt.dask
>>> a = da.ones((60, 50), chunks=20)
>>> b = da.ones((50, 40), chunks=20)
>>> c = ttgt.dask.einsum("ik,kj->ij", a, b)
>>> float(c[0, 0].compute())
50.0
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .. import _api, _threads, _ttgt
from .._plan import Plan
from . import _blocks, _spec
from ._blocks import BlockChoice, Cluster, Pair

__all__ = [
    "BlockChoice",
    "Cluster",
    "DaskPlan",
    "PairStep",
    "cluster",
    "einsum",
    "plan",
    "register",
    "registered",
    "tensordot",
    "unregister",
]

_saved: Optional[Tuple[Any, Any]] = None


def _dask() -> Any:
    try:
        import dask.array as da
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("ttgt.dask needs Dask: pip install 'dask[array]' (and 'distributed' for clusters)") from e
    return da


# ----------------------------------------------------------------------------------------
# threads inside a task


def _worker() -> Any:
    """The distributed worker running this task, or None."""
    try:
        from distributed import get_worker
    except ImportError:
        return None
    try:
        return get_worker()
    except ValueError:
        return None


def _task_threads() -> int:
    """Threads a ttgt call inside the running task may use; 0: ttgt's own default (the
    process's cores divided among the calls in flight)."""
    worker = _worker()
    if worker is None:
        return 0
    state = getattr(worker, "state", None)
    nthreads = int(getattr(state, "nthreads", 0) or getattr(worker, "nthreads", 1) or 1)
    running = int(getattr(state, "executing_count", 1) or 1)
    return max(1, nthreads // max(1, running))


def _bound_workspace(nbytes: int) -> None:
    """On a distributed worker, keeps ttgt's reusable workspace within what the plan gave a
    task (the worker's memory manager does not see it)."""
    if nbytes > 0 and _worker() is not None and _ttgt.workspace_retention(None) > nbytes:
        _ttgt.workspace_retention(nbytes)


@contextlib.contextmanager
def _within_task() -> Iterator[None]:
    n = _task_threads()
    if n:
        with _threads.num_threads(n):
            yield
    else:
        yield


# ----------------------------------------------------------------------------------------
# dask.array's per-block engine


def _block_einsum(subscripts: str, *operands: Any, **kwargs: Any) -> Any:
    """dask.array's per-chunk einsum on ttgt (it passes ``dtype``, ``optimize`` and the
    caller's ``casting``/``order``)."""
    with _within_task():
        return _api.einsum(subscripts, *operands, **kwargs)


def _block_tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """dask.array's per-chunk tensordot on ttgt."""
    with _within_task():
        return _api.tensordot(a, b, axes=axes)


_PLUGIN = "ttgt-block-engine"


def _client(client: Any) -> Any:
    """``client``, else the current distributed client, else None."""
    if client is not None:
        return client
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _plugin() -> Any:
    from distributed.diagnostics.plugin import WorkerPlugin

    class BlockEngine(WorkerPlugin):  # type: ignore[misc]
        """Registers ttgt as the per-block engine in every worker, present and future."""

        def setup(self, worker: Any) -> None:
            _register_here()

        def teardown(self, worker: Any) -> None:
            _unregister_here()

    return BlockEngine()


def _register_here() -> None:
    global _saved
    _dask()
    from dask.array.dispatch import einsum_lookup, tensordot_lookup

    if _saved is not None:
        return
    _saved = (einsum_lookup.dispatch(np.ndarray), tensordot_lookup.dispatch(np.ndarray))
    einsum_lookup.register(np.ndarray, _block_einsum)
    tensordot_lookup.register(np.ndarray, _block_tensordot)


def _unregister_here() -> None:
    global _saved
    if _saved is None:
        return
    from dask.array.dispatch import einsum_lookup, tensordot_lookup

    einsum_lookup.register(np.ndarray, _saved[0])
    tensordot_lookup.register(np.ndarray, _saved[1])
    _saved = None


def register(client: Any = None) -> None:
    """Routes dask.array's per-block ``einsum`` and ``tensordot`` of numpy blocks to ttgt
    (idempotent): in this process (the threaded and synchronous schedulers) and, with
    ``client`` or a current ``distributed`` client, in every worker of its cluster, present
    and future (a worker plugin: the blocks are looked up where they run). Graphs of
    ``dask.array.einsum`` and ``tensordot`` then compute their blocks with ttgt.

    >>> import ttgt.dask, dask.array as da, numpy as np
    >>> ttgt.dask.register()
    >>> float(da.einsum("ij,jk->ik", da.ones((4, 6), chunks=2), da.ones((6, 3), chunks=3)).sum().compute())
    72.0
    >>> ttgt.dask.unregister()
    """
    _register_here()
    c = _client(client)
    if c is not None:
        c.register_plugin(_plugin(), name=_PLUGIN)


def unregister(client: Any = None) -> None:
    """Gives dask.array's per-block ``einsum`` and ``tensordot`` back to what they were
    before :func:`register` (numpy's), here and in the workers of ``client`` or of the
    current ``distributed`` client."""
    _unregister_here()
    c = _client(client)
    if c is not None:
        try:
            c.unregister_worker_plugin(_PLUGIN)
        except ValueError:
            pass  # never registered on this cluster


def registered() -> bool:
    """Whether dask.array's per-block einsum runs on ttgt in this process."""
    return _saved is not None


# ----------------------------------------------------------------------------------------
# the cluster


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platform dependent
        return 8 << 30


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - platform dependent


def cluster(memory_limit: Optional[int] = None, bandwidth: Optional[float] = None) -> Cluster:
    """The cluster the next graph runs on: the workers of the current ``distributed``
    client, if there is one; otherwise this process under dask's local scheduler (its
    ``num_workers`` setting, or this process's cores). ``memory_limit``: bytes per worker,
    instead of the workers' own limits (or this machine's memory); ``bandwidth``: bytes per
    second per worker between workers.

    >>> import ttgt.dask
    >>> ttgt.dask.cluster(memory_limit=1 << 30).distributed
    False
    """
    bw = float(bandwidth) if bandwidth else _blocks.DEFAULT_BANDWIDTH
    client = _client(None)
    if client is not None:
        info = client.scheduler_info(n_workers=-1).get("workers", {})
        if info:
            threads = [max(1, int(w.get("nthreads", 1))) for w in info.values()]
            limits = [int(w.get("memory_limit") or 0) for w in info.values()]
            per_slot = min(
                (memory_limit or lim or _physical_memory()) // t for lim, t in zip(limits, threads)
            )
            return Cluster(len(info), sum(threads), per_slot, distributed=True, bandwidth=bw)
    import dask

    slots = int(dask.config.get("num_workers", None) or _cores())
    mem = memory_limit or _physical_memory() // 2
    return Cluster(1, max(1, slots), max(1, mem // max(1, slots)), distributed=False, bandwidth=bw)


# ----------------------------------------------------------------------------------------
# plans


@dataclass
class PairStep:
    """One pairwise contraction of a :class:`DaskPlan`: its subscripts, operand shapes, the
    chosen :class:`BlockChoice`, its FLOPs and the workspace bytes a task may keep."""

    subscripts: str
    shapes: Tuple[Tuple[int, ...], Tuple[int, ...]]
    choice: BlockChoice
    flops: float
    workspace: int = 0

    def describe(self) -> str:
        c = self.choice
        grid = " x ".join(f"{x}:{c.grid[x]}" for x in c.grid if c.grid[x] > 1) or "one block"
        blocks = ",".join(f"{x}={c.blocks[x]}" for x in c.blocks)
        parts = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in c.parts.items() if v)
        return (
            f"{self.subscripts}: grid {grid} (blocks {blocks}); {c.tasks} block contractions"
            + (f" + {c.sums} partial sums" if c.sums else "")
            + f"; one block {c.block_seconds * 1e3:.3g} ms; moves {c.bytes_moved / 1e6:.3g} MB"
            + f" (lower bound {c.lower_bound_bytes / 1e6:.3g} MB); predicted {c.predicted_seconds * 1e3:.3g} ms"
            + (f" [{parts}]" if parts else "")
        )


@dataclass
class DaskPlan:
    """What :func:`einsum` builds: the explicit subscripts, the pairwise steps in order with
    their grids, and the cluster they were chosen for.

    ``tasks``, ``bytes_moved`` and ``predicted_seconds`` add up the steps.
    """

    subscripts: str
    steps: List[PairStep]
    cluster: Cluster

    @property
    def tasks(self) -> int:
        return sum(s.choice.tasks + s.choice.sums for s in self.steps)

    @property
    def bytes_moved(self) -> float:
        return sum(s.choice.bytes_moved for s in self.steps)

    @property
    def lower_bound_bytes(self) -> float:
        return sum(s.choice.lower_bound_bytes for s in self.steps)

    @property
    def predicted_seconds(self) -> float:
        return sum(s.choice.predicted_seconds for s in self.steps)

    def explain(self) -> str:
        """The plan as text: the cluster, then each step's grid, tasks, bytes moved and
        predicted time."""
        cl = self.cluster
        head = (
            f"{self.subscripts} on {cl.workers} worker(s), {cl.slots} task slot(s), "
            f"{cl.memory_per_slot / 2**20:.0f} MiB per slot"
            + (f", {cl.bandwidth / 1e9:.3g} GB/s links" if cl.distributed else ", shared memory")
        )
        lines = [head] + [f"  step {k}: {s.describe()}" for k, s in enumerate(self.steps)]
        lines.append(
            f"  total: {self.tasks} tasks, {self.bytes_moved / 1e6:.3g} MB moved "
            f"(lower bound {self.lower_bound_bytes / 1e6:.3g} MB), predicted {self.predicted_seconds * 1e3:.3g} ms"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def _predictor(pair: Pair, dtype: np.dtype) -> Callable[[Dict[str, int]], float]:
    """Seconds ttgt's planner predicts for one block contraction on one thread."""
    spec = f"{pair.a},{pair.b}->{pair.out}"
    cache: Dict[Tuple[int, ...], float] = {}

    def predict(blocks: Dict[str, int]) -> float:
        key = tuple(blocks[x] for x in sorted(blocks))
        if key not in cache:
            a = np.empty(tuple(blocks[x] for x in pair.a), dtype)
            b = np.empty(tuple(blocks[x] for x in pair.b), dtype)
            d = Plan(spec, a, b, threads=1).explain(as_dict=True)
            cache[key] = float(d.get("predicted_seconds") or 0.0)  # type: ignore[union-attr]
        return cache[key]

    return predict


def _rate(pair: Pair, dtype: np.dtype, predict: Callable[[Dict[str, int]], float]) -> float:
    """FLOP/s of one thread for the coarse ranking: ttgt's prediction for a block of the
    pair about 64 elements wide in every index, scaled."""
    blocks = {x: min(n, 64) for x, n in pair.extents.items()}
    secs = predict(blocks)
    flops = 2.0 * math.prod(blocks[x] for x in set(pair.a) | set(pair.b))
    return flops / secs if secs > 0 else 1e10


def _chunks(x: Any) -> Optional[Tuple[Tuple[int, ...], ...]]:
    c = getattr(x, "chunks", None)
    return tuple(tuple(int(n) for n in axis) for axis in c) if c is not None else None


def _plan_pair(a: Any, ta: str, b: Any, tb: str, out: str, ext: Dict[str, int], dtype: np.dtype, cl: Cluster) -> PairStep:
    pair = Pair(ta, tb, out, {x: ext[x] for x in dict.fromkeys(ta + tb)}, dtype.itemsize, _chunks(a), _chunks(b))
    predict = _predictor(pair, dtype)
    choice = _blocks.choose_blocks(pair, cl, predict, _rate(pair, dtype, predict))[0]
    shapes = (tuple(ext[x] for x in ta), tuple(ext[x] for x in tb))
    # the workspace a task may keep between calls: its share of the slot's block budget
    workspace = int(cl.memory_per_slot * _blocks.MEMORY_SHARE / 2)
    return PairStep(f"{ta},{tb}->{out}", shapes, choice, pair.flops(), workspace)


# ----------------------------------------------------------------------------------------
# building the graph


def _chunk_contract(a: Any, b: Any, *, subscripts: str, ncontracted: int, result_dtype: np.dtype, workspace: int) -> Any:
    """One block contraction (a task): ttgt on the blocks, the result given one extra axis
    of extent 1 per contracted index so that the partial results line up for their sum."""
    _bound_workspace(workspace)
    with _within_task():
        c = _api.einsum(subscripts, a, b, dtype=result_dtype, casting="unsafe")
    c = np.asarray(c)
    return c.reshape(c.shape + (1,) * ncontracted)


def _build_pair(da: Any, a: Any, ta: str, b: Any, tb: str, out: str, step: PairStep, dtype: np.dtype, split_every: Any) -> Any:
    c = step.choice
    ext = {x: int(n) for x, n in zip(ta, a.shape)}
    ext.update({x: int(n) for x, n in zip(tb, b.shape)})
    a = a.rechunk(c.chunks_of(ta, ext))
    b = b.rechunk(c.chunks_of(tb, ext))
    contracted = [x for x in ta if x in tb and x not in out]
    index = tuple(out) + tuple(contracted)
    r = da.blockwise(
        _chunk_contract,
        index,
        a,
        tuple(ta),
        b,
        tuple(tb),
        adjust_chunks={x: 1 for x in contracted},
        dtype=dtype,
        subscripts=f"{ta},{tb}->{out}",
        ncontracted=len(contracted),
        result_dtype=dtype,
        workspace=int(step.workspace),
        meta=np.empty((0,) * len(index), dtype=dtype),
    )
    if contracted:
        r = r.sum(axis=tuple(range(len(out), len(index))), split_every=split_every, dtype=dtype)
    return r


def _one_operand(da: Any, x: Any, term: str, keep: str) -> Tuple[Any, str]:
    """Diagonals and sums of letters no other operand or the output needs, done first."""
    if term == keep:
        return x, term
    return da.einsum(f"{term}->{keep}", x), keep


def _prepare(da: Any, subscripts: str, operands: Sequence[Any], dtype: Any) -> Tuple[List[Any], List[str], str, Dict[str, int], np.dtype]:
    arrays = [x if isinstance(x, da.Array) else da.asarray(x) for x in operands]
    terms, out = _spec.explicit(subscripts, [x.ndim for x in arrays])
    ext, stretched = _spec.extents(terms, [x.shape for x in arrays])
    dt = np.dtype(dtype) if dtype is not None else np.result_type(*[x.dtype for x in arrays])
    # extent-1 axes that broadcast: one value along the letter, so the letter leaves that operand
    for k, axes in enumerate(stretched):
        if axes:
            index = tuple(0 if ax in axes else slice(None) for ax in range(arrays[k].ndim))
            arrays[k] = arrays[k][index]
            terms[k] = "".join(c for ax, c in enumerate(terms[k]) if ax not in axes)
    for k, t in enumerate(terms):
        others = set(out).union(*(set(u) for j, u in enumerate(terms) if j != k))
        keep = "".join(c for c in dict.fromkeys(t) if c in others)
        arrays[k], terms[k] = _one_operand(da, arrays[k], t, keep)
    return arrays, terms, out, ext, dt


def _path(terms: List[str], ext: Dict[str, int], optimize: Any) -> List[Tuple[int, int]]:
    if len(terms) <= 2:
        return [(0, 1)] if len(terms) == 2 else []
    shapes = [np.broadcast_to(np.zeros((), np.int8), tuple(ext[x] for x in t)) for t in terms]
    path, _ = _api.einsum_path(",".join(terms), *shapes, optimize=optimize if optimize not in (None, False) else True)
    return [tuple(p) for p in path[1:]]  # type: ignore[misc]


def _run(subscripts: str, operands: Sequence[Any], dtype: Any, optimize: Any, split_every: Any, memory_limit: Optional[int], bandwidth: Optional[float], build: bool) -> Tuple[Any, DaskPlan]:
    da = _dask()
    arrays, terms, out, ext, dt = _prepare(da, subscripts, operands, dtype)
    cl = cluster(memory_limit, bandwidth)
    steps: List[PairStep] = []
    items = list(zip(arrays, terms))
    path = _path(terms, ext, optimize)
    for s, (i, j) in enumerate(path):
        (y, ty), (x, tx) = items.pop(max(i, j)), items.pop(min(i, j))
        rest = set(out).union(*(set(t) for _, t in items))
        last = s == len(path) - 1
        tr = out if last else "".join(c for c in dict.fromkeys(tx + ty) if c in rest)
        # a letter of one side that neither the other side nor the result keeps: summed first
        x, tx = _one_operand(da, x, tx, "".join(c for c in tx if c in ty or c in tr))
        y, ty = _one_operand(da, y, ty, "".join(c for c in ty if c in tx or c in tr))
        step = _plan_pair(x, tx, y, ty, tr, ext, dt, cl)
        steps.append(step)
        r = _build_pair(da, x, tx, y, ty, tr, step, dt, split_every) if build else None
        items.append((r, tr))
    plan_ = DaskPlan(subscripts, steps, cl)
    if not build:
        return None, plan_
    (x, t), = items
    if t != out:
        x = da.einsum(f"{t}->{out}", x)
    return x.astype(dt, copy=False), plan_


def einsum(
    subscripts: str,
    *operands: Any,
    dtype: Any = None,
    optimize: Any = True,
    split_every: Any = None,
    memory_limit: Optional[int] = None,
    bandwidth: Optional[float] = None,
) -> Any:
    """``numpy.einsum`` on dask arrays (numpy arrays are wrapped), as a lazy dask array: the
    operands contracted pairwise along ttgt's path (``optimize`` as in :func:`ttgt.einsum`),
    each pair rechunked to the grid ttgt's models predict fastest on the current cluster
    (:func:`cluster`), blocks computed by ttgt, partial sums over split contracted indices
    reduced as a tree (``split_every`` as in dask). ``memory_limit``: bytes per worker the
    blocks are sized for (default: the workers' own limits, or this machine's memory);
    ``bandwidth``: bytes per second per worker between workers. :func:`plan` reports the
    choice.

    >>> import dask.array as da, numpy as np, ttgt.dask
    >>> a = da.from_array(np.arange(24.0).reshape(2, 3, 4), chunks=2)
    >>> b = np.ones((4, 3))
    >>> np.allclose(ttgt.dask.einsum("ijk,kj->i", a, b).compute(), np.einsum("ijk,kj->i", a.compute(), b))
    True
    """
    if not isinstance(subscripts, str):
        raise TypeError("ttgt.dask.einsum takes the subscripts string first")
    if not operands:
        raise TypeError("einsum needs at least one operand")
    result, _ = _run(subscripts, operands, dtype, optimize, split_every, memory_limit, bandwidth, True)
    return result


def plan(
    subscripts: str,
    *operands: Any,
    dtype: Any = None,
    optimize: Any = True,
    memory_limit: Optional[int] = None,
    bandwidth: Optional[float] = None,
) -> DaskPlan:
    """The plan :func:`einsum` would follow for these operands (their shapes and chunks, not
    their values): each pairwise step's grid, task count, bytes moved between workers against
    the lower bound, and predicted time.

    >>> import dask.array as da, ttgt.dask
    >>> p = ttgt.dask.plan("ij,jk->ik", da.ones((400, 300)), da.ones((300, 200)), memory_limit=1 << 30)
    >>> len(p.steps), p.steps[0].choice.tasks >= 1
    (1, True)
    """
    _, plan_ = _run(subscripts, operands, dtype, optimize, None, memory_limit, bandwidth, False)
    return plan_


def tensordot(a: Any, b: Any, axes: Any = 2, **kwargs: Any) -> Any:
    """``numpy.tensordot`` on dask arrays through :func:`einsum` (same keywords).

    >>> import dask.array as da, ttgt.dask
    >>> ttgt.dask.tensordot(da.ones((3, 4, 5)), da.ones((4, 5, 6))).shape
    (3, 6)
    """
    da = _dask()
    a = a if isinstance(a, da.Array) else da.asarray(a)
    b = b if isinstance(b, da.Array) else da.asarray(b)
    if isinstance(axes, int):
        if axes < 0 or axes > min(a.ndim, b.ndim):
            raise ValueError(f"axes={axes} is out of range for operands of {a.ndim} and {b.ndim} axes")
        xa, xb = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        xa, xb = ([axes[0]] if isinstance(axes[0], int) else list(axes[0])), ([axes[1]] if isinstance(axes[1], int) else list(axes[1]))
        if len(xa) != len(xb):
            raise ValueError("tensordot: the two axis lists differ in length")
        xa = [x % a.ndim for x in xa]
        xb = [x % b.ndim for x in xb]
    letters = _spec._LETTERS
    if a.ndim + b.ndim > len(letters):
        raise ValueError("tensordot: too many axes")
    ta = letters[: a.ndim]
    tb = list(letters[a.ndim : a.ndim + b.ndim])
    for i, j in zip(xa, xb):
        tb[j] = ta[i]
    tbs = "".join(tb)
    out = "".join(c for k, c in enumerate(ta) if k not in xa) + "".join(c for k, c in enumerate(tbs) if k not in xb)
    return einsum(f"{ta},{tbs}->{out}", a, b, **kwargs)
