#!/usr/bin/env bash
# Real-GPU checks and benchmarks with binaries built elsewhere (a GPU machine without a Rust
# toolchain). Build them first on a machine with one:
#
#   cargo build --release --features cuda
#   cargo test --release --features cuda --no-run --test cuda_device   # prints the test binary
#   mkdir -p .devbin && cp target/release/ttgt .devbin/ && cp <test binary> .devbin/cuda_device
#
# then run, on the GPU machine, from the repository root:
#
#   bash benches/gpu_run.sh [STEPS]      (STEPS: a comma list, default tests,bench)
#
# Steps: env (device and libraries), tests (tests/cuda_device.rs with TTGT_REQUIRE_GPU=1),
# sanitize (the device tests under compute-sanitizer memcheck and racecheck, when installed),
# bench (TTC set, 720 permutations, TCCG, f32 and f64), calibrate (`ttgt calibrate --backend
# cuda`, then the benches again with the fitted model), variants (TTC f32/f64 and the 720
# permutations in f32 for each PTX directory in $TTGT_PTX_VARIANTS, loaded through
# TTGT_PTX_DIR, and with the binary $TTGT_BASE_BIN if set: kernel variants compared in one
# run), schemas (the 720 permutations in f32 with each schema forced), micro (each set of
# $TTGT_MICRO_SETS, default TTC and the 720 permutations in f32 and f64, with single-element
# moves (--micro-blocks off) and with 2x2 blocks (--micro-blocks all), one after the other,
# $TTGT_MICRO_ROUNDS times, default 1; about 3 min on an H200), async (the same sets,
# $TTGT_ASYNC_SETS, with the register-staged OD kernels and with the cp.async ones,
# --async-copies, one after the other), contract (`ttgt bench contract --backend cuda
# --all-candidates --max-candidates 6` on each set of $TTGT_CONTRACT_SETS, default tccg_f32
# tccg_f64 ccsd_f64: the planner's choice and its candidates timed, with the regret), peers
# (benches/gpu_peers.py: PyTorch, CuPy and JAX on the sets of $TTGT_PEER_SETS, default
# tccg_f32,tccg_f64,ccsd_f64, peers $TTGT_PEERS, default torch,cupy,jax, with
# $TTGT_PYTHON, default python3, one process per peer, each limited to $TTGT_PEER_SECONDS,
# default 300; output peers.jsonl). TTGT_SANITIZE_FILTER names the device
# tests the sanitizers run (default all), TTGT_SANITIZE_SECONDS their limit (default 240).
# TTGT_BENCH_SETS,
# TTGT_VARIANT_SETS and TTGT_CALIBRATED_SETS choose the sets of each step (ttc_<dtype>,
# perms6_<dtype>, tccg_<dtype>); TTGT_BENCH_ARGS adds arguments to the bench step (e.g.
# --measure 20) and TTGT_BENCH_TAG names its output file. Output goes to $OUT (or ./gpu-out), in
# a few files: run.log (everything printed),
# bench_<tag>.jsonl (every bench's JSON lines, each run headed by a {"run": ...} line),
# model/<device>.json (the fitted model). Each step has a time limit, so one hung step does
# not take the whole run.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN="${TTGT_BIN:-.devbin}"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
STEPS=",${1:-env,tests,bench},"
has() { [[ "$STEPS" == *",$1,"* ]]; }

# cudarc (built for CUDA 12.8) looks for libcublas.so, .so.12, ...: on a CUDA 13 machine only
# libcublas.so.13 may exist, whose C API is the same for what ttgt calls. Link it under the
# plain name when the plain name is not found.
if ! ldconfig -p | grep -q 'libcublas\.so '; then
  lib="$(ldconfig -p | grep -o '/[^ ]*libcublas\.so\.[0-9]*$' | head -n1)"
  [ -z "$lib" ] && lib="$(find / -xdev -name 'libcublas.so.*' -not -name '*.so.*.*' 2>/dev/null | head -n1)"
  if [ -n "$lib" ]; then
    mkdir -p /tmp/ttgt-lib
    ln -sf "$lib" /tmp/ttgt-lib/libcublas.so
    for dep in "$(dirname "$lib")"/libcublasLt.so.*; do ln -sf "$dep" /tmp/ttgt-lib/; done
    export LD_LIBRARY_PATH="/tmp/ttgt-lib:$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
export TTGT_GPU_MODEL_DIR="${TTGT_GPU_MODEL_DIR:-$OUT/model}"

