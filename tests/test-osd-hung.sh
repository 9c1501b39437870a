#!/usr/bin/env bash
# A hung OSD (SIGSTOP: not dead, not answering, its TCP connections open)
# under fio writing and verifying through NBD on ./appliance up (3 OSDs,
# pg_size 3, pg_minsize 2): its /osd/state lease runs out
# (etcd_keepalive_timeout, 10 s), the monitor takes it out of the PGs, client
# I/O moves on to the other two (the NBD client sees latency, never an
# error, and no write waits for the stopped OSD); after SIGCONT the OSD finds its lease lost, registers again,
# rejoins and the PGs become clean. Prints the detection time and fio's
# longest write latency.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires nbdinfo fio python3 pgrep
[ "$top_srcdir" = "$top_builddir" ] || skip out-of-tree "./appliance up needs an in-tree build"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
DIR=$TESTDIR/app
PORT=$(free_port)
LOG=$TESTDIR/up.log
URI="nbd://127.0.0.1:$PORT/demo"
"$top_srcdir/appliance" up --dir "$DIR" --port "$PORT" >"$LOG" 2>&1 &
UP_PID=$!
cleanup_fn "stop_pid $UP_PID"
WAIT_SECS=120 wait_for grep -q "tromcho is up" "$LOG" || { cat "$LOG"; fail "appliance up did not come up"; }
status () { TROMCHO_CONFIG=$DIR/admin.conf "$top_builddir/cli/tromcho" status --json; }
field () { status | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
osds_down_is () { [ "$(field osds_down)" = "$1" ]; }
all_clean () { status | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if s["pgs"] and s["pgs_clean"] == s["pgs"] else 1)'; }
osd_pid () { pgrep -f "tromcho-osd .*--osd_num $1 --osd_data $DIR/" | head -1; }
WAIT_SECS=60 wait_for all_clean || fail "the PGs are not clean at the start: $(status)"

# About 48 s of capped random writes, each block checksummed, then a full read and verify.
fio --name=hung --ioengine=nbd --uri="$URI" --rw=randwrite --bs=64k --iodepth=8 --rate=2m \
    --size=96M --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 \
    --output-format=json --output="$TESTDIR/fio.json" >/dev/null 2>"$TESTDIR/fio.err" &
FIO=$!
cleanup_fn "kill -CONT $(osd_pid 2) 2>/dev/null || true; kill $FIO 2>/dev/null || true"
sleep 3
kill -0 $FIO 2>/dev/null || { cat "$TESTDIR/fio.err"; fail "fio ended before the OSD was stopped"; }
P2=$(osd_pid 2)
[ -n "$P2" ] || fail "no OSD 2 process"
kill -STOP "$P2"
t0=$(date +%s)
WAIT_SECS=45 wait_for osds_down_is 1 || fail "the stopped OSD 2 is still up after 45 s: $(status)"
echo "a stopped OSD is down after $(( $(date +%s) - t0 )) s (lease TTL etcd_keepalive_timeout = 10 s)"
# It stays stopped 15 s more: the writes must move on meanwhile, not wait for it.
sleep 15
stopped=$(( $(date +%s) - t0 ))
kill -CONT "$P2"
WAIT_SECS=45 wait_for osds_down_is 0 || fail "OSD 2 did not come back after SIGCONT: $(status)"
echo "OSD 2 rejoined $(( $(date +%s) - t0 )) s after it was stopped"
[ "$(osd_pid 2)" = "$P2" ] || fail "OSD 2 was restarted rather than continued"
wait $FIO || { cat "$TESTDIR/fio.err"; fail "fio saw an I/O or verify error"; }
python3 - "$TESTDIR/fio.json" "$stopped" <<'PY' || fail "fio's figures"
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
longest = j["write"]["clat_ns"]["max"] / 1e9
print("fio: %d writes, %d errors, longest write %.1f s (OSD 2 stopped %s s)" % (j["write"]["total_ios"], j["error"], longest, sys.argv[2]))
if j["error"]:
    sys.exit("fio reports errors")
if longest > int(sys.argv[2]) - 5:
    sys.exit("writes waited for the stopped OSD instead of moving on")
PY
WAIT_SECS=90 wait_for all_clean || fail "the PGs did not become clean after OSD 2 rejoined: $(status)"
echo "test-osd-hung: ok"
