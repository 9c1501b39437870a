#!/usr/bin/env bash
# A flush after the PG's primary restarted must make durable what the old
# primary acknowledged. One PG of 3 replicas (pg_minsize 2) led by osd 1:
# 1. A write through nbdkit, not flushed: on osds 1, 2 and 3, unsynced.
# 2. osd 1 is killed -9 (its copy dies with it) and started again at once,
#    its peering held 4 s (TROMCHO_OSD_PEERING_PAUSE_MS), so it has not
#    taken the write back from osd 2 or 3 when the flush comes.
# 3. The flush. The new osd 1 knows nothing of the write; the client must
#    (the connection it wrote on closed): it writes its unsynced writes
#    again, then syncs. Before, the new osd 1 synced its own store and
#    answered that all was durable while the write was unsynced on osds 2
#    and 3.
# 4. nbdkit stops; every OSD is killed -9 (a power loss) and started again:
#    a new client must read the write back.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit nbdsh cmp python3 pkill
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"

start_one_pg_rep3

start_nbdkit srv -- config="$CONF"
nbd_script_bg writer "
h = nbd.NBD()
h.connect_uri('$(uri srv img)')
h.pwrite(open('$TESTDIR/w', 'rb').read(), 0)
open('$TESTDIR/written', 'w').close()
wait('go')
h.flush()
open('$TESTDIR/flushed', 'w').close()
h.shutdown()
"
writer=$NBD_SCRIPT_PID
wait_for test -e "$TESTDIR/written" || fail "the write did not complete: $(cat "$TESTDIR/writer.err")"
stop_osd 1 -9
TROMCHO_OSD_PEERING_PAUSE_MS=4000 start_osd 1
echo "the write is acknowledged; osd 1 killed -9 and started again"
touch "$TESTDIR/go"
wait $writer || fail "the flush failed: $(cat "$TESTDIR/writer.err")"
echo "the flush returned"

stop_nbdkit srv
for n in 1 2 3; do stop_osd $n -9; done
for n in 1 2 3; do start_osd $n; done
tromcho dd iimg=img of="$TESTDIR/back" bs=1M count=1 2>"$TESTDIR/dd.err" ||
  fail "reading back after every OSD was killed: $(cat "$TESTDIR/dd.err")"
cmp -s "$TESTDIR/w" "$TESTDIR/back" ||
  fail "the flushed write did not survive kill -9 of every OSD ($(cmp "$TESTDIR/w" "$TESTDIR/back" 2>&1 | head -1))"
echo "after the flush, the write survives kill -9 of every OSD"
