#!/usr/bin/env bash
# Checks a test log against the minimum test counts in .ci/test_counts, so that a suite that
# stops running (a filter that matches nothing, a test binary that is not built, a runner
# that skips) fails CI instead of passing with fewer tests.
#
#   bash .ci/expect_tests.sh KIND LOG
#
# KIND is `cargo`, `cuda` or `tsan` (LOG holds `cargo test` output: one count per test
# binary, named as cargo prints it: `unittests src/lib.rs`, `tests/cli.rs`, `doc ttgt`), `pytest` (LOG holds
# `pytest -q` output; its "N passed" is the suite `pytest`) or `miri` (LOG holds a
# `cargo miri test` group's output; the suite is `miri NAME`, NAME given as a third
# argument). .ci/test_counts lists `KIND<TAB>SUITE<TAB>MINIMUM` lines; every suite of that
# kind listed there must appear in LOG with at least its count, and a failing test anywhere
# fails the check too.
set -euo pipefail
cd "$(dirname "$0")/.."

kind="$1" log="$2" name="${3:-}"
counts=.ci/test_counts
[ -f "$log" ] || { echo "expect_tests: no log $log" >&2; exit 1; }

if grep -Eq 'test result: FAILED|^FAILED |(^|[^0-9])[1-9][0-9]* failed' "$log"; then
  echo "expect_tests: $log reports failed tests" >&2
  exit 1
fi

# suite<TAB>passed, one line per suite found in the log
found="$(mktemp)"
trap 'rm -f "$found"' EXIT
case "$kind" in
  cargo | cuda | tsan)
    awk '
      /^ *Running / { s = $2; if (s == "unittests") s = s " " $3; next }
      /^ *Doc-tests / { s = "doc " $2; next }
      /test result: ok\./ { n = $4; if (s != "") { c[s] += n } }
      END { for (k in c) printf "%s\t%d\n", k, c[k] }
    ' "$log" >"$found"
    ;;
  pytest)
    n="$(grep -Eo '[0-9]+ passed' "$log" | tail -n1 | awk '{print $1}')"
    printf 'pytest\t%d\n' "${n:-0}" >"$found"
    ;;
  miri)
    n="$(grep -Eo 'test result: ok\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')"
    printf 'miri %s\t%d\n' "$name" "$n" >"$found"
    ;;
  *)
    echo "expect_tests: unknown kind $kind" >&2
    exit 2
    ;;
esac

status=0
while IFS=$'\t' read -r suite min; do
  got="$(awk -F'\t' -v s="$suite" '$1 == s { print $2 }' "$found")"
  if [ -z "$got" ]; then
    echo "expect_tests: suite '$suite' did not run (expected at least $min tests)" >&2
    status=1
  elif [ "$got" -lt "$min" ]; then
    echo "expect_tests: suite '$suite' ran $got tests, expected at least $min" >&2
    status=1
  else
    echo "expect_tests: $suite: $got passed (at least $min)"
  fi
done < <(awk -F'\t' -v k="$kind" -v n="$name" '
  /^#/ || NF < 3 { next }
  $1 == k && (k != "miri" || $2 == "miri " n) { print $2 "\t" $3 }
' "$counts")
exit "$status"
