#!/usr/bin/env bash
# The appliance supervisor's liveness check (sv_alive in ./appliance): a
# daemon counts as running only while its PID answers AND is the process
# the supervisor started (its start time matches). A daemon that died and
# was reaped while the supervisor ran something else leaves a number the
# kernel may give to another process; seen as alive, that daemon would
# never be restarted. The functions are taken from ./appliance itself.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires sed
fns=$TESTDIR/sv-functions.sh
for f in sv_spawn sv_starttime sv_alive; do
  sed -n "/^$f () {/,/^}/p" "$top_srcdir/appliance"
done >"$fns"
grep -q '^sv_alive ()' "$fns" && grep -q '^sv_starttime ()' "$fns" || fail "sv_alive / sv_starttime not found in ./appliance"
. "$fns"
declare -A SV_CMD=() SV_LOG=() SV_PID=() SV_SINCE=() SV_BORN=()

SV_CMD[d]="sleep 60"
SV_LOG[d]=$TESTDIR/d.log
sv_spawn d
pid=${SV_PID[d]}
cleanup_fn "kill $pid 2>/dev/null || true"
[ -n "${SV_BORN[d]}" ] || fail "no start time recorded for pid $pid"
sv_alive d || fail "a running daemon (pid $pid) is not seen as alive"

# The same number, another process: pretend the daemon was born earlier
# (what a number taken over by a newer process looks like).
real=${SV_BORN[d]}
SV_BORN[d]=$((real - 1))
! sv_alive d || fail "pid $pid with another start time is seen as the daemon"
SV_BORN[d]=$real

# The starttime parser copes with a command name holding spaces and ')'.
mkdir -p "$TESTDIR/bin"
cp "$(command -v sleep)" "$TESTDIR/bin/a) b"
"$TESTDIR/bin/a) b" 60 &
odd=$!
cleanup_fn "kill $odd 2>/dev/null || true"
want=$(awk '{ print $22 }' "/proc/$$/stat")   # this shell's, no odd name
[ "$(sv_starttime $$)" = "$want" ] || fail "sv_starttime of this shell: $(sv_starttime $$), want $want"
t=$(sv_starttime "$odd")
[[ $t =~ ^[0-9]+$ ]] && [ "$t" -ge "$want" ] || fail "sv_starttime of a process named 'a) b': '$t'"

kill "$pid"
wait "$pid" 2>/dev/null || true
! sv_alive d || fail "a dead daemon (pid $pid) is seen as alive"
[ -z "$(sv_starttime "$pid")" ] || fail "a dead process has a start time"
echo "ok"
