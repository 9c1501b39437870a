#!/usr/bin/env bash
# The client with the real control plane: tromcho pool-create, the monitor
# (tests/monitor-run) placing PGs in /pg/config, tromcho-osd registering with
# leases; an OSD killed with kill -9 in the middle of a dd: its lease
# expires, the monitor moves its PGs, the client follows the new placement,
# replays what the dead OSD had not synced (once), and the dd completes
# with the right data.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3 sha256sum
MON=$top_builddir/tests/monitor-run
[ -x "$MON" ] || skip not-built "monitor-run not built"
start_kv
EXTRA_CONF=', "etcd_keepalive_timeout": 3, "etcd_mon_ttl": 3' write_conf
"$MON" > "$TESTDIR/mon.log" 2>&1 &
MONPID=$!
cleanup_fn "stop_pid $MONPID"
tromcho pool-create p1 --pg-size 2 --pg-count 8 --pg-minsize 1 --failure-domain osd >/dev/null || fail "pool-create"
for n in 1 2 3; do start_osd $n; done
WAIT_SECS=30 wait_for sh -c "tromcho status | grep -q '8 clean'" || { tromcho status; cat "$TESTDIR/mon.log"; fail "no placement"; }
tromcho status
tromcho create img -s 256M --enc_key auto >/dev/null || fail "create"
head -c $((160 << 20)) /dev/urandom > "$TESTDIR/src"
# dd reads a pipe we feed: the kill lands after the first 64 MiB and before
# the rest, however fast the machine.
mkfifo "$TESTDIR/pipe"
tromcho --log_level info dd if="$TESTDIR/pipe" oimg=img bs=128K iodepth=2 2>"$TESTDIR/dd.err" &
dd_pid=$!
exec 3>"$TESTDIR/pipe"
head -c $((64 << 20)) "$TESTDIR/src" >&3
kill -0 $dd_pid 2>/dev/null || { cat "$TESTDIR/dd.err"; fail "dd ended before its input did"; }
stop_osd 2 -9
echo "killed osd 2 during the dd"
tail -c +$(((64 << 20) + 1)) "$TESTDIR/src" >&3
exec 3>&-
wait $dd_pid || { cat "$TESTDIR/dd.err"; tail -n 20 "$TESTDIR/mon.log"; fail "dd did not complete across the OSD's loss"; }
tail -1 "$TESTDIR/dd.err"
# One loss, one replay of what it had not synced (a background sync that
# kept the lost OSD in its set replayed the whole log again every round).
replays=$(grep -c "replaying [0-9]* unsynced writes" "$TESTDIR/dd.err")
[ "$replays" -ge 1 ] && [ "$replays" -le 2 ] || { grep replaying "$TESTDIR/dd.err" | head; fail "$replays replays for one lost OSD"; }
tromcho dd iimg=img of="$TESTDIR/back" bs=1M count=160 2>/dev/null || fail "read back"
[ "$(sha256sum < "$TESTDIR/back")" = "$(sha256sum < "$TESTDIR/src")" ] || fail "the image does not hold what dd copied"
WAIT_SECS=30 wait_for sh -c "tromcho status --json | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s[\"osds_up\"] == 2 and s[\"osds_down\"] == 1 and s[\"pgs_inactive\"] == 0'" ||
  { tromcho status; fail "status after the loss"; }
tromcho status
echo "test-client-monitor: ok"
