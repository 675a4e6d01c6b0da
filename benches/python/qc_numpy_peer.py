"""The numpy side of ``ttgt bench contract --cases qc`` (run by the ``ttgt`` binary, which
embeds this file), driven one request per line on standard input, one JSON answer per line:

- ``{"op": "ready"}`` answers ``{}`` once numpy (and PySCF) are imported, so that the
  binary's first plans and probes do not run beside the imports;
- ``{"op": "start", "case": {...}}`` makes the operands (recorded shapes and strides), calls
  each way once (the first call) and once more to size its batches;
- ``{"op": "round"}`` times one batch of repeated calls of each way, so that the binary can
  interleave numpy's rounds with its own.

The ways: ``numpy.einsum(..., optimize=True)``, ``numpy.einsum(..., optimize=False)``
(numpy's default; left out where its loop nest runs more than ``UNOPTIMIZED_MAX_LOOPS``
iterations, as at the orbital counts of ``--orbitals 24,120``, where one call would take
minutes) and, when PySCF is importable, ``pyscf.lib.einsum``; the binary takes the fastest as
the peer. Threads for numpy's BLAS come from the environment the binary sets.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any, Callable, Dict, List


# Most iterations of the loop nest of a call that ``numpy.einsum`` without ``optimize`` (no
# BLAS, one loop per index) is timed for: about a second a call.
UNOPTIMIZED_MAX_LOOPS = 10**9


def loop_count(spec: str, shapes: List[List[int]]) -> int:
    """Iterations of the loop nest over every index of ``spec`` (0 where it has ``...``)."""
    if "." in spec:
        return 0
    extent: Dict[str, int] = {}
    for sub, shape in zip(spec.split("->")[0].split(","), shapes):
        extent.update(zip(sub, shape))
    return math.prod(extent.values())


def operand(shape: List[int], strides: List[int], dtype: Any, seed: int) -> Any:
    import numpy as np

    span = 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if all(shape) else 0
    base = ((np.arange(span) * 2654435761 + seed) % 1000 / 500.0 - 1.0).astype(dtype)
    item = base.itemsize
    return np.lib.stride_tricks.as_strided(base, shape, [s * item for s in strides])


def main() -> None:
    import numpy as np

    batch_seconds = float(sys.argv[1])
    try:
        from pyscf import lib

        pyscf_einsum: Any = lib.einsum
    except Exception:
        pyscf_einsum = None
    ways: Dict[str, Callable[[], Any]] = {}
    per_batch: Dict[str, int] = {}
    for line in sys.stdin:
        req = json.loads(line)
        out: Dict[str, float] = {}
        if req["op"] == "ready":
            pass
        elif req["op"] == "start":
            case = req["case"]
            dtype = np.dtype(case["dtype"])
            ops = [operand(s, t, dtype, i + 1) for i, (s, t) in enumerate(zip(case["shapes"], case["strides"]))]
            spec = case["spec"]
            ways = {
                "numpy.einsum(optimize=True)": lambda: np.einsum(spec, *ops, optimize=True),
            }
            if loop_count(spec, case["shapes"]) <= UNOPTIMIZED_MAX_LOOPS:
                ways["numpy.einsum"] = lambda: np.einsum(spec, *ops)
            if pyscf_einsum is not None:
                ways["pyscf.lib.einsum"] = lambda: pyscf_einsum(spec, *ops)
            for name, fn in ways.items():
                t = time.perf_counter()
                fn()
                out[name] = time.perf_counter() - t
                t = time.perf_counter()
                fn()
                once = max(time.perf_counter() - t, 1e-8)
                per_batch[name] = max(2, min(1 << 20, math.ceil(batch_seconds / once)))
        else:
            for name, fn in ways.items():
                n = per_batch[name]
                t = time.perf_counter()
                for _ in range(n):
                    fn()
                out[name] = (time.perf_counter() - t) / n
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
