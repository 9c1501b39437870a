#!/usr/bin/env bash
# Setup (b) of the seed, "Mon as an etcd proxy": tromcho-gateway with
# etcd_proxy serves the etcd v3 API with use_perms and keeps the data in a
# real etcd, which accepts only the gateway's own etcd client certificate.
#  (1) one etcd member (TLS, --client-cert-auth): the issue's attacks go
#      through the proxy and are refused (a user reading another's enc_key,
#      a user promoting herself to admin, an unauthenticated deleterange, a
#      txn mixing allowed and forbidden keys, someone else's lease, a watch
#      of keys one may not see); a user certificate presented to etcd
#      itself is refused by etcd; rights follow a change of /config/user at
#      once, and a right revoked while writes are being decided is never
#      used (proxy-race.py); the embedded monitor places PGs through the
#      proxy and three OSDs serve an image written and read back.
#  (2) a three-member etcd cluster behind the proxy: the member the proxy
#      uses is killed with kill -9 under a put and watch load; the load goes
#      on without an error and every acknowledged put is in etcd and was
#      seen by the watch. A watcher that falls far behind gets every event
#      (proxy-slow-watch.py). A lease's owner survives a restart of the
#      gateway.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/perms-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-gateway tromcho-osd etcd openssl curl python3

E=$TESTDIR/etcd-pki
make_etcd_proxy_pki "$E" || fail "making etcd's certificates"
b64 () { printf '%s' "$1" | base64 -w0; }
# values WHO KEY END: every value WHO reads in [KEY, END) through the proxy, decoded.
values () {
  curl_as "$1" -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"$(b64 "$2")\", \"range_end\": \"$(b64 "$3")\"}" |
    python3 -c 'import sys, json, base64
r = json.load(sys.stdin)
if "header" not in r:
    print("ERROR", r)   # never an empty answer that a check for "nothing" would take
    sys.exit(1)
for x in r.get("kvs", []): print(base64.b64decode(x["key"]).decode(), base64.b64decode(x.get("value", "")).decode())'
}
mod_rev () {
  curl_as "$1" -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"$(b64 "$2")\"}" |
    python3 -c 'import sys, json; r = json.load(sys.stdin); print(r["kvs"][0]["mod_revision"] if r.get("kvs") else "none")'
}

# --- (1) one etcd member behind the proxy ---
start_etcd_members e 1 "$E"
ETCD1=$(cat "$TESTDIR/e1/url")
# etcd itself: the gateway's certificate gets in, a user's (client_ca) and
# the gateway's API certificate do not, nor no certificate at all.
tromcho make-certs --dir "$TESTDIR/pki" >/dev/null || fail "make-certs"
tromcho make-certs user alice --dir "$TESTDIR/pki" >/dev/null || fail "make-certs user alice"
curl -sf --cacert "$E/etcd.crt" --cert "$E/gw_etcd.crt" --key "$E/gw_etcd.key" -X POST "$ETCD1/v3/kv/range" \
  -d '{"key": "AA=="}' | grep -q revision || fail "etcd refuses the gateway's certificate"
for c in alice antietcd; do
  out=$(curl -s --cacert "$E/etcd.crt" --cert "$TESTDIR/pki/$c.crt" --key "$TESTDIR/pki/$c.key" -X POST \
        "$ETCD1/v3/kv/range" -d '{"key": "AA=="}' 2>&1) && echo "$out" | grep -q revision &&
    fail "etcd served a request with the $c certificate: $out"
done
! curl -s --cacert "$E/etcd.crt" -X POST "$ETCD1/v3/kv/range" -d '{"key": "AA=="}' | grep -q revision ||
  fail "etcd served a request without a certificate"
echo "etcd accepts only the gateway's certificate: ok"

# Options: each wrong field named; an etcd that does not answer named by URL.
P=$TESTDIR/pki
good="{\"urls\": [$(printf '"%s"' "$ETCD1")], \"cert\": \"$E/gw_etcd.crt\", \"key\": \"$E/gw_etcd.key\", \"ca\": \"$E/etcd.crt\"}"
g () { tromcho-gateway --config "$P/tromcho.conf" --use_perms true --gateway_address 127.0.0.1:0 --gateway_monitor false "$@"; }
expect_fail 'option etcd_proxy: unknown field kye' g --etcd_proxy "{\"urls\": [\"$ETCD1\"], \"kye\": \"x\"}"
expect_fail 'option etcd_proxy: field urls must be a non-empty list' g --etcd_proxy "{\"cert\": \"$E/gw_etcd.crt\"}"
expect_fail 'option etcd_proxy: field urls: element 0 \(ftp://x\) is not an http' g --etcd_proxy '{"urls": ["ftp://x"]}'
expect_fail "option etcd_proxy: field key: $TESTDIR/nokey: No such file" \
  g --etcd_proxy "{\"urls\": [\"$ETCD1\"], \"cert\": \"$E/gw_etcd.crt\", \"key\": \"$TESTDIR/nokey\", \"ca\": \"$E/etcd.crt\"}"
