#!/usr/bin/env bash
# ./appliance up supervises its daemons: an OSD killed with -9 while fio
# writes and verifies through NBD is restarted with a log line and
# `tromcho status`, and the NBD client sees no error; killed again at once,
# it comes back after a longer backoff; two OSDs killed together both come
# back; SIGTERM still stops everything.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires nbdinfo nbdcopy fio curl python3 pgrep
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

osd_pid () { pgrep -f "tromcho-osd .*--osd_num $1 --osd_data $DIR/" | head -1; }
osd_running () { [ -n "$(osd_pid "$1")" ]; }
# restarted N: OSD 2's exit was logged N times
restarted () { [ "$(grep -c "osd2 (pid [0-9]*) exited" "$LOG")" = "$1" ]; }

# fio writes 96 MiB at random with a checksum in every block, then reads it
# all back and verifies; any I/O error or bad block fails it. The write rate
# is capped (about 6 s of writing) so the kill lands in the middle of it.
fio --name=verify --ioengine=nbd --uri="$URI" --rw=randwrite --bs=64k --iodepth=8 --rate=16m \
    --size=96M --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 \
    --output="$TESTDIR/fio.out" >/dev/null 2>"$TESTDIR/fio.err" &
FIO=$!
cleanup_fn "kill $FIO 2>/dev/null || true"
sleep 2
kill -0 $FIO 2>/dev/null || { cat "$TESTDIR/fio.out" "$TESTDIR/fio.err"; fail "fio ended before the OSD was killed"; }
OLD=$(osd_pid 2)
[ -n "$OLD" ] || fail "no OSD 2 process"
kill -9 "$OLD"
WAIT_SECS=30 wait_for grep -q "osd2 restarted" "$LOG" || { cat "$LOG"; fail "OSD 2 was not restarted"; }
grep -q "osd2 (pid $OLD) exited after [0-9]*s, killed by signal 9 (KILL); restart #1 in 1s" "$LOG" ||
  { cat "$LOG"; fail "no log line for the exit of OSD 2"; }
# (the supervisor logs the restart between its fork and the exec of the OSD)
osd2_new () { NEW=$(osd_pid 2); [ -n "$NEW" ] && [ "$NEW" != "$OLD" ]; }
WAIT_SECS=10 wait_for osd2_new || fail "OSD 2 is not running again"
NEW=$(osd_pid 2)
# tromcho status printed after the restart
# (a function, so each try reads the log again: a <(...) is read once)
status_after_restart () { sed -n '/osd2 restarted/,$p' "$LOG" | tail -n +2 | grep -qi "osd"; }
WAIT_SECS=15 wait_for status_after_restart ||
  { cat "$LOG"; fail "tromcho status was not printed after the restart"; }

# Killed again soon after its start (well within the 10 s that make a
# start good), it backs off longer; fio goes on meanwhile.
kill -9 "$NEW"
WAIT_SECS=30 wait_for restarted 2 || { cat "$LOG"; fail "second exit not logged"; }
grep -q "osd2 (pid $NEW) exited.*restart #2 in 2s" "$LOG" || { cat "$LOG"; fail "no backoff on the second restart"; }
WAIT_SECS=30 wait_for osd_running 2 || fail "OSD 2 not restarted the second time"
T_BACK=$SECONDS

wait $FIO || { cat "$TESTDIR/fio.out" "$TESTDIR/fio.err"; fail "fio saw an error while OSD 2 was killed twice"; }
grep -q "err= 0" "$TESTDIR/fio.out" || { cat "$TESTDIR/fio.out"; fail "fio reports errors"; }


# Two OSDs killed together: the second dies while the supervisor waits out
# the first one's backoff (or prints the status after it), so the shell
# reaps it then, and `wait -n` used to forget it: never restarted.
# By then OSD 2 has run over 10 s: a good start, so despite its two quick
# deaths its next restart waits 1 s, not 4 (a gateway killed every 15-30 s
# used to come back 16-30 s later, past the OSDs' leases).
while [ $((SECONDS - T_BACK)) -lt 11 ]; do sleep 1; done
P1=$(osd_pid 1) P2=$(osd_pid 2)
[ -n "$P1" ] && [ -n "$P2" ] || fail "OSDs 1 and 2 are not both running"
kill -9 "$P1"
sleep 0.3
kill -9 "$P2"
exited () { grep -q "osd$1 (pid $2) exited.*killed by signal 9 (KILL)" "$LOG"; }
WAIT_SECS=40 wait_for exited 1 "$P1" || { cat "$LOG"; fail "the exit of OSD 1 was not logged"; }
WAIT_SECS=40 wait_for exited 2 "$P2" || { cat "$LOG"; fail "the exit of OSD 2, killed during OSD 1's backoff, was not seen"; }
grep -q "osd2 (pid $P2) exited.*restart #3 in 1s" "$LOG" || { cat "$LOG"; fail "OSD 2 ran over 10 s, yet backed off longer than 1 s"; }
back () { local p; p=$(osd_pid "$1"); [ -n "$p" ] && [ "$p" != "$2" ]; }
WAIT_SECS=40 wait_for back 1 "$P1" || { cat "$LOG"; fail "OSD 1 not restarted"; }
WAIT_SECS=40 wait_for back 2 "$P2" || { cat "$LOG"; fail "OSD 2 not restarted after dying during OSD 1's backoff"; }

# The cluster is whole again: every image reads back, and the NBD export is up.
nbdinfo --size "$URI" >/dev/null || fail "nbdkit is not serving after the restarts"

# SIGTERM stops everything, the restarted OSD too.
kill -TERM "$UP_PID"
wait "$UP_PID" 2>/dev/null || true
! nbdinfo --size "$URI" 2>/dev/null || fail "nbdkit still serving after SIGTERM"
! pgrep -f "osd_data $DIR/" >/dev/null || fail "OSDs still running after SIGTERM"
echo "test-appliance-restart: ok"
