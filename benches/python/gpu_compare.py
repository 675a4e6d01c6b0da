#!/usr/bin/env python3
"""Tables of ttgt's GPU contractions against PyTorch, CuPy and JAX, from runs on one device.

Reads the JSON lines of ``ttgt bench contract --backend cuda --all-candidates --json``
(``bench_contract.jsonl`` of ``benches/gpu_run.sh contract``) and of
``benches/gpu_peers.py`` (``peers.jsonl``), and prints, per set (``tccg_f32``,
``ccsd_f64``, ...): the cases both sides timed, ttgt's mean share of the same-size cuBLAS GEMM,
the geometric-mean speed-up of ttgt over each peer with the number of cases where ttgt is
faster, the planner's regret (its choice against the fastest timed candidate) and the first-call
(single-use) times. Repeated-use seconds are compared (each side's best sample of 4
back-to-back calls between CUDA events).

    python3 benches/python/gpu_compare.py --ttgt run1/bench_contract.jsonl \\
        --peers run1/peers.jsonl run2/peers.jsonl [--markdown] [--cases]

A case timed by a peer in several files keeps its fastest time. PyTorch and CuPy may return a
permuted view (no transposition of C); where the peer file has ``dense_seconds`` (the result
made dense, ttgt's output contract) that comparison is printed too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any


def load(paths: list[Path]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        text = gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def ttgt_records(paths: list[Path]) -> dict[tuple[str, str], dict[str, Any]]:
    """(set, case) -> record; the set is the name of the run the record follows."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    run = ""
    for r in load(paths):
        if "run" in r:
            run = r["run"]
        elif "case" in r and "seconds" in r:
            out[(run, r["case"])] = r
    return out


def peer_records(paths: list[Path]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(set, case, peer) -> record with the fastest repeated-use time over the files."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in load(paths):
        if "case" not in r or "seconds" not in r:
            continue
        key = (r["set"], r["case"], r["peer"])
        if key not in out or r["seconds"] < out[key]["seconds"]:
            out[key] = r
    return out


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summary(ttgt: dict, peers: dict) -> list[dict[str, Any]]:
    rows = []
    sets = sorted({s for s, _ in ttgt})
    names = sorted({p for _, _, p in peers})
    for s in sets:
        cases = {c: r for (ss, c), r in ttgt.items() if ss == s}
        row: dict[str, Any] = {"set": s, "cases": len(cases)}
        row["of_cublas"] = sum(r["ratio"] for r in cases.values()) / len(cases)
        regrets = [r["regret"] for r in cases.values() if r.get("regret") is not None]
        row["regret_under_10pct"] = sum(x < 0.10 for x in regrets)
        row["regret_cases"] = len(regrets)
        row["regret_max"] = max(regrets, default=float("nan"))
        kinds: dict[str, int] = defaultdict(int)
        for r in cases.values():
            kinds[r.get("kind", "?")] += 1
        row["kinds"] = dict(kinds)
        for p in names:
            both = [(r, peers[(s, c, p)]) for c, r in cases.items() if (s, c, p) in peers]
            sp = [q["seconds"] / r["seconds"] for r, q in both]
            dense = [q["dense_seconds"] / r["seconds"] for r, q in both if "dense_seconds" in q]
            row[p] = {
                "cases": len(both),
                "dense_cases": len(dense),
                "dense_speedup_geomean": geomean(dense),
                "speedup_geomean": geomean(sp),
                "ttgt_faster": sum(x > 1 for x in sp),
                "speedup_min": min(sp, default=float("nan")),
                "single_use_geomean": geomean(
                    [q["single_use_seconds"] / r["single_use_seconds"] for r, q in both]
                ),
            }
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], peers: list[str]) -> str:
    head = "| set | cases | of cuBLAS | regret < 10 % | " + " | ".join(
        f"vs {p}: geomean (faster / cases) [first call]" for p in peers
    )
    lines = [head + " |", "|" + " --- |" * (4 + len(peers))]
    for r in rows:
        cells = [
            r["set"],
            str(r["cases"]),
            f"{r['of_cublas']:.2f}",
            (
                f"{r['regret_under_10pct']} / {r['regret_cases']} "
                f"(max {100 * r['regret_max']:.0f} %)"
                if r["regret_cases"]
                else "-"
            ),
        ]
        for p in peers:
            q = r.get(p, {})
            if not q or not q["cases"]:
                cells.append("-")
                continue
            dense = (
                f"; dense result {q['dense_speedup_geomean']:.2f}x" if q["dense_cases"] else ""
            )
            cells.append(
                f"{q['speedup_geomean']:.2f}x ({q['ttgt_faster']} / {q['cases']}, "
                f"min {q['speedup_min']:.2f}{dense}) [{q['single_use_geomean']:.1f}x]"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_case(ttgt: dict, peers: dict) -> str:
    names = sorted({p for _, _, p in peers})
    lines = [
        "set case ttgt_ms of_cublas kind regret " + " ".join(f"{p}_ms" for p in names)
    ]
    def natural(key: tuple[str, str]) -> tuple:
        return (key[0], [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", key[1])])

    for (s, c), r in sorted(ttgt.items(), key=lambda kv: natural(kv[0])):
        cols = [
            s,
            c,
            f"{1e3 * r['seconds']:.4f}",
            f"{r['ratio']:.2f}",
            r.get("kind", "?"),
            "-" if r.get("regret") is None else f"{100 * r['regret']:.0f}%",
        ]
        cols += [
            f"{1e3 * peers[(s, c, p)]['seconds']:.4f}" if (s, c, p) in peers else "-"
            for p in names
        ]
        lines.append(" ".join(cols))
    return "\n".join(lines)


def split_tccg(ttgt: dict, peers: dict, n: int) -> tuple[dict, dict]:
    """The records again under "<set> 1-n" and "<set> >n" for the TCCG sets (case tccg-<i>)."""
    t2, p2 = dict(ttgt), dict(peers)

    def group(s: str, c: str) -> str | None:
        m = re.fullmatch(r"tccg-(\d+)", c)
        if not s.startswith("tccg") or not m:
            return None
        return f"{s} 1-{n}" if int(m.group(1)) <= n else f"{s} >{n}"

    for (s, c), r in ttgt.items():
        g = group(s, c)
        if g:
            t2[(g, c)] = r
    for (s, c, q), r in peers.items():
        g = group(s, c)
        if g:
            p2[(g, c, q)] = r
    return t2, p2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ttgt", nargs="+", type=Path, required=True)
    ap.add_argument("--peers", nargs="+", type=Path, required=True)
    ap.add_argument("--markdown", action="store_true", help="a table for docs/BENCHMARKS.md")
    ap.add_argument("--cases", action="store_true", help="also one line per case")
    ap.add_argument(
        "--split",
        type=int,
        default=0,
        metavar="N",
        help="also rows for TCCG cases 1-N and the ones after N (31-48 are the ccsd_t cases)",
    )
    a = ap.parse_args()
    t, p = ttgt_records(a.ttgt), peer_records(a.peers)
    if a.split:
        t, p = split_tccg(t, p, a.split)
    rows = summary(t, p)
    if a.markdown:
        print(markdown(rows, sorted({n for _, _, n in p})))
    else:
        for r in rows:
            print(json.dumps(r))
    if a.cases:
        print(per_case(t, p))


if __name__ == "__main__":
    main()
