#!/usr/bin/env bash
# test-primary-balance.sh in the secure setup (perms-functions.sh: the KV
# over HTTPS, use_perms, the embedded monitor acting as a monitor). The
# seed's table lets a monitor read /pgstats/, not /pg/state/: each primary
# OSD writes its PGs' reports under /pgstats/ too, only for PGs it leads
# and with its own lease, and from those the monitor evens out the
# primaries once OSD 3, up after the pool was placed, is filled. An
# encrypted image written before reads back after.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/perms-functions.sh"
requires tromcho tromcho-osd curl python3 cmp
start_secure_gateway

for c in osd admin; do
  python3 - "$P/$c.conf" "$TESTDIR/$c.conf" "$KV_URL" <<'PY' || fail "config $c"
import json, sys
c = json.load(open(sys.argv[1]))
c.update({"etcd_address": [sys.argv[3]], "use_perms": True, "proto_checksums": "gcm", "log_level": "info",
          "etcd_quick_timeout": 3000})
json.dump(c, open(sys.argv[2], "w"))
PY
done
as () { local id=$1; shift; tromcho --config "$TESTDIR/$id.conf" "$@"; }
start () {
  tromcho-osd --config "$TESTDIR/osd.conf" --osd_num "$1" --osd_data "$TESTDIR/osd$1/data" >>"$TESTDIR/osd$1/log" 2>&1 &
  echo $! > "$TESTDIR/osd$1.pid"
  cleanup_fn "stop_pid $!"
}
for n in 1 2 3; do
  mkdir -p "$TESTDIR/osd$n"
  as admin osd-create --data "$TESTDIR/osd$n/data" --osd_num $n --size 256M >/dev/null || fail "osd-create $n"
done
start 1
start 2
as admin pool-create p1 --pg-size 3 --pg-minsize 2 --pg-count 12 --failure-domain osd >/dev/null || fail "pool-create"

# led: "OSD:count ..." of the PGs each OSD leads, from the admin's pool map
led () {
  curl -s $KV_CURL_OPTS "$KV_URL/v3/kv/range" -d "{\"key\": \"$(printf /tromcho/pg/config | base64 -w0)\"}" |
    python3 -c '
import base64, collections, json, sys
r = json.load(sys.stdin)
items = json.loads(base64.b64decode(r["kvs"][0]["value"]))["items"].get("1", {}) if r.get("kvs") else {}
c = collections.Counter(v["primary"] for v in items.values())
print(" ".join("%d:%d" % (o, c.get(o, 0)) for o in (1, 2, 3)), "pgs:%d" % len(items), "inactive:%d" % c.get(0, 0))'
}
active () { led | grep -q "pgs:12 inactive:0"; }
WAIT_SECS=60 wait_for active || fail "the pool was not placed on OSDs 1 and 2: $(led)"
echo "two OSDs up: $(led)"
led | grep -q " 3:0 " || fail "OSD 3 leads PGs before it started: $(led)"

head -c 8M /dev/urandom > "$TESTDIR/data"
as admin create img -s 8M --pool p1 --enc_key auto >/dev/null || fail "create img"
as admin dd if="$TESTDIR/data" oimg=img bs=256K >/dev/null 2>&1 || fail "dd into img"

start 3
end=$((SECONDS + 90))
balanced () {
  led | python3 -c '
import sys
f = sys.stdin.read().split()
n = [int(x.split(":")[1]) for x in f[:3]]
sys.exit(0 if min(n) >= 3 and max(n) - min(n) <= 1 else 1)'
}
until balanced; do
  [ $SECONDS -lt $end ] || { grep -iE "pgstats|refus|denied" "$GW_LOG" | tail -5; fail "the primaries were not evened out within 90 s: $(led)"; }
  sleep 1
done
echo "after OSD 3 joined and the PGs were clean: $(led)"
grep -q "primaries moved to even out" "$GW_LOG" || fail "the monitor did not log the primaries it moved"
# The OSDs' /pgstats writes went through the filter (none refused).
! grep -E "refused|denied" "$GW_LOG" | grep -q pgstats || fail "the filter refused an OSD's /pgstats: $(grep pgstats "$GW_LOG" | tail -3)"
as admin dd iimg=img of="$TESTDIR/back" bs=256K >/dev/null 2>&1 || fail "dd out of img"
cmp "$TESTDIR/data" "$TESTDIR/back" || fail "img reads back other data after its primaries moved"
for n in 1 2 3; do stop_pid "$(cat "$TESTDIR/osd$n.pid")"; done
if grep -lE "AddressSanitizer|LeakSanitizer|runtime error:" "$TESTDIR"/osd*/log "$GW_LOG"; then fail "sanitizer report in a log"; fi
echo "test-primary-balance-perms: ok"
