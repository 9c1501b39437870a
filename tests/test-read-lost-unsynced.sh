#!/usr/bin/env bash
# A client reads what it wrote even when every OSD that took the write died
# before a flush. One PG of 3 replicas (pg_minsize 2) led by osd 1:
# 1. osd 3 is killed: the PG runs on osds 1 and 2.
# 2. A write through nbdkit, not flushed: acknowledged by osds 1 and 2.
# 3. osds 2 and 1 are killed -9 (both unsynced copies die), osds 2 and 3
#    start and run the PG with osd 2 leading (as the monitor would set it).
# 4. The same nbdkit reads the range: it must read the write, which only
#    its unsynced-write log holds now (before, it read zeros: the kill
#    soak's verify failures).
# 5. A flush writes it again to osds 2 and 3; a new client reads it back.
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
nbd_script_bg client "
h = nbd.NBD()
h.connect_uri('$(uri srv img)')
w = open('$TESTDIR/w', 'rb').read()
h.pwrite(w, 65536)
open('$TESTDIR/written', 'w').close()
wait('go')
open('$TESTDIR/read', 'wb').write(h.pread(len(w) + 131072, 0))
open('$TESTDIR/readdone', 'w').close()
wait('go2')
h.flush()
h.shutdown()
"
client=$NBD_SCRIPT_PID
wait_for test -e "$TESTDIR/written" || fail "the write did not complete: $(cat "$TESTDIR/client.err")"
stop_osd 2 -9
stop_osd 1 -9
start_osd 2
start_osd 3
set_pgs 1 1 "2 3 1"
echo "the write is acknowledged; osds 1 and 2 killed -9; osds 2 and 3 serve the PG"
touch "$TESTDIR/go"
wait_for test -e "$TESTDIR/readdone" || fail "the read did not complete: $(cat "$TESTDIR/client.err")"
{ head -c 65536 /dev/zero; cat "$TESTDIR/w"; head -c 65536 /dev/zero; } > "$TESTDIR/expect"
cmp -s "$TESTDIR/expect" "$TESTDIR/read" ||
  fail "the client does not read what it wrote ($(cmp "$TESTDIR/expect" "$TESTDIR/read" 2>&1 | head -1))"
echo "the client reads its unsynced write back from its log"
touch "$TESTDIR/go2"
wait $client || fail "the flush failed: $(cat "$TESTDIR/client.err")"
stop_nbdkit srv
tromcho dd iimg=img of="$TESTDIR/back" bs=64K count=18 2>"$TESTDIR/dd.err" ||
  fail "reading back from osds 2 and 3: $(cat "$TESTDIR/dd.err")"
cmp -s "$TESTDIR/expect" "$TESTDIR/back" ||
  fail "osds 2 and 3 do not hold the write after the flush ($(cmp "$TESTDIR/expect" "$TESTDIR/back" 2>&1 | head -1))"
echo "the flush wrote it again: a new client reads it from osds 2 and 3"