if has env; then
  {
    "${TTGT_PYTHON:-python3}" -c 'import importlib
for m in ("numpy", "torch", "cupy", "jax"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:
        print(m, "unavailable:", e)' 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem \
      --format=csv
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    ls -la /tmp/ttgt-lib 2>/dev/null
    lscpu | grep -E 'Model name|^CPU\(s\)'
  } 2>&1 | tee -a "$OUT/run.log"
fi

if has tests; then
  echo "== device tests"
  TTGT_REQUIRE_GPU=1 timeout 120 "$BIN/cuda_device" --nocapture --test-threads=1 2>&1 \
    | tee -a "$OUT/run.log" | grep -E 'SKIPPED|panicked|test result|FAILED|^test ' 
fi

if has sanitize && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool"
    t0=$(date +%s)
    # shellcheck disable=SC2086  # the filter may name several tests
    TTGT_REQUIRE_GPU=1 timeout "${TTGT_SANITIZE_SECONDS:-240}" compute-sanitizer --tool "$tool" \
      --print-limit 20 "$BIN/cuda_device" --test-threads=1 ${TTGT_SANITIZE_FILTER:-} 2>&1 \
      | tee -a "$OUT/run.log" | grep -E 'ERROR SUMMARY|test result|=========|^test ' | head -n 30
    echo "== $tool: exit ${PIPESTATUS[0]}, $(($(date +%s) - t0)) s" | tee -a "$OUT/run.log"
  done
fi

run_bench() { # $1: tag, $2: name, $3...: ttgt arguments
  local tag="$1" name="$2" t0
  shift 2
  t0=$(date +%s)
  echo "{\"run\": \"$name\", \"args\": \"$*\"}" >>"$OUT/bench_$tag.jsonl"
  timeout "${TTGT_STEP_SECONDS:-120}" "${TTGT_EXE:-$BIN/ttgt}" "$@" --json >>"$OUT/bench_$tag.jsonl" 2>&1
  echo "== $name ($tag, $(($(date +%s) - t0)) s): $(tail -n 1 "$OUT/bench_$tag.jsonl" | cut -c1-150)" \
    | tee -a "$OUT/run.log"
}

# A named set: ttc_<dt> (the TTC table), perms6_<dt> (720 permutations of 16^6), tccg_<dt>.
run_set() { # $1: tag, $2: label, $3: set, $4...: extra ttgt arguments
  local tag="$1" label="$2" set="$3" dt="${3##*_}"
  shift 3
  case "$set" in
    ttc_*) run_bench "$tag" "$label" bench transpose --backend cuda --dtype "$dt" "$@" ;;
    perms6_*) run_bench "$tag" "$label" bench transpose --backend cuda --all-perms 6 --extent 16 \
      --dtype "$dt" "$@" ;;
    tccg_*) run_bench "$tag" "$label" bench contract --backend cuda --dtype "$dt" "$@" ;;
    ccsd_*) run_bench "$tag" "$label" bench contract --backend cuda --cases ccsd --dtype "$dt" "$@" ;;
  esac
}

bench() { # $1: tag
  for set in ${TTGT_BENCH_SETS:-ttc_f32 perms6_f32 tccg_f32 ttc_f64 perms6_f64 tccg_f64}; do
    # shellcheck disable=SC2086  # extra arguments split on purpose
    run_set "$1" "$set" "$set" ${TTGT_BENCH_ARGS:-}
  done
}

has bench && bench "${TTGT_BENCH_TAG:-default}"

if has variants; then
  sets="${TTGT_VARIANT_SETS:-ttc_f32 ttc_f64 perms6_f32}"
  if [ -n "${TTGT_BASE_BIN:-}" ]; then
    for set in $sets; do TTGT_EXE="$TTGT_BASE_BIN" run_set variants "base_$set" "$set"; done
  fi
  for dir in ${TTGT_PTX_VARIANTS:-}; do
    v="$(basename "$dir")"
    for set in $sets; do TTGT_PTX_DIR="$dir" run_set variants "${v}_$set" "$set"; done
  done
fi

if has schemas; then
  for sc in ${TTGT_SCHEMAS:-od oa fl fs}; do
    run_set schemas "perms6_f32_$sc" perms6_f32 --schema "$sc"
  done
fi

if has micro; then
  for round in $(seq "${TTGT_MICRO_ROUNDS:-1}"); do
    for set in ${TTGT_MICRO_SETS:-perms6_f32 perms6_f64 ttc_f32 ttc_f64}; do
      run_set micro "${set}_single_$round" "$set" --micro-blocks off
      run_set micro "${set}_2x2_$round" "$set" --micro-blocks all
    done
  done
fi

if has async; then
  for set in ${TTGT_ASYNC_SETS:-perms6_f32 perms6_f64 ttc_f32 ttc_f64}; do
    run_set async "${set}_staged" "$set"
    run_set async "${set}_async" "$set" --async-copies
  done
fi

if has contract; then
  for set in ${TTGT_CONTRACT_SETS:-tccg_f32 tccg_f64 ccsd_f64}; do
    run_set contract "$set" "$set" --all-candidates --max-candidates 6
  done
fi

if has peers; then
  # One process per peer, each with its own time limit: a peer that compiles slowly (JAX)
  # cannot use up the others' time.
  for peer in $(echo "${TTGT_PEERS:-torch,cupy,jax}" | tr ',' ' '); do
    echo "== peers: ${TTGT_PEER_SETS:-tccg_f32,tccg_f64,ccsd_f64} ($peer)"
    t0=$(date +%s)
    timeout "${TTGT_PEER_SECONDS:-300}" "${TTGT_PYTHON:-python3}" benches/gpu_peers.py \
      --sets "${TTGT_PEER_SETS:-tccg_f32,tccg_f64,ccsd_f64}" --peers "$peer" \
      --out "$OUT/peers.jsonl" 2>&1 | tee -a "$OUT/run.log" | tail -n 8
    echo "== peers ($peer): exit ${PIPESTATUS[0]}, $(($(date +%s) - t0)) s" | tee -a "$OUT/run.log"
  done
fi

if has calibrate; then
  echo "== calibrate --backend cuda"
  t0=$(date +%s)
  timeout 150 "$BIN/ttgt" calibrate --backend cuda 2>&1 | tee -a "$OUT/run.log" | tail -n 3
  echo "== calibrate: $(($(date +%s) - t0)) s" | tee -a "$OUT/run.log"
  TTGT_BENCH_SETS="${TTGT_CALIBRATED_SETS:-${TTGT_BENCH_SETS:-}}" bench calibrated
fi
exit 0
