#!/usr/bin/env bash
# /metrics of the front ends (issue 15): nbdkit tromcho metrics_port=N and
# tromcho-fuse --metrics_port N serve Prometheus text; scraped while data
# is copied in, it parses, and after the copy the requests, bytes and
# latency counts of each operation rose by what was done (bytes written =
# what was copied), the handle gauge counts the open connection or file,
# and a refused write is counted as an error.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
. "$top_srcdir/tests/metrics-functions.sh"
requires tromcho tromcho-osd tromcho-fuse fusermount3 nbdkit nbdcopy curl python3
start_kv
write_conf
make_pool 1 4 2 1
start_osd 1
start_osd 2
set_pgs 1 4 "1 2"
tromcho create img -s 64M --enc_key auto >/dev/null || fail "create img"
tromcho create fimg -s 64M >/dev/null || fail "create fimg"
head -c 32M /dev/urandom > "$TESTDIR/data"

# scrape PORT NAME: GET /metrics into $TESTDIR/NAME, parsed into NAME.json
scrape () {
  curl -sf "http://127.0.0.1:$1/metrics" > "$TESTDIR/$2" || fail "GET /metrics on port $1"
  parse_metrics "$TESTDIR/$2" > "$TESTDIR/$2.json" || { head -20 "$TESTDIR/$2"; fail "$2 does not parse"; }
}
# rose NAME0 NAME1 SERIES MIN: SERIES rose by at least MIN from NAME0 to NAME1
rose () {
  local a b
  a=$(metric_val "$TESTDIR/$1.json" "$3"); b=$(metric_val "$TESTDIR/$2.json" "$3")
  echo "  $3: $a -> $b"
  [ $((b - a)) -ge "$4" ] || fail "$3 rose by $((b - a)), expected at least $4"
}

# ---- nbdkit ----
if ldd "$PLUGIN" 2>/dev/null | grep -q libasan; then
  echo "(nbdkit part left out: nbdkit cannot load a sanitizer-built plugin)"
else
  NPORT=$(free_port)
  start_nbdkit nbd -- image=img metrics_port="$NPORT"
  # (the plugin logs the endpoint where nbdkit's daemon logs go: syslog)
  WAIT_SECS=10 wait_for curl -sf -o /dev/null "http://127.0.0.1:$NPORT/metrics" ||
    { cat "$TESTDIR/nbd.log"; fail "nbdkit tromcho serves no /metrics on port $NPORT"; }
  scrape "$NPORT" n0
  nbdcopy --flush --requests=8 "$TESTDIR/data" "$URI" &
  cpid=$!
  sleep 0.3
  scrape "$NPORT" n1   # under load: parses
  wait $cpid || fail "nbdcopy into img"
  nbdcopy "$URI" - | head -c 8M > /dev/null
  scrape "$NPORT" n2
  echo "nbdkit tromcho /metrics:"
  rose n0 n2 'tromcho_nbd_requests_total{op="write"}' 1
  rose n0 n2 'tromcho_nbd_bytes_total{op="write"}' $((32 << 20))
  rose n0 n2 'tromcho_nbd_request_latency_seconds_count{op="write"}' 1
  rose n0 n2 'tromcho_nbd_requests_total{op="read"}' 1
  rose n0 n2 'tromcho_nbd_bytes_total{op="read"}' $((8 << 20))
  rose n0 n2 'tromcho_nbd_requests_total{op="flush"}' 1
  rose n0 n2 'tromcho_nbd_handles_opened_total' 2
  [ "$(metric_val "$TESTDIR/n2.json" 'tromcho_nbd_bytes_total{op="write"}')" -eq $((32 << 20)) ] ||
    fail "write bytes are not the 32 MiB copied"
  [ "$(metric_val "$TESTDIR/n2.json" 'tromcho_nbd_errors_total{op="write"}')" -eq 0 ] || fail "errors counted without errors"
  grep -q '^# HELP tromcho_nbd_request_latency_seconds ' "$TESTDIR/n2" || fail "no HELP for the latency histogram"
  grep -q '^tromcho_nbd_request_latency_seconds_bucket{op="write",le="+Inf"}' "$TESTDIR/n2" || fail "no +Inf bucket"
  stop_nbdkit nbd
fi

# ---- tromcho-fuse ----
[ -c /dev/fuse ] || skip no-dev-fuse "no /dev/fuse"
FPORT=$(free_port)
MNT=$TESTDIR/mnt
mkdir -p "$MNT"
tromcho-fuse --metrics_port "$FPORT" --log_level info "$MNT" -f >"$TESTDIR/fuse.log" 2>&1 &
fuse_pid=$!
cleanup_fn "fusermount3 -u '$MNT' 2>/dev/null; stop_pid $fuse_pid"
wait_for test -f "$MNT/fimg" || { cat "$TESTDIR/fuse.log"; fail "mount did not show the images"; }
WAIT_SECS=10 wait_for grep -q "metrics on http://127.0.0.1:$FPORT/metrics" "$TESTDIR/fuse.log" ||
  { cat "$TESTDIR/fuse.log"; fail "tromcho-fuse did not log its metrics endpoint"; }
scrape "$FPORT" f0
dd if="$TESTDIR/data" of="$MNT/fimg" bs=1M oflag=direct conv=notrunc,fsync 2>/dev/null &
dpid=$!
sleep 0.3
scrape "$FPORT" f1
[ "$(metric_val "$TESTDIR/f1.json" tromcho_fuse_handles)" -le 1 ] || fail "more than one open file counted"
wait $dpid || fail "dd into the FUSE file"
dd if="$MNT/fimg" of=/dev/null bs=1M count=4 iflag=direct 2>/dev/null || fail "dd from the FUSE file"
fallocate -p -o 0 -l 1M "$MNT/fimg" || fail "punch hole"
scrape "$FPORT" f2
echo "tromcho-fuse /metrics:"
rose f0 f2 'tromcho_fuse_requests_total{op="write"}' 32
rose f0 f2 'tromcho_fuse_bytes_total{op="write"}' $((32 << 20))
rose f0 f2 'tromcho_fuse_request_latency_seconds_count{op="write"}' 32
rose f0 f2 'tromcho_fuse_bytes_total{op="read"}' $((4 << 20))
rose f0 f2 'tromcho_fuse_requests_total{op="flush"}' 1
rose f0 f2 'tromcho_fuse_bytes_total{op="trim"}' $((1 << 20))
rose f0 f2 'tromcho_fuse_handles_opened_total' 2
[ "$(metric_val "$TESTDIR/f2.json" tromcho_fuse_handles)" -eq 0 ] || fail "the handle gauge does not return to 0"
# A failed request is an error: a write past the end of the image.
dd if=/dev/zero of="$MNT/fimg" bs=4096 count=1 seek=$((64 << 8)) oflag=direct conv=notrunc 2>/dev/null &&
  fail "a write past the end succeeded"
scrape "$FPORT" f3
rose f2 f3 'tromcho_fuse_errors_total{op="write"}' 1
fusermount3 -u "$MNT" || fail "unmount"
wait $fuse_pid || { cat "$TESTDIR/fuse.log"; fail "tromcho-fuse did not exit cleanly"; }
grep -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$TESTDIR/fuse.log" && fail "a sanitizer report in the FUSE log"
echo "test-frontend-metrics: ok"
