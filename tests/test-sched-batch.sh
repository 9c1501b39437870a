#!/usr/bin/env bash
# Option sched_batch (default true): every thread of tromcho-osd, the
# cluster client's I/O thread in nbdkit tromcho and each nbdkit worker
# that has done I/O run under SCHED_BATCH (policy 3 in /proc/PID/stat);
# with sched_batch false (the OSD's command line, the plugin's parameter)
# none does, and the data still round-trips either way.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit nbdsh curl python3
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"

# policies PID: the scheduling policy of each of PID's threads, one a line
policies () {
  local t
  for t in /proc/"$1"/task/*; do awk '{print $41}' "$t/stat" 2>/dev/null; done
}

start_kv
write_conf
start_rep3
tromcho create img -s 16M --enc_key auto || fail "create img"

for n in 1 2 3; do
  pid=$(cat "$TESTDIR/osd$n/pid")
  p=$(policies "$pid" | sort -u | tr '\n' ' ')
  [ "$p" = "3 " ] || fail "OSD $n: thread policies '$p', expected all SCHED_BATCH (3)"
done

# OSD 3 again with sched_batch false: its threads keep the default policy
stop_osd 3
tromcho-osd --osd_num 3 --osd_data "$TESTDIR/osd3/data" --sched_batch false >>"$TESTDIR/osd3/log" 2>&1 &
echo $! > "$TESTDIR/osd3/pid"
wait_for osd_registered 3 || { cat "$TESTDIR/osd3/log"; fail "OSD 3 did not come back"; }
p=$(policies "$(cat "$TESTDIR/osd3/pid")" | sort -u | tr '\n' ' ')
[ "$p" = "0 " ] || fail "OSD 3 with sched_batch false: thread policies '$p', expected all SCHED_OTHER (0)"

# check_nbdkit NAME MIN MAX: with a connection open that wrote and read
# back 1 MiB, between MIN and MAX of nbdkit's threads are SCHED_BATCH
check_nbdkit () {
  local pid
  pid=$(cat "$TESTDIR/$1.pid")
  nbdsh -c "
import os
h = nbd.NBD()
h.connect_uri('$(uri "$1" img)')
data = os.urandom(1 << 20)
h.pwrite(data, 4096)
h.flush()
assert h.pread(1 << 20, 4096) == data, 'read back differs'
batch = 0
for t in os.listdir('/proc/$pid/task'):
    with open('/proc/$pid/task/%s/stat' % t) as f:
        batch += f.read().rsplit(')', 1)[1].split()[38] == '3'
print(batch)
assert $2 <= batch <= $3, '%d of nbdkit threads under SCHED_BATCH, expected $2..$3' % batch
h.shutdown()
" || fail "nbdkit $1: I/O or thread policies"
}

# The I/O thread and at least the worker that served the requests.
start_nbdkit on -- config="$CONF"
check_nbdkit on 2 1000
stop_nbdkit on
start_nbdkit off -- config="$CONF" sched_batch=false
check_nbdkit off 0 0
stop_nbdkit off
echo "OK"
