#!/usr/bin/env bash
# CI: the concurrency stress test (tests/stress.rs: calls from many rayon pools while every
# process-wide setting changes) under ThreadSanitizer for TTGT_TSAN_SECONDS seconds (default
# 30), std included (-Zbuild-std). Any race report fails the run. Fails when nightly or its
# rust-src cannot be had, unless TTGT_TSAN_OPTIONAL=1 (a recorded skip).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# shellcheck source=.ci/nightly.sh
source .ci/nightly.sh ThreadSanitizer TTGT_TSAN_OPTIONAL
need_nightly rust-src
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
# opt-level 1 (the usual level for sanitizer builds): the same rounds per second as at
# opt-level 3 under ThreadSanitizer, a quarter less build time (docs/TUNING.md, "CI time").
CARGO_PROFILE_RELEASE_OPT_LEVEL=1 RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" \
  TSAN_OPTIONS="halt_on_error=1 abort_on_error=1" \
  TTGT_STRESS_SECONDS="${TTGT_TSAN_SECONDS:-30}" \
  cargo +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu --release \
  --target-dir target/tsan --test stress -- --nocapture 2>&1 | tee "$log" || status=1
if grep -q "WARNING: ThreadSanitizer" "$log"; then
  echo "ThreadSanitizer reported a race" >&2
  status=1
fi
bash .ci/expect_tests.sh tsan "$log" || status=1
exit "$status"
