#!/bin/sh
# The suite's LOG_COMPILER: every test runs under a time limit, so a test
# that hangs fails by itself, named, instead of stalling `make check` (and
# CI) until its outer limit. TERM first (the scripts' traps stop their
# daemons by PID), KILL 20 s later. TEST_TIMEOUT in seconds, default 900:
# the slowest test takes about a tenth of that under the sanitizers.
limit=${TEST_TIMEOUT:-900}
timeout -k 20 "$limit" "$@"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "FAIL: $1 ran longer than its limit of $limit s (TEST_TIMEOUT): stopped" >&2
  exit 1
fi
exit "$rc"
