#!/usr/bin/env bash
# The seed's etcd/Antietcd setups with real processes and use_perms, each
# brought up the way DESIGN.md and gateway/README.md describe:
#  (a) the gateway with its embedded KV and monitor (use_antietcd true);
#  (c) a separate filtering gateway (KV only) and the monitor in another
#      gateway (use_antietcd false) that reaches it with mon_etcd_client_cert;
#  (d) that filtering gateway on its own, without etcd: a restart keeps the data.
#  (b) the filtering proxy to etcd (etcd_proxy) in front of a real etcd,
#      with the monitor in the proxy (test-gateway-proxy.sh goes further).
# Options that do not apply to a setup are refused by name.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
requires tromcho tromcho-gateway curl python3 etcd openssl
FAKE_OSD=$top_builddir/tests/fake-osd
[ -x "$FAKE_OSD" ] || skip not-built "fake-osd not built"

P=$TESTDIR/pki
tromcho make-certs --dir "$P" >/dev/null || fail "make-certs"
tromcho make-certs user alice --dir "$P" >/dev/null || fail "make-certs user alice"
declare -A CERT=([admin]=admin [alice]=alice [osd]=osd_ca [mon]=mon_ca)
echo '{}' > "$TESTDIR/empty.conf"
export TROMCHO_CONFIG=$TESTDIR/empty.conf

# The settings every process of a setup shares (the seed's vitastor.conf).
base="\"use_perms\": true, \"etcd_ca\": \"$P/antietcd.crt\", \"osd_ca\": \"$P/osd_ca.crt\",
  \"client_ca\": \"$P/client_ca.crt\", \"mon_ca\": \"$P/mon_ca.crt\", \"log_level\": \"info\", \"etcd_mon_ttl\": 2,
  \"etcd_quick_timeout\": 5000, \"etcd_slow_timeout\": 30000"
# The filtering gateway's own: its TLS certificate.
kvgw="$base, \"use_antietcd\": true, \"antietcd_cert\": \"$P/antietcd.crt\", \"antietcd_key\": \"$P/antietcd.key\""
mon="\"mon_etcd_client_cert\": \"$P/mon_ca.crt\", \"mon_etcd_client_key\": \"$P/mon_ca.key\""

# kv WHO URL ENDPOINT BODY: one etcd v3 request with WHO's certificate.
kv () {
  local c=${CERT[$1]}
  curl -s --cacert "$P/antietcd.crt" --cert "$P/$c.crt" --key "$P/$c.key" -X POST "$2/v3/$3" -d "$4"
}
b64 () { printf '%s' "$1" | base64 -w0; }
put_as () { kv "$1" "$2" kv/put "{\"key\": \"$(b64 "/tromcho$3")\", \"value\": \"$(b64 "$4")\"}"; }
get_as () {
  kv "$1" "$2" kv/range "{\"key\": \"$(b64 "/tromcho$3")\"}" |
    python3 -c 'import sys, json, base64; [print(base64.b64decode(x["value"]).decode()) for x in json.load(sys.stdin).get("kvs", [])]'
}

