"""Wall time of a PySCF coupled-cluster run with PySCF's numpy einsum, with pytblis (when
installed) and with ttgt, each in its own process, with the time spent inside einsum.

    python benches/python/pyscf_ccsd.py                         # water/cc-pVTZ, benzene/cc-pVDZ
    python benches/python/pyscf_ccsd.py --molecule water --basis cc-pvdz --method ccsd_t
    python benches/python/pyscf_ccsd.py --json results.json

With ``--repeat N`` the backends run N times each, alternating, and the table shows the
medians (the JSON records keep every run). Each backend runs the same SCF, then the timed coupled-cluster kernel (RCCSD by default;
``--method uccsd`` or ``ccsd_t`` for RCCSD followed by the (T) correction). The einsum time
counts the outermost ``lib.einsum``/``lib.contract`` calls only (PySCF's einsum calls its
contract). Threads: ``--threads`` (default: all cores) for numpy's BLAS, pytblis and ttgt
alike. OPENBLAS_CORETYPE is unset in the child processes, so numpy runs its best kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List

MOLECULES = {
    "water": "O 0 0 0; H 0 -0.757 0.587; H 0 0.757 0.587",
    "benzene": (
        "C 0.000 1.396 0; C 1.209 0.698 0; C 1.209 -0.698 0; C 0.000 -1.396 0; C -1.209 -0.698 0;"
        " C -1.209 0.698 0; H 0.000 2.479 0; H 2.147 1.240 0; H 2.147 -1.240 0; H 0.000 -2.479 0;"
        " H -2.147 -1.240 0; H -2.147 1.240 0"
    ),
    "ammonia": "N 0 0 0.1173; H 0 0.9377 -0.2737; H 0.8121 -0.4689 -0.2737; H -0.8121 -0.4689 -0.2737",
}

DEFAULT_CASES = [("water", "cc-pvtz"), ("benzene", "cc-pvdz")]


def child(args: argparse.Namespace) -> Dict[str, Any]:
    """One backend in this process: SCF, then the timed coupled-cluster kernel."""
    import numpy as np
    from pyscf import cc, gto, scf
    from pyscf.lib import numpy_helper as nh

    backend = args.child
    if backend == "numpy":
        nh.EINSUM_BACKEND = None
    elif backend == "pytblis":
        import pytblis  # noqa: F401

        nh.EINSUM_BACKEND = "pytblis"
    elif backend == "ttgt":
        import ttgt.pyscf

        ttgt.pyscf.install()
    inside = {"seconds": 0.0, "calls": 0, "depth": 0}
    per_call: Dict[str, List[float]] = {}

    def timed(fn):
        def wrapper(*a, **k):
            if inside["depth"]:
                return fn(*a, **k)
            inside["depth"] += 1
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                dt = time.perf_counter() - t
                inside["seconds"] += dt
                inside["calls"] += 1
                inside["depth"] -= 1
                if args.calls:
                    shapes = ",".join("x".join(map(str, np.shape(x))) for x in a[1:])
                    per_call.setdefault(f"{a[0]} {shapes}", []).append(dt)

        return wrapper

    current = {id(nh.einsum): timed(nh.einsum), id(nh.contract): timed(nh.contract)}
    originals = {id(nh.einsum): nh.einsum, id(nh.contract): nh.contract}
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("pyscf"):
            continue
        for attr, value in list(vars(mod).items()):
            if id(value) in current and originals[id(value)] is value:
                setattr(mod, attr, current[id(value)])

    mol = gto.M(atom=MOLECULES[args.molecule], basis=args.basis, verbose=0)
    mf = scf.RHF(mol).run()
    t0 = time.perf_counter()
    if args.method == "uccsd":
        mycc = cc.UCCSD(scf.addons.convert_to_uhf(mf))
        mycc.kernel()
        energy = float(mycc.e_corr)
    else:
        mycc = cc.RCCSD(mf)
        mycc.kernel()
        energy = float(mycc.e_corr)
        if args.method == "ccsd_t":
            energy += float(mycc.ccsd_t())
    wall = time.perf_counter() - t0
    nocc = int(np.count_nonzero(mf.mo_occ))
    return {
        "backend": backend,
        "molecule": args.molecule,
        "basis": args.basis,
        "method": args.method,
        "occupied": nocc,
        "orbitals": int(mf.mo_coeff.shape[1]),
        "wall_seconds": wall,
        "einsum_seconds": inside["seconds"],
        "einsum_calls": inside["calls"],
        "energy": energy,
        "threads": args.threads,
        "per_call": per_call if args.calls else None,
    }


def available(module: str) -> bool:
    code = f"import {module}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--molecule", choices=sorted(MOLECULES))
    p.add_argument("--basis")
    p.add_argument("--method", choices=["rccsd", "uccsd", "ccsd_t"], default="rccsd")
    p.add_argument("--backends", default="numpy,pytblis,ttgt")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run each backend N times (alternating) and report the medians")
    p.add_argument("--json", help="write the records here")
    p.add_argument("--calls", type=int, default=0, metavar="N",
                   help="also list the N contractions with the most einsum time, per backend")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    cases = [(args.molecule, args.basis)] if args.molecule else DEFAULT_CASES
    if args.molecule and not args.basis:
        p.error("--molecule needs --basis")
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TTGT_NUM_THREADS"):
        env[var] = str(args.threads)
    records: List[Dict[str, Any]] = []
    for molecule, basis in cases:
        runs: Dict[str, List[Dict[str, Any]]] = {}
        for _ in range(max(1, args.repeat)):
            for backend in args.backends.split(","):
                if backend == "pytblis" and not available("pytblis"):
                    continue
                cmd = [sys.executable, __file__, "--child", backend, "--molecule", molecule, "--basis", basis,
                       "--method", args.method, "--threads", str(args.threads), "--calls", str(args.calls)]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"{backend} on {molecule}/{basis} failed:\n{out.stderr}")
                runs.setdefault(backend, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
        if "pytblis" in args.backends.split(",") and "pytblis" not in runs:
            print(f"{molecule}/{basis}: pytblis is not installed, skipped", file=sys.stderr)
        for backend, rs in runs.items():
            r = dict(rs[0])
            for field in ("wall_seconds", "einsum_seconds"):
                r[field] = statistics.median(x[field] for x in rs)
                r[field.replace("seconds", "all")] = [x[field] for x in rs]
            records.append(r)
    print(f"{'case':<24} {'backend':<8} {'wall s':>8} {'einsum s':>9} {'share':>6} {'calls':>6} {'wall x':>7} {'einsum x':>8} {'dE (Eh)':>9}")
    for r in records:
        base = next(b for b in records if b["molecule"] == r["molecule"] and b["basis"] == r["basis"] and b["backend"] == "numpy") \
            if any(b["backend"] == "numpy" and b["molecule"] == r["molecule"] and b["basis"] == r["basis"] for b in records) else r
        case = f"{r['molecule']}/{r['basis']} ({r['occupied']}/{r['orbitals']})"
        print(f"{case:<24} {r['backend']:<8} {r['wall_seconds']:8.2f} {r['einsum_seconds']:9.2f} "
              f"{r['einsum_seconds'] / r['wall_seconds']:6.0%} {r['einsum_calls']:6d} "
              f"{base['wall_seconds'] / r['wall_seconds']:7.2f} {base['einsum_seconds'] / r['einsum_seconds']:8.2f} "
              f"{r['energy'] - base['energy']:9.1e}")
    if args.calls:
        print_calls(records, args.calls)
    if args.json:
        for r in records:
            r.pop("per_call", None)
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "records": records}, f, indent=1)


def print_calls(records: List[Dict[str, Any]], most: int) -> None:
    """The contractions with the most einsum time in the first backend, each backend's
    total seconds on them (same spec and shapes), and the ratio to the first backend."""
    for molecule, basis in sorted({(r["molecule"], r["basis"]) for r in records}):
        rs = [r for r in records if r["molecule"] == molecule and r["basis"] == basis and r.get("per_call")]
        if len(rs) < 2:
            continue
        first = rs[0]["per_call"]
        top = sorted(first, key=lambda k: -sum(first[k]))[:most]
        names = [r["backend"] for r in rs]
        print(f"\n{molecule}/{basis}: contractions by {names[0]} einsum time (total ms over calls)")
        print(f"{'contraction':<58} {'calls':>5} " + " ".join(f"{n + ' ms':>11}" for n in names) + " " + " ".join(f"{n + ' x':>9}" for n in names[1:]))
        for k in top:
            ts = [sum(r["per_call"].get(k, [float("nan")])) * 1e3 for r in rs]
            print(f"{k:<58} {len(first[k]):5d} " + " ".join(f"{t:11.2f}" for t in ts) + " " + " ".join(f"{ts[0] / t:9.2f}" for t in ts[1:]))


if __name__ == "__main__":
    main()
