#!/usr/bin/env bash
# Self-fencing (osd/README.md, "Fencing"): an OSD whose /osd/state lease
# the KV has not renewed in time serves no client I/O and takes no data
# from a primary, since the monitor may already have moved its PGs; once it
# holds a lease again it peers its PGs again and serves. Each OSD under
# test reaches the KV through a relay the test freezes (SIGSTOP): cut off
# from the KV, still reachable by clients and peers.
#  1. a primary cut off: its WRITE and READ get EAGAIN (before, it went on
#     writing to its member, which never learned anything either);
#  2. a member cut off, whose primary is held on its old map (a 40 s
#     osd_kv_settle): it refuses the primary's SEC_WRITE, its copy stays;
#  3. a member whose loop hangs while its lease keeper runs: the lease
#     lapses, the OSD leaves the map, and comes back once the loop runs;
#  4. a member whose store's sync hangs while its loop runs: the same,
#     after three leases.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
. "$top_srcdir/tests/metrics-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
KV_PORT=${KV_URL##*:}
# relay NAME: a TCP relay to the KV; sets RELAY_URL, RELAY_PID
relay () {
  python3 -u "$top_srcdir/tests/msgr-relay.py" "$KV_PORT" "$TESTDIR/$1" >"$TESTDIR/$1.out" 2>&1 &
  RELAY_PID=$!
  cleanup_fn "kill -CONT $RELAY_PID 2>/dev/null; stop_pid $RELAY_PID"
  WAIT_SECS=10 wait_for grep -q '^PORT ' "$TESTDIR/$1.out" || fail "relay $1 did not start"
  RELAY_URL=http://127.0.0.1:$(sed -n 's/^PORT //p' "$TESTDIR/$1.out")
}
kv_put /config/pools '{"1": {"name": "p1", "pg_size": 2, "pg_minsize": 1, "pg_count": 1, "block_size": 131072},
  "2": {"name": "p2", "pg_size": 2, "pg_minsize": 1, "pg_count": 1, "block_size": 131072}}'
kv_put /pg/config '{"items": {"1": {"0": {"osd_set": [1, 2], "primary": 1}}, "2": {"0": {"osd_set": [3, 4], "primary": 3}}}}'
kv_put /config/inode/1/5 '{"name": "a", "size": 1048576}'
kv_put /config/inode/2/5 '{"name": "b", "size": 1048576}'
for n in 1 2 3 4; do create_osd $n; done
relay relay1; R1=$RELAY_PID
MPORT=$(free_port)
KV_URL=$RELAY_URL OSD_OPTS="--metrics_port $MPORT" start_osd 1
# lease SERIES: the value of SERIES on osd 1's /metrics
lease () {
  curl -sf "http://127.0.0.1:$MPORT/metrics" > "$TESTDIR/m.txt" || fail "GET /metrics of osd 1"
  parse_metrics "$TESTDIR/m.txt" > "$TESTDIR/m.json" || fail "osd 1's metrics do not parse"
  metric_val "$TESTDIR/m.json" "$1"
}
relay relay4; R4=$RELAY_PID
KV_URL=$RELAY_URL start_osd 4
start_osd 2
OSD_OPTS="--osd_kv_settle 40000" start_osd 3
I1=$(( (1 << 48) | 5 )) I2=$(( (2 << 48) | 5 ))
wait_for grep -q "pg 1/0 active" "$TESTDIR/osd1.log" || fail "osd 1 did not activate pg 1/0"
wait_for grep -q "pg 2/0 active" "$TESTDIR/osd3.log" || fail "osd 3 did not activate pg 2/0"
# The ports now: a fenced OSD's /osd/state goes when its lease expires.
declare -A PORT
for n in 1 2 3 4; do PORT[$n]=$(osd_port $n); done
ver () { osd_client raw SEC_READ --port "${PORT[$1]}" --inode "$2" --offset 0 --len 4096 | sed -n 's/.* version=\([0-9]*\) .*/\1/p'; }
hex () { head -c 4096 /dev/zero | tr '\0' "$1" | od -An -v -tx1 | tr -d ' \n'; }
write () { osd_client raw WRITE --port "${PORT[$1]}" --inode "$2" --offset 0 --len 4096 --hex-payload "$(hex "$3")"; }
write 1 $I1 a | grep -q '^status=0 ' || fail "a write through osd 1"
write 3 $I2 a | grep -q '^status=0 ' || fail "a write through osd 3"
v2=$(ver 2 $I1) v4=$(ver 4 $I2)
[ -n "$v2" ] && [ "$v2" -gt 0 ] && [ -n "$v4" ] && [ "$v4" -gt 0 ] || fail "no replicas: '$v2' '$v4'"
[ "$(lease tromcho_osd_lease_held)" = 1 ] || fail "osd 1's metrics do not say it holds its lease"

