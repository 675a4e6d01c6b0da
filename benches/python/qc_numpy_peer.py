"""The numpy side of ``ttgt bench contract --cases qc`` (run by the ``ttgt`` binary, which
embeds this file): reads the cases as JSON on standard input and prints one JSON line per
case with numpy's time per call.

Each case is timed three ways, on operands with the recorded shapes and strides:
``numpy.einsum(..., optimize=True)``, ``numpy.einsum(..., optimize=False)`` (numpy's
default) and, when PySCF is importable, ``pyscf.lib.einsum``; the fastest is the peer. The
first call of each and the best mean of batches of repeated calls are reported, as the
ttgt side does. Threads for numpy's BLAS come from the environment the binary sets.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable, Dict, List


def operand(shape: List[int], strides: List[int], dtype: Any, seed: int) -> Any:
    import numpy as np

    span = 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if all(shape) else 0
    base = ((np.arange(span) * 2654435761 + seed) % 1000 / 500.0 - 1.0).astype(dtype)
    item = base.itemsize
    return np.lib.stride_tricks.as_strided(base, shape, [s * item for s in strides])


def timed(fn: Callable[[], Any], repeat: int, batch_seconds: float) -> Dict[str, float]:
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    t = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t, 1e-8)
    per_batch = max(1, min(1 << 20, int(batch_seconds / once + 0.999))) if once < batch_seconds else 1
    best = float("inf")
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        for _ in range(per_batch):
            fn()
        best = min(best, (time.perf_counter() - t) / per_batch)
    return {"first_seconds": first, "seconds": best}


def main() -> None:
    import numpy as np

    repeat, batch_seconds = int(sys.argv[1]), float(sys.argv[2])
    try:
        from pyscf import lib

        pyscf_einsum = lib.einsum
    except Exception:
        pyscf_einsum = None
    cases = json.load(sys.stdin)
    for case in cases:
        dtype = np.dtype(case["dtype"])
        ops = [operand(s, t, dtype, i + 1) for i, (s, t) in enumerate(zip(case["shapes"], case["strides"]))]
        spec = case["spec"]
        ways: Dict[str, Callable[[], Any]] = {
            "numpy.einsum(optimize=True)": lambda: np.einsum(spec, *ops, optimize=True),
            "numpy.einsum": lambda: np.einsum(spec, *ops),
        }
        if pyscf_einsum is not None:
            ways["pyscf.lib.einsum"] = lambda: pyscf_einsum(spec, *ops)
        results = {name: timed(fn, repeat, batch_seconds) for name, fn in ways.items()}
        best = min(results, key=lambda k: results[k]["seconds"])
        print(json.dumps({"name": case["name"], "peer": best, **results[best],
                          "all": {k: v["seconds"] for k, v in results.items()}}), flush=True)


if __name__ == "__main__":
    main()
