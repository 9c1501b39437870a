#!/usr/bin/env bash
# The monitor against a real KV: two monitors, one active, the other takes
# over within a lease TTL when it dies; fake OSDs on three hosts; pools made
# with the CLI get a valid /pg/config; an OSD whose lease expires changes
# only the PGs that had it; /stats counts; pool-ls and pool-rm.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
requires curl python3 tromcho
MON=$top_builddir/tests/monitor-run
OSD=$top_builddir/tests/fake-osd
[ -x "$MON" ] && [ -x "$OSD" ] || skip not-built "monitor-run/fake-osd not built"
start_kv kv
P=/tromcho
TTL=2
echo "{}" > "$TESTDIR/empty.conf"
export TROMCHO_CONFIG=$TESTDIR/empty.conf
opts="--etcd_address $KV_URL"

start_mon () {
  "$MON" $opts --etcd_mon_ttl $TTL --log_level debug >>"$TESTDIR/mon$1.log" 2>&1 &
  eval "MON$1=$!"
  cleanup_fn "stop_pid $!"
}
master_pid () { kv_get $P/mon/master | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null; }
has_master () { [ -n "$(master_pid)" ]; }

start_mon 1
start_mon 2
wait_for has_master || fail "no monitor became master"
m=$(master_pid)
[ "$m" = "$MON1" ] || [ "$m" = "$MON2" ] || fail "master pid $m is neither monitor ($MON1, $MON2)"
sleep 1
[ "$(master_pid)" = "$m" ] || fail "mastership moved without a reason"
kill -0 "$MON1" && kill -0 "$MON2" || fail "a monitor exited"
echo "master: $m"

# Six fake OSDs, two on each of three hosts.
declare -A OSDPID
for i in 1 2 3 4 5 6; do
  "$OSD" $opts --etcd_keepalive_timeout 2 --id $i --host host$(( (i + 1) / 2 )) >>"$TESTDIR/osd$i.log" 2>&1 &
  OSDPID[$i]=$!
  cleanup_fn "stop_pid $!"
done
osd_count () { curl -sf -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"$(printf $P/osd/state/ | base64 -w0)\", \"range_end\": \"$(printf $P/osd/state0 | base64 -w0)\", \"count_only\": true}" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))'; }
osds_registered () { [ "$(osd_count)" = 6 ]; }
WAIT_SECS=10 wait_for osds_registered \
  || fail "fake OSDs did not register"

# Pools: validation, creation, duplicates.
expect_fail "pg_minsize 4 is not in 1..pg_size" tromcho $opts pool-create bad --pg-size 3 --pg-minsize 4 --pg-count 8
expect_fail "pg_count 0 is not in" tromcho $opts pool-create bad --pg-size 3 --pg-count 0
expect_fail "block_size 3000 is not a power of two" tromcho $opts pool-create bad --pg-size 3 --pg-count 8 --block-size 3000
expect_fail "neither host nor osd" tromcho $opts pool-create bad --pg-size 3 --pg-count 8 --failure-domain rack
expect_fail "pg-count is required" tromcho $opts pool-create bad --pg-size 3
expect_fail "'b/d' *: only letters" tromcho $opts pool-create b/d --pg-size 3 --pg-count 8
tromcho $opts pool-create rep3 --pg-size 3 --pg-minsize 2 --pg-count 32 --creator-group devs | grep -q "created with id 1" \
  || fail "pool-create rep3"
expect_fail "already exists" tromcho $opts pool-create rep3 --pg-size 2 --pg-count 8
expect_fail "block_size 1048576 is not a power of two from 4k to 256k" \
  tromcho $opts pool-create bad --pg-size 2 --pg-count 16 --block-size 1M
tromcho $opts pool-create two --pg-size 2 --pg-count 16 --block-size 128k --failure-domain osd | grep -q "id 2" \
  || fail "pool-create two"

# The placement checker: valid sets for every PG of every pool.
cat > "$TESTDIR/check.py" <<'PY'
import json, sys
pools = json.loads(sys.argv[1]); pg = json.loads(sys.argv[2]); hosts = json.loads(sys.argv[3])
items = pg["items"]
assert sorted(items) == sorted(pools), (sorted(items), sorted(pools))
for pid, p in pools.items():
    pgs = items[pid]
    assert sorted(map(int, pgs)) == list(range(p["pg_count"])), "pool %s PG numbers" % pid
    for n, e in pgs.items():
        s = e["osd_set"]
        assert len(s) == p["pg_size"] and 0 not in s, (pid, n, s)
        assert len(set(s)) == len(s), (pid, n, s)
        if p.get("failure_domain", "host") == "host":
            assert len({hosts[str(o)] for o in s}) == len(s), ("two replicas on a host", pid, n, s)
        assert all(str(o) in hosts for o in s), ("down OSD in set", pid, n, s)
        assert e["primary"] in s, (pid, n, e)
