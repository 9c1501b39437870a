#!/usr/bin/env bash
# A member still registered that answers nothing: its event loop stopped
# alone (tests/freeze-thread.py) while its lease, 60 s long, holds it in
# the map. A SYNC through the primary (lease 3 s) waits three of its
# leases for the member's SEC_SYNC, then the primary closes the
# connection (ETIMEDOUT), marks the member down and answers EAGAIN (the
# client syncs again, without it); before, the SYNC waited as long as
# the member, a guest's fsync with it. While the member is
# frozen the primary's probes of it (a connection, no peering) fail and
# writes go on; once it runs, a probe goes through and it takes writes.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
one_pg_pool 2 1 "1" "1,2"
create_osd 1; create_osd 2
start_osd 1
OSD_OPTS="--etcd_keepalive_timeout 60" start_osd 2
OSD_OPTS=
wait_for grep -q "pg 1/0 active" "$TESTDIR/osd1.log" || fail "osd 1 did not activate pg 1/0"
ttl=$(curl -sf "$KV_URL/v3/lease/timetolive" -d "{\"ID\": $(kv_get /osd/state/2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["lease"])')}" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["grantedTTL"])')
[ "$ttl" = 60 ] || fail "osd 2's lease is $ttl s, not 60: the test proves nothing"
P1=$(osd_port 1) P2=$(osd_port 2)
hex () { head -c 4096 /dev/zero | tr '\0' "$1" | od -An -v -tx1 | tr -d ' \n'; }
write () { timeout "$1" "$OSD_CLIENT" --etcd_address "$KV_URL" raw WRITE --port "$P1" --inode $I --offset 0 --len 4096 --hex-payload "$(hex "$2")"; }
ver () { osd_client raw SEC_READ --port "$P2" --inode $I --offset 0 --len 4096 | sed -n 's/.* version=\([0-9]*\) .*/\1/p'; }
write 10 a | grep -q '^status=0 ' || fail "a write through osd 1"
v2=$(ver)
[ -n "$v2" ] && [ "$v2" -gt 0 ] || fail "osd 2 has no copy: '$v2'"

freeze_thread "$(cat "$TESTDIR/osd2.pid")" 24 freeze   # the loop: the main thread
write 5 b | grep -q '^status=0 ' || fail "a write through osd 1 (pg_minsize 1) with osd 2 frozen"
# The SYNC that must reach osd 2 (written since its last SEC_SYNC).
sync1 () { timeout "$1" "$OSD_CLIENT" --etcd_address "$KV_URL" raw SYNC --port "$P1"; }
t0=$(date +%s.%N)
out=$(sync1 18) || true
took=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))")
echo "a SYNC through osd 1 with osd 2 frozen: ${took} s: $out"
echo "$out" | grep -q '^status=-11 ' ||
  fail "the SYNC waited for the frozen member, or did not say it must be retried (EAGAIN): $out"
python3 -c "import sys; sys.exit(0 if 8 <= $took < 15 else 1)" ||
  fail "the SYNC took ${took} s: not the 9 s call timeout (3 leases of 3 s)"
grep -q "no reply for [0-9]* ms with [0-9]* requests in flight: peer hung or cut off" "$TESTDIR/osd1.log" ||
  fail "osd 1 did not say why it closed its connection to osd 2"
grep -q "peer osd 2 is down" "$TESTDIR/osd1.log" || fail "osd 1 did not mark osd 2 down"
osd_registered 2 || fail "osd 2 left the map: the test proves nothing"
# Down: writes and syncs no longer wait for it, probes and all.
for c in c d e; do
  t0=$(date +%s.%N)
  write 5 $c | grep -q '^status=0 ' || fail "a write through osd 1 while osd 2 is down and frozen"
  out=$(sync1 5) || true
  echo "$out" | grep -q '^status=0 ' || fail "a SYNC through osd 1 while osd 2 is down and frozen: $out"
  python3 -c "import sys; sys.exit(0 if $(date +%s.%N) - $t0 < 3 else 1)" || fail "a write or SYNC waited on the down member"
  sleep 1
done
thawed freeze && fail "osd 2 ran again too early: the test proves nothing"
thaw_wait freeze
WAIT_SECS=40 wait_for grep -q "peer osd 2 answers again" "$TESTDIR/osd1.log" || fail "osd 1's probes did not take osd 2 back"
# (What osd 2's socket held when osd 1 closed it, the write "b", lands
# when it runs: the same bytes at the same version as osd 1's, marked
# stale there and recovered anyway.)
vb=$(ver)
ok=
for _ in $(seq 1 40); do
  write 5 f | grep -q '^status=0 ' || fail "a write through osd 1 after osd 2 came back"
  [ "$(ver)" -gt "$vb" ] && { ok=1; break; }
  sleep 0.5
done
[ -n "$ok" ] || fail "osd 2 did not take writes again once it ran"
osd_finish
echo "test-osd-peer-timeout: ok"
