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
start_rep3
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
wait $LOAD || { cat "$TESTDIR/load.log"; grep -i "replay" "$TESTDIR/srv.log" | tail -n 5
  grep -h " \(error\|warning\):" "$TESTDIR"/osd*/log "$TESTDIR/srv.log" | tail -n 20
  # the fence (osd/README.md, Missing / limits): who locked, who was refused
  grep -H "refused\|SEC_LOCK\|primary" "$TESTDIR"/osd*/log | tail -n 30
  fail "a replayed write landed over a newer one (or an I/O error)"; }
cat "$TESTDIR/load.log"
grep -q " 0 wrong" "$TESTDIR/load.log" || fail "blocks do not hold their last write"
replays=$(grep -c "replaying [0-9]* unsynced writes" "$TESTDIR/srv.log")
echo "$replays flushes replayed unsynced writes"
[ "$replays" -ge 2 ] ||
  { ls -la "$TESTDIR"; head -n 5 "$TESTDIR/srv.log" "$CONF"; fail "no flush replayed anything: the test did not test the replay"; }
echo "one process: every block holds its last write"

# 2. Two processes (two nbdkits on the image). A writes blocks and does not
#    flush; B writes over some of them (whole sectors and, for others, a
#    few bytes of a sector: WRITE_IF) and flushes. OSD 3 dies, its PGs
#    move; A's flush replays its writes: each must find the object already
#    holding it or something newer (the survivors kept it) and write
#    nothing, so B's bytes stay; A's blocks that B did not touch keep A's.
start_nbdkit other -v -- config="$CONF" image=img
GO=$TESTDIR/go
rm -f "$GO"
$PY - "$(uri srv "")" "$(uri other "")" "$GO" >"$TESTDIR/two.log" 2>&1 <<'PY' &
import os, sys, time
import nbd
a, b = nbd.NBD(), nbd.NBD()
a.connect_uri(sys.argv[1])
b.connect_uri(sys.argv[2])
go = sys.argv[3]
N, STRIDE = 24, 131072 * 3 + 4096
blk = lambda tag, i: ((b"%s %4d " % (tag, i)) * 600)[:4096]
for i in range(N):
    a.pwrite(blk(b"A", i), i * STRIDE)
    a.pwrite(blk(b"a", i), i * STRIDE + 8192)          # B leaves these alone
for i in range(0, N, 2):
    b.pwrite(blk(b"B", i), i * STRIDE)                 # whole sectors over A's
for i in range(1, N, 2):
    b.pwrite(b"bbbb", i * STRIDE + 100)                # a few bytes: WRITE_IF
b.flush()
print("written", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
a.flush()                                              # replays A's writes
bad = 0
for h, name in ((a, "A"), (b, "B")):
    for i in range(N):
        want = blk(b"B", i) if i % 2 == 0 else blk(b"A", i)[:100] + b"bbbb" + blk(b"A", i)[104:]
        if h.pread(4096, i * STRIDE) != want or h.pread(4096, i * STRIDE + 8192) != blk(b"a", i):
            bad += 1
            print("block %d read via %s: %r" % (i, name, h.pread(4096, i * STRIDE)[:16]), flush=True)
print("%d wrong" % bad, flush=True)
sys.exit(1 if bad else 0)
PY
TWO=$!
cleanup_fn "kill $TWO 2>/dev/null"
wait_for grep -q "^written" "$TESTDIR/two.log" || { cat "$TESTDIR/two.log"; fail "the two writers did not write"; }
n0=$(grep -c "replaying [0-9]* unsynced writes" "$TESTDIR/srv.log")
stop_osd 3 -9
set_pgs 1 8 "1 2"
touch "$GO"
wait $TWO || { cat "$TESTDIR/two.log"; fail "a replay of one process undid another process's newer writes"; }
cat "$TESTDIR/two.log"
[ "$(grep -c "replaying [0-9]* unsynced writes" "$TESTDIR/srv.log")" -gt "$n0" ] ||
  fail "A's flush did not replay: the test did not test the replay"
skipped=0
for n in 1 2; do
  s=$("$top_builddir/tests/osd-client" --etcd_address "$KV_URL" describe --osd $n | python3 -c 'import json,sys; print(json.load(sys.stdin).get("replays_skipped", 0))') ||
    fail "describe osd $n"
  skipped=$((skipped + s))
done
echo "replayed writes the survivors held already: $skipped"
[ "$skipped" -gt 0 ] || fail "no replayed write was skipped"
echo "test-client-replay-order: ok"
