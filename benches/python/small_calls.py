"""Per-call time of small contractions: ttgt.einsum (a new result, and into ``out=``), a
ttgt.Plan call, numpy.einsum and numpy.dot on the same operands (best of several rounds of many calls each).

    python benches/python/small_calls.py [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import timeit

import numpy as np
import ttgt

CASES = [
    ("ij,jk->ik", {"i": n, "j": n, "k": n}) for n in (8, 16, 32, 64)
] + [
    ("ijk,kl->ijl", {"i": 8, "j": 8, "k": 8, "l": 8}),
    ("abc,cbd->ad", {"a": 16, "b": 8, "c": 16, "d": 16}),
    ("ijab,abcd->ijcd", {"i": 5, "j": 5, "a": 8, "b": 8, "c": 8, "d": 8}),
]


def per_call(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=0, help="ttgt threads (0: its default)")
    p.add_argument("--json")
    args = p.parse_args()
    if args.threads:
        ttgt.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'spec':<18} {'extents':<26} {'ttgt us':>8} {'out= us':>8} {'plan us':>8} {'numpy us':>9} {'dot us':>7} {'numpy/ttgt':>10}")
    for spec, ext in CASES:
        ins, out = spec.split("->")
        ops = [rng.standard_normal([ext[c] for c in t]) for t in ins.split(",")]
        want = np.einsum(spec, *ops)
        assert np.allclose(ttgt.einsum(spec, *ops), want)
        plan = ttgt.Plan(spec, *ops)
        number = 2000
        t_ttgt = per_call(lambda: ttgt.einsum(spec, *ops), number)
        res = np.empty_like(want)
        t_out = per_call(lambda: ttgt.einsum(spec, *ops, out=res), number)
        t_plan = per_call(lambda: plan(*ops), number)
        t_np = per_call(lambda: np.einsum(spec, *ops), number)
        t_dot = per_call(lambda: np.dot(ops[0], ops[1]), number) if spec == "ij,jk->ik" else float("nan")
        extents = ",".join(f"{k}={v}" for k, v in ext.items())
        print(f"{spec:<18} {extents:<26} {t_ttgt * 1e6:8.2f} {t_out * 1e6:8.2f} {t_plan * 1e6:8.2f} {t_np * 1e6:9.2f} {t_dot * 1e6:7.2f} {t_np / t_ttgt:10.2f}")
        rows.append({"spec": spec, "extents": ext, "ttgt_s": t_ttgt, "ttgt_out_s": t_out, "plan_s": t_plan, "numpy_einsum_s": t_np,
                     "numpy_dot_s": t_dot if spec == "ij,jk->ik" else None})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads or ttgt.get_num_threads(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
