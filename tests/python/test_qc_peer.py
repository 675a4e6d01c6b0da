"""The numpy side of the qc bench (benches/python/qc_numpy_peer.py), driven over its pipe as
the ttgt binary drives it: the ways it times, and the unoptimized einsum left out where its
loop nest is too long to time."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "benches" / "python" / "qc_numpy_peer.py"


def load_peer():
    spec = importlib.util.spec_from_file_location("qc_numpy_peer", PEER)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_loop_count_multiplies_every_index_once() -> None:
    peer = load_peer()
    assert peer.loop_count("ij,jk->ik", [[2, 3], [3, 4]]) == 24
    assert peer.loop_count("abcd,ijcd->ijab", [[120] * 4, [24, 24, 120, 120]]) == 120**4 * 24**2
    assert peer.loop_count("ii", [[7, 7]]) == 7
    assert peer.loop_count("...i,i", [[2], [2]]) == 0


def run_peer(case: dict) -> dict:
    requests = [{"op": "ready"}, {"op": "start", "case": case}, {"op": "round"}]
    out = subprocess.run(
        [sys.executable, str(PEER), "0.001"],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert answers[0] == {}
    return answers[2]


def test_peer_times_both_numpy_ways_of_a_small_call() -> None:
    case = {"spec": "ij,jk->ik", "shapes": [[4, 5], [5, 6]], "strides": [[5, 1], [6, 1]], "dtype": "float64"}
    timed = run_peer(case)
    assert "numpy.einsum(optimize=True)" in timed and "numpy.einsum" in timed
    assert all(t > 0 for t in timed.values())


def test_peer_leaves_out_unoptimized_einsum_of_a_long_loop_nest() -> None:
    # 2000 x 2000 x 300: 1.2e9 iterations unoptimized, a 2.4 GFLOP BLAS call optimized
    case = {
        "spec": "ij,jk->ik",
        "shapes": [[2000, 300], [300, 2000]],
        "strides": [[300, 1], [2000, 1]],
        "dtype": "float64",
    }
    timed = run_peer(case)
    assert "numpy.einsum(optimize=True)" in timed
    assert "numpy.einsum" not in timed
