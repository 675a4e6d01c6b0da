"""Block shapes for one pairwise contraction on a Dask cluster, chosen by predicted time.

A pairwise contraction has batch indices (in both operands and the result), free indices of
either operand, and contracted indices. Splitting each index into blocks turns it into a grid
of block contractions (one task each, run by ttgt) and, when contracted indices are split, a
tree of sums of partial results. The choice weighs, for every grid that fits a task's memory:

- the block contractions, priced by ttgt's own planner on the block shapes (packs, GEMM,
  write-back at one thread per task), in waves over the cluster's task slots;
- the partial sums of split contracted indices;
- the bytes moved between workers (operand blocks sent to the workers whose tasks read them,
  partial results sent to their sums, rechunking) over the network bandwidth;
- a per-task scheduling overhead.

The module is pure planning: it reads shapes, chunks and the cluster's size, never data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

Chunks = Tuple[Tuple[int, ...], ...]

#: Seconds of scheduler work per task on a distributed cluster (dask's documented order of
#: magnitude for the distributed scheduler).
DISTRIBUTED_TASK_SECONDS = 1e-3
#: Seconds of scheduler work per task on the local threaded or synchronous scheduler.
LOCAL_TASK_SECONDS = 1e-4
#: Bytes per second of each worker's link when nothing else is known (10 GbE).
DEFAULT_BANDWIDTH = 1.25e9
#: Share of a task slot's memory the operand, result and workspace blocks may fill (dask's
#: workers spill at 60 % of their limit; the rest holds the interpreter, results waiting to
#: move, and the blocks being fetched for the next task).
MEMORY_SHARE = 0.25
#: Bytes per second a task sums partial results at.
SUM_BANDWIDTH = 4e9
#: Candidate grids priced by ttgt's planner (the rest only by the coarse rate).
PRICED = 8
#: Most splits of one index group (powers of two up to this).
MAX_SPLITS = 4096
#: Most block contractions per task slot a grid may have (finer grids only add scheduling).
MAX_TASKS_PER_SLOT = 256


@dataclass(frozen=True)
class Cluster:
    """What the planner knows of where the graph runs.

    ``workers``: processes that hold data (1 for the threaded and synchronous schedulers);
    ``slots``: tasks that run at once (all workers' threads); ``memory_per_slot``: bytes one
    running task may use; ``distributed``: whether blocks move between processes;
    ``bandwidth``: bytes per second per worker between workers.

    >>> Cluster(workers=1, slots=2, memory_per_slot=1 << 30).distributed
    False
    """

    workers: int
    slots: int
    memory_per_slot: int
    distributed: bool = False
    bandwidth: float = DEFAULT_BANDWIDTH

    @property
    def task_seconds(self) -> float:
        return DISTRIBUTED_TASK_SECONDS if self.distributed else LOCAL_TASK_SECONDS


@dataclass(frozen=True)
class Pair:
    """One pairwise contraction: subscripts of A, B and the result, extents, element bytes
    and the operands' present chunks (None for an operand not chunked yet)."""

    a: str
    b: str
    out: str
    extents: Dict[str, int]
    itemsize: int
    chunks_a: Optional[Chunks] = None
    chunks_b: Optional[Chunks] = None

    def groups(self) -> Tuple[List[str], List[str], List[str], List[str]]:
        """(batch, free of A, free of B, contracted) letters, each in the order A then B
        names them."""
        a, b, out = set(self.a), set(self.b), set(self.out)
        batch = [x for x in self.a if x in b and x in out]
        free_a = [x for x in self.a if x not in b]
        free_b = [x for x in self.b if x not in a]
        contracted = [x for x in self.a if x in b and x not in out]
        return batch, free_a, free_b, contracted

    def size(self, letters: str) -> int:
        return math.prod(self.extents[x] for x in letters)

    def flops(self) -> float:
        """Multiply-adds times two, over every index once."""
        return 2.0 * math.prod(self.extents[x] for x in set(self.a) | set(self.b))


@dataclass
class BlockChoice:
    """A grid for one pairwise contraction and its predicted cost.

    ``blocks``: block extent per letter; ``grid``: blocks per letter; ``tasks``: block
    contractions; ``sums``: partial results summed (0 when no contracted index is split);
    ``bytes_moved``: predicted bytes sent between workers; ``lower_bound_bytes``: the least any
    distribution of these multiply-adds over the workers must move (Loomis-Whitney: each
    worker touches at least 3·(F/P)^(2/3) elements of A, B and C for its F/P multiply-adds,
    and holds at most 1/P of them); ``block_seconds``: ttgt's prediction for one block
    contraction; ``predicted_seconds``: the whole step.
    """

    blocks: Dict[str, int]
    grid: Dict[str, int]
    tasks: int
    sums: int
    bytes_moved: float
    lower_bound_bytes: float
    block_seconds: float
    predicted_seconds: float
    rechunk: Tuple[bool, bool] = (False, False)
    parts: Dict[str, float] = field(default_factory=dict)

    def chunks_of(self, letters: str, extents: Dict[str, int]) -> Tuple[int, ...]:
        """The regular chunk shape of an operand with these letters."""
        return tuple(min(self.blocks[x], extents[x]) for x in letters)


def _powers(limit: int) -> List[int]:
    out, g = [], 1
    while g <= min(limit, MAX_SPLITS):
        out.append(g)
        g *= 2
    return out


def split_group(letters: Sequence[str], extents: Dict[str, int], splits: int) -> Dict[str, int]:
    """Block extents of a group's letters so that the group has about ``splits`` blocks: the
    letter with the largest block is halved until the product of the per-letter block counts
    reaches ``splits`` (or every block is one wide).

    >>> split_group("ab", {"a": 100, "b": 30}, 4)
    {'a': 25, 'b': 30}
    >>> split_group("ab", {"a": 6, "b": 6}, 4)
    {'a': 3, 'b': 3}
    """
    blocks = {x: extents[x] for x in letters}

    def count() -> int:
        return math.prod(-(-extents[x] // blocks[x]) for x in letters)

    while count() < splits:
        wide = max(letters, key=lambda x: blocks[x], default=None)
        if wide is None or blocks[wide] == 1:
            break
        blocks[wide] = -(-blocks[wide] // 2)
    return blocks


def _matches(chunks: Optional[Chunks], letters: str, blocks: Dict[str, int], extents: Dict[str, int]) -> bool:
    """Whether an operand's present chunks are already the regular chunks of ``blocks``."""
    if chunks is None:
        return False
    for cs, x in zip(chunks, letters):
        b = min(blocks[x], extents[x])
        full, rest = divmod(extents[x], b)
        want = (b,) * full + ((rest,) if rest else ())
        if tuple(cs) != want:
            return False
    return True


def lower_bound_bytes(pair: Pair, workers: int) -> float:
    """Bytes any distribution of the pair's multiply-adds over ``workers`` must move
    (memory-independent bound; 0 on one worker).

    >>> lower_bound_bytes(Pair("ik", "kj", "ij", {"i": 64, "j": 64, "k": 64}, 8), 1)
    0.0
    >>> lower_bound_bytes(Pair("ik", "kj", "ij", {"i": 64, "j": 64, "k": 64}, 8), 8) > 0
    True
    """
    if workers <= 1:
        return 0.0
    f = pair.flops() / 2.0
    held = (pair.size(pair.a) + pair.size(pair.b) + pair.size(pair.out)) / workers
    return workers * max(0.0, 3.0 * (f / workers) ** (2.0 / 3.0) - held) * pair.itemsize


Predict = Callable[[Dict[str, int]], float]


def choose_blocks(pair: Pair, cluster: Cluster, predict: Predict, rate: float) -> List[BlockChoice]:
    """Every grid that fits a task slot's memory, best predicted first; the first
    :data:`PRICED` by coarse cost are priced with ``predict`` (seconds of one block
    contraction on one thread, from ttgt's planner), the rest keep the coarse estimate
    (``rate``: FLOP/s of one thread at large blocks).

    Raises ValueError when not even one-element blocks fit (a memory limit below a few
    elements).
    """
    batch, free_a, free_b, contracted = pair.groups()
    ext, size = pair.extents, pair.itemsize
    budget = cluster.memory_per_slot * MEMORY_SHARE
    a_bytes, b_bytes, c_bytes = (pair.size(s) * size for s in (pair.a, pair.b, pair.out))
    bound = lower_bound_bytes(pair, cluster.workers)
    splits = {
        id(letters): {g: split_group(letters, ext, g) for g in _powers(pair.size("".join(letters)))}
        for letters in (batch, free_a, free_b, contracted)
    }

    def grids(most: int) -> List[Tuple[float, BlockChoice]]:
        found = []
        for gb, sb in splits[id(batch)].items():
            for gm, sm in splits[id(free_a)].items():
                if gb * gm > most:
                    break
                for gn, sn in splits[id(free_b)].items():
                    if gb * gm * gn > most:
                        break
                    for gk, sk in splits[id(contracted)].items():
                        if gb * gm * gn * gk > most:
                            break
                        blocks = {**sb, **sm, **sn, **sk}
                        c = _price(pair, cluster, blocks, bound, (a_bytes, b_bytes, c_bytes), rate, budget)
                        if c is not None:
                            found.append((c.predicted_seconds, c))
        return found

    most = max(MAX_TASKS_PER_SLOT * cluster.slots, 64)
    coarse = grids(most)
    while not coarse and most < MAX_SPLITS**2:
        # blocks small enough for the memory limit need a finer grid
        most *= 16
        coarse = grids(most)
    if not coarse:
        raise ValueError(
            f"no block of {pair.a},{pair.b}->{pair.out} fits {cluster.memory_per_slot} bytes per task"
        )
    coarse.sort(key=lambda t: (t[0], t[1].tasks))
    seen = set()
    unique: List[BlockChoice] = []
    for _, c in coarse:
        key = tuple(sorted(c.blocks.items()))
        if key not in seen:
            seen.add(key)
            unique.append(c)
    for c in unique[:PRICED]:
        secs = predict(c.blocks)
        c.parts["compute"] = -(-c.tasks // cluster.slots) * secs
        c.predicted_seconds = _total(c.parts, -(-c.tasks // cluster.slots))
        c.block_seconds = secs
    head = sorted(unique[:PRICED], key=lambda c: (c.predicted_seconds, c.tasks))
    return head + unique[PRICED:]


def _price(
    pair: Pair,
    cluster: Cluster,
    blocks: Dict[str, int],
    bound: float,
    sizes: Tuple[float, float, float],
    rate: float,
    budget: float,
) -> Optional[BlockChoice]:
    """The coarse cost of one grid, or None when its blocks do not fit ``budget``."""
    ext, size = pair.extents, pair.itemsize
    a_bytes, b_bytes, c_bytes = sizes
    blk = {x: min(blocks[x], ext[x]) for x in ext}
    ba = math.prod(blk[x] for x in pair.a) * size
    bb = math.prod(blk[x] for x in pair.b) * size
    bc = math.prod(blk[x] for x in pair.out) * size
    # the blocks, ttgt's packed copies of them and the block result
    if 2 * (ba + bb + bc) > budget:
        return None
    grid = {x: -(-ext[x] // blk[x]) for x in ext}
    batch, free_a, free_b, contracted = pair.groups()
    g = lambda letters: math.prod(grid[x] for x in letters)  # noqa: E731
    gb, gm, gn, gk = g(batch), g(free_a), g(free_b), g(contracted)
    tasks = gb * gm * gn * gk
    flops = 2.0 * math.prod(blk[x] for x in set(pair.a) | set(pair.b))
    block_seconds = flops / rate
    waves = -(-tasks // cluster.slots)
    compute = waves * block_seconds
    sums = gb * gm * gn * gk if gk > 1 else 0
    sum_seconds = (c_bytes * gk / SUM_BANDWIDTH) / cluster.slots if gk > 1 else 0.0
    rechunk = (
        not _matches(pair.chunks_a, pair.a, blk, ext),
        not _matches(pair.chunks_b, pair.b, blk, ext),
    )
    moved = 0.0
    p = cluster.workers
    if cluster.distributed and p > 1:
        away = (p - 1) / p
        moved = away * (a_bytes * min(gn, p) + b_bytes * min(gm, p))
        if gk > 1:
            moved += away * c_bytes * (gk - 1)
        moved += away * (a_bytes * rechunk[0] + b_bytes * rechunk[1])
    comm = moved / (cluster.bandwidth * p) if moved else 0.0
    # a local rechunk copies the operand once
    local = (a_bytes * rechunk[0] + b_bytes * rechunk[1]) / SUM_BANDWIDTH / max(1, min(cluster.slots, tasks))
    # a rechunk is a task per old and per new chunk
    moves = sum(
        (math.prod(len(c) for c in old) if old else 1) + math.prod(grid[x] for x in letters)
        for old, letters, r in ((pair.chunks_a, pair.a, rechunk[0]), (pair.chunks_b, pair.b, rechunk[1]))
        if r
    )
    overhead = (tasks + sums + moves) * cluster.task_seconds
    parts = {"compute": compute, "network": comm, "sums": sum_seconds, "rechunk": local, "scheduling": overhead}
    return BlockChoice(
        blocks=blk,
        grid=grid,
        tasks=tasks,
        sums=sums,
        bytes_moved=moved,
        lower_bound_bytes=bound,
        block_seconds=block_seconds,
        predicted_seconds=_total(parts, waves),
        rechunk=rechunk,
        parts=parts,
    )


def _total(parts: Dict[str, float], waves: int) -> float:
    """Seconds of a grid from its parts: transfers overlap the block contractions of other
    waves, except the first wave's inputs (a grid of one wave waits for all of them).

    >>> _total({"compute": 4.0, "network": 1.0, "sums": 0.0, "rechunk": 0.0, "scheduling": 0.5}, 4)
    4.75
    >>> _total({"compute": 4.0, "network": 1.0, "sums": 0.0, "rechunk": 0.0, "scheduling": 0.5}, 1)
    5.5
    """
    compute, network = parts["compute"], parts["network"]
    overlapped = max(compute, network) + min(compute, network) / max(1, waves)
    return overlapped + parts["sums"] + parts["rechunk"] + parts["scheduling"]
