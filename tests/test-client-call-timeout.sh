#!/usr/bin/env bash
# The cluster client and an OSD that stays in the map but answers nothing
# on a connection already up (SIGSTOP with a 60 s lease: as hung, or cut
# off from this client alone, while the KV still sees it). The client's
# call timeout (four etcd_keepalive_timeout of its config, or
# client_op_timeout if shorter) closes the silent connection, so:
# 1. when the PG moves to another OSD meanwhile, the writes in flight on
#    the silent primary retry on the new one and the copy completes,
#    while the old primary is still stopped (before: they waited on the
#    socket until it ran again, or until TCP gave up), and the last SYNC
#    does not wait on the silent OSD (leading no PG now) for a handshake;
# 2. when nothing moves, an operation fails after client_op_timeout with
#    an error that says so, instead of hanging.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3 sha256sum
start_kv
# The client: call timeout 4 x 2 s; the OSDs: leases of 60 s (command line).
EXTRA_CONF=', "etcd_keepalive_timeout": 2' OP_TIMEOUT=60 write_conf
make_pool 1 1 2 1
OSD_OPTS="--etcd_keepalive_timeout 60"
start_osd 1; start_osd 2
OSD_OPTS=
set_pgs 1 1 "1 2"
lease_ttl () {
  curl -sf "$KV_URL/v3/lease/timetolive" -d "{\"ID\": $(kv_get "/osd/state/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["lease"])')}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["grantedTTL"])'
}
for n in 1 2; do
  [ "$(lease_ttl $n)" = 60 ] || fail "osd $n's lease is $(lease_ttl $n) s, not 60: the test proves nothing"
done
tromcho create img -s 64M >/dev/null || fail "create"
head -c $((16 << 20)) /dev/urandom > "$TESTDIR/src"
cleanup_fn "for p in $TESTDIR/osd*/pid; do kill -CONT \$(cat \$p) 2>/dev/null; done; true"

# copy_and_stop N SEEK: start a copy of the source to the image at SEEK
# (256 KiB blocks; dd_pid), stop OSD N once 4 MiB went (the copy's
# connection to it is up), then let the rest go (t0: then).
copy_and_stop () {
  feed_paused 4 | tromcho dd if=/dev/stdin oimg=img bs=256K iodepth=4 seek="$2" 2>"$TESTDIR/dd.err" &
  dd_pid=$!
  wait_for test -e "$TESTDIR/paused" || fail "the feed did not start"
  sleep 0.5
  kill -STOP "$(cat "$TESTDIR/osd$1/pid")"
  touch "$TESTDIR/go"
  t0=$(date +%s.%N)
}
elapsed () { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }

# 1. The primary stops mid-copy; the PG moves to OSD 2 alone.
copy_and_stop 1 0
sleep 1
set_pgs 1 1 "2" 1
WAIT_SECS=45 wait_for sh -c "! kill -0 $dd_pid 2>/dev/null" ||
  { cat "$TESTDIR/dd.err"; fail "the copy still waits 45 s after the PG moved away from its stopped primary"; }
wait $dd_pid || { cat "$TESTDIR/dd.err"; fail "the copy failed after the PG moved"; }
took=$(elapsed "$t0")
echo "writes in flight on a stopped primary (its PG moved): the copy completed ${took} s after it stopped"
# One call timeout (8 s) and the replay, not a handshake timeout more: the
# last SYNC does not connect again to the silent OSD, which leads no PG now.
python3 -c "import sys; sys.exit(0 if $took < 14 else 1)" ||
  fail "the copy took ${took} s: its SYNC waited on the silent old primary (a new handshake) before the replay"
osd_registered 1 || fail "osd 1 left the map: the test proves nothing"
tromcho dd iimg=img of="$TESTDIR/back" bs=1M count=16 2>"$TESTDIR/dd.err" || { cat "$TESTDIR/dd.err"; fail "read back"; }
[ "$(sha256sum < "$TESTDIR/back")" = "$(sha256sum < "$TESTDIR/src")" ] || fail "the image does not hold what dd copied"
kill -CONT "$(cat "$TESTDIR/osd1/pid")"

