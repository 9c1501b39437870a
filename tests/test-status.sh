#!/usr/bin/env bash
# What the cluster says it is doing (issue 15): the OSDs write /pg/state and
# /osd/stats; `tromcho status` (and --json, parsed here) shows HEALTH_OK with
# every PG clean, HEALTH_WARN with degraded PGs and an OSD down while one is
# killed -9 (writes go on; describe lists the objects, without their copy
# on osd 3, as degraded), and HEALTH_OK again once it returned and was recovered; the
# scheduled scrub (scrub_interval) finds a byte flipped in a replica's data
# file without being asked, repairs it and status reports it;
# an OSD's /metrics, scraped with curl while writes run, parses as
# Prometheus text and its counters rise.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
. "$top_srcdir/tests/metrics-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
make_pool 1 3 2 4
set_pgs 1 4 "1" "1,2,3"
OSD_OPTS="--osd_stats_interval 1 --scrub_interval 4"
MPORT=$(free_port)
for n in 1 2 3; do create_osd $n; done
OSD_OPTS="$OSD_OPTS --metrics_port $MPORT" start_osd 1
for n in 2 3; do start_osd $n; done
osd_client wait-clean --pool 1 --timeout 20 || fail "PGs not clean at start"

status () { tromcho --etcd_address "$KV_URL" status "$@"; }
# check PY: status --json as s, assert PY (python)
check () { status --json | python3 -c "import json,sys; s=json.load(sys.stdin); $1" 2>/dev/null; }
WAIT_SECS=30 wait_for check 'assert s["health"]["status"] == "HEALTH_OK" and s["pgs_clean"] == 4, s' ||
  { status; fail "status is not HEALTH_OK with 4 clean PGs at start"; }
status

# /metrics of osd 1
grep -q "metrics on http://127.0.0.1:$MPORT/metrics" "$TESTDIR/osd1.log" || fail "osd 1 did not log its metrics endpoint"
scrape () { curl -sf "http://127.0.0.1:$MPORT/metrics" > "$TESTDIR/$1" || fail "GET /metrics failed"; }
# parse FILE, val FILE SERIES: metrics-functions.sh on files in $TESTDIR
parse () { parse_metrics "$TESTDIR/$1"; }
val () { metric_val "$TESTDIR/$1" "$2"; }
scrape m0; parse m0 > "$TESTDIR/m0.json" || fail "metrics before the load do not parse"

I=$(( (1 << 48) | 5 ))
osd_client write --inode $I --offset 0 --len 8M --seed 21 || fail "write"
osd_client write --inode $I --offset 8M --len 32M --seed 21 &
wpid=$!
scrape m1; parse m1 > "$TESTDIR/m1.json" || fail "metrics under load do not parse"
wait $wpid || fail "write under scrape"
osd_client sync || fail "sync"
scrape m2; parse m2 > "$TESTDIR/m2.json" || fail "metrics after the load do not parse"
for k in 'tromcho_osd_ops_total{op="WRITE"}' 'tromcho_osd_write_bytes_total' 'tromcho_osd_op_latency_seconds_count{op="WRITE"}' \
         'tromcho_osd_store_sync_seconds_count'; do
  a=$(val m0.json "$k"); b=$(val m2.json "$k")
  echo "metric $k: $a -> $b"
  [ "$b" -gt "$a" ] || fail "$k did not rise under writes ($a -> $b)"
done
[ "$(val m2.json 'tromcho_osd_write_bytes_total')" -ge $((40 << 20)) ] || fail "write bytes lower than what was written"
grep -q '^# HELP tromcho_osd_op_latency_seconds ' "$TESTDIR/m2" || fail "no HELP for the latency histogram"
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/other" | grep -q 404 || fail "/other is not 404"

# An OSD killed -9: degraded, WARN, writes go on; back: recovered, OK.
kill_osd 3 -9
osd_client write --inode $I --offset 0 --len 16M --seed 22 --timeout 30 || fail "write with osd 3 down"
WAIT_SECS=30 wait_for check 'assert s["health"]["status"] == "HEALTH_WARN" and s["osds_down"] == 1 and s["pgs_degraded"] + s["pgs_recovering"] == 4, s' ||
  { status; fail "status does not show 4 degraded PGs and an OSD down"; }
