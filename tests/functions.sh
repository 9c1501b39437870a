# Shared helpers for the shell tests (after nbdkit's tests/functions.sh).
# Source it first: `. "${top_srcdir:-..}/tests/functions.sh"`.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_srcdir:=$top_builddir}"
export PATH="$top_builddir/cli:$top_builddir/osd:$top_builddir/gateway:$top_builddir/fuse:$PATH"

# skip REASON MESSAGE: end the test as skipped (exit 77). REASON is a short
# tag; only the tags listed in tests/README.md are allowed, and under
# `./appliance test` any other skip counts as a failure.
skip () {
  echo "$0: skipped [$1]: $2"
  exit 77
}

# Skip the test unless every named program is on PATH. Not an allowed reason:
# ./appliance installs every tool a test needs, so this shows a missing
# install step.
requires () {
  for p in "$@"; do
    command -v "$p" >/dev/null 2>&1 || skip missing-tool "$p is not installed"
  done
}

_cleanup_hooks=()
# Run "$@" on exit, whatever the exit path (latest first).
cleanup_fn () { _cleanup_hooks+=("$*"); }
_run_cleanup () {
  local rc=$?
  local i
  for (( i=${#_cleanup_hooks[@]}-1; i>=0; i-- )); do eval "${_cleanup_hooks[$i]}" || true; done
  exit $rc
}
trap _run_cleanup EXIT
trap 'exit 130' INT TERM

# A temporary folder of the test's own, removed on exit (kept when the test
# fails, not when it skips (77), and TC_KEEP_FAILED is set, to read its
# daemons' logs).
TESTDIR=$(mktemp -d "/tmp/tromcho-test.XXXXXX")
_remove_testdir () {
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -n "${TC_KEEP_FAILED:-}" ]; then
    echo "$0: kept $TESTDIR" >&2
  else
    rm -rf "$TESTDIR"
  fi
}
cleanup_fn _remove_testdir

# Stop a process by PID: TERM, then KILL after 5 s.
stop_pid () {
  local pid=$1 i
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

# Print a free TCP port on 127.0.0.1, outside the ephemeral range (free-port.py).
free_port () {
  python3 "$top_srcdir/tests/free-port.py"
}

# Wait until "$@" succeeds, at most $WAIT_SECS (default 20) seconds.
wait_for () {
  local i
  for i in $(seq $(( ${WAIT_SECS:-20} * 10 ))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for: $*" >&2
  return 1
}

fail () { echo "FAIL: $*" >&2; exit 1; }
# expect_fail MESSAGE-PATTERN COMMAND...: the command must fail and its
# stderr must match the pattern.
expect_fail () {
  local pat=$1; shift
  local out
  if out=$("$@" 2>&1); then fail "expected failure: $*"; fi
  echo "$out" | grep -qE -- "$pat" || fail "error of '$*' does not match '$pat': $out"
}
