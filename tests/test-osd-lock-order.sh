#!/usr/bin/env bash
# The order of the PG write locks (osd_proto.h, SEC_LOCK): a primary locks
# its PG on the members at the KV revision of the PG configuration it
# peered at. A SEC_LOCK at an older revision (a primary peering on a map
# the cluster has left, whose lock comes in after the new primary's) is
# refused with ESTALE and the holder keeps its writes (one at a revision
# the KV has not reached, with EAGAIN; of a PG not in the map, ENOENT);
# a member that
# answers a primary's SEC_WRITE with EBUSY (its lock was taken) makes the
# primary peer again and take the lock back, so writes resume by
# themselves instead of failing until the client gives up.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
make_pool 1 3 3 1   # pg_minsize 3: a write needs both members
set_pgs 1 1 "1" "1,2,3"
for n in 1 2 3; do create_osd $n; start_osd $n; done
I=$(( (1 << 48) | 5 ))
# the mod_revision of /pg/config: what the primary's SEC_LOCKs carry
rev=$(curl -sf "$KV_URL/v3/kv/range" -d "{\"key\":\"$(printf '%s' "$PREFIX/pg/config" | base64 -w0)\"}" |
  python3 -c 'import sys,json; print(json.load(sys.stdin)["kvs"][0]["mod_revision"])')
[ "$rev" -gt 1 ] || fail "no revision for /pg/config: $rev"
lock () {   # lock OSD EPOCH: a SEC_LOCK of pg 1/0 from a connection of our own
  osd_client raw SEC_LOCK --port "$(osd_port "$1")" --pool 1 --pg 0 --pg-count 1 --epoch "$2"
}
osd_client write --inode $I --offset 0 --len 131072 --seed 1 || fail "write through the primary"

# 1. An older configuration's lock is refused; the primary's writes go on.
for n in 2 3; do
  out=$(lock $n $((rev - 1)))
  echo "$out" | grep -q '^status=-116 ' || fail "SEC_LOCK on osd $n at an older revision was not refused: $out"
  grep -q "pg 1/0 stays locked: .* peered at KV revision $((rev - 1)), the lock holder at $rev" "$TESTDIR/osd$n.log" ||
    fail "osd $n did not log the refused SEC_LOCK"
done
# A lock of a PG the map does not have (the lock table stays bounded).
out=$(osd_client raw SEC_LOCK --port "$(osd_port 2)" --pool 7 --pg 3 --pg-count 8 --epoch "$rev")
echo "$out" | grep -q '^status=-2 ' || fail "SEC_LOCK of a PG that does not exist was not refused: $out"
grep -q "SEC_LOCK of pg 7/3 from .*: no such PG in the map" "$TESTDIR/osd2.log" || fail "osd 2 did not log the unknown PG"
# A lock from beyond the KV's revision would shut every primary out.
out=$(lock 2 $((rev + 1000)))
echo "$out" | grep -q '^status=-11 ' || fail "SEC_LOCK at a revision the KV has not reached was not refused: $out"
grep -q "at KV revision $((rev + 1000)), which /pg/config has not reached here" "$TESTDIR/osd2.log" ||
  fail "osd 2 did not log the SEC_LOCK from the future"
osd_client write --inode $I --offset 0 --len 131072 --seed 2 --timeout 5 ||
  fail "a refused SEC_LOCK took the primary's lock: its write failed"
osd_client read --inode $I --offset 0 --len 131072 --seed 2 || fail "read back after the refused SEC_LOCKs"

# 2. The same revision is taken (the primary's own reconnection looks like
# this): the primary's next SEC_WRITEs get EBUSY, it peers again and its
# lock is back; a write succeeds within a few tries.
for n in 2 3; do
  out=$(lock $n "$rev")
  echo "$out" | grep -q '^status=0 ' || fail "SEC_LOCK on osd $n at the current revision: $out"
done
ok=
for t in 1 2 3 4 5 6 7 8 9 10; do
  if osd_client write --inode $I --offset 0 --len 131072 --seed 3 --timeout 2 2>/dev/null; then ok=1; break; fi
  sleep 0.5
done
[ -n "$ok" ] || fail "writes did not resume after a member's lock was taken (no re-peering on EBUSY)"
grep -q "pg 1/0: osd [23] says another primary holds its lock; peering again" "$TESTDIR/osd1.log" ||
  fail "the primary did not log why it peered again"
osd_client read --inode $I --offset 0 --len 131072 --seed 3 || fail "read back after the lock came back"
for n in 2 3; do
  grep -q "SEC_WRITE from .* refused: pg 1/0 is locked by another primary" "$TESTDIR/osd$n.log" ||
    fail "osd $n never refused the primary's SEC_WRITE: the test did not take the lock"
done
osd_finish
echo "test-osd-lock-order: ok"
