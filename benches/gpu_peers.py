#!/usr/bin/env python3
"""Times what a GPU user reaches for instead of ttgt, on ttgt's benchmark cases.

Peers: ``torch.einsum`` (permute + bmm), ``cupy.einsum``, ``jax.numpy.einsum`` under
``jax.jit`` (full float32 precision, no TF32), and for transpositions
``x.permute(...).contiguous()`` (PyTorch), ``cupy.ascontiguousarray(x.transpose(...))`` and
``jnp.transpose`` under ``jit``. Each case is timed on one device array per peer made from the
same host data: the first call (``single_use_seconds``: PyTorch's path search, CuPy's plan,
JAX's trace and compile) and repeated use (after one more untimed call, the best of
``--repeat`` samples, each the mean of 4 back-to-back calls between CUDA events, or between two
synchronisations for JAX), the same protocol as ``ttgt bench ... --backend cuda``. Each
transposition also times a device-to-device copy of the same bytes (``copy_seconds``), a
same-run reference. PyTorch and CuPy may return an einsum's result as a permuted view of their
GEMM's output, which skips the transposition of C that ttgt performs (ttgt writes C in its
row-major layout): ``contiguous`` says whether the result was dense, ``dense_seconds`` times the
call with the result made dense (the same output contract as ttgt's). ``--gemm-reference`` also
times the same-size batched GEMM in each peer (``gemm_seconds``).

Sets (the same cases, names and layouts as ``ttgt bench``): ``tccg_<dt>`` (the 48 TCCG
contractions, row-major form), ``ccsd_<dt>`` (the distinct calls of a PySCF RCCSD iteration
on water in cc-pVTZ rescaled to 24x117 and 40x301 occupied x virtual orbitals, as
``ttgt bench contract --backend cuda --cases ccsd``), ``ttc_<dt>`` (the 57 TTC
transpositions), ``perms6_<dt>`` (the 720 permutations of a 16^6 tensor); ``<dt>`` is f32,
f64 or c64.

Without a GPU (``--device cpu``) the ``numpy`` peer runs the same cases on the host, which is
how the harness itself is tested (``--scale`` shrinks the extents).

    python3 benches/gpu_peers.py --sets tccg_f32,ttc_f32 --peers torch,cupy,jax --out peers.jsonl
    python3 benches/gpu_peers.py --device cpu --peers numpy --sets tccg_f64 --scale 0.1

Output: one JSON object per (case, peer) line, a ``{"env": ...}`` line first and a
``{"error": ...}`` line for a peer that fails on a case (the run goes on).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

DATA = Path(__file__).resolve().parent / "data"
CALLS_PER_SAMPLE = 4
CCSD_RUN = "water/cc-pvtz/rccsd"
CCSD_ORBITALS = [(24, 117), (40, 301)]
DTYPES = {"f32": np.float32, "f64": np.float64, "c32": np.complex64, "c64": np.complex128}


@dataclass
class Case:
    """One benchmark case: a contraction (spec, two shapes) or a transposition (perm, shape)."""

    set: str
    name: str
    dtype: str
    spec: str = ""
    shapes: list[list[int]] = field(default_factory=list)
    perm: list[int] = field(default_factory=list)

    @property
    def is_transpose(self) -> bool:
        return bool(self.perm)


def _rows(path: Path) -> list[dict[str, str]]:
    lines = [l for l in path.read_text().splitlines() if l and not l.startswith("#")]
    head = lines[0].split("\t")
    return [dict(zip(head, l.split("\t"))) for l in lines[1:]]


def _scaled(x: int, scale: float) -> int:
    return max(1, round(x * scale))


def tccg_cases(dt: str, scale: float) -> list[Case]:
    out = []
    for r in _rows(DATA / "tccg_contractions.tsv"):
        key = "extents_f32" if dt in ("f32",) else "extents_f64"
        ext = {k: _scaled(int(v), scale) for k, v in (p.split("=") for p in r[key].split(","))}
        spec = r["einsum_rowmajor_equiv"]
        ins = spec.split("->")[0].split(",")
        out.append(Case(f"tccg_{dt}", f"tccg-{r['id']}", dt, spec, [[ext[c] for c in t] for t in ins]))
    return out


def ccsd_cases(dt: str, scale: float) -> list[Case]:
    text = (DATA / "qc_contractions.tsv").read_text()
    head = next(l for l in text.splitlines() if l.startswith(f"# {CCSD_RUN}:"))
    ro, rv = (int(w) for w in head.split(":")[1].replace(",", " ").split()[0:3:2])
    rows = [
        l.split("\t")
        for l in text.splitlines()
        if l and not l.startswith("#") and l.split("\t")[1] == CCSD_RUN
    ]
    out = []
    for o, v in CCSD_ORBITALS:
        so, sv = _scaled(o, scale), _scaled(v, scale)
        for r in rows:
            shapes = [[so if int(x) == ro else sv for x in s.split("x")] for s in r[3].split(",")]
            out.append(Case(f"ccsd_{dt}", f"ccsd-{o}x{v}-{r[0]}", dt, r[2], shapes))
    return out


def ttc_cases(dt: str, scale: float) -> list[Case]:
    out = []
    for r in _rows(DATA / "ttc_transpositions.tsv"):
        perm = [int(x) for x in r["rowmajor_perm"].split(",")]
        sizes = [_scaled(int(x), scale) for x in r["rowmajor_sizes"].split(",")]
        out.append(Case(f"ttc_{dt}", f"ttc-{r['id']}", dt, shapes=[sizes], perm=perm))
    return out


def perms6_cases(dt: str, scale: float) -> list[Case]:
    n = _scaled(16, scale)
    return [
        Case(f"perms6_{dt}", "perm-" + "-".join(map(str, p)), dt, shapes=[[n] * 6], perm=list(p))
        for p in itertools.permutations(range(6))
    ]


SETS: dict[str, Callable[[str, float], list[Case]]] = {
    "tccg": tccg_cases,
    "ccsd": ccsd_cases,
    "ttc": ttc_cases,
    "perms6": perms6_cases,
}


def gemm_shape(spec: str, shapes: list[list[int]]) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a two-operand contraction without diagonals or one-sided sums."""
    ins, out = spec.split("->")
    a, b = ins.split(",")
    ext = {c: n for t, s in zip((a, b), shapes) for c, n in zip(t, s)}
    prod = lambda cs: math.prod(ext[c] for c in cs)  # noqa: E731
    batch = [c for c in out if c in a and c in b]
    m = [c for c in out if c in a and c not in b]
    n = [c for c in out if c in b and c not in a]
    k = [c for c in a if c in b and c not in out]
    return prod(batch), prod(m), prod(n), prod(k)


