"""Distributed einsums on Dask: ttgt.dask.einsum beside dask.array.einsum with numpy blocks
and with ttgt blocks (ttgt.dask.register()), on a local cluster of worker processes.

Operands are generated on the workers and persisted before any timing; each way's result is
persisted and waited for, then released; ways alternate for --repeat rounds and the best
time of each is kept. Writes one JSON record per case to stdout (or --json FILE).

    .venv/bin/python benches/python/dask_einsum.py --workers 2 --threads 1 --memory 2GB
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait

import ttgt.dask as td

# (name, spec, shapes, input chunks): a GEMM, the CCSD particle-particle ladder (occupied 12,
# virtual 96) and a TCCG-style contraction with its batch-free indices split.
CASES: List[Tuple[str, str, List[Tuple[int, ...]], int]] = [
    ("gemm-4000", "ik,kj->ij", [(4000, 4000), (4000, 4000)], 1000),
    ("ccsd-ladder-o12-v96", "ijcd,abcd->ijab", [(12, 12, 96, 96), (96, 96, 96, 96)], 48),
    ("tccg-abcd-dbef", "abcd,dbef->acef", [(72, 64, 72, 64), (64, 64, 72, 72)], 32),
]
# Run only when named (--only): operands and result of 200 MB each, for workers whose memory
# limit is below their sum (--memory 400MB).
LARGE: List[Tuple[str, str, List[Tuple[int, ...]], int]] = [("gemm-5000", "ik,kj->ij", [(5000, 5000), (5000, 5000)], 1000)]


def _timed(client: Client, build: Callable[[], Any]) -> float:
    start = time.perf_counter()
    r = client.persist(build())
    wait(r)
    secs = time.perf_counter() - start
    del r
    return secs


def run_case(client: Client, name: str, spec: str, shapes: List[Tuple[int, ...]], chunks: int, repeat: int) -> Dict[str, Any]:
    ops = [da.random.RandomState(k).random_sample(s, chunks=chunks) for k, s in enumerate(shapes)]
    ops = client.persist(ops)
    wait(ops)
    plan = td.plan(spec, *ops)

    def ttgt_dask() -> Any:
        return td.einsum(spec, *ops)

    def dask_numpy() -> Any:
        return da.einsum(spec, *ops)

    def dask_numpy_blas() -> Any:
        return da.einsum(spec, *ops, optimize=True)

    ways = {
        "ttgt.dask.einsum": ttgt_dask,
        "dask.array.einsum (numpy blocks)": dask_numpy,
        "dask.array.einsum(optimize=True) (numpy blocks)": dask_numpy_blas,
        "dask.array.einsum (ttgt blocks)": dask_numpy,
    }
    best = {k: float("inf") for k in ways}
    for _ in range(repeat):
        for k, f in ways.items():
            # the per-block engine is looked up where the block runs: on the workers
            blocks_on_ttgt = k.endswith("(ttgt blocks)")
            if blocks_on_ttgt:
                td.register(client)
            try:
                best[k] = min(best[k], _timed(client, f))
            finally:
                if blocks_on_ttgt:
                    td.unregister(client)
    # a check of the values: the sum of the result against dask with numpy blocks
    got = td.einsum(spec, *ops).sum().compute()
    want = da.einsum(spec, *ops).sum().compute()
    flops = plan.steps[0].flops if plan.steps else 0.0
    return {
        "case": name,
        "spec": spec,
        "shapes": shapes,
        "input_chunks": chunks,
        "seconds": best,
        "speedup_vs_numpy_blocks": min(best[k] for k in best if "numpy blocks" in k) / best["ttgt.dask.einsum"],
        "gflops": flops / best["ttgt.dask.einsum"] / 1e9,
        "predicted_seconds": plan.predicted_seconds,
        "tasks": plan.tasks,
        "bytes_moved": plan.bytes_moved,
        "lower_bound_bytes": plan.lower_bound_bytes,
        "plan": plan.explain(),
        "relative_difference": abs(float(got) - float(want)) / max(1.0, abs(float(want))),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="threads per worker")
    p.add_argument("--memory", default="2GB", help="memory limit per worker")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default=None, help="run only the case of this name")
    p.add_argument("--json", default=None, help="write the records to this file")
    args = p.parse_args()
    records = []
    with LocalCluster(
        n_workers=args.workers, threads_per_worker=args.threads, memory_limit=args.memory, processes=True, dashboard_address=":0"
    ) as cluster, Client(cluster) as client:
        for name, spec, shapes, chunks in CASES + LARGE:
            if (args.only and name != args.only) or (not args.only and (name, spec, shapes, chunks) in LARGE):
                continue
            r = run_case(client, name, spec, shapes, chunks, args.repeat)
            r.update(workers=args.workers, threads_per_worker=args.threads, memory_limit=args.memory)
            records.append(r)
            print(json.dumps(r), flush=True)
            s = r["seconds"]
            print(
                f"# {name}: ttgt.dask {s['ttgt.dask.einsum']:.3f} s, dask+numpy {s['dask.array.einsum (numpy blocks)']:.3f} s, "
                f"dask+numpy optimize=True {s['dask.array.einsum(optimize=True) (numpy blocks)']:.3f} s, "
                f"dask+ttgt blocks {s['dask.array.einsum (ttgt blocks)']:.3f} s, predicted {r['predicted_seconds']:.3f} s",
                file=sys.stderr,
            )
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
