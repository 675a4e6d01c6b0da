"""The GPU peer harness (benches/gpu_peers.py) and its report (benches/python/gpu_compare.py),
run on the host with the numpy peer: the case sets match ttgt's, every record has real
timings, permuted-view results are flagged, and the report joins both sides."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


peers = load(ROOT / "benches" / "gpu_peers.py", "gpu_peers")
compare = load(ROOT / "benches" / "python" / "gpu_compare.py", "gpu_compare")


def test_case_sets_match_the_benchmark_tables() -> None:
    tccg = peers.tccg_cases("f64", 1.0)
    assert len(tccg) == 48 and tccg[0].name == "tccg-1"
    assert tccg[0].spec == "adb,cd->cba" and tccg[0].shapes == [[312, 312, 312], [24, 312]]
    ccsd = peers.ccsd_cases("f64", 1.0)
    assert len(ccsd) == 42
    assert ccsd[0].name == "ccsd-24x117-qc-197" and ccsd[0].spec == "jcd,cdbk->jbk"
    assert ccsd[0].shapes == [[24, 117, 117], [117, 117, 117, 24]]
    assert {x for c in ccsd[21:] for s in c.shapes for x in s} == {40, 301}
    ttc = peers.ttc_cases("f32", 1.0)
    assert len(ttc) == 57 and ttc[0].perm == [1, 0]
    perms = peers.perms6_cases("f32", 1.0)
    assert len(perms) == 720 and perms[1].name == "perm-0-1-2-3-5-4"
    assert peers.gemm_shape("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]) == (2, 3, 5, 4)
    assert peers.gemm_shape("abcd,dbef->acef", [[2, 3, 4, 5], [5, 3, 6, 7]]) == (1, 8, 42, 15)


def test_numpy_peer_run_and_report(tmp_path: Path) -> None:
    out = tmp_path / "peers.jsonl"
    subprocess.run(
        [sys.executable, str(ROOT / "benches" / "gpu_peers.py"), "--device", "cpu",
         "--peers", "numpy", "--sets", "tccg_f64,perms6_f32", "--scale", "0.1",
         "--repeat", "1", "--gemm-reference", "--only", "tccg-1,tccg-35,perm-5-4-3-2-1-0",
         "--out", str(out)],
        check=True,
    )
    recs = [json.loads(l) for l in out.read_text().splitlines()]
    assert "env" in recs[0] and "numpy" in recs[0]["env"]
    cases = {r["case"]: r for r in recs[1:]}
    assert set(cases) == {"tccg-1", "tccg-35", "perm-5-4-3-2-1-0"}
    for r in cases.values():
        assert r["seconds"] > 0 and r["single_use_seconds"] > 0 and "error" not in r
    # numpy returns tccg-35's result as a permuted view: flagged, and the dense time is
    # timed on its own.
    assert cases["tccg-35"]["contiguous"] is False
    assert cases["tccg-35"]["dense_seconds"] > 0
    assert cases["perm-5-4-3-2-1-0"]["copy_seconds"] > 0
    assert cases["tccg-1"]["gemm_seconds"] > 0
    # The report against a ttgt file of the same cases.
    ttgt = tmp_path / "ttgt.jsonl"
    lines = [{"run": "tccg_f64"}] + [
        {"case": c, "seconds": s, "single_use_seconds": 2 * s, "ratio": 0.5, "kind": "partial",
         "regret": 0.0}
        for c, s in (("tccg-1", cases["tccg-1"]["seconds"] / 2),
                     ("tccg-35", cases["tccg-35"]["seconds"] * 2))
    ]
    ttgt.write_text("\n".join(json.dumps(l) for l in lines))
    rows = compare.summary(compare.ttgt_records([ttgt]), compare.peer_records([out]))
    (row,) = rows
    assert row["set"] == "tccg_f64" and row["cases"] == 2
    assert row["numpy"]["cases"] == 2 and row["numpy"]["ttgt_faster"] == 1
    assert np.isclose(row["numpy"]["speedup_geomean"], 1.0)
    assert row["numpy"]["dense_cases"] == 2
    assert "vs numpy" in compare.markdown(rows, ["numpy"])
    # Split at case 30: tccg-1 in the first group, tccg-35 (a ccsd_t case) in the second.
    t2, p2 = compare.split_tccg(compare.ttgt_records([ttgt]), compare.peer_records([out]), 30)
    groups = {r["set"]: r for r in compare.summary(t2, p2)}
    assert set(groups) == {"tccg_f64", "tccg_f64 1-30", "tccg_f64 >30"}
    assert groups["tccg_f64 1-30"]["cases"] == 1 and groups["tccg_f64 >30"]["cases"] == 1
    assert groups["tccg_f64 1-30"]["numpy"]["ttgt_faster"] == 1
    assert groups["tccg_f64 >30"]["numpy"]["ttgt_faster"] == 0
