#!/usr/bin/env bash
# The cluster client replays its unsynced writes when an OSD that took some
# of them is lost before a flush. A replayed write is older than any write
# still in flight to the same sector, so it must never land over one: the
# replay waits for the writes in flight to finish, and holds new ones until
# it is done. Here connections of one nbdkit rewrite their own blocks (each
# read back at once) while another flushes all the time, and OSDs are
# killed -9 and their PGs moved (each loss makes the next flush replay);
# every read-back and, at the end, every block must hold the last bytes
# written to it.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit curl python3
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
PY=/usr/bin/python3
$PY -c 'import nbd' || fail "python3-libnbd is not installed"

start_kv
LOG_LEVEL=info write_conf
make_pool 1 8 3 2
for n in 1 2 3; do start_osd $n; done
set_pgs 1 8 "1 2 3"
tromcho create img -s 64M --enc_key auto >/dev/null || fail "create img"
start_nbdkit srv -v -- config="$CONF" image=img
STOP=$TESTDIR/stop
$PY "$top_srcdir/tests/replay-order-load.py" "$(uri srv "")" "$STOP" 12 3 >"$TESTDIR/load.log" 2>&1 &
LOAD=$!
cleanup_fn "kill $LOAD 2>/dev/null"
wait_for grep -q "^started" "$TESTDIR/load.log" || { cat "$TESTDIR/load.log"; fail "the load did not start"; }
sleep 1
# Each loss: the primary of a third of the PGs dies, its PGs move to the
# other two (as the monitor would move them), it comes back, they move back.
for n in 3 1 2; do
  others=$(for o in 1 2 3; do [ $o = $n ] || printf '%s ' $o; done)
  stop_osd $n -9
  set_pgs 1 8 "$others"
  echo "OSD $n killed"
  sleep 1.5
  kill -0 $LOAD 2>/dev/null || break
  start_osd $n
  set_pgs 1 8 "1 2 3"
  echo "OSD $n back"
  sleep 1.5
done
touch "$STOP"
wait $LOAD || { cat "$TESTDIR/load.log"; grep -i "replay" "$TESTDIR/srv.log" | tail -n 5; fail "a replayed write landed over a newer one (or an I/O error)"; }
cat "$TESTDIR/load.log"
grep -q " 0 wrong" "$TESTDIR/load.log" || fail "blocks do not hold their last write"
replays=$(grep -c "replaying [0-9]* unsynced writes" "$TESTDIR/srv.log")
echo "$replays flushes replayed unsynced writes"
[ "$replays" -ge 2 ] ||
  { ls -la "$TESTDIR"; head -n 5 "$TESTDIR/srv.log" "$CONF"; fail "no flush replayed anything: the test did not test the replay"; }
echo "test-client-replay-order: ok"
