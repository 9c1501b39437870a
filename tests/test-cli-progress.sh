#!/usr/bin/env bash
# tromcho dd, flatten and rm show progress (bytes, rate, time left) on a
# terminal (a pty from script(1)) and print nothing of it otherwise.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3 script
start_kv
write_conf
make_pool 1 4 1 1
OSD_SIZE=1G start_osd 1
set_pgs 1 4 "1"
SIZE=128M
head -c 128M /dev/urandom > "$TESTDIR/data"
tromcho create base -s $SIZE --enc_key auto >/dev/null || fail "create base"

# on_tty OUT COMMAND...: run COMMAND with stdout and stderr on a terminal.
on_tty () {
  local out=$1; shift
  script -qefc "$(printf '%q ' "$@")" /dev/null > "$out" 2>&1
}

# dd to an image: a progress line with the total, the rate and the time left.
on_tty "$TESTDIR/dd.tty" tromcho dd if="$TESTDIR/data" oimg=base bs=1M iodepth=2 || fail "dd on a tty: $(cat "$TESTDIR/dd.tty")"
grep -aqE $'\r\033\\[Kdd: [0-9.]+ [KMG]iB of 128 MiB \\([0-9]+%\\), [0-9.]+ [KMG]?i?B/s, [0-9hms]+ left' "$TESTDIR/dd.tty" ||
  { cat -v "$TESTDIR/dd.tty"; fail "dd shows no progress on a terminal"; }
grep -aq "134217728 bytes (128 MiB) copied" "$TESTDIR/dd.tty" || fail "dd's summary is missing"
# Not a terminal: the summary only.
tromcho dd iimg=base of="$TESTDIR/back" bs=1M 2> "$TESTDIR/dd.err" || fail "dd back: $(cat "$TESTDIR/dd.err")"
cmp "$TESTDIR/back" "$TESTDIR/data" || fail "dd copied other data"
! grep -aq $'\r\\|left\\|\033' "$TESTDIR/dd.err" || fail "progress printed when stderr is not a terminal: $(cat -v "$TESTDIR/dd.err")"
[ "$(wc -l < "$TESTDIR/dd.err")" = 1 ] || fail "dd printed more than its summary: $(cat "$TESTDIR/dd.err")"

# flatten: a clone copies its parent's 128 MiB in, re-encrypted.
tromcho snap-create base@s1 >/dev/null || fail "snap-create"
tromcho clone base@s1 c1 --enc_key auto >/dev/null || fail "clone c1"
tromcho clone base@s1 c2 --enc_key auto >/dev/null || fail "clone c2"
on_tty "$TESTDIR/flatten.tty" tromcho flatten c1 || fail "flatten on a tty: $(cat "$TESTDIR/flatten.tty")"
grep -aqE $'\r\033\\[Kflatten: [0-9.]+ [KMG]iB of 128 MiB \\([0-9]+%\\), .*/s, [0-9hms]+ left' "$TESTDIR/flatten.tty" ||
  { cat -v "$TESTDIR/flatten.tty"; fail "flatten shows no progress on a terminal"; }
out=$(tromcho flatten c2 2>&1) || fail "flatten c2: $out"
[ "$out" = "Image c2 flattened" ] || fail "flatten not on a terminal printed: $(echo "$out" | cat -v)"
tromcho dd iimg=c1 of="$TESTDIR/c1" bs=1M 2>/dev/null && cmp "$TESTDIR/c1" "$TESTDIR/data" || fail "c1 after flatten"

# rm: quiet without a terminal; on one, any progress line is well formed.
out=$(tromcho rm c2 2>&1) || fail "rm c2: $out"
[ "$out" = "Image c2 deleted" ] || fail "rm not on a terminal printed: $(echo "$out" | cat -v)"
on_tty "$TESTDIR/rm.tty" tromcho rm c1 || fail "rm on a tty: $(cat "$TESTDIR/rm.tty")"
grep -aq "Image c1 deleted" "$TESTDIR/rm.tty" || fail "rm c1: $(cat -v "$TESTDIR/rm.tty")"
if grep -aq $'\033' "$TESTDIR/rm.tty"; then
  grep -aqE $'\r\033\\[Krm: [0-9.]+ [KMG]?i?B of [0-9.]+ [KMG]iB \\([0-9]+%\\)' "$TESTDIR/rm.tty" || { cat -v "$TESTDIR/rm.tty"; fail "rm's progress line"; }
fi
echo "test-cli-progress: ok"
