#!/usr/bin/env bash
# Every test: the Rust suite (unit, property, error-table, CLI, numpy comparison) and the
# Python package's (pytest: numpy, opt_einsum and PySCF comparisons). Sets up what it needs:
# a virtual environment (TTGT_VENV, default .venv) with numpy, pytest, opt_einsum, PySCF, Dask, ml_dtypes and mypy,
# and the package built from this checkout. Takes about 9 minutes on 2 cores from scratch.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${TTGT_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian's python3 ships venv's ensurepip in a separate package
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      rm -rf "$venv"
      python3 -m venv "$venv"
    else
      echo "python3 -m venv failed: install python3-venv (Debian: sudo apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
fi
py="$PWD/$venv/bin/python"
"$py" -m pip install --quiet --upgrade pip
"$py" -m pip install --quiet numpy pytest opt_einsum pyscf mypy ml_dtypes "dask[array,distributed]"
echo "== [${SECONDS} s] building and installing the Python package (maturin, release)"
"$py" -m pip install --quiet .

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

echo "== [${SECONDS} s] cargo test"
PATH="$PWD/$venv/bin:$PATH" TTGT_REQUIRE_NUMPY=1 cargo test 2>&1 | tee "$logs/cargo.log"
# Every test binary ran, with at least its known number of tests (.ci/test_counts).
bash .ci/expect_tests.sh cargo "$logs/cargo.log"

echo "== [${SECONDS} s] mypy src/python/ttgt, the GPU peer harness"
"$py" -m mypy --ignore-missing-imports src/python/ttgt benches/gpu_peers.py benches/python/gpu_compare.py benches/python/dask_einsum.py

echo "== [${SECONDS} s] pytest tests/python"
(cd tests/python && TTGT_REQUIRE_PEERS=1 "$py" -m pytest -q -p no:cacheprovider .) \
  | tee "$logs/pytest.log"
bash .ci/expect_tests.sh pytest "$logs/pytest.log"