# 1. The primary cut off from the KV: within its lease (3 s) it stops.
kill -STOP $R1
t0=$(date +%s)
WAIT_SECS=10 wait_for grep -q "osd 1: the KV has not renewed the lease of /osd/state/1 in time" "$TESTDIR/osd1.log" ||
  fail "osd 1 did not fence itself"
[ $(( $(date +%s) - t0 )) -le 4 ] || fail "osd 1 fenced itself only after $(( $(date +%s) - t0 )) s (lease 3 s)"
out=$(write 1 $I1 b)
echo "$out" | grep -q '^status=-11 ' || fail "osd 1 without a lease took a write: $out"
out=$(osd_client raw READ --port "${PORT[1]}" --inode $I1 --offset 0 --len 4096)
echo "$out" | grep -q '^status=-11 ' || fail "osd 1 without a lease served a read: $out"
[ "$(ver 2 $I1)" = "$v2" ] || fail "osd 2's copy changed under a primary without a lease"
grep -q "osd 1: refused WRITE from .*: this OSD holds no lease of the KV now" "$TESTDIR/osd1.log" ||
  fail "osd 1 did not log why it refused"
[ "$(lease tromcho_osd_lease_held)" = 0 ] || fail "osd 1's metrics say it holds its lease while it fences itself"
[ "$(lease tromcho_osd_lease_refusals_total)" -ge 2 ] || fail "osd 1's metrics did not count the refusals"

# Back: a new lease, the PG peered again, writes go through.
kill -CONT $R1
ok=
for _ in $(seq 1 60); do
  out=$(write 1 $I1 c)
  if echo "$out" | grep -q '^status=0 '; then ok=1; break; fi
  sleep 0.5
done
[ -n "$ok" ] || fail "osd 1 did not serve again once the KV was back: $out"
grep -q "osd 1: holding a lease again (.* requests refused without one): peering every PG" "$TESTDIR/osd1.log" ||
  fail "osd 1 did not say it peered again"
[ "$(ver 2 $I1)" -gt "$v2" ] || fail "osd 2 did not take osd 1's write once it held a lease again"
[ "$(lease tromcho_osd_lease_held)" = 1 ] || fail "osd 1's metrics do not say it holds its lease again"

# 2. A member cut off; its primary (osd 3) does not see the lease go.
kill -STOP $R4
WAIT_SECS=10 wait_for grep -q "osd 4: the KV has not renewed the lease" "$TESTDIR/osd4.log" ||
  fail "osd 4 did not fence itself"
out=$(write 3 $I2 d)
echo "$out" | grep -q '^status=0 ' || fail "osd 3 (pg_minsize 1) did not take a write alone: $out"
[ "$(ver 4 $I2)" = "$v4" ] || fail "osd 4 without a lease took a SEC_WRITE"
grep -q "osd 4: refused SEC_WRITE from .*: this OSD holds no lease" "$TESTDIR/osd4.log" ||
  fail "osd 4 did not log why it refused"
