#!/usr/bin/env bash
# Replication and recovery with real processes: 3 OSDs, pg_size 3,
# pg_minsize 2. A write stream (8 in flight, SYNC every 64 writes; it holds
# after a quarter until the OSD is dead, so the kill lands mid-stream
# however fast the machine) runs while a secondary is killed with -9, then
# (after it came back and the PGs were clean again) while the primary is
# killed with -9 and the map moves the primary, as the monitor would. Every write acknowledged before a
# successful SYNC must read back; the OSDs that come back are recovered and
# every PG becomes clean.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
make_pool 1 3 2 4
set_pgs 1 4 "1" "1,2,3"
for n in 1 2 3; do create_osd $n; start_osd $n; done
osd_client wait-clean --pool 1 --timeout 20 || fail "PGs not clean at start"

A=$(( (1 << 48) | 1 ))
B=$(( (1 << 48) | 2 ))
COUNT=${STREAM_COUNT:-3000}

# wait_writes LOG N: until the log has N acknowledged writes
wait_writes () {
  local i
  for i in $(seq 300); do
    [ "$(grep -c '^w ' "$1" 2>/dev/null || echo 0)" -ge "$2" ] && return 0
    sleep 0.1
  done
  fail "the stream did not reach $2 writes"
}

# 1. kill -9 a secondary in the middle of the stream.
osd_client stream --inode $A --sectors 8192 --count $COUNT --sync-every 64 --log "$TESTDIR/a.log" --timeout 30 \
  --hold-at $((COUNT / 4)) --release-file "$TESTDIR/a.go" > "$TESTDIR/a.out" 2>&1 &
spid=$!
wait_writes "$TESTDIR/a.log" $((COUNT / 4))
[ "$(grep -c '^w ' "$TESTDIR/a.log")" = $((COUNT / 4)) ] || { cat "$TESTDIR/a.out"; fail "stream A did not hold"; }
kill_osd 3 -9
touch "$TESTDIR/a.go"
echo "killed osd 3 after $(grep -c '^w ' "$TESTDIR/a.log") writes"
wait $spid || { cat "$TESTDIR/a.out"; fail "stream A failed with a secondary down"; }
cat "$TESTDIR/a.out"
osd_client verify --inode $A --log "$TESTDIR/a.log" || fail "stream A: synced writes lost (secondary killed)"

start_osd 3
osd_client wait-clean --pool 1 --timeout 40 || fail "PGs not clean after osd 3 came back"
grep -q "recovered: every object on every member" "$TESTDIR/osd1.log" || fail "osd 1 logged no recovery"

# 2. kill -9 the primary in the middle of the stream; the map moves it.
osd_client stream --inode $B --sectors 8192 --count $COUNT --sync-every 64 --log "$TESTDIR/b.log" --timeout 30 \
  --hold-at $((COUNT / 4)) --release-file "$TESTDIR/b.go" > "$TESTDIR/b.out" 2>&1 &
spid=$!
wait_writes "$TESTDIR/b.log" $((COUNT / 4))
[ "$(grep -c '^w ' "$TESTDIR/b.log")" = $((COUNT / 4)) ] || { cat "$TESTDIR/b.out"; fail "stream B did not hold"; }
kill_osd 1 -9
touch "$TESTDIR/b.go"
echo "killed osd 1 after $(grep -c '^w ' "$TESTDIR/b.log") writes"
set_pgs 1 4 "2 3" "1,2,3"
wait $spid || { cat "$TESTDIR/b.out"; fail "stream B failed across the primary's death"; }
cat "$TESTDIR/b.out"
osd_client verify --inode $B --log "$TESTDIR/b.log" || fail "stream B: synced writes lost (primary killed)"
osd_client verify --inode $A --log "$TESTDIR/a.log" || fail "stream A: synced writes lost after the primary moved"

# 3. the old primary comes back as a secondary and is brought up to date.
start_osd 1
osd_client wait-clean --pool 1 --timeout 40 || fail "PGs not clean after osd 1 came back"
# Now only osd 1 and one other: everything must still be there.
kill_osd 2 -9
set_pgs 1 4 "1 3" "1,2,3"
osd_client verify --inode $A --log "$TESTDIR/a.log" || fail "stream A: not on the recovered osd 1"
osd_client verify --inode $B --log "$TESTDIR/b.log" || fail "stream B: not on the recovered osd 1"
osd_finish
echo "test-osd-failover: ok"
