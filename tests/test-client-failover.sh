#!/usr/bin/env bash
# kill -9 an OSD in the middle of a tromcho dd: the dd completes (the client
# retries on the PG's primary once it is back, or on the new primary), and
# the image then holds exactly what was copied.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/metrics-functions.sh"
requires tromcho tromcho-osd curl python3 sha256sum
start_kv
if [ "${FAILOVER_MODE:-}" = gcm ]; then
  # Keys (the OSDs have a certificate, the client trusts osd_ca) and mode
  # gcm: the client seals the encrypted image's ciphertext in place, so a
  # write resent after the OSD's death or replayed from the unsynced log
  # must be sent from its plain bytes again (test-client-failover-gcm.sh).
  tromcho make-certs --dir "$TESTDIR/pki" >/dev/null || fail "make-certs"
  P=$TESTDIR/pki
  EXTRA_CONF=", \"proto_checksums\": \"gcm\", \"force_proto_checksums\": \"gcm\", \"osd_ca\": \"$P/osd_ca.crt\",
    \"osd_cert\": \"$P/osd_ca.crt\", \"osd_pkey\": \"$P/osd_ca.key\""
fi
OP_TIMEOUT=50 write_conf
make_pool 1 8 2 2
M1=$(free_port) M2=$(free_port)
OSD_OPTS="--metrics_port $M1" start_osd 1
OSD_OPTS="--metrics_port $M2" start_osd 2
# forwarded N: the SEC_WRITEs osd N sent with the client's sealed bytes as
# they came (msgr.h, "Own keys")
forwarded () {
  local port; port=$([ "$1" = 1 ] && echo "$M1" || echo "$M2")
  curl -sf "http://127.0.0.1:$port/metrics" > "$TESTDIR/m$1.txt" || fail "GET /metrics of osd $1"
  parse_metrics "$TESTDIR/m$1.txt" > "$TESTDIR/m$1.json" || fail "osd $1's metrics do not parse"
  metric_val "$TESTDIR/m$1.json" tromcho_osd_sec_writes_forwarded_total
}
set_pgs 1 8 "1 2"
tromcho create img -s 256M --enc_key auto >/dev/null || fail "create"
head -c $((192 << 20)) /dev/urandom > "$TESTDIR/src"

# 1. The primary of half the PGs dies and comes back (pg_minsize 2: its PGs
#    wait for it).
feed_paused 96 | tromcho dd if=/dev/stdin oimg=img bs=256K iodepth=4 2>"$TESTDIR/dd.err" &
dd_pid=$!
wait_for test -e "$TESTDIR/paused" || fail "the feed did not start"
stop_osd 1 -9
echo "killed osd 1 during the dd"
touch "$TESTDIR/go"
sleep 1
start_osd 1
wait $dd_pid || { cat "$TESTDIR/dd.err"; tail -n 15 "$TESTDIR"/osd*/log; fail "dd did not complete across the OSD's death"; }
cat "$TESTDIR/dd.err"
tromcho dd iimg=img of="$TESTDIR/back" bs=1M count=192 2>/dev/null || fail "read back"
[ "$(sha256sum < "$TESTDIR/back")" = "$(sha256sum < "$TESTDIR/src")" ] || fail "the image does not hold what dd copied"
echo "dd across kill -9 and restart of an OSD: complete, checksums match"
# osd 1 restarted (its counter with it); osd 2 was the primary of half the
# PGs all along and passed the 256 KiB writes' sealed bytes on to osd 1,
# whose copies section 2 reads alone.
fw=$(forwarded 2)
if [ "${FAILOVER_MODE:-}" = gcm ]; then
  [ "$fw" -gt 0 ] || fail "osd 2 sealed every SEC_WRITE again: none passed on as the client sealed it"
else
  [ "$fw" = 0 ] || fail "osd 2 counted $fw forwarded SEC_WRITEs without gcm"
fi
echo "osd 2 passed $fw SEC_WRITEs on as the client sealed them"

# 2. An OSD dies for good; the placement moves its PGs to the survivor (as
#    the monitor does: written here) while the dd runs.
make_pool 1 8 2 1
sleep 0.5
feed_paused 96 | tromcho dd if=/dev/stdin oimg=img bs=256K iodepth=4 seek=64 2>"$TESTDIR/dd.err" &
dd_pid=$!
wait_for test -e "$TESTDIR/paused" || fail "the feed did not start"
stop_osd 2 -9
echo "killed osd 2 during the dd"
set_pgs 1 8 "1" 1
touch "$TESTDIR/go"
wait $dd_pid || { cat "$TESTDIR/dd.err"; fail "dd did not complete after the PGs moved"; }
tromcho dd iimg=img of="$TESTDIR/back" bs=16M skip=1 count=12 2>/dev/null || fail "read back"
[ "$(sha256sum < "$TESTDIR/back")" = "$(head -c $((192 << 20)) "$TESTDIR/src" | sha256sum)" ] ||
  fail "after the move, the image does not hold what dd copied"
echo "dd across the loss of an OSD and a new placement: complete, checksums match"
echo "test-client-failover: ok"
