#!/usr/bin/env bash
# A flush must not call durable a write that a lost OSD took with it.
# Found by the kill soak (tests/soak/soak.sh kill): fio read zeros where it
# had written. One PG of 3 replicas (pg_minsize 2) led by osd 1:
# 1. osd 3 is killed: the PG runs on osds 1 and 2.
# 2. A write through nbdkit, not flushed: acknowledged by osds 1 and 2.
# 3. osd 2 is killed -9: its unsynced copy dies with it.
# 4. The flush. It must not return while the write is on osd 1 alone (the
#    primary used to skip the lost peer and answer that all was durable);
#    osd 2 is started again while it waits, the write must reach it (the
#    client writes its unsynced writes again, the primary recovers osd 2's
#    copy) and the flush then returns.
# 5. nbdkit stops, osd 1 is killed -9, osds 2 and 3 run the PG with osd 2
#    leading (as the monitor would set it): a new client must read the
#    write back.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit nbdsh cmp python3 pkill
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"

start_one_pg_rep3

stop_osd 3 -9
start_nbdkit srv -- config="$CONF"
# The writer: write, say so, wait for go, flush, say so (with the time).
nbd_script_bg writer "
h = nbd.NBD()
h.connect_uri('$(uri srv img)')
h.pwrite(open('$TESTDIR/w', 'rb').read(), 0)
open('$TESTDIR/written', 'w').close()
wait('go')
t = time.monotonic()
h.flush()
open('$TESTDIR/flushed', 'w').write('%.1f' % (time.monotonic() - t))
h.shutdown()
"
writer=$NBD_SCRIPT_PID
wait_for test -e "$TESTDIR/written" || fail "the write did not complete: $(cat "$TESTDIR/writer.err")"
stop_osd 2 -9
echo "the write is acknowledged; osd 2 killed -9"
touch "$TESTDIR/go"
sleep 3
if [ -e "$TESTDIR/flushed" ]; then
  wait $writer
  fail "the flush returned in $(cat "$TESTDIR/flushed") s with the write on osd 1 alone (osd 2 lost it, osd 3 never had it)"
fi
echo "the flush waits while osd 1 alone holds the write"
start_osd 2
wait $writer || fail "the flush failed: $(cat "$TESTDIR/writer.err")"
echo "the flush returned once osd 2 was back ($(cat "$TESTDIR/flushed") s)"
grep -q "SYNC: a peer was lost with unsynced writes" "$TESTDIR/osd1/log" ||
  fail "osd 1 did not say why it refused the first SYNC: $(tail -n 5 "$TESTDIR/osd1/log")"

stop_nbdkit srv
stop_osd 1 -9
start_osd 3
set_pgs 1 1 "2 3 1"
tromcho dd iimg=img of="$TESTDIR/back" bs=1M count=1 2>"$TESTDIR/dd.err" ||
  fail "reading back from osds 2 and 3: $(cat "$TESTDIR/dd.err")"
cmp -s "$TESTDIR/w" "$TESTDIR/back" ||
  fail "osds 2 and 3 do not hold the flushed write ($(cmp "$TESTDIR/w" "$TESTDIR/back" 2>&1 | head -1))"
echo "after the flush, the write survives the loss of osd 1"
