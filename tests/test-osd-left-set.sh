#!/usr/bin/env bash
# A deposed primary that left the PG's set, and the PG coming back to it.
# pg_size 2, pg_minsize 2: the PG moves from osd 1 (with osd 2) to osd 3
# (with osd 2); osd 1 hears of it 8 s late (osd_kv_settle), and a write
# sent to it meanwhile is refused by osd 2 (osd 3 holds the lock) but lands
# in osd 1's own store: the client is told it failed and writes other data
# through osd 3, acknowledged. Then the PG comes back to osd 1. With plain
# per-object counters both copies held the same version and osd 1 served
# its own, the failed write, in place of the acknowledged one. Versions now
# carry the primary's term (osd_primary_write.c, next_version): osd 2's
# copy is newer and osd 1's is replaced.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
one_pg_pool 2 2 "1" "1,2"
for n in 1 2 3; do create_osd $n; done
start_osd 2
start_osd 3
OSD_OPTS="--osd_kv_settle 8000"
start_osd 1
OSD_OPTS=
actives () { grep -c "pg 1/0 active" "$TESTDIR/osd1.log" || true; }
wait_for grep -q "pg 1/0 active: .* 2 of 2 members" "$TESTDIR/osd1.log" || fail "osd 1 did not activate pg 1/0"
osd_client write --inode $I --offset 0 --len 4096 --seed 1 || fail "the first write through osd 1"
ver () { osd_client raw SEC_READ --port "$(osd_port "$1")" --inode $I --offset 0 --len 4096 | sed -n 's/.* version=\([0-9]*\) .*/\1/p'; }
v0=$(ver 1)
[ -n "$v0" ] && [ "$v0" = "$(ver 2)" ] || fail "osd 1 and osd 2 do not hold the first write alike: '$v0' / '$(ver 2)'"

# The PG moves to osd 3; osd 1 leaves the set and hears of it 8 s later.
t0=$(date +%s)
set_pgs 1 1 "3" "3,2"
wait_for grep -q "pg 1/0 active" "$TESTDIR/osd3.log" || fail "osd 3 did not activate pg 1/0"
out=$(osd_client raw WRITE --port "$(osd_port 1)" --inode $I --offset 0 --len 4096 --seed 2)
echo "a write through osd 1 after the move: $out"
echo "$out" | grep -q '^status=0 ' && fail "osd 1 acknowledged a write its member refused"
v1=$(ver 1)
echo "osd 1's own copy: version $v0 -> $v1"
[ -n "$v1" ] && [ "$v1" != "$v0" ] || fail "osd 1's store did not take the refused write: the test proves nothing"
[ $(( $(date +%s) - t0 )) -lt 8 ] || fail "too slow: osd 1 may have heard of the move (the test proves nothing)"
osd_client write --inode $I --offset 0 --len 4096 --seed 3 || fail "the write again, through osd 3"
osd_client read --inode $I --offset 0 --len 4096 --seed 3 || fail "reading it back through osd 3"
WAIT_SECS=30 wait_for grep -q "no longer primary of pg 1/0" "$TESTDIR/osd1.log" || fail "osd 1 did not drop pg 1/0"

# The PG comes back to osd 1 (with osd 2).
n=$(actives)
set_pgs 1 1 "1" "1,2"
WAIT_SECS=40 wait_for sh -c "[ \$(grep -c 'pg 1/0 active' '$TESTDIR/osd1.log') -gt $n ]" ||
  fail "osd 1 did not activate pg 1/0 again"
osd_client read --inode $I --offset 0 --len 4096 --seed 3 ||
  fail "an acknowledged write is lost: osd 1 serves the write it was refused"
osd_client write --inode $I --offset 0 --len 4096 --seed 4 || fail "a write through osd 1 again"
osd_client read --inode $I --offset 0 --len 4096 --seed 4 || fail "reading it back through osd 1"
[ "$(ver 1)" = "$(ver 2)" ] || fail "osd 1 and osd 2 hold versions $(ver 1) / $(ver 2)"
osd_finish
echo "test-osd-left-set: ok"