_HOST: dict[tuple[tuple[int, ...], str, int], np.ndarray] = {}


def host_data(shape: list[int], dt: str, seed: int) -> np.ndarray:
    """Uniform values in [-1, 1); the last few arrays are kept (the 720 permutations share one)."""
    key = (tuple(shape), dt, seed)
    if key not in _HOST:
        if len(_HOST) >= 2:
            _HOST.clear()
        rng = np.random.default_rng(seed)
        real = np.float64 if dt in ("f64", "c64") else np.float32

        def uniform() -> np.ndarray:
            x = rng.random(shape, dtype=real)
            x *= 2
            x -= 1
            return x

        x = uniform()
        if dt in ("c32", "c64"):
            x = x + 1j * uniform()
        _HOST[key] = x.astype(DTYPES[dt], copy=False)
    return _HOST[key]


class Peer:
    """One framework: moves host data to its device and runs einsum, permute, copy, GEMM."""

    name = ""

    def put(self, x: np.ndarray) -> Any:
        raise NotImplementedError

    def sync(self) -> None:
        pass

    def einsum(self, spec: str) -> Callable[..., Any]:
        raise NotImplementedError

    def transpose(self, perm: list[int]) -> Callable[[Any], Any]:
        raise NotImplementedError

    def copy(self) -> Callable[[Any], Any]:
        raise NotImplementedError

    def bmm(self) -> Callable[[Any, Any], Any]:
        raise NotImplementedError

    def device_seconds(self, f: Callable[[], Any], calls: int) -> float:
        """Seconds of `calls` back-to-back calls (device time where events exist)."""
        self.sync()
        t = time.perf_counter()
        for _ in range(calls):
            r = f()
        self.block(r)
        return time.perf_counter() - t

    def block(self, r: Any) -> None:
        self.sync()

    def release(self) -> None:
        """Returns cached device memory (between cases)."""

    def is_contiguous(self, x: Any) -> bool:
        """Whether `x` is a dense row-major array (einsum may return a permuted view)."""
        return True

    def contiguous(self, x: Any) -> Any:
        """`x` as a dense row-major array: what ttgt writes."""
        return x

    def env(self) -> dict[str, Any]:
        return {}


