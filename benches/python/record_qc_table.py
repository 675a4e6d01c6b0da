"""Record the einsum calls a PySCF coupled-cluster run makes, as a contraction table for
``ttgt bench contract --cases qc``.

    python benches/python/record_qc_table.py > benches/data/qc_contractions.tsv
    python benches/python/record_qc_table.py --runs water/cc-pvdz/rccsd

Each run does an SCF and then the coupled-cluster kernel (``ccsd_t``: RCCSD, then the (T)
correction of PySCF's einsum implementation, ``ccsd_t_slow``, whose ``numpy.einsum`` calls
are recorded too) with PySCF's own einsum (numpy
backend), counting the outermost ``lib.einsum``/``lib.contract`` calls by spec, operand
shapes, operand strides and dtype. A call whose operands are views keeps its strides, so the
bench replays the layouts PySCF passes, transposed and sliced views included. The header
lines name the PySCF and numpy versions and the runs.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any, Dict, List, Tuple

MOLECULES = {
    "water": "O 0 0 0; H 0 -0.757 0.587; H 0 0.757 0.587",
    "ammonia": "N 0 0 0.1173; H 0 0.9377 -0.2737; H 0.8121 -0.4689 -0.2737; H -0.8121 -0.4689 -0.2737",
}

DEFAULT_RUNS = [
    "water/cc-pvdz/rccsd",
    "water/cc-pvdz/uccsd",
    "water/cc-pvdz/gccsd",
    "water/cc-pvdz/ccsd_t",
    "water/cc-pvtz/rccsd",
    "water/cc-pvtz/uccsd",
    "ammonia/cc-pvdz/rccsd",
]

Key = Tuple[str, str, str, str]


def record(run: str) -> Tuple[Counter, Dict[str, int]]:
    """Run one `molecule/basis/method` and count its einsum calls."""
    import numpy as np
    from pyscf import cc, gto, scf
    from pyscf.cc import ccsd_t_slow, gccsd, rccsd, uccsd  # noqa: F401  (patched below)
    from pyscf.lib import numpy_helper as nh

    molecule, basis, method = run.split("/")
    counts: Counter = Counter()
    depth = [0]

    def layout(x: Any) -> Tuple[str, str]:
        a = np.asarray(x)
        shape = "x".join(map(str, a.shape)) or "-"
        strides = "x".join(str(s // a.itemsize) for s in a.strides) or "-"
        return shape, strides

    def wrap(fn):
        def wrapper(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                ops = args[1:]
                if isinstance(args[0], str) and ops:
                    lays = [layout(x) for x in ops]
                    dtype = np.result_type(*ops).name
                    key = (
                        args[0].replace(" ", ""),
                        ",".join(s for s, _ in lays),
                        ",".join(t for _, t in lays),
                        dtype,
                    )
                    counts[key] += 1

        return wrapper

    originals = {id(nh.einsum): nh.einsum, id(nh.contract): nh.contract}
    wrapped = {k: wrap(v) for k, v in originals.items()}
    patched: List[Tuple[Any, str, Any]] = []
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("pyscf"):
            continue
        for attr, value in list(vars(mod).items()):
            if id(value) in originals and originals[id(value)] is value:
                patched.append((mod, attr, value))
                setattr(mod, attr, wrapped[id(value)])
    try:
        mol = gto.M(atom=MOLECULES[molecule], basis=basis, verbose=0)
        mf = scf.RHF(mol).run()
        if method == "uccsd":
            cc.UCCSD(scf.addons.convert_to_uhf(mf)).run()
        elif method == "gccsd":
            cc.GCCSD(scf.addons.convert_to_ghf(mf)).run()
        elif method == "ccsd_t":
            # PySCF's C (T) kernel makes no einsum calls; its einsum reference
            # implementation is the one a prototype starts from.
            mycc = cc.RCCSD(mf).run()
            eris = mycc.ao2mo()
            # ccsd_t_slow calls numpy.einsum itself: those calls are recorded too.
            plain = np.einsum
            np.einsum = wrap(plain)
            try:
                ccsd_t_slow.kernel(mycc, eris)
            finally:
                np.einsum = plain
        else:
            cc.RCCSD(mf).run()
    finally:
        for mod, attr, value in patched:
            setattr(mod, attr, value)
    nocc = int(np.count_nonzero(mf.mo_occ))
    return counts, {"occupied": nocc, "virtual": int(mf.mo_coeff.shape[1]) - nocc}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", default=",".join(DEFAULT_RUNS), help="comma list of molecule/basis/method")
    args = p.parse_args()
    import numpy
    import pyscf

    print("# Quantum-chemistry contraction table: every einsum call of PySCF coupled-cluster runs,")
    print(f"# recorded by benches/python/record_qc_table.py with PySCF {pyscf.__version__} and numpy {numpy.__version__}.")
    print("# shapes/strides: one entry per operand, extents and element strides of the view PySCF passed.")
    print("# calls: how many times the run made this call (the weight of the call-weighted totals).")
    rows: List[List[str]] = []
    for run in args.runs.split(","):
        counts, sizes = record(run)
        print(f"# {run}: {sizes['occupied']} occupied, {sizes['virtual']} virtual orbitals, "
              f"{sum(counts.values())} calls, {len(counts)} distinct")
        for (spec, shapes, strides, dtype), n in sorted(counts.items(), key=lambda kv: -kv[1]):
            rows.append([run, spec, shapes, strides, dtype, str(n)])
    print("id\tworkload\tspec\tshapes\tstrides\tdtype\tcalls")
    for i, row in enumerate(rows, 1):
        print("\t".join([f"qc-{i}"] + row))


if __name__ == "__main__":
    main()
