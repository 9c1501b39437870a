#!/usr/bin/env bash
# A KV that cannot be reached: the CLI says so within a few seconds, naming
# the address and the cause (refused; connected but silent); an OSD started
# while its KV is down keeps retrying, logs it, and registers once the KV
# is back.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
requires tromcho tromcho-osd python3 curl
echo "{}" > "$TESTDIR/empty.conf"
export TROMCHO_CONFIG=$TESTDIR/empty.conf

# timed SECONDS PATTERN COMMAND...: the command fails within SECONDS with
# stderr matching PATTERN.
timed () {
  local secs=$1 pat=$2 t0 took; shift 2
  t0=$(date +%s.%N)
  expect_fail "$pat" "$@"
  took=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))")
  echo "$* failed in ${took}s"
  python3 -c "import sys; sys.exit(0 if $took < $secs else 1)" || fail "$*: took ${took}s, more than ${secs}s"
}

# Refused: every command a user types first, several requests each.
dead=http://127.0.0.1:$(free_port)
for cmd in ls pool-ls status; do
  timed 8 "kv: $dead: .*\(Connection refused\)" tromcho --etcd_address "$dead" $cmd
done
# Connected, then silent: the request gives up after etcd_slow_timeout.
python3 "$top_srcdir/tests/kv-stub.py" silent "$TESTDIR/silent.port" >"$TESTDIR/silent.log" 2>&1 &
cleanup_fn "stop_pid $!"
WAIT_SECS=10 wait_for test -s "$TESTDIR/silent.port" || fail "kv-stub.py did not start"
silent=http://127.0.0.1:$(cat "$TESTDIR/silent.port")
timed 8 "kv: $silent: the server did not answer for 2000 ms" tromcho --etcd_address "$silent" --etcd_slow_timeout 2000 ls

# An OSD whose KV is down: retries and logs, then starts when it is back.
start_kv kv
tromcho --etcd_address "$KV_URL" osd-create --data "$TESTDIR/osd1" --osd_num 1 --size 64M >/dev/null || fail "osd-create"
kv_stop kv
tromcho-osd --osd_num 1 --etcd_address "$KV_URL" --etcd_keepalive_timeout 3 >"$TESTDIR/osd1.log" 2>&1 &
osd=$!
cleanup_fn "stop_pid $osd"
WAIT_SECS=8 wait_for grep -q "osd 1: cannot reach the KV: kv: $KV_URL: .*Connection refused.*retrying" "$TESTDIR/osd1.log" ||
  { cat "$TESTDIR/osd1.log"; fail "the OSD did not log that the KV is unreachable"; }
sleep 2
kill -0 $osd 2>/dev/null || { cat "$TESTDIR/osd1.log"; fail "the OSD exited while the KV was down"; }
kv_spawn kv
registered () { [ -n "$(kv_get /tromcho/osd/state/1)" ]; }
WAIT_SECS=20 wait_for registered ||
  { cat "$TESTDIR/osd1.log"; fail "the OSD did not register once the KV was back"; }
grep -q "osd 1: the KV at $KV_URL answers" "$TESTDIR/osd1.log" || fail "no log line when the KV came back"
echo "test-kv-unreachable: ok"
