#!/usr/bin/env bash
# The monitor evens out the PGs each OSD leads once a pool is calm
# (gateway/monitor.c, common/cluster/placement_primary.c). A pool of size 3
# is placed while two of its three OSDs are up: they lead every PG, and
# data is written. The third OSD comes up: the monitor adds it to the sets,
# recovery fills it, and once every PG is clean the monitor hands it a
# third of the primaries (before, it led none for good: the placement
# keeps a PG's primary). Every synced write still reads back, and a second
# look changes nothing.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
TROMCHO_KV=gateway
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-gateway tromcho-osd curl python3 "$OSD_CLIENT"

KV_MONITOR=true
start_kv
sed -i "s|\$| --etcd_address $KV_URL --etcd_mon_ttl 2 --log_level info|" "$TESTDIR/kv/cmd"
kv_restart kv
for n in 1 2 3; do create_osd $n; done
start_osd 1
start_osd 2
tromcho --etcd_address "$KV_URL" pool-create p1 --pg-size 3 --pg-minsize 2 --pg-count 12 --failure-domain osd \
  >/dev/null || fail "pool-create"

# led: "OSD:count ..." of the PGs each OSD leads in /pg/config
led () {
  kv_get /pg/config | python3 -c '
import collections, json, sys
items = json.load(sys.stdin)["items"].get("1", {})
c = collections.Counter(v["primary"] for v in items.values())
print(" ".join("%d:%d" % (o, c.get(o, 0)) for o in (1, 2, 3)), "pgs:%d" % len(items))'
}
all_active () { led | grep -q "pgs:12" && ! kv_get /pg/config | grep -q '"primary": *0'; }
WAIT_SECS=30 wait_for all_active || fail "the pool was not placed on OSDs 1 and 2: $(led)"
echo "two OSDs up: $(led)"
led | grep -q " 3:0 " || fail "OSD 3 leads PGs before it started: $(led)"

I=$(( (1 << 48) | 5 ))
osd_client stream --inode $I --sectors 4096 --count 1500 --sync-every 50 --log "$TESTDIR/s.log" --timeout 40 \
  > "$TESTDIR/s.out" 2>&1 || { cat "$TESTDIR/s.out"; fail "the stream on two OSDs failed"; }

start_osd 3
osd_client wait-clean --pool 1 --timeout 60 || fail "PGs not clean after OSD 3 joined"
# The monitor looks every 10 s: within three looks OSD 3 leads its share
# (12 PGs over 3 OSDs: 4 each), and nobody leads more than one extra.
balanced () {
  led | python3 -c '
import sys
f = sys.stdin.read().split()
n = [int(x.split(":")[1]) for x in f[:3]]
sys.exit(0 if min(n) >= 3 and max(n) - min(n) <= 1 else 1)'
}
end=$((SECONDS + 40))
until balanced; do
  [ $SECONDS -lt $end ] || fail "the primaries were not evened out within 40 s: $(led)"
  sleep 1
done
echo "after OSD 3 joined and the PGs were clean: $(led)"
grep -q "primaries moved to even out" "$TESTDIR/kv/log" || fail "the monitor did not log the primaries it moved"
osd_client wait-clean --pool 1 --timeout 40 || fail "PGs not clean after their primaries moved"
osd_client verify --inode $I --log "$TESTDIR/s.log" || fail "synced writes lost when the primaries moved"

# Calm and balanced: later looks move nothing.
before=$(kv_get /pg/config)
sleep 12
[ "$(kv_get /pg/config)" = "$before" ] || fail "/pg/config changed again with nothing going on: $(led)"
osd_finish
echo "test-primary-balance: ok"