class NumpyPeer(Peer):
    name = "numpy"

    def put(self, x: np.ndarray) -> Any:
        return x

    def einsum(self, spec: str) -> Callable[..., Any]:
        return lambda a, b: np.einsum(spec, a, b, optimize=True)

    def transpose(self, perm: list[int]) -> Callable[[Any], Any]:
        return lambda x: np.ascontiguousarray(x.transpose(perm))

    def is_contiguous(self, x: Any) -> bool:
        return bool(x.flags.c_contiguous)

    def contiguous(self, x: Any) -> Any:
        return np.ascontiguousarray(x)

    def copy(self) -> Callable[[Any], Any]:
        return lambda x: x.copy()

    def bmm(self) -> Callable[[Any, Any], Any]:
        return np.matmul

    def env(self) -> dict[str, Any]:
        return {"numpy": np.__version__}


class TorchPeer(Peer):
    name = "torch"

    def __init__(self) -> None:
        import torch

        self.t = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.dev = torch.device("cuda")

    def put(self, x: np.ndarray) -> Any:
        return self.t.from_numpy(x).to(self.dev)

    def sync(self) -> None:
        self.t.cuda.synchronize()

    def release(self) -> None:
        self.t.cuda.empty_cache()

    def device_seconds(self, f: Callable[[], Any], calls: int) -> float:
        s, e = self.t.cuda.Event(enable_timing=True), self.t.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            f()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / 1e3

    def einsum(self, spec: str) -> Callable[..., Any]:
        return lambda a, b: self.t.einsum(spec, a, b)

    def transpose(self, perm: list[int]) -> Callable[[Any], Any]:
        return lambda x: x.permute(*perm).contiguous()

    def is_contiguous(self, x: Any) -> bool:
        return bool(x.is_contiguous())

    def contiguous(self, x: Any) -> Any:
        return x.contiguous()

    def copy(self) -> Callable[[Any], Any]:
        return lambda x: x.clone()

    def bmm(self) -> Callable[[Any, Any], Any]:
        return self.t.bmm

    def env(self) -> dict[str, Any]:
        t = self.t
        return {
            "torch": t.__version__,
            "cuda": t.version.cuda,
            "device": t.cuda.get_device_name(0),
            "allow_tf32": t.backends.cuda.matmul.allow_tf32,
        }