expect_fail 'option etcd_proxy: field key is missing' g --etcd_proxy "{\"urls\": [\"$ETCD1\"], \"cert\": \"$E/gw_etcd.crt\", \"ca\": \"$E/etcd.crt\"}"
expect_fail 'option etcd_proxy: field ca is missing' g --etcd_proxy "{\"urls\": [\"$ETCD1\"]}"
dead=https://127.0.0.1:$(free_port)
expect_fail "option etcd_proxy: no etcd answered at $dead: .*$dead" \
  g --etcd_quick_timeout 500 --etcd_slow_timeout 1000 --etcd_proxy "{\"urls\": [\"$dead\"], \"cert\": \"$E/gw_etcd.crt\", \"key\": \"$E/gw_etcd.key\", \"ca\": \"$E/etcd.crt\"}"
expect_fail "option etcd_proxy: no etcd answered at $ETCD1: .*$ETCD1" \
  g --etcd_slow_timeout 1000 --etcd_proxy "{\"urls\": [\"$ETCD1\"], \"cert\": \"$P/alice.crt\", \"key\": \"$P/alice.key\", \"ca\": \"$E/etcd.crt\"}"
expect_fail 'option gateway_data is set but etcd_proxy keeps the data in etcd' g --gateway_data "$TESTDIR/x" --etcd_proxy "$good"
expect_fail 'option etcd_proxy is set but use_antietcd is false' g --use_antietcd false --etcd_proxy "$good"
rm -rf "$P"
echo "etcd_proxy option errors name the field or the URL: ok"

GW_ETCD_PROXY=$good start_secure_gateway alice bob carol
grep -q "a filtering proxy to etcd at $ETCD1" "$GW_LOG" || fail "the gateway does not say it proxies to $ETCD1"
[ ! -e "$TESTDIR/gw/data" ] || fail "the proxy made an embedded store"
for c in osd admin alice bob carol; do
  python3 - "$P/$c.conf" "$TESTDIR/$c.conf" "$KV_URL" <<'PY' || fail "config $c"
import json, sys
c = json.load(open(sys.argv[1]))
c.update({"etcd_address": [sys.argv[3]], "use_perms": True, "log_level": "warn", "etcd_quick_timeout": 3000})
json.dump(c, open(sys.argv[2], "w"))
PY
done
as () { local id=$1; shift; tromcho --config "$TESTDIR/$id.conf" "$@"; }
kv_put /config/user/alice '{"groups": ["creators"]}' || fail "admin writes users through the proxy"
kv_put /config/user/bob '{"groups": ["others"]}'
kv_put /config/user/carol '{"groups": []}'
# The first administrator came from gateway_bootstrap_admin, written in etcd.
curl -s --cacert "$E/etcd.crt" --cert "$E/gw_etcd.crt" --key "$E/gw_etcd.key" -X POST "$ETCD1/v3/kv/range" \
  -d "{\"key\": \"$(b64 /tromcho/config/user/admin)\"}" | grep -q "$(b64 '{"type":"admin"}')" ||
  fail "gateway_bootstrap_admin did not write the admin record into etcd"

# Three OSDs and the embedded monitor, all through the proxy.
as admin pool-create p1 --pg-size 3 --pg-minsize 2 --pg-count 4 --creator-group creators --failure-domain osd >/dev/null || fail "pool-create p1"
for n in 1 2 3; do
  mkdir -p "$TESTDIR/osd$n"
  as admin osd-create --data "$TESTDIR/osd$n/data" --osd_num $n --size 256M >/dev/null || fail "osd-create $n"
  tromcho-osd --config "$TESTDIR/osd.conf" --osd_num $n --osd_data "$TESTDIR/osd$n/data" >>"$TESTDIR/osd$n/log" 2>&1 &
  echo $! > "$TESTDIR/osd$n/pid"
  cleanup_fn "stop_pid $!"
