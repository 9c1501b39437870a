#!/usr/bin/env bash
# A PG moved for balance (its old primary still runs and holds its lease)
# loses no acknowledged write: the new primary locks the PG on every member
# before it lists their objects (osd_peering.c), so a write the old primary
# gets in before a member's lock is in that member's listing, and none gets
# in after it. The window is held open with TROMCHO_OSD_PEERING_PAUSE_MS (a
# test hook: the new primary waits 4 s between its two peering steps), and
# the old primary and a member are held on their old map by a 40 s
# osd_kv_settle, so only the new primary's lock can tell them. A write
# through the old primary inside the window is either refused, or, if it
# was acknowledged, read back through the new primary. Before the order was
# lock-then-list, the old primary wrote to itself and to the member between
# their listings and their locks, acknowledged it (2 of 3, pg_minsize 2),
# and the new primary served the older version.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
one_pg_pool 3 2 "1" "1,2,3"
for n in 1 2 3; do create_osd $n; done
# (osd 1 last: with its settle it would not see the others register)
TROMCHO_OSD_PEERING_PAUSE_MS=4000 start_osd 2
OSD_OPTS="--osd_kv_settle 40000"
start_osd 3
start_osd 1
OSD_OPTS=
grep -q "TROMCHO_OSD_PEERING_PAUSE_MS: peering holds" "$TESTDIR/osd2.log" || fail "osd 2 does not say it pauses peering"
wait_for grep -q "pg 1/0 active: .* 3 of 3 members" "$TESTDIR/osd1.log" || fail "osd 1 did not activate pg 1/0 with all members"
osd_client write --inode $I --offset 0 --len 4096 --seed 1 || fail "the first write through osd 1"
t0=$(date +%s)

# The PG moves to osd 2, osd 1 staying a member. osd 2 sees it at once,
# locks, and holds for 4 s; osd 1 and osd 3 learn it only from that lock.
set_pgs 1 1 "2" "2,1,3"
wait_for grep -q "pg 1/0 locked; listing in 4000 ms" "$TESTDIR/osd2.log" || fail "osd 2 did not reach its pause"
out=$(osd_client raw WRITE --port "$(osd_port 1)" --inode $I --offset 0 --len 4096 --seed 2)
echo "write through the old primary in the window: $out"
grep -q "pg 1/0 active" "$TESTDIR/osd2.log" && fail "osd 2 finished peering before the write: the test proves nothing"
[ $(( $(date +%s) - t0 )) -lt 30 ] || fail "too slow: the old map's settle may have run out (the test proves nothing)"

wait_for grep -q "pg 1/0 active" "$TESTDIR/osd2.log" || fail "osd 2 did not activate pg 1/0"
if echo "$out" | grep -q '^status=0 '; then
  osd_client read --inode $I --offset 0 --len 4096 --seed 2 ||
    fail "an acknowledged write through the old primary is lost: osd 2 serves the older data"
else
  # Refused: the data is either version, but the PG serves and takes writes.
  osd_client read --inode $I --offset 0 --len 4096 --seed 1 2>/dev/null ||
    osd_client read --inode $I --offset 0 --len 4096 --seed 2 || fail "pg 1/0 serves neither version"
fi
grep -q "no longer primary of pg 1/0" "$TESTDIR/osd1.log" ||
  fail "osd 1 still leads pg 1/0 after osd 2's lock (it did not read the KV again on the lock)"
osd_client write --inode $I --offset 0 --len 4096 --seed 3 || fail "a write through the new primary"
osd_client read --inode $I --offset 0 --len 4096 --seed 3 || fail "reading back through the new primary"
# Every member holds the new primary's version.
for n in 1 3; do
  v=$(osd_client raw SEC_READ --port "$(osd_port $n)" --inode $I --offset 0 --len 4096 | sed -n 's/.* version=\([0-9]*\) .*/\1/p')
  v2=$(osd_client raw SEC_READ --port "$(osd_port 2)" --inode $I --offset 0 --len 4096 | sed -n 's/.* version=\([0-9]*\) .*/\1/p')
  [ -n "$v" ] && [ "$v" = "$v2" ] || fail "osd $n holds version '$v' of the object, osd 2 '$v2'"
done
osd_finish
echo "test-osd-balance-move: ok"
