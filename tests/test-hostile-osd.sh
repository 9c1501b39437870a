#!/usr/bin/env bash
# Hostile peers against an OSD (issue 12, DESIGN.md section 5 "Limits
# against hostile peers"): oversized frames, stalled frames that fill the
# payload budget, floods of idle connections, garbage and truncated
# handshakes. After each attack the OSD is up, its RSS stays under
# baseline + 16 MiB, and a legitimate client's write and read complete.
# The attacker (tests/hostile-peer) connects from other loopback addresses
# (127.0.0.2...) so the per-address cap applies to it, not to the client.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
HOSTILE=$top_builddir/tests/hostile-peer
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT" "$HOSTILE"

OSD_OPTS="--msgr_max_conns 200 --msgr_max_conns_per_addr 16 --msgr_frame_timeout 3 --handshake_timeout 2
  --msgr_conn_budget 1M --msgr_process_budget 4M"
start_kv
make_pool 1 1 1 1
set_pgs 1 1 "1" "1"
create_osd 1
# Under AddressSanitizer, freed blocks wait in its quarantine (256 MB by
# default) instead of going back: RSS would count memory the OSD released.
# Without the quarantine RSS measures what the OSD holds, as in a plain build.
ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}quarantine_size_mb=0" start_osd 1
P=$(osd_port 1)
PID=$(cat "$TESTDIR/osd1.pid")
A=$(( (1 << 48) | 1 ))
LOG=$TESTDIR/osd1.log

rss_kb () { awk '/^VmRSS:/ {print $2}' "/proc/$PID/status"; }
# The OSD has done some I/O before the baseline (buffers, store caches).
osd_client write --inode $A --offset 0 --len 262144 --seed 1 >/dev/null || fail "first write"
osd_client read --inode $A --offset 0 --len 262144 --seed 1 >/dev/null || fail "first read"
BASE=$(rss_kb)
BOUND=$(( BASE + 16 * 1024 ))
echo "OSD RSS baseline ${BASE} kB, bound ${BOUND} kB"
seed=1

