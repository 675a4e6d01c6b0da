#!/usr/bin/env python3
"""Side-by-side TCCG table: ttgt vs numpy.einsum(optimize=True) vs TBLIS (PyPI `pytblis`).

Runs `ttgt bench contract --json` for our numbers, then times numpy and TBLIS on the same
cases (same spec in row-major form, same extents, same element type, same thread count) in
this process, and prints a Markdown table plus a summary (mean GFLOP/s, how many cases ttgt
wins). Peers that are not installed are reported as missing, not silently skipped.

The comparison is on the same result: C in row-major order (ttgt writes it into a C allocated
once; pytblis returns a new C-ordered array). numpy.einsum(optimize=True) can return its last
GEMM's output as a permuted, non-contiguous view, which defers the move into C's order to the
view's reader; its "numpy.einsum" column is therefore timed with the result in row-major order
(the faster of `out=` a preallocated C-ordered array and `ascontiguousarray` of the view), and
the time of the bare call is reported beside it as "numpy (view)", with its own win count.

    python3 -m pip install numpy pytblis
    cargo build --release
    python3 benches/compare_peers.py --dtype f64 --threads 1 [--scale 0.5] [--only 1,2,3]

OpenBLAS's OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE overrides (set on some machines to work
around old OpenBLAS bugs) slow a current numpy; this script removes both from its own
environment before importing numpy (use --keep-openblas-env to keep them).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TABLE = os.path.join(HERE, "data", "tccg_contractions.tsv")


def parse_table(path):
    rows = [l.rstrip("\n") for l in open(path) if l.strip() and not l.startswith("#")]
    head = rows[0].split("\t")
    col = {name: i for i, name in enumerate(head)}
    cases = []
    for line in rows[1:]:
        f = line.split("\t")
        ext = lambda s: {kv.split("=")[0]: int(kv.split("=")[1]) for kv in s.split(",")}
        cases.append(
            {
                "case": "tccg-" + f[col["id"]].strip(),
                "spec": f[col["einsum_rowmajor_equiv"]].strip(),
                "ext4": ext(f[col["extents_f32"]]),
                "ext8": ext(f[col["extents_f64"]]),
            }
        )
    return cases


def best_of(fn, repeat):
    fn()  # warm-up (plans, allocations)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="f64", choices=["f32", "f64"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default=None, help="comma list of TCCG ids")
    ap.add_argument("--ttgt", default=os.path.join(ROOT, "target", "release", "ttgt"))
    ap.add_argument("--keep-openblas-env", action="store_true")
    ap.add_argument("--json", action="store_true", help="one JSON line per case")
    a = ap.parse_args()

    threads = str(a.threads)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[var] = threads
    if not a.keep_openblas_env:
        os.environ.pop("OPENBLAS_CORETYPE", None)
        os.environ.pop("OPENBLAS_L2_SIZE", None)

    import numpy as np

    try:
        import pytblis

        pytblis.set_num_threads(a.threads)
    except ImportError:
        pytblis = None

    cmd = [a.ttgt, "bench", "contract", "--json", "--dtype", a.dtype, "--threads", threads,
           "--repeat", str(a.repeat), "--scale", str(a.scale)]
    if a.only:
        cmd += ["--only", a.only]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ttgt bench contract failed: {out.stderr.strip()}")
    ours = {}
    for line in out.stdout.splitlines():
        r = json.loads(line)
        if not r.get("summary"):
            ours[r["case"]] = r

    dt = np.float32 if a.dtype == "f32" else np.float64
    rng = np.random.default_rng(7)
    rows = []
    for c in parse_table(TABLE):
        if c["case"] not in ours:
            continue
        ext = {k: max(1, round(v * a.scale)) for k, v in (c["ext4"] if a.dtype == "f32" else c["ext8"]).items()}
        ins, outs = c["spec"].split("->")
        ta, tb = ins.split(",")
        A = rng.uniform(-1, 1, [ext[i] for i in ta]).astype(dt)
        B = rng.uniform(-1, 1, [ext[i] for i in tb]).astype(dt)
        flops = ours[c["case"]]["seconds"] * ours[c["case"]]["gflops"] * 1e9
        # numpy timed as returned (maybe a permuted view) and with C in row-major order
        # (see the module docstring)
        t_view = best_of(lambda: np.einsum(c["spec"], A, B, optimize=True), a.repeat)
        C = np.empty([ext[i] for i in outs], dtype=dt)
        t_np = min(
            best_of(lambda: np.einsum(c["spec"], A, B, optimize=True, out=C), a.repeat),
            best_of(lambda: np.ascontiguousarray(np.einsum(c["spec"], A, B, optimize=True)), a.repeat),
        )
        del C
        t_tb = best_of(lambda: pytblis.einsum(c["spec"], A, B), a.repeat) if pytblis else None
        r = {
            "case": c["case"],
            "spec": c["spec"],
            "ttgt_gflops": ours[c["case"]]["gflops"],
            "numpy_gflops": flops / t_np / 1e9,
            "numpy_view_gflops": flops / t_view / 1e9,
            "tblis_gflops": flops / t_tb / 1e9 if t_tb else None,
            "gemm_gflops": ours[c["case"]]["gemm_gflops"],
        }
        rows.append(r)
        if a.json:
            print(json.dumps(r), flush=True)

    if not rows:
        sys.exit("no case selected")
    if not a.json:
        print(f"TCCG, {a.dtype}, {a.threads} thread(s), extents x{a.scale}; GFLOP/s (best of {a.repeat})\n")
        print("numpy.einsum: C in row-major order, as ttgt and TBLIS return it; numpy (view): as")
        print("einsum returns it, possibly a permuted view that still has to be moved into C's order.\n")
        print("| case | spec | ttgt | numpy.einsum | numpy (view) | TBLIS | same-size GEMM | ttgt/numpy | ttgt/numpy (view) | ttgt/TBLIS |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            tb = r["tblis_gflops"]
            tb_txt = f"{tb:.1f}" if tb else "missing"
            vs_tb = f"{r['ttgt_gflops'] / tb:.2f}" if tb else "-"
            print(f"| {r['case']} | `{r['spec']}` | {r['ttgt_gflops']:.1f} | {r['numpy_gflops']:.1f} | "
                  f"{r['numpy_view_gflops']:.1f} | {tb_txt} | {r['gemm_gflops']:.1f} | "
                  f"{r['ttgt_gflops'] / r['numpy_gflops']:.2f} | "
                  f"{r['ttgt_gflops'] / r['numpy_view_gflops']:.2f} | {vs_tb} |")
    n = len(rows)
    mean = lambda k: sum(r[k] for r in rows) / n
    wins = lambda k: sum(r["ttgt_gflops"] > r[k] for r in rows)
    summary = {"summary": True, "cases": n, "mean_ttgt_gflops": mean("ttgt_gflops"),
               "mean_numpy_gflops": mean("numpy_gflops"), "ttgt_faster_than_numpy": wins("numpy_gflops"),
               "mean_numpy_view_gflops": mean("numpy_view_gflops"),
               "ttgt_faster_than_numpy_view": wins("numpy_view_gflops")}
    if pytblis:
        summary["mean_tblis_gflops"] = mean("tblis_gflops")
        summary["ttgt_faster_than_tblis"] = wins("tblis_gflops")
    else:
        summary["tblis"] = "pytblis not installed"
    print(json.dumps(summary) if a.json else "\n" + ", ".join(f"{k}: {v:.2f}" if isinstance(v, float) else f"{k}: {v}" for k, v in summary.items()))


if __name__ == "__main__":
    main()
