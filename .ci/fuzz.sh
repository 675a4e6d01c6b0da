#!/usr/bin/env bash
# CI: every fuzz target of tests/fuzz (cargo-fuzz: libFuzzer with AddressSanitizer, nightly)
# for TTGT_FUZZ_SECONDS seconds each (default 20; two targets at a time, one core each),
# starting from the committed corpora (new inputs go to a temporary directory, the
# repository is not written). Targets: spec (parser and binder), einsum (results against the
# reference), npy (the CLI's reader), plan (the contraction planner and executor against the
# reference, every candidate), transpose (the transposition engine's kernels and the
# in-place movers, with guards around B). A crash, a leak, an out-of-memory or a target that
# runs fewer than 100 inputs fails the run; its input is left in tests/fuzz/artifacts. Fails
# when nightly or cargo-fuzz cannot be had, unless TTGT_FUZZ_OPTIONAL=1 (a recorded skip).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# shellcheck source=.ci/nightly.sh
source .ci/nightly.sh Fuzz TTGT_FUZZ_OPTIONAL
need_nightly rust-src
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz >/dev/null 2>&1 || skip "could not install cargo-fuzz"
fi
seconds="${TTGT_FUZZ_SECONDS:-20}"
# opt-level 1 (the usual level for sanitizer builds): a quarter less build time; the targets
# run 0.6 to 0.8 times as many inputs as at opt-level 3 (docs/TUNING.md, "CI time").
export CARGO_PROFILE_RELEASE_OPT_LEVEL="${TTGT_FUZZ_OPT_LEVEL:-1}"
cargo +nightly fuzz build -O --fuzz-dir tests/fuzz
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
# Runs target $1 and prints its count of inputs; fails as the header says.
fuzz_one() {
  local t="$1"
  mkdir -p "$work/$t"
  if cargo +nightly fuzz run -O --fuzz-dir tests/fuzz "$t" "$work/$t" "tests/fuzz/corpus/$t" -- \
    -max_total_time="$seconds" -print_final_stats=1 >"$work/$t.log" 2>&1; then
    runs="$(awk '/stat::number_of_executed_units/ { print $2 }' "$work/$t.log")"
    echo "fuzz $t: ${runs:-0} inputs in ${seconds} s, no failure"
    if [ "${runs:-0}" -lt 100 ]; then
      echo "fuzz $t: ran fewer than 100 inputs" >&2
      return 1
    fi
  else
    echo "fuzz $t: FAILED" >&2
    tail -n 60 "$work/$t.log" >&2
    return 1
  fi
}
set -- spec einsum npy plan transpose
while [ "$#" -gt 0 ]; do
  fuzz_one "$1" &
  first=$!
  if [ "$#" -gt 1 ]; then
    fuzz_one "$2" || status=1
  fi
  wait "$first" || status=1
  shift $(($# > 1 ? 2 : 1))
done
exit "$status"