# after ATTACK: the OSD is alive, under the bound, and serves a client.
after () {
  kill -0 "$PID" 2>/dev/null || { tail -n 20 "$LOG"; fail "$1: the OSD died"; }
  local rss; rss=$(rss_kb)
  echo "$1: OSD RSS ${rss} kB (peak so far $(awk '/^VmHWM:/ {print $2}' "/proc/$PID/status") kB)"
  [ "$rss" -le "$BOUND" ] || fail "$1: OSD RSS ${rss} kB over the bound ${BOUND} kB"
  legit_io "$1"
}
legit_io () {
  seed=$((seed + 1))
  timeout 60 "$OSD_CLIENT" --etcd_address "$KV_URL" write --inode $A --offset 0 --len 262144 --seed $seed >/dev/null ||
    fail "$1: a legitimate write failed"
  timeout 60 "$OSD_CLIENT" --etcd_address "$KV_URL" read --inode $A --offset 0 --len 262144 --seed $seed >/dev/null ||
    fail "$1: a legitimate read failed"
}
# field NAME LINE
field () { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# 1. Six connections announcing 64 MiB WRITEs and sending 8 MiB of each:
# the header alone is refused (a WRITE carries at most one 128 KiB object
# here), before a byte of payload is reserved or read.
out=$("$HOSTILE" frame --port $P --from 127.0.0.2 --conns 6 --len 67108864 --send 8388608 --hold 5)
echo "oversized: $out"
[ "$(field handshaken "$out")" = 6 ] || fail "oversized: the attacker did not get in: $out"
[ "$(field closed_by_server "$out")" = 6 ] || fail "oversized: not every connection was closed: $out"
grep -q "announces 67108864 payload bytes, more than the 131072 its operation allows" "$LOG" ||
  fail "oversized: no log line naming the limit"
after oversized

# 2. Sixteen connections each announcing a legal 128 KiB WRITE, sending
# 64 KiB and stalling: together they reserve 2 MiB of the 4 MiB budget;
# the payload grows only as bytes come; each is closed after
# msgr_frame_timeout (3 s). A client writes while they stall.
"$HOSTILE" frame --port $P --from 127.0.0.3 --conns 16 --len 131072 --send 65536 --hold 15 >"$TESTDIR/stall.out" &
hp=$!
cleanup_fn "kill $hp 2>/dev/null"
sleep 1
legit_io "stalled frames (during)"
wait $hp
out=$(cat "$TESTDIR/stall.out")
echo "stalled frames: $out"
[ "$(field closed_by_server "$out")" = 16 ] || fail "stalled frames: not all closed by the frame timeout: $out"
grep -q "frame stalled: nothing received for" "$LOG" || fail "stalled frames: no log line for the timeout"
after "stalled frames"

# 3. Budget exhaustion: 40 stalled 128 KiB frames from three addresses ask
# for 5 MiB, more than the 4 MiB budget: the frames that do not fit wait
# unread (no memory), and the client's write goes through once the frame
# timeout frees the budget.
for a in 4 5 6; do
  "$HOSTILE" frame --port $P --from 127.0.0.$a --conns 14 --len 131072 --send 131000 --hold 20 >"$TESTDIR/budget$a.out" &
  echo $! >>"$TESTDIR/budget.pids"
  cleanup_fn "kill $! 2>/dev/null"
done
sleep 1
legit_io "budget exhausted (during)"
for p in $(cat "$TESTDIR/budget.pids"); do wait "$p"; done
for a in 4 5 6; do echo "budget from 127.0.0.$a: $(cat "$TESTDIR/budget$a.out")"; done
after "budget exhausted"

# 4. A flood of 300 idle connections from one address: all but
# msgr_max_conns_per_addr (16) are closed at once; the rest go after
# handshake_timeout.
"$HOSTILE" idle --port $P --from 127.0.0.7 --conns 300 --hold 10 >"$TESTDIR/idle.out" &
hp=$!
cleanup_fn "kill $hp 2>/dev/null"
sleep 1
legit_io "idle flood (during)"
wait $hp
out=$(cat "$TESTDIR/idle.out")
echo "idle flood: $out"
[ "$(field closed_by_server "$out")" = 300 ] || fail "idle flood: the OSD kept idle connections: $out"
grep -q "refused: .* connections from 127.0.0.7 already (msgr_max_conns_per_addr)" "$LOG" ||
  fail "idle flood: no log line for the per-address cap"
grep -q "handshake not finished after 2000 ms" "$LOG" || fail "idle flood: no handshake timeout"
after "idle flood"

# 5. The total cap: 15 addresses x 15 connections = 225 > msgr_max_conns 200.
for a in $(seq 10 24); do
  "$HOSTILE" idle --port $P --from 127.0.0.$a --conns 15 --hold 4 >"$TESTDIR/total$a.out" &
  echo $! >>"$TESTDIR/total.pids"
  cleanup_fn "kill $! 2>/dev/null"
done
for p in $(cat "$TESTDIR/total.pids"); do wait "$p"; done
grep -q "connections already (msgr_max_conns)" "$LOG" || fail "total cap: no log line for msgr_max_conns"
after "total cap"

# 6. Garbage instead of a ClientHello, and ClientHellos cut in half.
out=$("$HOSTILE" garbage --port $P --from 127.0.0.8 --conns 16 --hold 5)
echo "garbage: $out"
[ "$(field closed_by_server "$out")" = 16 ] || fail "garbage: connections left open: $out"
out=$("$HOSTILE" truncated --port $P --from 127.0.0.9 --conns 16 --hold 6)
echo "truncated: $out"
[ "$(field closed_by_server "$out")" = 16 ] || fail "truncated handshakes: connections left open: $out"
after "bad handshakes"

osd_finish
echo "test-hostile-osd: ok"