PY
hosts_of () { python3 -c "import json; print(json.dumps({str(i): 'host%d' % ((i + 1) // 2) for i in [$1]}))"; }
pg_ok () { python3 "$TESTDIR/check.py" "$(kv_get $P/config/pools)" "$(kv_get $P/pg/config)" "$1"; }
WAIT_SECS=10 wait_for pg_ok "$(hosts_of 1,2,3,4,5,6)" || { pg_ok "$(hosts_of 1,2,3,4,5,6)"; fail "/pg/config is not a valid placement"; }
echo "placement valid"

tromcho $opts pool-ls | tee "$TESTDIR/ls.txt"
grep -qE "^1 +rep3 +3 +2 +32 +128k +host +32 +32 +0 +active" "$TESTDIR/ls.txt" || fail "pool-ls rep3 line"
grep -qE "^2 +two +2 +1 +16 +128k +osd +16 +16 +0 +active" "$TESTDIR/ls.txt" || fail "pool-ls two line"
tromcho $opts pool-ls --json | python3 -c '
import json, sys
p = json.load(sys.stdin)
assert [x["name"] for x in p] == ["rep3", "two"], p
assert p[0]["pgs_active"] == 32 and p[0]["state"] == "active" and p[0]["creator_group"] == "devs", p[0]
assert p[1]["block_size"] == 131072 and p[1]["failure_domain"] == "osd", p[1]
' || fail "pool-ls --json"