class CupyPeer(Peer):
    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self.cp = cupy

    def put(self, x: np.ndarray) -> Any:
        return self.cp.asarray(x)

    def sync(self) -> None:
        self.cp.cuda.Device().synchronize()

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()

    def device_seconds(self, f: Callable[[], Any], calls: int) -> float:
        s, e = self.cp.cuda.Event(), self.cp.cuda.Event()
        s.record()
        for _ in range(calls):
            f()
        e.record()
        e.synchronize()
        return self.cp.cuda.get_elapsed_time(s, e) / 1e3

    def einsum(self, spec: str) -> Callable[..., Any]:
        return lambda a, b: self.cp.einsum(spec, a, b)

    def transpose(self, perm: list[int]) -> Callable[[Any], Any]:
        return lambda x: self.cp.ascontiguousarray(x.transpose(perm))

    def is_contiguous(self, x: Any) -> bool:
        return bool(x.flags.c_contiguous)

    def contiguous(self, x: Any) -> Any:
        return self.cp.ascontiguousarray(x)

    def copy(self) -> Callable[[Any], Any]:
        return lambda x: x.copy()

    def bmm(self) -> Callable[[Any, Any], Any]:
        return self.cp.matmul

    def env(self) -> dict[str, Any]:
        return {"cupy": self.cp.__version__, "CUPY_TF32": os.environ.get("CUPY_TF32", "")}


class JaxPeer(Peer):
    name = "jax"

    def __init__(self) -> None:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_default_matmul_precision", "highest")
        import jax.numpy as jnp

        if jax.default_backend() != "gpu":
            raise RuntimeError(f"JAX runs on {jax.default_backend()}, not a GPU")
        self.jax, self.jnp = jax, jnp

    def put(self, x: np.ndarray) -> Any:
        return self.jax.device_put(x)

    def block(self, r: Any) -> None:
        r.block_until_ready()

    def sync(self) -> None:
        pass

    def release(self) -> None:
        self.jax.clear_caches()

    def einsum(self, spec: str) -> Callable[..., Any]:
        hi = self.jax.lax.Precision.HIGHEST
        return self.jax.jit(lambda a, b: self.jnp.einsum(spec, a, b, precision=hi))

    def transpose(self, perm: list[int]) -> Callable[[Any], Any]:
        return self.jax.jit(lambda x: self.jnp.transpose(x, perm))

    def copy(self) -> Callable[[Any], Any]:
        return self.jax.jit(lambda x: x + 0)

    def bmm(self) -> Callable[[Any, Any], Any]:
        hi = self.jax.lax.Precision.HIGHEST
        return self.jax.jit(lambda a, b: self.jnp.matmul(a, b, precision=hi))

    def env(self) -> dict[str, Any]:
        return {
            "jax": self.jax.__version__,
            "backend": self.jax.default_backend(),
            "matmul_precision": "highest",
        }


PEERS: dict[str, Callable[[], Peer]] = {
    "numpy": NumpyPeer,
    "torch": TorchPeer,
    "cupy": CupyPeer,
    "jax": JaxPeer,
}