done
pool_active () { as admin pool-ls --json | python3 -c '
import json, sys
p = json.load(sys.stdin)
p = p.get("pools", p) if isinstance(p, dict) else p
assert len(p) == 1 and p[0].get("pgs_active") == p[0].get("pg_count") == 4, p'; }
WAIT_SECS=90 wait_for pool_active || { as admin pool-ls; tail "$TESTDIR"/osd*/log "$GW_LOG"; fail "PGs not active through the proxy"; }
grep -q 'monitor: wrote /tromcho/pg/config (1 pools' "$GW_LOG" || fail "the embedded monitor did not write /pg/config"

# alice's encrypted image, written and read back through three OSDs.
as alice create aimg -s 8M --pool p1 --reader_group readers --enc_key auto >/dev/null || fail "alice creates aimg"
head -c 4M /dev/urandom > "$TESTDIR/data"
as alice dd if="$TESTDIR/data" oimg=aimg bs=256K >/dev/null 2>&1 || fail "alice writes aimg"
as alice dd iimg=aimg of="$TESTDIR/back" bs=256K count=16 >/dev/null 2>&1 || fail "alice reads aimg"
cmp "$TESTDIR/data" "$TESTDIR/back" || fail "aimg read back differs from what was written"
echo "3 OSDs and the monitor through the proxy, an image written and read back: ok"

# Attack: bob reads alice's enc_key. alice sees it; bob's ranges (one key,
# the whole prefix) hold neither the record nor the key.
ikey=$(values alice /tromcho/config/inode/ /tromcho/config/inode0 | awk '/enc_key/ {print $1}')
[ -n "$ikey" ] || fail "alice cannot read her own image record (with its enc_key)"
values bob /tromcho/ /tromcho0 > "$TESTDIR/bob.range" || fail "bob's range failed"
grep -q '/tromcho/config/pools' "$TESTDIR/bob.range" || fail "bob's range lost keys he may read"
! grep -q "enc_key\|$ikey\|/index/image/aimg" "$TESTDIR/bob.range" || fail "bob read alice's image or key: $(cat "$TESTDIR/bob.range")"
[ -z "$(values bob "$ikey" "$ikey"x)" ] || fail "bob read $ikey"
echo "a user reading another's enc_key: refused (filtered out): ok"

# Attack: alice promotes herself (writes /config/user/alice).
out=$(curl_as alice -X POST "$KV_URL/v3/kv/put" -d "{\"key\": \"$(b64 /tromcho/config/user/alice)\", \"value\": \"$(b64 '{"type": "admin"}')\"}")
echo "$out" | grep -q 'permission denied: user alice may not write key /tromcho/config/user/alice' || fail "alice's self-promotion: $out"
[ "$(kv_get /config/user/alice)" = '{"groups": ["creators"]}' ] || fail "alice's record changed: $(kv_get /config/user/alice)"
echo "a user promoting herself to admin: refused: ok"

# Attack: deleterange of everything without a certificate.
# (/config/ and /index/: what the OSDs and the monitor leave alone)
stable () { { values admin /tromcho/config/ /tromcho/config0; values admin /tromcho/index/ /tromcho/index0; } | cut -d' ' -f1; }
before=$(stable)
[ "$(echo "$before" | grep -c .)" -ge 6 ] || fail "too few keys to see a deleterange: $before"
out=$(curl_as anyone -X POST "$KV_URL/v3/kv/deleterange" -d "{\"key\": \"AA==\", \"range_end\": \"AA==\"}")
echo "$out" | grep -q 'unauthenticated' || fail "unauthenticated deleterange: $out"
[ "$(stable)" = "$before" ] || fail "keys lost to the unauthenticated deleterange"
out=$(curl_as alice -X POST "$KV_URL/v3/kv/deleterange" -d "{\"key\": \"$(b64 /tromcho/)\", \"range_end\": \"$(b64 /tromcho0)\"}")
echo "$out" | grep -q 'permission denied' || fail "alice's deleterange of everything: $out"
[ "$(stable)" = "$before" ] || fail "keys lost to alice's deleterange"
echo "deleterange without a certificate, or outside one's rights: refused: ok"

# Attack: a txn with an allowed put (alice's own image record, same value)
# and a forbidden one: refused whole, nothing written.
ival=$(values alice "$ikey" "$ikey"x | cut -d' ' -f2-)
rev0=$(mod_rev alice "$ikey")
txn="{\"success\": [{\"request_put\": {\"key\": \"$(b64 "$ikey")\", \"value\": \"$(b64 "$ival")\"}},
  {\"request_put\": {\"key\": \"$(b64 /tromcho/config/user/alice)\", \"value\": \"$(b64 '{"type": "admin"}')\"}}]}"
out=$(curl_as alice -X POST "$KV_URL/v3/kv/txn" -d "$txn")
echo "$out" | grep -q 'permission denied: user alice may not write key /tromcho/config/user/alice' || fail "mixed txn: $out"
[ "$(mod_rev alice "$ikey")" = "$rev0" ] || fail "the allowed half of the refused txn ran"
[ "$(kv_get /config/user/alice)" = '{"groups": ["creators"]}' ] || fail "the forbidden half of the txn ran"
# The allowed half alone runs (the refusal was not for everything).
out=$(curl_as alice -X POST "$KV_URL/v3/kv/txn" -d "{\"success\": [{\"request_put\": {\"key\": \"$(b64 "$ikey")\", \"value\": \"$(b64 "$ival")\"}}]}")
echo "$out" | grep -q '"succeeded":true' || fail "alice's own txn: $out"
[ "$(mod_rev alice "$ikey")" != "$rev0" ] || fail "alice's allowed txn did not write"
echo "a txn mixing allowed and forbidden keys: refused whole: ok"

# Leases: only the one who granted may keep alive or revoke.
lid=$(curl_as alice -X POST "$KV_URL/v3/lease/grant" -d '{"TTL": "60"}' | python3 -c 'import sys, json; print(json.load(sys.stdin)["ID"])')
[ -n "$lid" ] || fail "alice's lease grant"
for op in keepalive revoke timetolive; do
  out=$(curl_as bob -X POST "$KV_URL/v3/lease/$op" -d "{\"ID\": \"$lid\"}")
  echo "$out" | grep -q "permission denied: user bob may not .* lease $lid" || fail "bob's $op of alice's lease: $out"
done
curl_as alice -X POST "$KV_URL/v3/lease/keepalive" -d "{\"ID\": \"$lid\"}" | grep -q '"TTL"' || fail "alice's keepalive"
curl_as bob -X POST "$KV_URL/v3/lease/leases" -d '{}' | grep -q "$lid" && fail "bob lists alice's lease"
curl_as alice -X POST "$KV_URL/v3/lease/leases" -d '{}' | grep -q "$lid" || fail "alice does not list her lease"
curl_as alice -X POST "$KV_URL/v3/lease/revoke" -d "{\"ID\": \"$lid\"}" | grep -q header || fail "alice's revoke"
# The owner records are the gateway's: nobody reads or writes them through the filter.
out=$(curl_as admin -X POST "$KV_URL/v3/kv/put" -d "{\"key\": \"$(b64 /tromcho/gateway/lease/1)\", \"value\": \"$(b64 user:admin)\"}")
echo "$out" | grep -q 'permission denied' || fail "admin forged a lease owner record: $out"
echo "someone else's lease: refused: ok"

# A watch never shows keys its watcher may not see: bob and alice watch
# /config/ while alice changes her image and admin changes the pools.
watch_as () {
  curl_as "$1" -N --max-time 30 -X POST "$KV_URL/v3/watch" \
    -d "{\"create_request\": {\"key\": \"$(b64 /tromcho/config/)\", \"range_end\": \"$(b64 /tromcho/config0)\", \"prev_kv\": true}}" \
    > "$TESTDIR/watch.$1" 2>/dev/null &
  echo $! > "$TESTDIR/watch.$1.pid"
  cleanup_fn "stop_pid $!"
}
watch_as alice
watch_as bob
wait_for grep -q created "$TESTDIR/watch.alice" || fail "alice's watch was not created"
wait_for grep -q created "$TESTDIR/watch.bob" || fail "bob's watch was not created"
as alice modify aimg --resize 16M >/dev/null || fail "alice resizes aimg"
kv_put /config/pools "$(kv_get /config/pools)" || fail "admin rewrites /config/pools"
wait_for grep -q "$(b64 /tromcho/config/pools)" "$TESTDIR/watch.bob" || fail "bob's watch missed /config/pools"
wait_for grep -q "$(b64 "$ikey")" "$TESTDIR/watch.alice" || fail "alice's watch missed her image's change"
! grep -q "$(b64 "$ikey")" "$TESTDIR/watch.bob" || fail "bob's watch showed alice's image record"
stop_pid "$(cat "$TESTDIR/watch.alice.pid")"; stop_pid "$(cat "$TESTDIR/watch.bob.pid")"
echo "a watch of keys one may not see: filtered: ok"

# Rights follow a change at once: carol reads aimg as soon as she is in its
# reader_group, and no more as soon as she is out of it.
[ -z "$(values carol "$ikey" "$ikey"x)" ] || fail "carol reads aimg before she is a reader"
kv_put /config/user/carol '{"groups": ["readers"]}'
[ -n "$(values carol "$ikey" "$ikey"x)" ] || fail "carol, now a reader, cannot read aimg"
kv_put /config/user/carol '{"groups": []}'
[ -z "$(values carol "$ikey" "$ikey"x)" ] || fail "carol still reads aimg after leaving its reader_group"
echo "rights follow /config/user at once: ok"

# No revoked right slips between the check and the write: admin gives
# aimg to carol and back while alice keeps writing its index entry; every
# put the proxy acknowledged ran at a revision where alice owned aimg.
python3 "$top_srcdir/tests/proxy-race.py" "$KV_URL" "$P/antietcd.crt" "$P" alice carol "$ikey" \
  /tromcho/index/image/aimg 300 || fail "a write ran without its right"
echo "a right revoked during the decision is never used: ok"

# A user certificate presented to etcd directly is refused (again, with
# the cluster running).
out=$(curl -s --cacert "$E/etcd.crt" --cert "$P/alice.crt" --key "$P/alice.key" -X POST "$ETCD1/v3/kv/range" \
      -d "{\"key\": \"$(b64 "$ikey")\"}" 2>&1) && echo "$out" | grep -q revision && fail "etcd served alice directly: $out"
for n in 1 2 3; do stop_pid "$(cat "$TESTDIR/osd$n/pid")"; done
gwpid=$(cat "$TESTDIR/gw/pid")
kill "$gwpid"
wait "$gwpid" || { st=$?; tail -60 "$GW_LOG"; fail "the proxy did not stop cleanly on SIGTERM (status $st)"; }
kv_stop e1
echo "(1) one etcd member behind the proxy: ok"

# --- (2) three etcd members; the one in use killed under load ---
start_etcd_members f 3 "$E"
mkdir -p "$TESTDIR/gw2"
port=$(free_port)
KV_URL=https://127.0.0.1:$port
start_gw2 () {
  tromcho-gateway --config "$P/tromcho.conf" --use_perms true --gateway_address "127.0.0.1:$port" \
    --gateway_monitor true --gateway_bootstrap_admin admin --etcd_slow_timeout 10000 --log_level info \
    --etcd_proxy "{\"urls\": $ETCD_URLS, \"cert\": \"$E/gw_etcd.crt\", \"key\": \"$E/gw_etcd.key\", \"ca\": \"$E/etcd.crt\"}" \
    >>"$TESTDIR/gw2/log" 2>&1 &
  GW2=$!
  cleanup_fn "stop_pid $GW2"
  # shellcheck disable=SC2086
  WAIT_SECS=30 wait_for curl -sf $KV_CURL_OPTS "$KV_URL/health" || { cat "$TESTDIR/gw2/log"; fail "the gateway over 3 members did not start"; }
}
start_gw2
F1=$(cat "$TESTDIR/f1/url")
grep -q "in use: $F1" "$TESTDIR/gw2/log" || fail "the gateway does not use the first member ($F1): $(cat "$TESTDIR/gw2/log")"
L=/tromcho/config/load/
curl_as admin -N --max-time 120 -X POST "$KV_URL/v3/watch" \
  -d "{\"create_request\": {\"key\": \"$(b64 $L)\", \"range_end\": \"$(b64 /tromcho/config/load0)\"}}" > "$TESTDIR/load.watch" &
WPID=$!
cleanup_fn "stop_pid $WPID"
wait_for grep -q created "$TESTDIR/load.watch" || fail "the load's watch was not created"
python3 "$top_srcdir/tests/proxy-load.py" "$KV_URL" "$P/antietcd.crt" "$P/admin.crt" "$P/admin.key" "$L" \
  "$TESTDIR/acked" "$TESTDIR/stop" 2>"$TESTDIR/load.err" &
LPID=$!
cleanup_fn "touch $TESTDIR/stop; stop_pid $LPID"
acked_at_least () { [ -f "$TESTDIR/acked" ] && [ "$(wc -l < "$TESTDIR/acked")" -ge "$1" ]; }
WAIT_SECS=30 wait_for acked_at_least 100 || fail "the load does not run: $(cat "$TESTDIR/load.err")"
kv_stop f1 -9
at_kill=$(wc -l < "$TESTDIR/acked")
WAIT_SECS=60 wait_for acked_at_least $((at_kill + 200)) ||
  { tail "$TESTDIR/gw2/log"; fail "the load stopped after kill -9 of $F1: $(tail -3 "$TESTDIR/load.err")"; }
touch "$TESTDIR/stop"
wait $LPID || fail "puts failed while $F1 was killed: $(cat "$TESTDIR/load.err")"
acked=$(wc -l < "$TESTDIR/acked")
echo "$acked puts acknowledged, $((acked - at_kill)) after kill -9 of $F1, none failed"
# Every acknowledged put is in etcd (read through the proxy) and was seen by the watch.
sleep 1
values admin $L /tromcho/config/load0 > "$TESTDIR/load.kv" || fail "reading the load back"
python3 - "$TESTDIR/acked" "$TESTDIR/load.kv" "$TESTDIR/load.watch" "$L" <<'PY' || fail "acknowledged puts lost"
import base64, json, sys
acked = [int(x) for x in open(sys.argv[1])]
kv = dict(line.split(" ", 1) for line in open(sys.argv[2]).read().splitlines())
prefix = sys.argv[4]
lost = [i for i in acked if kv.get(prefix + str(i)) != "v%d" % i]
assert not lost, "acknowledged but not in etcd: %s" % lost[:20]
seen = set()
for line in open(sys.argv[3]):
    r = json.loads(line).get("result", {})
    for e in r.get("events", []):
        seen.add(base64.b64decode(e["kv"]["key"]).decode())
unseen = [i for i in acked if prefix + str(i) not in seen]
assert not unseen, "acknowledged but not seen by the watch: %s" % unseen[:20]
PY
kill -0 $WPID 2>/dev/null || fail "the watch through the proxy ended when $F1 was killed"
# A watcher that falls behind: its events beyond what the proxy queues for
# it are read again from etcd once it catches up, none lost or repeated.
python3 "$top_srcdir/tests/proxy-slow-watch.py" "$KV_URL" "$P/antietcd.crt" "$P/admin.crt" "$P/admin.key" \
  /tromcho/config/big/ 400 || { tail "$TESTDIR/gw2/log"; fail "a slow watcher lost events"; }
grep -q 'watch of user admin caught up: resuming from revision' "$TESTDIR/gw2/log" ||
  fail "the slow watcher never went over the proxy's queue (the test did not test it)"
echo "(2) kill -9 of the etcd member in use under load: nothing lost: ok"

# A lease's owner outlives the gateway (it is recorded in etcd): after a
# restart, the OSD identity still cannot keep the administrator's lease
# alive or revoke it; the administrator can.
lid=$(curl_as admin -X POST "$KV_URL/v3/lease/grant" -d '{"TTL": "60"}' | python3 -c 'import sys, json; print(json.load(sys.stdin)["ID"])')
[ -n "$lid" ] || fail "admin's lease grant"
kill "$GW2"
wait "$GW2" || { st=$?; tail -60 "$TESTDIR/gw2/log"; fail "the proxy over 3 members did not stop cleanly on SIGTERM (status $st)"; }
start_gw2
for op in keepalive revoke; do
  out=$(curl_as osd -X POST "$KV_URL/v3/lease/$op" -d "{\"ID\": \"$lid\"}")
  echo "$out" | grep -q "permission denied: osd .* may not .* lease $lid" || fail "after a restart, the OSD's $op of admin's lease: $out"
done
curl_as admin -X POST "$KV_URL/v3/lease/keepalive" -d "{\"ID\": \"$lid\"}" | grep -q '"TTL":"60"' ||
  fail "after a restart, admin cannot keep his lease alive"
kill "$GW2"
wait "$GW2" || { st=$?; tail -60 "$TESTDIR/gw2/log"; fail "the restarted proxy did not stop cleanly on SIGTERM (status $st)"; }
echo "lease owners survive a restart of the gateway: ok"
echo "test-gateway-proxy: ok"