# gw NAME CONFIG-JSON [OPTIONS...]: a gateway with a KV port, started (and
# stopped on exit) by kv-functions.sh's kv_spawn; sets URL.
gw () {
  local name=$1 conf=$TESTDIR/$1.conf port
  shift
  mkdir -p "$TESTDIR/$name"
  [ -f "$TESTDIR/$name/port" ] || free_port > "$TESTDIR/$name/port"
  port=$(cat "$TESTDIR/$name/port")
  echo "{$1}" > "$conf"
  shift
  echo "tromcho-gateway --config $conf --gateway_address 127.0.0.1:$port --gateway_data $TESTDIR/$name/data $*" > "$TESTDIR/$name/cmd"
  echo "https://127.0.0.1:$port" > "$TESTDIR/$name/url"
  echo "--cacert $P/antietcd.crt --cert $P/admin.crt --key $P/admin.key" > "$TESTDIR/$name/curlopts"
  URL=https://127.0.0.1:$port
  [ -f "$TESTDIR/$name/cleanup" ] || { cleanup_fn "kv_stop $name"; touch "$TESTDIR/$name/cleanup"; }
  kv_stop "$name"
  kv_spawn "$name"
}
# bootstrap NAME: the first run writes the user records (trusted, no
# use_perms), as an installer does before the cluster is opened.
bootstrap () {
  gw "$1" "$kvgw" --use_perms false --gateway_monitor false
  put_as admin "$URL" /config/user/admin '{"type": "admin"}' | grep -q revision || fail "bootstrap $1: admin record"
  put_as admin "$URL" /config/user/alice '{"groups": ["staff"]}' | grep -q revision || fail "bootstrap $1: alice"
}
fake_osd () {
  "$FAKE_OSD" --id "$2" --host "h$2" --etcd_address "$1" --etcd_ca "$P/antietcd.crt" \
    --etcd_client_cert "$P/osd_ca.crt" --etcd_client_key "$P/osd_ca.key" --etcd_keepalive_timeout 10 \
    --etcd_quick_timeout 5000 --etcd_slow_timeout 30000 >>"$TESTDIR/osd$2.log" 2>&1 &
  cleanup_fn "stop_pid $!"
  OSDPID=$!
}
# placed URL OSD: /pg/config places pool 1's 4 PGs on that OSD.
placed () {
  get_as admin "$1" /pg/config | python3 -c '
import json, sys
pgs = json.load(sys.stdin)["items"]["1"]
assert len(pgs) == 4 and all(p["primary"] == int(sys.argv[1]) and p["osd_set"] == [int(sys.argv[1])] for p in pgs.values()), pgs' "$2"
}
# What use_perms must show in every setup: no certificate, no access; a user
# can neither promote herself nor write the monitor's keys.
filtered () {
  local out
  out=$(curl -s --cacert "$P/antietcd.crt" -X POST "$1/v3/kv/range" -d "{\"key\": \"$(b64 /tromcho/config/user/admin)\"}")
  echo "$out" | grep -q 'client certificate' || fail "$2: a request without a certificate got: $out"
  put_as alice "$1" /config/user/alice '{"type": "admin"}' | grep -q 'permission denied' || fail "$2: alice promoted herself"
  put_as alice "$1" /pg/config '{}' | grep -q 'permission denied' || fail "$2: alice wrote /pg/config"
  [ -z "$(get_as alice "$1" /config/user/admin)" ] || fail "$2: alice reads the admin's record"
}

# --- (a) embedded KV + monitor in one gateway ---
bootstrap a
gw a "$kvgw, $mon" --gateway_monitor true
A=$URL
put_as admin "$A" /config/pools '{"1": {"name": "p1", "pg_count": 4, "pg_size": 1, "pg_minsize": 1}}' | grep -q revision ||
  fail "(a): admin writes /config/pools"
fake_osd "$A" 1
kill -0 $OSDPID || fail "(a): fake-osd exited: $(cat "$TESTDIR/osd1.log")"
WAIT_SECS=30 wait_for placed "$A" 1 || { tail "$TESTDIR/a/log" "$TESTDIR/osd1.log"; fail "(a): the embedded monitor placed no PGs"; }
filtered "$A" "(a)"
echo "(a) embedded KV and monitor: ok"

# --- (c) a separate filtering gateway (KV only) + the monitor elsewhere ---
bootstrap c
gw c "$kvgw" --gateway_monitor false
C=$URL
put_as admin "$C" /config/pools '{"1": {"name": "p1", "pg_count": 4, "pg_size": 1, "pg_minsize": 1}}' | grep -q revision ||
  fail "(c): admin writes /config/pools"
fake_osd "$C" 2
sleep 1
[ -z "$(get_as admin "$C" /pg/config)" ] || fail "(c): /pg/config before any monitor runs"
echo "{$base, $mon, \"use_antietcd\": false, \"etcd_address\": \"$C\"}" > "$TESTDIR/mon.conf"
g () { tromcho-gateway --config "$TESTDIR/mon.conf" "$@"; }
expect_fail 'option gateway_address is set but use_antietcd is false' g --gateway_address 127.0.0.1:0
expect_fail 'option antietcd_cert is set but use_antietcd is false' g --antietcd_cert "$P/antietcd.crt"
expect_fail 'option use_antietcd is false and gateway_monitor is false' g --gateway_monitor false
echo "{$base, \"use_antietcd\": false}" > "$TESTDIR/noaddr.conf"
expect_fail 'option use_antietcd is false: this gateway serves no KV, so it needs etcd_address' \
  tromcho-gateway --config "$TESTDIR/noaddr.conf"