stats_are () { kv_get $P/stats | python3 -c "
import json, sys
s = json.load(sys.stdin)
assert (s['osd_up'], s['osd_down'], s['pg_count'], s['pools'], s['pgs_active']) == ($1), s"; }
WAIT_SECS=10 wait_for stats_are "6, 0, 48, 2, 48" || { stats_are "6, 0, 48, 2, 48"; fail "/stats"; }

# Kill the active monitor: the other takes over within a TTL (+ etcd's
# expiry tick and our poll), and the placement stays as it is.
before=$(kv_get $P/pg/config)
old=$(master_pid)
[ "$old" = "$MON1" ] && other=$MON2 || other=$MON1
kill -9 "$old"
t0=$(date +%s.%N)
master_is () { [ "$(master_pid)" = "$1" ]; }
WAIT_SECS=10 wait_for master_is "$other" \
  || fail "the standby monitor did not take over"
# The takeover time is the new active monitor's own log line (UTC) minus
# the kill, so a slow poll on a loaded machine does not count.
[ "$other" = "$MON1" ] && olog=$TESTDIR/mon1.log || olog=$TESTDIR/mon2.log
took=$(python3 - "$olog" "$t0" <<'PY'
import re, sys, time
lines = [l for l in open(sys.argv[1]) if "now the active monitor" in l]
h, m, s = re.match(r"(\d\d):(\d\d):(\d\d\.\d+)", lines[-1]).groups()
t0 = float(sys.argv[2])
g = time.gmtime(t0)
kill = g.tm_hour * 3600 + g.tm_min * 60 + g.tm_sec + (t0 % 1)
print("%.1f" % ((int(h) * 3600 + int(m) * 60 + float(s) - kill) % 86400))
PY
) || fail "no 'now the active monitor' line in $olog"
echo "takeover after ${took}s (ttl ${TTL}s)"
python3 -c "import sys; sys.exit(0 if $took <= $TTL + 1.5 else 1)" || fail "takeover took ${took}s, more than the TTL ($TTL s) + 1.5 s"
sleep 1
[ "$(kv_get $P/pg/config)" = "$before" ] || fail "the new master changed a valid placement"

# OSD 3 dies (kill -9: its lease expires): only the PGs that had it change.
kill -9 "${OSDPID[3]}"
osd_gone () { [ -z "$(kv_get $P/osd/state/$1)" ]; }
WAIT_SECS=15 wait_for osd_gone 3 \
  || fail "OSD 3's lease did not expire"
changed () { [ "$(kv_get $P/pg/config)" != "$before" ]; }
WAIT_SECS=10 wait_for changed || fail "/pg/config did not change after OSD 3 went down"
WAIT_SECS=10 wait_for pg_ok "$(hosts_of 1,2,4,5,6)" || { pg_ok "$(hosts_of 1,2,4,5,6)"; fail "placement after OSD 3 left"; }
after=$(kv_get $P/pg/config)
python3 - "$before" "$after" <<'PY' || fail "OSD 3 leaving changed more than its PGs"
import json, sys
a = json.loads(sys.argv[1])["items"]; b = json.loads(sys.argv[2])["items"]
had = changed = 0
for pid in a:
    for n in a[pid]:
        x, y = a[pid][n]["osd_set"], b[pid][n]["osd_set"]
        if 3 in x:
            had += 1
            assert [o for o in x if o != 3] == [o for i, o in enumerate(y) if x[i] != 3], ("other slots moved", pid, n, x, y)
            assert 3 not in y
        else:
            assert x == y, ("PG without OSD 3 changed", pid, n, x, y)
            assert a[pid][n]["primary"] == b[pid][n]["primary"], ("primary moved", pid, n)
        changed += x != y
assert changed == had, (changed, had)
print("OSD 3 left: %d PGs had it, %d changed" % (had, changed))
PY
WAIT_SECS=10 wait_for stats_are "5, 1, 48, 2, 48" || { stats_are "5, 1, 48, 2, 48"; fail "/stats after OSD 3 left"; }

# The KV restarts: the monitor's watches resume and it still reacts.
kv_restart kv
before=$(kv_get $P/pg/config)
kill -9 "${OSDPID[5]}"
WAIT_SECS=15 wait_for osd_gone 5 || fail "OSD 5's lease did not expire"
WAIT_SECS=10 wait_for changed || fail "/pg/config did not change after the KV restart and OSD 5 leaving"
WAIT_SECS=10 wait_for pg_ok "$(hosts_of 1,2,4,6)" || { pg_ok "$(hosts_of 1,2,4,6)"; fail "placement after OSD 5 left"; }
WAIT_SECS=10 wait_for stats_are "4, 2, 48, 2, 48" || { stats_are "4, 2, 48, 2, 48"; fail "/stats after OSD 5 left"; }

# A broken /config/pools does not wipe the placement.
pools=$(kv_get $P/config/pools)
before=$(kv_get $P/pg/config)
kv_put $P/config/pools '{"1": {"name": "rep3", "pg_size"'
sleep 1.5
[ "$(kv_get $P/pg/config)" = "$before" ] || fail "a broken /config/pools changed /pg/config"
grep -q "placement left as it is" "$TESTDIR"/mon*.log || fail "the monitor did not log the broken /config/pools"
kv_put $P/config/pools "$pools"

# pool-rm: the pool leaves /config/pools and /pg/config.
tromcho $opts pool-rm two | grep -q "removed" || fail "pool-rm"
expect_fail "no pool named 'two'" tromcho $opts pool-rm two
gone () { kv_get $P/pg/config | python3 -c 'import json,sys; sys.exit(0 if list(json.load(sys.stdin)["items"]) == ["1"] else 1)'; }
WAIT_SECS=10 wait_for gone || fail "pool two is still in /pg/config"
[ "$(tromcho $opts pool-ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ] || fail "pool-ls after pool-rm"

# An OSD serves only pools of its store's object size: a 256k pool goes to
# the one 256k OSD alone, and a pool no OSD fits is not placed (pool-ls
# says so, the monitor's log names the reason).
"$OSD" $opts --etcd_keepalive_timeout 2 --id 7 --host host4 --block_size 262144 >>"$TESTDIR/osd7.log" 2>&1 &
OSDPID[7]=$!
cleanup_fn "stop_pid $!"
tromcho $opts pool-create big --pg-size 1 --pg-count 4 --block-size 256k --failure-domain osd | grep -q "created" \
  || fail "pool-create big"
tromcho $opts pool-create small --pg-size 1 --pg-count 4 --block-size 64k --failure-domain osd | grep -q "created" \
  || fail "pool-create small"
big_on_7 () { kv_get $P/pg/config | python3 -c '
import json, sys
pools = {p["name"]: i for i, p in json.loads(sys.argv[1]).items()}
items = json.load(sys.stdin)["items"]
big = items[pools["big"]]
assert sorted(map(int, big)) == [0, 1, 2, 3] and all(e["osd_set"] == [7] for e in big.values()), big
assert not items.get(pools["small"]) or all(e["primary"] == 0 for e in items[pools["small"]].values()), items.get(pools["small"])
assert all(7 not in e["osd_set"] for e in items["1"].values()), items["1"]
' "$(kv_get $P/config/pools)"; }
WAIT_SECS=10 wait_for big_on_7 || { big_on_7; fail "the 256k pool is not on the 256k OSD alone"; }
tromcho $opts pool-ls | grep -qE "^[0-9]+ +small .* +0 +0 +4 +not placed" || { tromcho $opts pool-ls; fail "pool-ls small"; }
grep -qE "pool small \([0-9]+\): block_size 65536; ([0-9]+) of the \1 OSDs up have another" "$TESTDIR"/mon*.log \
  || fail "the monitor did not say why pool small is not placed"
tromcho $opts pool-rm big >/dev/null && tromcho $opts pool-rm small >/dev/null || fail "pool-rm big, small"
stop_pid "${OSDPID[7]}"

# A clean stop resigns: the last monitor revokes its lease.
stop_pid "$other"
no_master () { [ -z "$(kv_get $P/mon/master)" ]; }
wait_for no_master \
  || fail "a stopped monitor did not resign"
# Stop the rest cleanly; no sanitizer report in any log.
for i in 1 2 4 6; do stop_pid "${OSDPID[$i]}"; done
if grep -lE "AddressSanitizer|LeakSanitizer|runtime error:" "$TESTDIR"/*.log; then fail "sanitizer report in a log"; fi
echo "test-monitor: ok"