kill -CONT $R4
WAIT_SECS=20 wait_for grep -q "osd 4: holding a lease again" "$TESTDIR/osd4.log" ||
  fail "osd 4 did not get a lease again"

# 3. A member whose event loop hangs while its lease keeper's thread runs
# (ptrace stops only that thread): the keeper lets the lease lapse, the
# OSD leaves the map (before, it stayed registered and its PGs waited on
# it for ever); thawed, it fences itself, registers again and takes writes.
v2=$(ver 2 $I1)
freeze_thread "$(cat "$TESTDIR/osd2.pid")" 10 freeze   # the loop: the main thread
t0=$(date +%s)
not_registered () { ! osd_registered "$1"; }
WAIT_SECS=9 wait_for not_registered 2 || fail "osd 2's lease outlived its hung loop"
grep -q "kv: the holder of lease [0-9a-f]* has shown no life for [0-9]* ms: letting the lease lapse" "$TESTDIR/osd2.log" ||
  fail "osd 2's keeper did not say why it let the lease lapse"
echo "osd 2 with a hung loop left the map after $(( $(date +%s) - t0 )) s (lease 3 s)"
thawed freeze && fail "osd 2 left the map only after its loop ran again: the test proves nothing"
thaw_wait freeze
WAIT_SECS=20 wait_for grep -q "osd 2: holding a lease again" "$TESTDIR/osd2.log" || fail "osd 2 did not get a lease again"
WAIT_SECS=20 wait_for osd_registered 2 || fail "osd 2 did not register again"
ok=
for _ in $(seq 1 40); do
  write 1 $I1 e | grep -q '^status=0 ' || fail "a write through osd 1 while osd 2 came back"
  [ "$(ver 2 $I1)" -gt "$v2" ] && { ok=1; break; }
  sleep 0.5
done
[ -n "$ok" ] || fail "osd 2 did not take osd 1's writes again after its loop ran again"

# 4. A member whose store's sync hangs (its sync thread stopped) while its
# loop runs: after three leases without an answer its lease lapses too;
# once the sync returns, the OSD registers again.
P4=$(cat "$TESTDIR/osd4.pid") TID=
for t in /proc/$P4/task/*; do [ "$(cat "$t/comm" 2>/dev/null)" = tc-osd-sync ] && TID=${t##*/}; done
[ -n "$TID" ] || fail "osd 4 has no thread named tc-osd-sync"
freeze_thread "$TID" 24 freeze2
timeout 60 "$OSD_CLIENT" --etcd_address "$KV_URL" raw SYNC --port "${PORT[4]}" >"$TESTDIR/sync.out" 2>&1 &
SYNC=$!
t0=$(date +%s)
sleep 2
grep -q status "$TESTDIR/sync.out" && fail "osd 4 answered a SYNC while its sync thread was stopped: $(cat "$TESTDIR/sync.out")"
WAIT_SECS=20 wait_for not_registered 4 || fail "osd 4 stayed registered with a sync stuck for three leases"
grep -q "osd 4: the store's sync has not returned for [0-9]* s: letting the lease lapse" "$TESTDIR/osd4.log" ||
  fail "osd 4 did not say why it let the lease lapse"
echo "osd 4 with a stuck sync left the map after $(( $(date +%s) - t0 )) s (three leases: 9 s)"
thawed freeze2 && fail "osd 4 left the map only after its sync returned: the test proves nothing"
thaw_wait freeze2
wait "$SYNC" || true
grep -q '^status=0 ' "$TESTDIR/sync.out" || fail "the SYNC was not answered once the sync thread ran: $(cat "$TESTDIR/sync.out")"
WAIT_SECS=20 wait_for grep -q "osd 4: the store's syncs return again" "$TESTDIR/osd4.log" || fail "osd 4 did not see its syncs return"
WAIT_SECS=20 wait_for osd_registered 4 || fail "osd 4 did not register again after its sync returned"
osd_finish
echo "test-osd-lease-fence: ok"