echo "{$base, \"use_antietcd\": false, \"etcd_address\": \"$C\"}" > "$TESTDIR/nomon.conf"
expect_fail 'needs mon_etcd_client_cert' tromcho-gateway --config "$TESTDIR/nomon.conf"
tromcho-gateway --config "$TESTDIR/mon.conf" >"$TESTDIR/mon.log" 2>&1 &
MONPID=$!
cleanup_fn "stop_pid $MONPID"
kill -0 $OSDPID || fail "(c): fake-osd exited: $(cat "$TESTDIR/osd2.log")"
WAIT_SECS=30 wait_for placed "$C" 2 || { tail "$TESTDIR/mon.log" "$TESTDIR/c/log" "$TESTDIR/osd2.log"; fail "(c): the separate monitor placed no PGs"; }
kill -0 $MONPID || fail "(c): the monitor exited"
grep -q 'no KV API here' "$TESTDIR/mon.log" || fail "(c): the monitor's gateway says nothing of its setup"
! grep -qi 'listening\|KV API on' "$TESTDIR/mon.log" || fail "(c): the monitor's gateway serves a KV"
filtered "$C" "(c)"
echo "(c) separate filtering gateway + monitor elsewhere: ok"

# --- (d) the filtering gateway alone, without etcd: a restart keeps the data ---
stop_pid $MONPID
! kill -0 $MONPID 2>/dev/null || fail "(c): the monitor's gateway did not stop"
kv_restart c
placed "$C" 2 || fail "(d): /pg/config lost over a restart"
[ "$(get_as admin "$C" /config/user/alice)" = '{"groups": ["staff"]}' ] || fail "(d): a user record lost over a restart"
filtered "$C" "(d)"
echo "(d) standalone gateway without etcd: ok"

# --- (b) the filtering proxy to etcd (etcd_proxy): the data in a real etcd
# that trusts only the gateway's own etcd certificate; the monitor runs in
# the proxy and reaches the KV through it. test-gateway-proxy.sh has the
# attacks, the OSDs and the failover of a 3-member etcd. ---
make_etcd_proxy_pki "$TESTDIR/epki" || fail "(b): etcd's certificates"
start_etcd_members e 1 "$TESTDIR/epki"
ETCD1=$(cat "$TESTDIR/e1/url")
proxy="\"etcd_proxy\": {\"urls\": [\"$ETCD1\"], \"cert\": \"$TESTDIR/epki/gw_etcd.crt\", \"key\": \"$TESTDIR/epki/gw_etcd.key\", \"ca\": \"$TESTDIR/epki/etcd.crt\"}"
mkdir -p "$TESTDIR/b"
free_port > "$TESTDIR/b/port"
echo "{$kvgw, $mon, $proxy}" > "$TESTDIR/b.conf"
echo "tromcho-gateway --config $TESTDIR/b.conf --gateway_address 127.0.0.1:$(cat "$TESTDIR/b/port") --gateway_bootstrap_admin admin" > "$TESTDIR/b/cmd"
echo "https://127.0.0.1:$(cat "$TESTDIR/b/port")" > "$TESTDIR/b/url"
echo "--cacert $P/antietcd.crt --cert $P/admin.crt --key $P/admin.key" > "$TESTDIR/b/curlopts"
cleanup_fn "kv_stop b"
kv_spawn b
B=$(cat "$TESTDIR/b/url")
put_as admin "$B" /config/user/alice '{"groups": ["staff"]}' | grep -q revision || fail "(b): admin writes alice's record"
put_as admin "$B" /config/pools '{"1": {"name": "p1", "pg_count": 4, "pg_size": 1, "pg_minsize": 1}}' | grep -q revision ||
  fail "(b): admin writes /config/pools"
fake_osd "$B" 3
kill -0 $OSDPID || fail "(b): fake-osd exited: $(cat "$TESTDIR/osd3.log")"
WAIT_SECS=30 wait_for placed "$B" 3 || { tail "$TESTDIR/b/log" "$TESTDIR/osd3.log"; fail "(b): the monitor placed no PGs through the proxy"; }
filtered "$B" "(b)"
# The data is in etcd, not in the gateway.
curl -s --cacert "$TESTDIR/epki/etcd.crt" --cert "$TESTDIR/epki/gw_etcd.crt" --key "$TESTDIR/epki/gw_etcd.key" \
  -X POST "$ETCD1/v3/kv/range" -d "{\"key\": \"$(b64 /tromcho/pg/config)\"}" | grep -q '"kvs"' ||
  fail "(b): /pg/config is not in etcd"
expect_fail 'option gateway_data is set but etcd_proxy keeps the data in etcd' \
  tromcho-gateway --config "$TESTDIR/b.conf" --gateway_address 127.0.0.1:0 --gateway_data "$TESTDIR/p"
echo "(b) filtering proxy to etcd: ok"
echo "test-gateway-setups: ok"
