#!/usr/bin/env bash
# CUDA backend checks that need no GPU (called from .ci/run):
#  1. PTX: every kernels/*.cu compiled by clang's CUDA front end for sm_70 (ttlg_oda.cu, the
#     cp.async kernels: sm_80), diffed against the PTX embedded in the crate (kernels/ptx/),
#     then assembled by NVIDIA's ptxas for sm_70 (sm_80) .. sm_90 (registers, shared memory
#     and spills printed per kernel).
#  2. The crate with --features cuda (cudarc, loaded at run time) builds and lints clean on a
#     machine without CUDA.
#  3. The kernels run on the CPU under the emulator (--features cuda-emu) and agree with the
#     CPU transpose; the launcher's parameter lists match the PTX entries.
# `.ci/cuda.sh --regen` rewrites kernels/ptx/ instead of diffing (after editing a kernel);
# `--ptx-only` stops after the PTX step.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

REGEN=0; PTX_ONLY=0
[ "${1:-}" = "--regen" ] && REGEN=1 && PTX_ONLY=1
[ "${1:-}" = "--ptx-only" ] && PTX_ONLY=1

# --- tools: clang-19 (apt) and ptxas (PyPI wheel nvidia-cuda-nvcc-cu12) -------------------
if ! command -v clang-19 >/dev/null; then
  echo "== installing clang-19"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19 >/dev/null
fi
PTXAS="${PTXAS:-}"
if [ -z "$PTXAS" ]; then
  TOOLS="${TTGT_CUDA_TOOLS:-$HOME/.cache/ttgt-ci/cuda-tools}"
  PTXAS="$(find "$TOOLS" -type f -name ptxas 2>/dev/null | head -n1 || true)"
  if [ -z "$PTXAS" ]; then
    echo "== fetching ptxas (pip wheel nvidia-cuda-nvcc-cu12)"
    mkdir -p "$TOOLS"
    python3 -m pip download --quiet --no-deps -d "$TOOLS/wheel" nvidia-cuda-nvcc-cu12
    python3 -m zipfile -e "$TOOLS"/wheel/nvidia_cuda_nvcc_cu12-*.whl "$TOOLS/pkg"
    PTXAS="$(find "$TOOLS/pkg" -type f -name ptxas | head -n1)"
  fi
  chmod +x "$PTXAS"
fi
echo "== $(clang-19 --version | head -n1); $("$PTXAS" --version | tail -n1)"

# --- PTX -----------------------------------------------------------------------------------
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
status=0
for cu in kernels/ttlg_*.cu; do
  name="$(basename "$cu" .cu)"
  # The asynchronous-copy kernels (cp.async) need sm_80; the others are built for sm_70.
  base=sm_70; archs="sm_70 sm_75 sm_80 sm_86 sm_89 sm_90"
  if [ "$name" = ttlg_oda ]; then base=sm_80; archs="sm_80 sm_86 sm_89 sm_90"; fi
  clang-19 --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=$base -S -O3 -x cuda \
    -Wall -Werror -Ikernels "$cu" -o "$TMP/$name.ptx"
  if [ "$REGEN" = 1 ]; then
    cp "$TMP/$name.ptx" "kernels/ptx/$name.ptx"
  elif ! diff -q "$TMP/$name.ptx" "kernels/ptx/$name.ptx" >/dev/null; then
    echo "kernels/ptx/$name.ptx is stale: run .ci/cuda.sh --regen and commit it" >&2
    status=1
  fi
  for arch in $archs; do
    "$PTXAS" -arch="$arch" -O3 -v "$TMP/$name.ptx" -o "$TMP/$name.$arch.cubin" 2>"$TMP/log" \
      || { cat "$TMP/log" >&2; exit 1; }
    # One line per kernel: registers, shared memory, spills.
    awk -v arch="$arch" -F"'" '
      /Compiling entry function/ { k = $2 }
      /spill stores/ { sp = $0; sub(/^ +/, "", sp) }
      /Used [0-9]+ registers/ { u = $0; sub(/^.*Used /, "", u); printf "%-6s %-22s %s; %s\n", arch, k, u, sp }
    ' "$TMP/log"
  done
done
[ "$status" = 0 ] || exit "$status"
[ "$PTX_ONLY" = 1 ] && exit 0

# --- builds and tests ----------------------------------------------------------------------
# One build covers both features (the cuda-only and the emulator-only code).
echo "== cargo clippy --all-targets --features cuda,cuda-emu -- -D warnings"
cargo clippy --all-targets --features cuda,cuda-emu -- -D warnings
echo "== emulated kernels, PTX signatures, planner, device tests (SKIPPED without a GPU), CLI"
cargo test --features cuda,cuda-emu --test cuda_emu --test cuda_ptx --test cuda_plan \
  --test cuda_device --test cuda_cli -- --nocapture 2>&1 | grep -v '^$' | tee "$TMP/tests.log"
bash .ci/expect_tests.sh cuda "$TMP/tests.log"
# Without a GPU the device tests print SKIPPED and pass: listed as skipped, never silent.
skipped="$(grep -c '^SKIPPED' "$TMP/tests.log" || true)"
if [ "$skipped" -gt 0 ]; then
  echo "== $skipped device tests SKIPPED (no CUDA device)"
  [ -n "${TTGT_SKIPS:-}" ] && echo "CUDA device tests: $skipped SKIPPED (no CUDA device)" >>"$TTGT_SKIPS"
fi