status | tee "$TESTDIR/status-down"
grep -q "HEALTH_WARN" "$TESTDIR/status-down" && grep -q "1 osds down" "$TESTDIR/status-down" ||
  fail "the human status does not say why it warns"
# describe lists every object of the image as degraded: none has its copy on osd 3
tromcho --etcd_address "$KV_URL" describe --object-state degraded --json > "$TESTDIR/describe.json" ||
  fail "describe with osd 3 down"
python3 - "$TESTDIR/describe.json" "$I" <<'EOF' || { cat "$TESTDIR/describe.json"; fail "describe does not list the degraded objects"; }
import json, sys
d, inode = json.load(open(sys.argv[1])), int(sys.argv[2])
objs = [o for o in d["objects"] if o["inode"] == inode]
assert len(objs) == 320, len(objs)   # 40 MiB of 128 KiB objects, each without its copy on osd 3
assert all("degraded" in o["state"] and o["stale_osds"] == [3] for o in objs), objs[:3]
print("describe: %d degraded objects, stale on osd 3" % len(objs))
EOF
start_osd 3
seen=""
for i in $(seq 120); do
  s=$(status --json) || fail "status failed"
  echo "$s" | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["pgs_recovering"] > 0' 2>/dev/null && seen=yes
  echo "$s" | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["health"]["status"] == "HEALTH_OK" and s["pgs_clean"] == 4' 2>/dev/null && break
  sleep 0.5
done
echo "$s" | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["health"]["status"] == "HEALTH_OK", s' ||
  { status; fail "not HEALTH_OK after osd 3 returned"; }
echo "recovery seen as 'recovering' in status: ${seen:-no (it ended between two reads)}"
osd_client read --inode $I --offset 0 --len 16M --seed 22 || fail "data after recovery"

# The scheduled scrub finds a byte flipped in a secondary's copy.
python3 - "$TESTDIR/osd2.data" "$I" 131072 <<'EOF' || fail "could not find the sector to flip"
import struct, sys
path, inode, off = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
M = (1 << 64) - 1
def pat(o, n):
    out = b""
    for i in range(0, n, 8):
        x = ((inode * 0x9E3779B97F4A7C15) ^ ((o + i) * 0xC2B2AE3D27D4EB4F) ^ (22 * 0x165667B19E3779F9)) & M
        x ^= x >> 31
        x = (x * 0xD6E8FEB86659FD93) & M
        x ^= x >> 32
        out += struct.pack("<Q", x)
    return out
data = open(path, "rb").read()
pos = data.find(pat(off, 64))
if pos < 0 or pos % 4096:
    sys.exit(1)
with open(path, "r+b") as f:
    f.seek(pos + 1000)
    b = f.read(1)
    f.seek(pos + 1000)
    f.write(bytes([b[0] ^ 0x5A]))
print("flipped byte %d of %s" % (pos + 1000, path))
EOF
WAIT_SECS=60 wait_for check 'assert s["scrub"]["bad_sectors"] >= 1 and s["scrub"]["repaired_sectors"] >= 1, s' ||
  { status; tail -20 "$TESTDIR/osd1.log"; fail "the scheduled scrub did not report the flipped byte"; }
grep -q "scrub: inode .* offset 131072: 1 bad sectors, 1 repaired" "$TESTDIR/osd1.log" || fail "no scrub log line"
status | tee "$TESTDIR/status-scrub"
grep -Eq "scrub: +[1-9][0-9]* bad sectors found, [1-9]" "$TESTDIR/status-scrub" || fail "status does not show the scrub's finding"
[ -n "$(kv_get /osd/stats/1)" ] || fail "no /osd/stats/1"
kv_get /pg/state/1/0 | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["primary"] == 1 and "active" in s["state"], s' ||
  fail "/pg/state/1/0 is not osd 1's report"
scrape m3; parse m3 > "$TESTDIR/m3.json" || fail "metrics after the scrub do not parse"
[ "$(val m3.json tromcho_osd_scrub_bad_sectors_total)" -ge 1 ] && [ "$(val m3.json tromcho_osd_recovered_objects_total)" -ge 1 ] ||
  fail "scrub or recovery counters did not count"
osd_finish
echo "test-status: ok"
