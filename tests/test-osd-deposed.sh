#!/usr/bin/env bash
# A deposed primary cannot write through a member that knows it was
# deposed (osd_proto.h, SEC_LOCK): the member's map is newer than the
# primary's lock and names another primary, so the member refuses the old
# primary's SEC_WRITEs (EBUSY) and its new SEC_LOCK (ESTALE), even while
# the new primary has not reached it (here it does not exist at all). The
# old primary is held on its old map by a 40 s osd_kv_settle. When the PG
# comes back to it, the member it lost at its last peering is taken back
# by itself (the retry of osd_peering_retry), though its map never moved.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
one_pg_pool 2 2 "1" "1,3"
create_osd 3; start_osd 3
OSD_OPTS="--osd_kv_settle 40000" ; create_osd 1; start_osd 1
OSD_OPTS=
wait_for grep -q "pg 1/0 active" "$TESTDIR/osd1.log" || fail "osd 1 did not activate pg 1/0"
osd_client write --inode $I --offset 0 --len 131072 --seed 1 || fail "write through osd 1"
t0=$(date +%s)
ver () { osd_client raw SEC_READ --port "$(osd_port 3)" --inode $I --offset 0 --len 4096 | sed -n 's/.* version=\([0-9]*\) .*/\1/p'; }
v1=$(ver)
[ -n "$v1" ] && [ "$v1" -gt 0 ] || fail "no version of the object on osd 3: '$v1'"

# The PG moves to osd 2 (which never comes): osd 3 sees it at once, osd 1
# not for 40 s.
set_pgs 1 1 "2" "2,3"
sleep 1
zeros () { head -c "$1" /dev/zero | od -An -v -tx1 | tr -d ' \n'; }
out=$(osd_client raw WRITE --port "$(osd_port 1)" --inode $I --offset 0 --len 4096 --hex-payload "$(zeros 4096)")
echo "$out" | grep -q '^status=0 ' && fail "the deposed primary's write was taken: $out"
grep -q "SEC_WRITE from osd 1 (.*) refused: pg 1/0's primary is osd 2 now" "$TESTDIR/osd3.log" ||
  fail "osd 3 did not refuse (or log) the deposed primary's SEC_WRITE"
wait_for grep -q "SEC_LOCK of pg 1/0 refused: osd 1 (.*) peered at KV revision [0-9]*, the PG's primary at [0-9]* is osd 2" \
  "$TESTDIR/osd3.log" || fail "osd 3 did not refuse the deposed primary's new SEC_LOCK"
out=$(osd_client raw WRITE --port "$(osd_port 1)" --inode $I --offset 0 --len 4096 --hex-payload "$(zeros 4096)")
echo "$out" | grep -q '^status=0 ' && fail "the deposed primary's second write was taken: $out"
[ "$(ver)" = "$v1" ] || fail "osd 3's copy changed under the deposed primary: version $v1 -> $(ver)"
[ $(( $(date +%s) - t0 )) -lt 38 ] || fail "too slow: osd 1 may have seen the new map (the test proves nothing)"
grep -q "no longer primary of pg 1/0" "$TESTDIR/osd1.log" && fail "osd 1 saw the new map early: the test proves nothing"

# The PG moves back to osd 1. Nothing osd 1 peers on changed (its map never
# moved), but osd 3, usable and left out of the last peering, is taken
# back within a few seconds: writes resume.
set_pgs 1 1 "1" "1,3"
ok=
for t in $(seq 1 40); do
  out=$(osd_client raw WRITE --port "$(osd_port 1)" --inode $I --offset 0 --len 4096 --hex-payload "$(zeros 4096)")
  if echo "$out" | grep -q '^status=0 '; then ok=1; break; fi
  sleep 0.5
done
[ -n "$ok" ] || fail "osd 1 did not take osd 3 back once it was the primary again: $out"
grep -q "pg 1/0: osd 3 is usable but took no part in peering; peering again" "$TESTDIR/osd1.log" ||
  fail "osd 1 did not say why it peered again"
[ "$(ver)" != "$v1" ] || fail "osd 3 did not take the write once osd 1 was the primary again"
osd_finish
echo "test-osd-deposed: ok"
