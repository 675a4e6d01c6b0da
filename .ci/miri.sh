#!/usr/bin/env bash
# CI: the crate's unsafe code under Miri (undefined behaviour, out-of-bounds pointer
# arithmetic, aliasing violations, data races between rayon tasks). Needs a nightly toolchain
# with the miri and rust-src components; installs them when it can, and fails when it cannot
# (no network to the toolchain server), unless TTGT_MIRI_OPTIONAL=1, which prints
# "Miri: SKIPPED (...)", adds the reason to $TTGT_SKIPS (when set) and exits 0. Each group of
# tests must run at least its known number of tests (.ci/test_counts), so a filter that no
# longer matches fails.
#
# What runs (unit tests, sized down under `cfg(miri)`): the loop walker of transposition plans
# with the scalar tile and row kernels (transpose/plan.rs, transpose/kernel), the strided
# copies and reductions (transpose/strided.rs), the element-type conversions
# (transpose/convert.rs), the in-place chunk movers (transpose/inplace:
# cycles serial and on threads, split cycles, pieces, square swaps, buffered), element access of
# views (tensor/view.rs), the GETT engine's scalar kernel and packing (backend/cpu/gett), and
# the contraction loop nest (backend/cpu/execute.rs) over candidates of small contractions
# with our own GEMM: packed operands, loops and batch-reduce loops, C direct, through a
# temporary, in place and in tiles, the epilogue, the measured choice; the streamed GEMV
# (backend/cpu/gemm/gemv.rs: both matrix forms, strided vectors, rows split over threads); the
# nested loops of tiny contractions (backend/cpu/loops.rs: dot products and vector updates over
# permuted, reversed, diagonal and summed views, empty operands, complex).
# Not covered: the SIMD kernels (under Miri `is_x86_feature_detected!` reports no AVX, so the
# scalar paths run), the GEMM libraries (`matrixmultiply`, `gemm`), the huge-page advice
# (madvise) and FFI (CUDA, HPTT).
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR=never

# shellcheck source=.ci/nightly.sh
source .ci/nightly.sh Miri TTGT_MIRI_OPTIONAL
need_nightly miri rust-src
cargo +nightly miri --version >/dev/null 2>&1 || skip "cargo +nightly miri does not run"

# Tree Borrows: rayon's crossbeam-epoch breaks the Stacked Borrows rules but not Tree
# Borrows' (crossbeam-rs/crossbeam#545, #996). Permissive provenance: crossbeam-epoch also casts
# integers to pointers, which Miri would warn about on every run. Ignore leaks: rayon's pool
# threads are still alive when a test binary's main thread returns.
export MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks"

cargo +nightly miri setup
# Build once, then the two groups side by side (Miri interprets on one core per process).
cargo +nightly miri test --lib --no-run
group() {
  cargo +nightly miri test --lib -- "$@" >"$log_dir/$1.log" 2>&1
}
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT
# The groups take about as long as each other (Miri's clock: 177 and 178 s).
group backend::cpu::execute:: backend::cpu::gett::tests transpose::inplace::tests::failed_plans &
second=$!
status=0
group transpose::plan:: transpose::strided:: transpose::convert:: transpose::inplace::tests::inplace_chunk \
  tensor::view:: tensor::alloc:: backend::cpu::gett::pack:: backend::cpu::gemm::gemv:: backend::cpu::loops:: || status=1
wait "$second" || status=1
cat "$log_dir"/transpose::plan::.log "$log_dir"/backend::cpu::execute::.log
bash .ci/expect_tests.sh miri "$log_dir/backend::cpu::execute::.log" execute || status=1
bash .ci/expect_tests.sh miri "$log_dir/transpose::plan::.log" transpose || status=1
exit "$status"
