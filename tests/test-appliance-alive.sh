#!/usr/bin/env bash
# The appliance supervisor's liveness check (sv_alive in ./appliance): a
# daemon counts as running only while its PID is a live process AND the
# one the supervisor started (its start time matches). A daemon that died
# and was reaped while the supervisor ran something else leaves a number
# the kernel may give to another process; seen as alive, that daemon would
# never be restarted. The check forks nothing: a command substitution in
# it made bash reap a daemon that died meanwhile and forget it before the
# supervisor's `wait -n` (seen in CI: "wait: PID: no such job", the OSD
# never restarted). The functions are taken from ./appliance itself.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires sed strace awk
fns=$TESTDIR/sv-functions.sh
for f in sv_spawn sv_stat sv_alive; do
  sed -n "/^$f () {/,/^}/p" "$top_srcdir/appliance"
done >"$fns"
grep -q '^sv_alive ()' "$fns" && grep -q '^sv_stat ()' "$fns" || fail "sv_alive / sv_stat not found in ./appliance"
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

# The parser copes with a command name holding spaces and ')'.
mkdir -p "$TESTDIR/bin"
cp "$(command -v sleep)" "$TESTDIR/bin/a) b"
"$TESTDIR/bin/a) b" 60 &
odd=$!
cleanup_fn "kill $odd 2>/dev/null || true"
want=$(awk '{ print $22 }' "/proc/$$/stat")   # this shell's, no odd name
sv_stat $$ && [ "$SV_START" = "$want" ] && [ "$SV_STATE" = R ] ||
  fail "sv_stat of this shell: state '$SV_STATE' start '$SV_START', want R and $want"
sv_stat "$odd" && [[ $SV_START =~ ^[0-9]+$ ]] && [ "$SV_START" -ge "$want" ] && [[ $SV_STATE =~ ^[RSD]$ ]] ||
  fail "sv_stat of a process named 'a) b': state '$SV_STATE' start '$SV_START'"

# No fork in the check: strace counts the clone/fork calls of a shell
# while it runs sv_alive 20 times on a live daemon (it stops itself until
# strace is attached).
cat >"$TESTDIR/nofork.sh" <<'SH'
. "$1"
declare -A SV_CMD=() SV_LOG=() SV_PID=() SV_SINCE=() SV_BORN=()
SV_CMD[d]="sleep 60"
SV_LOG[d]=/dev/null
sv_spawn d
kill -STOP $$
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do sv_alive d || exit 3; done
kill "${SV_PID[d]}"
SH
bash "$TESTDIR/nofork.sh" "$fns" &
sh_pid=$!
stopped () { grep -q '^State:.*T' "/proc/$sh_pid/status"; }
wait_for stopped || fail "the checking shell did not stop for strace"
strace -f -qq -e trace=clone,clone3,fork,vfork -o "$TESTDIR/forks" -p "$sh_pid" &
st=$!
traced () { grep -q '^TracerPid:[[:space:]]*[1-9]' "/proc/$sh_pid/status"; }
wait_for traced || fail "strace did not attach to the checking shell"
kill -CONT "$sh_pid"
wait "$sh_pid" || fail "sv_alive said a live daemon is gone (status $?)"
wait "$st" 2>/dev/null || true
n=$(grep -c -E 'clone|fork' "$TESTDIR/forks" || true)
[ "$n" = 0 ] || fail "sv_alive forks ($n processes for 20 checks): $(head -3 "$TESTDIR/forks")"

# Killed: not alive, and its exit status is still there for `wait`.
kill -9 "$pid"
for _ in $(seq 50); do sv_alive d || break; sleep 0.1; done
! sv_alive d || fail "a daemon killed 5 s ago (pid $pid) is seen as alive"
rc=0
wait "$pid" 2>/dev/null || rc=$?
[ "$rc" = 137 ] || fail "wait $pid after the check: status $rc, not 137 (killed by 9): its status was lost"
! sv_stat "$pid" || fail "a dead process still has a /proc entry: state $SV_STATE"
echo "ok"
