#!/usr/bin/env bash
# What crosses the wire, captured by a relay (tests/msgr-relay.py):
#  - in gcm mode no byte sequence of the payload appears: requests and
#    echoes carry a 64-byte marker, and neither the marker nor any 16-byte
#    window of it is in either direction's capture; in payload mode (the
#    control) the marker is there, so the capture and the search work;
#  - a stream cut in the middle of a frame fails the request and the
#    server logs the truncation;
#  - a stalled handshake is closed after handshake_timeout; a handshake cut
#    short is logged; the server keeps serving.
. "${top_srcdir:-..}/tests/functions.sh"
set -e
ECHO=${top_builddir}/tests/msgr-echo
RELAY=${top_srcdir}/tests/msgr-relay.py
[ -x "$ECHO" ] || skip not-built "msgr-echo not built"
requires python3

P=$TESTDIR/pki
tromcho make-certs --dir "$P" >/dev/null
SRV="--osd_cert $P/osd_ca.crt --osd_pkey $P/osd_ca.key --client_ca $P/client_ca.crt"
CLI="--cert $P/admin.crt --pkey $P/admin.key --osd_ca $P/osd_ca.crt"
MARKER='TROMCHO-MARKER-0123456789abcdef-the-payload-must-not-leak-in-gcm'

pids=()
cleanup_fn 'for p in "${pids[@]}"; do stop_pid $p; done'
start () {   # start NAME CMD...: waits for "PORT n", sets PORT and LASTPID
  local name=$1; shift
  rm -f "$TESTDIR/$name.out"
  "$@" >"$TESTDIR/$name.out" 2>"$TESTDIR/$name.err" &
  LASTPID=$!
  pids+=($LASTPID)
  WAIT_SECS=10 wait_for grep -q '^PORT ' "$TESTDIR/$name.out"
  PORT=$(awk '/^PORT/ {print $2}' "$TESTDIR/$name.out")
}

# count_marker FILE: how many 16-byte windows of the marker occur in FILE
count_marker () {
  python3 - "$1" "$MARKER" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
m = sys.argv[2].encode()
assert len(m) == 64
print(sum(1 for i in range(0, 64 - 16 + 1) if m[i:i + 16] in data))
PY
}

capture () {   # capture MODE: echo 20 x 4 KiB marker payloads through the relay
  local mode=$1
  start srv_$mode "$ECHO" server $SRV --proto_checksums $mode
  local sport=$PORT
  start relay_$mode python3 "$RELAY" $sport "$TESTDIR/cap_$mode"
  local out
  out=$("$ECHO" client --port $PORT $CLI --proto_checksums $mode --marker --size 4096 --count 20 --inflight 4 2>&1) ||
    fail "$mode client: $out"
  grep -q "^OK ops=20 mode=$mode" <<<"$out" || fail "$mode client: $out"
}

capture gcm
capture payload
for d in c2s s2c; do
  size=$(stat -c %s "$TESTDIR/cap_gcm.$d")
  [ "$size" -gt $((20 * 4096)) ] || fail "gcm capture $d has only $size bytes"
  n=$(count_marker "$TESTDIR/cap_gcm.$d")
  [ "$n" -eq 0 ] || fail "gcm: $n windows of the marker visible in the $d capture"
  n=$(count_marker "$TESTDIR/cap_payload.$d")
  [ "$n" -eq 49 ] || fail "payload (control): the marker should be visible in $d, found $n of 49 windows"
done
echo "gcm capture: no 16-byte window of the marker in $(stat -c %s "$TESTDIR/cap_gcm.c2s") + $(stat -c %s "$TESTDIR/cap_gcm.s2c") bytes"

# Sustained load across processes: 128 KiB echoes, 32 in flight (a reader
# that stopped after a full round of reads once hung here).
for mode in payload gcm; do
  start srv_load_$mode "$ECHO" server $SRV --proto_checksums $mode
  out=$(timeout 60 "$ECHO" client --port $PORT $CLI --proto_checksums $mode --size 131072 --inflight 32 \
          --count 1500 2>&1) || fail "$mode load: $out"
  grep -q "^OK ops=1500 mode=$mode" <<<"$out" || fail "$mode load: $out"
done

# Key updates across processes: every 16 records (the server decides).
start srv_rekey "$ECHO" server $SRV --proto_checksums gcm --rekey-log2 4
out=$("$ECHO" client --port $PORT $CLI --proto_checksums gcm --size 1000 --count 300 --inflight 8 2>&1) ||
  fail "rekey: $out"
rekeys=$(sed -n 's/^OK ops=300 mode=gcm rekeys=\([0-9]*\).*/\1/p' <<<"$out")
[ -n "$rekeys" ] && [ "$rekeys" -ge 70 ] || fail "expected >= 70 key updates over 1200 records, got: $out"

# A stream cut in the middle of the first frame (handshake ~560 bytes c2s).
start srv_cut "$ECHO" server $SRV --proto_checksums gcm
SPID=$LASTPID SERR=$TESTDIR/srv_cut.err
start relay_cut python3 "$RELAY" $PORT "$TESTDIR/cap_cut" --cut-c2s 1500
out=$("$ECHO" client --port $PORT $CLI --proto_checksums gcm --size 4096 --count 1 2>&1) &&
  fail "a truncated frame was answered: $out"
WAIT_SECS=5 wait_for grep -q 'closed by the peer in the middle of a frame (truncated)' "$SERR" ||
  fail "server did not log the truncation: $(cat "$SERR")"

# A stalled handshake, and one cut short.
start srv_stall "$ECHO" server $SRV --handshake_timeout 1
SPID=$LASTPID SERR=$TESTDIR/srv_stall.err
python3 - $PORT <<'PY'
import socket, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
t0 = time.time()
s.settimeout(10)
assert s.recv(100) == b"", "server sent data to a silent client"
dt = time.time() - t0
assert 0.8 < dt < 5, "closed after %.1f s, handshake_timeout is 1 s" % dt
s2 = socket.create_connection(("127.0.0.1", port))
s2.sendall(b"\x01\x03\x00\x00\x48\x00\x00\x00TRMH")   # a ClientHello that stops after 4 bytes
s2.close()
PY
grep -q 'handshake not finished after 1000 ms' "$SERR" || fail "no timeout log line: $(cat "$SERR")"
WAIT_SECS=5 wait_for grep -q 'in the middle of the handshake' "$SERR" || fail "cut handshake not logged: $(cat "$SERR")"
out=$("$ECHO" client --port $PORT $CLI --count 3 2>&1) || fail "server no longer serves: $out"
echo "wire checks passed"

# Stop the servers (they exit through their signal handler, so LeakSanitizer
# runs) and refuse any sanitizer report from any process of this test.
for p in "${pids[@]}"; do stop_pid $p; done
pids=()
if grep -lE 'Sanitizer|runtime error' "$TESTDIR"/*.err "$TESTDIR"/*.out 2>/dev/null; then
  fail "sanitizer report: $(grep -hE -A5 'Sanitizer|runtime error' "$TESTDIR"/*.err "$TESTDIR"/*.out | head -40)"
fi
