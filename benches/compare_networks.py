#!/usr/bin/env python3
"""Multi-operand einsum networks: ttgt's path, ttgt along the FLOP-optimal path, numpy, opt_einsum.

For each network of benches/data/networks.tsv, runs `ttgt contract SPEC --sizes ... --json`
with `--path auto` (the fewest predicted seconds) and `--path optimal` (the fewest FLOPs, run
by ttgt), then times numpy.einsum with optimize='optimal' and optimize='greedy', and
opt_einsum.contract when it is installed, on operands of the same shapes in this process
(same element type, same thread count, result in row-major order). Prints a Markdown table:
seconds of each, ttgt's speed-up over the FLOP-optimal path and over the best of the peers,
and the FLOPs of ttgt's path beside numpy's (from numpy.einsum_path).

    python3 -m venv .venv && .venv/bin/pip install numpy opt_einsum
    cargo build --release
    .venv/bin/python benches/compare_networks.py --dtype f64 --threads 2 [--only ao2mo,bilinear]
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TABLE = os.path.join(HERE, "data", "networks.tsv")
sys.path.insert(0, HERE)
from compare_peers import best_of  # noqa: E402


def networks(path):
    rows = [l.rstrip("\n") for l in open(path) if l.strip() and not l.startswith("#")]
    head = rows[0].split("\t")
    col = {name: i for i, name in enumerate(head)}
    out = []
    for line in rows[1:]:
        f = line.split("\t")
        sizes = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in f[col["sizes"]].split(",")}
        out.append({"name": f[col["name"]], "spec": f[col["spec"]], "sizes": sizes})
    return out


def _one_run(spec, shapes, dtype, how):
    import numpy as np
    ops = [np.ones(s, dtype=dtype) for s in shapes]
    if how == "opt_einsum":
        import opt_einsum
        opt_einsum.contract(spec, *ops)
    else:
        np.einsum(spec, *ops, optimize=how)


def finishes(spec, shapes, dtype, how, limit):
    """Whether one evaluation by `how` finishes within `limit` seconds (in a child process,
    so that a pathological path, such as numpy's element-wise loops over a large nest, does
    not stall the table)."""
    import multiprocessing
    p = multiprocessing.Process(target=_one_run, args=(spec, shapes, dtype, how))
    p.start()
    p.join(limit)
    if p.is_alive():
        p.terminate()
        p.join()
        return False
    return p.exitcode == 0


def fmt(t):
    return "over limit" if t == float("inf") else f"{t:.6f}"


def ttgt_run(a, net, path):
    sizes = ",".join(f"{k}={v}" for k, v in net["sizes"].items())
    cmd = [a.ttgt, "contract", net["spec"], "--sizes", sizes, "--dtype", a.dtype, "--json",
           "--threads", str(a.threads), "--repeat", str(a.repeat), "--path", path]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="f64", choices=["f32", "f64"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default=None, help="comma list of network names")
    ap.add_argument("--processes", type=int, default=3,
                    help="ttgt processes per path, alternated; the best run is kept")
    ap.add_argument("--peer-limit", type=float, default=30.0,
                    help="seconds one peer evaluation may take before it is reported as over the limit")
    ap.add_argument("--ttgt", default=os.path.join(ROOT, "target", "release", "ttgt"))
    a = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    os.environ.pop("OPENBLAS_CORETYPE", None)
    os.environ.pop("OPENBLAS_L2_SIZE", None)
    import numpy as np

    dt = np.float32 if a.dtype == "f32" else np.float64
    rng = np.random.default_rng(7)
    only = set(a.only.split(",")) if a.only else None
    print(f"networks, {a.dtype}, {a.threads} thread(s); seconds, best of {a.repeat} "
          f"(ttgt: in each of {a.processes} processes per path)\n")
    try:
        import opt_einsum
    except ImportError:
        opt_einsum = None
    print("| network | spec | ttgt path | ttgt FLOP-optimal path | numpy optimal | numpy greedy | "
          "opt_einsum | FLOP-optimal / path | best numpy or opt_einsum / ttgt | ttgt path FLOPs | "
          "numpy path FLOPs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    wins = 0
    rows = 0
    speedups = []
    for net in networks(TABLE):
        if only and net["name"] not in only:
            continue
        # alternated processes, the best of each kept: one process's run can be twice as
        # slow as the next one's on a shared machine
        ours, flop = None, None
        for _ in range(a.processes):
            r = ttgt_run(a, net, "auto")
            ours = r if ours is None or r["seconds"] < ours["seconds"] else ours
            r = ttgt_run(a, net, "optimal")
            flop = r if flop is None or r["seconds"] < flop["seconds"] else flop
        ins, outs = net["spec"].split("->")
        ops = [rng.uniform(-1, 1, [net["sizes"][c] for c in t]).astype(dt) for t in ins.split(",")]

        def numpy(opt):
            r = np.einsum(net["spec"], *ops, optimize=opt)
            return np.ascontiguousarray(r)

        shapes = [o.shape for o in ops]

        def timed(how, fn):
            # a peer whose one evaluation takes longer than --peer-limit is reported as such
            if not finishes(net["spec"], shapes, dt, how, a.peer_limit):
                return float("inf")
            return best_of(fn, a.repeat)

        t_opt = timed("optimal", lambda: numpy("optimal"))
        t_greedy = timed("greedy", lambda: numpy("greedy"))
        t_oe = float("nan")
        if opt_einsum is not None:
            t_oe = timed("opt_einsum", lambda: np.ascontiguousarray(opt_einsum.contract(net["spec"], *ops)))
        peer = min(t for t in (t_opt, t_greedy, t_oe) if t == t)
        info = np.einsum_path(net["spec"], *ops, optimize="optimal")[1]
        m = re.search(r"Optimized FLOP count:\s*([0-9.e+]+)", info)
        np_flops = float(m.group(1)) if m else float("nan")
        rows += 1
        wins += ours["seconds"] < peer
        if peer != float("inf"):
            speedups.append(peer / ours["seconds"])
        print(f"| {net['name']} | `{net['spec']}` | {ours['seconds']:.6f} | {flop['seconds']:.6f} | "
              f"{fmt(t_opt)} | {fmt(t_greedy)} | {fmt(t_oe)} | {flop['seconds'] / ours['seconds']:.2f} | "
              f"{peer / ours['seconds']:.2f} | {ours['flops']:.3e} | {np_flops:.3e} |")
    geo = math.exp(sum(math.log(x) for x in speedups) / max(len(speedups), 1))
    print(f"\nttgt's path faster than the best of numpy (optimal, greedy) and opt_einsum on {wins} of "
          f"{rows} networks; geometric-mean speed-up over that best {geo:.2f}x (networks where a peer "
          f"finished within the limit)")


if __name__ == "__main__":
    main()