def timed(peer: Peer, f: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(first call seconds, repeated-use seconds): see the module docstring."""
    peer.sync()
    t = time.perf_counter()
    peer.block(f())
    first = time.perf_counter() - t
    peer.block(f())
    best = min(peer.device_seconds(f, CALLS_PER_SAMPLE) for _ in range(max(1, repeat)))
    return first, best / CALLS_PER_SAMPLE


_ON_DEVICE: dict[tuple[str, tuple[int, ...], str], tuple[Any, float]] = {}


def run_case(
    peer: Peer, case: Case, repeat: int, seed: int, gemm_reference: bool = False
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "set": case.set,
        "case": case.name,
        "peer": peer.name,
        "dtype": case.dtype,
        "shapes": case.shapes,
    }
    if case.is_transpose:
        # Cases of one shape (the 720 permutations) share the device input and the copy.
        key = (peer.name, tuple(case.shapes[0]), case.dtype)
        if key not in _ON_DEVICE:
            _ON_DEVICE.clear()
            peer.release()
            x = peer.put(host_data(case.shapes[0], case.dtype, seed))
            c = peer.copy()
            _ON_DEVICE[key] = (x, timed(peer, lambda: c(x), repeat)[1])
        x, tc = _ON_DEVICE[key]
        f = peer.transpose(case.perm)
        first, t = timed(peer, lambda: f(x), repeat)
        nbytes = 2 * math.prod(case.shapes[0]) * np.dtype(DTYPES[case.dtype]).itemsize
        rec.update(
            perm=case.perm,
            single_use_seconds=first,
            seconds=t,
            copy_seconds=tc,
            gbps=nbytes / t / 1e9,
            ratio=tc / t,
        )
        return rec
    _ON_DEVICE.clear()
    a = peer.put(host_data(case.shapes[0], case.dtype, seed))
    b = peer.put(host_data(case.shapes[1], case.dtype, seed + 1))
    f = peer.einsum(case.spec)
    first, t = timed(peer, lambda: f(a, b), repeat)
    dense = peer.is_contiguous(f(a, b))
    # A permuted view is not what ttgt returns (C in its own row-major layout): also time
    # the result made dense, the same output contract.
    t_dense = t if dense else timed(peer, lambda: peer.contiguous(f(a, b)), repeat)[1]
    bt, m, n, k = gemm_shape(case.spec, case.shapes)
    flops = 2.0 * bt * m * n * k * (4 if case.dtype.startswith("c") else 1)
    rec.update(
        spec=case.spec,
        gemm=[bt, m, n, k],
        single_use_seconds=first,
        seconds=t,
        contiguous=dense,
        dense_seconds=t_dense,
        gflops=flops / t / 1e9,
    )
    del a, b
    if gemm_reference:
        ga = peer.put(np.ones((bt, m, k), DTYPES[case.dtype]))
        gb = peer.put(np.ones((bt, k, n), DTYPES[case.dtype]))
        g = peer.bmm()
        _, tg = timed(peer, lambda: g(ga, gb), repeat)
        del ga, gb
        rec.update(gemm_seconds=tg, ratio=tg / t)
    peer.release()
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="tccg_f32,tccg_f64,ccsd_f64,ttc_f32,ttc_f64,perms6_f32")
    ap.add_argument("--peers", default="torch,cupy,jax")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every extent")
    ap.add_argument("--only", default="", help="comma list of case names")
    ap.add_argument("--out", default="-", help="JSON lines file (default: stdout)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--gemm-reference",
        action="store_true",
        help="also time the same-size batched GEMM in each peer (ttgt's bench times cuBLAS's)",
    )
    args = ap.parse_args()

    out = sys.stdout if args.out == "-" else open(args.out, "a", buffering=1)
    emit = lambda d: print(json.dumps(d), file=out, flush=True)  # noqa: E731
    peers: list[Peer] = []
    for name in args.peers.split(","):
        if name not in PEERS:
            ap.error(f"unknown peer {name!r} (known: {', '.join(PEERS)})")
        if args.device == "cpu" and name != "numpy":
            ap.error("--device cpu runs the numpy peer only")
        try:
            peers.append(PEERS[name]())
        except Exception as e:  # noqa: BLE001  (a missing framework is reported, not fatal)
            emit({"error": f"{name}: {type(e).__name__}: {e}", "peer": name})
    emit({"env": {p.name: p.env() for p in peers}, "python": sys.version.split()[0]})
    only = set(filter(None, args.only.split(",")))
    for s in args.sets.split(","):
        kind, _, dt = s.partition("_")
        if kind not in SETS or dt not in DTYPES:
            ap.error(f"unknown set {s!r} (sets: tccg, ccsd, ttc, perms6; types: f32, f64, c32, c64)")
        t0 = time.perf_counter()
        cases = [c for c in SETS[kind](dt, args.scale) if not only or c.name in only]
        for case in cases:
            for p in peers:
                try:
                    t_case = time.perf_counter()
                    rec = run_case(p, case, args.repeat, args.seed, args.gemm_reference)
                    # wall time of the whole case (data, first call, compile, samples)
                    rec["case_seconds"] = time.perf_counter() - t_case
                    emit(rec)
                except Exception as e:  # noqa: BLE001  (one failing case must not end the run)
                    emit({"set": s, "case": case.name, "peer": p.name, "error": f"{type(e).__name__}: {e}"})
        print(f"== {s}: {len(cases)} cases, {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
