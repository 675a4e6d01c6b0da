# Sourced by the CI scripts that need a nightly toolchain (.ci/miri.sh, .ci/fuzz.sh,
# .ci/tsan.sh): `skip REASON` fails the script, or, with $1_OPTIONAL=1 (e.g.
# TTGT_FUZZ_OPTIONAL=1), prints "NAME: SKIPPED (REASON)", records it in $TTGT_SKIPS and exits 0;
# `need_nightly COMPONENT...` installs the nightly toolchain and components when missing.
skip_name="$1" skip_var="$2"
skip() {
  if [ "${!skip_var:-0}" = 1 ]; then
    echo "$skip_name: SKIPPED ($1)"
    [ -n "${TTGT_SKIPS:-}" ] && echo "$skip_name: $1 ($skip_var=1)" >>"$TTGT_SKIPS"
    exit 0
  fi
  echo "$skip_name: cannot run: $1 (set $skip_var=1 to make this a skip)" >&2
  exit 1
}
need_nightly() {
  command -v rustup >/dev/null || skip "rustup not found"
  if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal >/dev/null 2>&1 \
      || skip "could not install the nightly toolchain"
  fi
  if [ "$#" -gt 0 ]; then
    rustup component add --toolchain nightly "$@" >/dev/null 2>&1 \
      || skip "could not install the nightly components $*"
  fi
}
