#!/usr/bin/env bash
# The whole control loop with real processes: tromcho-gateway (embedded KV
# and the monitor), `tromcho pool-create`, 4 OSDs from `tromcho osd-create`.
# The monitor places the PGs; a write stream runs while one OSD is killed
# with -9: its lease expires, the monitor moves its PGs (new primaries, a
# new member that recovery fills), the client retries on the new primaries,
# and every write acknowledged before a SYNC reads back. The OSD comes back
# and every PG becomes clean.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
TROMCHO_KV=gateway
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-gateway tromcho-osd curl python3 "$OSD_CLIENT"

# kv-functions.sh starts the gateway without its monitor unless asked.
KV_MONITOR=true
start_kv
# The gateway's monitor must use the gateway's own KV (etcd_address).
sed -i "s|\$| --etcd_address $KV_URL --etcd_mon_ttl 2|" "$TESTDIR/kv/cmd"
kv_restart kv
tromcho --etcd_address "$KV_URL" pool-create p1 --pg-size 3 --pg-minsize 2 --pg-count 8 --failure-domain osd \
  >/dev/null || fail "pool-create"
for n in 1 2 3 4; do create_osd $n; start_osd $n; done
osd_client wait-clean --pool 1 --timeout 30 || fail "the monitor's placement never became clean"
kv_get /pg/config | grep -q '"osd_set"' || fail "no /pg/config from the monitor"

I=$(( (1 << 48) | 3 ))
# The stream holds after 600 acknowledged writes until the release file
# exists, so osd 1 dies mid-stream however fast or slow the machine is.
osd_client stream --inode $I --sectors 16384 --count 3000 --sync-every 64 --log "$TESTDIR/s.log" --timeout 40 \
  --hold-at 600 --release-file "$TESTDIR/release" > "$TESTDIR/s.out" 2>&1 &
spid=$!
for i in $(seq 600); do [ "$(grep -c "^w " "$TESTDIR/s.log" 2>/dev/null || true)" -ge 600 ] 2>/dev/null && break; sleep 0.1; done
[ "$(grep -c '^w ' "$TESTDIR/s.log")" = 600 ] || { cat "$TESTDIR/s.out"; fail "the stream did not hold at 600 writes"; }
before=$(kv_get /pg/config)
kill_osd 1 -9
echo "killed osd 1 after $(grep -c '^w ' "$TESTDIR/s.log") writes"
touch "$TESTDIR/release"
wait $spid || { cat "$TESTDIR/s.out"; fail "the stream failed across the loss of osd 1"; }
cat "$TESTDIR/s.out"
# (The monitor may also even out primaries meanwhile: wait for osd 1 to
# leave /pg/config, not for any change.)
osd1_out () {
  kv_get /pg/config | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]["1"]
bad = [pg for pg, v in items.items() if 1 in v["osd_set"] or v["primary"] == 1]
sys.exit(1 if bad else 0)'
}
moved=0
for i in $(seq 300); do [ "$(kv_get /pg/config)" != "$before" ] && osd1_out && { moved=1; break; }; sleep 0.2; done
[ $moved = 1 ] || fail "osd 1 is still in /pg/config 60 s after it was killed (its lease expires in 3 s)"
osd_client verify --inode $I --log "$TESTDIR/s.log" || fail "synced writes lost when osd 1 died"
osd_client wait-clean --pool 1 --timeout 40 || fail "PGs not clean after the monitor moved them"

start_osd 1
osd_client wait-clean --pool 1 --timeout 40 || fail "PGs not clean after osd 1 came back"
osd_client verify --inode $I --log "$TESTDIR/s.log" || fail "synced writes lost after osd 1 came back"
osd_finish
echo "test-osd-cluster: ok"