# 2. The primary (OSD 2) stops and nothing moves: an operation fails after
#    client_op_timeout (5 s here), it does not hang.
OP_TIMEOUT=5 EXTRA_CONF=', "etcd_keepalive_timeout": 2' write_conf
copy_and_stop 2 64
WAIT_SECS=25 wait_for sh -c "! kill -0 $dd_pid 2>/dev/null" ||
  fail "the copy still waits on the stopped primary 25 s later (client_op_timeout 5 s)"
if wait $dd_pid; then fail "the copy succeeded with its only primary stopped"; fi
took=$(elapsed "$t0")
cat "$TESTDIR/dd.err"
echo "writes in flight on a stopped primary that stays: failed after ${took} s (client_op_timeout 5 s)"
grep -q "could not serve it in time" "$TESTDIR/dd.err" || fail "the error does not say the cluster did not answer in time"
osd_registered 2 || fail "osd 2 left the map: the test proves nothing"
kill -CONT "$(cat "$TESTDIR/osd2/pid")"
tromcho dd iimg=img of="$TESTDIR/back" bs=1M count=16 2>"$TESTDIR/dd.err" || { cat "$TESTDIR/dd.err"; fail "read back after SIGCONT"; }
[ "$(sha256sum < "$TESTDIR/back")" = "$(sha256sum < "$TESTDIR/src")" ] || fail "the image lost what was copied before"
# What the second copy wrote before the stop was acknowledged: it is there.
tromcho dd iimg=img of="$TESTDIR/back" bs=1M skip=16 count=4 2>"$TESTDIR/dd.err" || { cat "$TESTDIR/dd.err"; fail "read back 2"; }
[ "$(sha256sum < "$TESTDIR/back")" = "$(head -c $((4 << 20)) "$TESTDIR/src" | sha256sum)" ] ||
  fail "the writes acknowledged before the primary stopped are not in the image"

# 3. Writes acknowledged by the primary (pg_size 1), not yet synced; the
#    primary stops and its PG moves before the flush. The flush's SYNC to
#    the silent OSD times out (5 s) when the operation's own time is up:
#    too late to write the lost OSD's writes again to the new primary, so
#    the flush fails. It said "ok" before, with the data on no primary.
{ head -c $((4 << 20)) "$TESTDIR/src"; touch "$TESTDIR/paused"; while [ ! -e "$TESTDIR/go" ]; do sleep 0.05; done; } |
  tromcho dd if=/dev/stdin oimg=img bs=256K iodepth=4 seek=96 2>"$TESTDIR/dd.err" &
dd_pid=$!
rm -f "$TESTDIR/go"
wait_for test -e "$TESTDIR/paused" || fail "the feed did not start"
sleep 0.5
kill -STOP "$(cat "$TESTDIR/osd2/pid")"
set_pgs 1 1 "1" 1
sleep 1
touch "$TESTDIR/go"
WAIT_SECS=25 wait_for sh -c "! kill -0 $dd_pid 2>/dev/null" || fail "the flush still waits 25 s later (client_op_timeout 5 s)"
if wait $dd_pid; then
  tromcho dd iimg=img of="$TESTDIR/back" bs=256K skip=96 count=16 2>"$TESTDIR/dd2.err" || { cat "$TESTDIR/dd2.err"; fail "read back 3"; }
  [ "$(sha256sum < "$TESTDIR/back")" = "$(head -c $((4 << 20)) "$TESTDIR/src" | sha256sum)" ] ||
    { cat "$TESTDIR/dd.err"; fail "the flush succeeded but the new primary does not hold what was written"; }
else
  cat "$TESTDIR/dd.err"
  grep -q "no time is left to write its unsynced writes again" "$TESTDIR/dd.err" ||
    fail "the failed flush does not say why"
fi
kill -CONT "$(cat "$TESTDIR/osd2/pid")"
echo "test-client-call-timeout: ok"
