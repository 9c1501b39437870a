#!/usr/bin/env bash
# use_perms on the gateway's KV API, driven with curl and a certificate per
# identity (anyone, admin, alice, bob, carol, an OSD, a monitor): every cell
# of the seed's "etcd data access rights" tested here is printed as a matrix
# and asserted; ranges and watches show only readable keys; a txn is
# checked whole; an OSD writes only its own state, stats and PG states;
# leases are their granter's; the inode aliasing attack
# (/config/inode/1/2^48+1) and admin self-promotion fail; expired,
# foreign-CA and wrong-usage certificates are refused with the reason, in
# the log with the caller.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/perms-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-gateway curl python3 certtool openssl
KV_MONITOR=true start_secure_gateway alice bob carol

b () { printf '%s' "/tromcho$1" | base64 -w0; }
bv () { printf '%s' "$1" | base64 -w0; }
KEY1=$(printf 'a%0127x' 1)
KEY2=$(printf 'b%0127x' 2)
kv_put /config/user/alice '{"type": "client", "groups": ["creators"]}' || fail "admin writes users"
kv_put /config/user/bob '{"groups": ["readers"]}'
kv_put /config/user/carol '{"groups": []}'
kv_put /config/pools '{"1": {"name": "p1", "pg_count": 2, "pg_size": 1, "pg_minsize": 1, "creator_group": "creators"}, "2": {"name": "p2", "pg_count": 2, "pg_size": 1, "pg_minsize": 1, "creator_group": "others"}}'
ALICE_IMG="{\"name\": \"alice-img\", \"size\": 1048576, \"owner\": \"alice\", \"reader_group\": \"readers\", \"enc_key\": \"$KEY1\"}"
kv_put /config/inode/1/1 "$ALICE_IMG"
kv_put /index/image/alice-img '{"id": 1, "pool_id": 1}'
kv_put /config/inode/1/2 "{\"name\": \"carol-img\", \"size\": 1048576, \"owner\": \"carol\", \"enc_key\": \"$KEY2\"}"
kv_put /index/image/carol-img '{"id": 2, "pool_id": 1}'

echo "identity   operation                                    result   (seed)"
# cell ID OPERATION EXPECT PATH BODY: allowed = HTTP 200, refused = 401/403.
cell () {
  local id=$1 op=$2 exp=$3 path=$4 body=$5 out code got
  out=$(curl_as "$id" -w '\n%{http_code}' -X POST "$KV_URL$path" -d "$body")
  code=${out##*$'\n'}
  case $code in 200) got=allowed ;; 401|403) got=refused ;; *) got="error-$code" ;; esac
  printf '%-10s %-44s %-8s (%s)\n' "$id" "$op" "$got" "$exp"
  [ "$got" = "$exp" ] || fail "$id: $op: $got, the seed's tables say $exp: ${out%$'\n'*}"
  LAST=${out%$'\n'*}
}
put () { cell "$1" "put $2" "$3" /v3/kv/put "{\"key\": \"$(b "$2")\", \"value\": \"$(bv "$4")\"}"; }
# see ID KEY EXPECT: a range on exactly KEY returns it (visible) or not (hidden).
see () {
  local n
  n=$(curl_as "$1" -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"$(b "$2")\"}" |
      python3 -c 'import json,sys; r=json.load(sys.stdin); assert "error" not in r, r; print(len(r.get("kvs", [])))') ||
    fail "$1: range $2 failed"
  local got=hidden; [ "$n" = 1 ] && got=visible
  printf '%-10s %-44s %-8s (%s)\n' "$1" "read $2" "$got" "$3"
  [ "$got" = "$3" ] || fail "$1: read $2: $got, the seed's tables say $3"
}

# Reading: a range is never refused, it shows what the caller may read.
for id in alice bob carol admin osd mon; do see $id /config/pools visible; done
see alice /config/inode/1/1 visible;  see alice /index/image/alice-img visible
see bob /config/inode/1/1 visible;    see bob /index/image/alice-img visible
see carol /config/inode/1/1 hidden;   see carol /index/image/alice-img hidden
see alice /config/inode/1/2 hidden;   see alice /index/image/carol-img hidden
see alice /config/user/alice visible; see alice /config/user/bob hidden
see osd /config/inode/1/1 visible;    see mon /config/user/alice visible
see osd /stats hidden;                see alice /mon/master hidden
see admin /mon/master visible;        see admin /config/inode/1/2 visible
cell anyone "range /config/pools (no certificate)" refused /v3/kv/range "{\"key\": \"$(b /config/pools)\"}"

# Writing.
put alice /config/user/alice refused '{"type": "admin"}'
put carol /config/user/carol refused '{"type": "admin"}'
put osd /config/user/osd refused '{"type": "admin"}'
put mon /config/user/mon refused '{"type": "admin"}'
put admin /config/user/dave allowed '{"groups": []}'
put alice /config/inode/1/1 allowed "$ALICE_IMG"
put bob /config/inode/1/1 refused "${ALICE_IMG/alice-img/bobs}"
put carol /config/inode/1/1 refused "$ALICE_IMG"
put alice /config/inode/1/1 refused "${ALICE_IMG/\"owner\": \"alice\"/\"owner\": \"bob\"}"
put osd /config/inode/1/1 refused "$ALICE_IMG"
put alice /config/inode/1/281474976710657 refused "${ALICE_IMG/1048576/2097152}"
echo "$LAST" | grep -q "281474976710657" || fail "the refusal does not name the key: $LAST"
put alice /config/inode/1/02 refused "${ALICE_IMG/alice-img/x}"
put alice /config/inode/1/3 allowed '{"name": "alice-new", "size": 4096, "owner": "alice"}'
put alice /config/inode/2/3 refused '{"name": "alice-p2", "size": 4096, "owner": "alice"}'
put alice /config/inode/1/4 refused '{"name": "for-bob", "size": 4096, "owner": "bob"}'
put alice /index/image/alice-new allowed '{"id": 3, "pool_id": 1}'
put carol /index/image/mine refused '{"id": 1, "pool_id": 1}'
put alice /index/maxid/1 allowed 3
put alice /index/maxid/2 refused 3
put bob /index/maxid/1 refused 3
# OSDs share one identity: an OSD writes /osd/state/<n> naming the lease it
# puts it with, then /osd/stats/<n> and the /pg/state and /pgstats of PGs
# /pg/config makes n primary of only with that lease (narrower than the
# seed, which gives OSDs all of /osd/, /pg/state/, /pg/history/, /pgstats/).
putl () { cell "$1" "put $2 (lease $5)" "$3" /v3/kv/put "{\"key\": \"$(b "$2")\", \"value\": \"$(bv "$4")\", \"lease\": \"$5\"}"; }
put mon /pg/config allowed '{"items": {}}'
cell osd "lease grant 909" allowed /v3/lease/grant '{"TTL": 600, "ID": 909}'
cell osd "lease grant 808" allowed /v3/lease/grant '{"TTL": 600, "ID": 808}'
put osd /osd/state/9 refused '{"lease": 0}'
putl osd /osd/state/9 refused '{"lease": 808}' 909
putl osd /osd/state/9 allowed '{"lease": 909}' 909
putl osd /osd/state/9 refused '{"lease": 808}' 808
putl osd /osd/state/09 refused '{"lease": 909}' 909
put mon /osd/state/9 refused '{}'
put alice /osd/state/9 refused '{}'
putl osd /osd/stats/9 allowed '{}' 909
putl osd /osd/stats/9 refused '{}' 808
put osd /osd/stats/9 refused '{}'
putl osd /osd/stats/8 refused '{}' 909
putl osd /osd/other/9 refused '{}' 909
cell osd "delete /osd/stats/9" refused /v3/kv/deleterange "{\"key\": \"$(b /osd/stats/9)\"}"
putl osd /osd/state/8 allowed '{"lease": 808}' 808
# The monitor places pool 1 on OSDs 8 and 9: each PG's primary may write its
# state with its lease, the other OSD may not, nor anyone for a PG /pg/config
# does not have.
for i in $(seq 60); do
  PRIMS=$(kv_get /pg/config | python3 -c 'import json,sys; c=json.load(sys.stdin)["items"]["1"]; print(c["0"]["primary"], c["1"]["primary"])' 2>/dev/null) &&
    [ "$PRIMS" != "9 9" ] && break
  sleep 0.5
done
[ -n "$PRIMS" ] || fail "the monitor placed no PG of pool 1"
P0=${PRIMS% *}
own () { [ "$1" = 9 ] && echo 909 || echo 808; }
other () { [ "$1" = 9 ] && echo 808 || echo 909; }
putl osd /pg/state/1/0 allowed '{"state": ["active"]}' "$(own "$P0")"
putl osd /pg/state/1/0 refused '{}' "$(other "$P0")"
putl osd /pg/state/1/5 refused '{}' 909
put osd /pg/state/1/0 refused '{}'
putl osd /pgstats/1/0 allowed '{"state": ["active"]}' "$(own "$P0")"
putl osd /pgstats/1/0 refused '{}' "$(other "$P0")"
putl osd /pgstats/1/5 refused '{}' 909
putl osd /pgstats/01/0 refused '{}' "$(own "$P0")"
put osd /pgstats/1/0 refused '{}'
put alice /pgstats/1/0 refused '{}'
put osd /pg/config refused '{"items": {}}'
put admin /pg/config refused '{"items": {}}'
put admin /pg/history/1/0 allowed '{}'
put mon /stats allowed '{}'
put osd /stats refused '{}'
putl osd /pg/history/1/0 refused '{}' 909
put mon /config/pools refused '{}'
cell carol "deleterange everything" refused /v3/kv/deleterange "{\"key\": \"$(b /)\", \"range_end\": \"$(bv /tromcho0)\"}"
cell alice "deleterange everything" refused /v3/kv/deleterange "{\"key\": \"$(b /)\", \"range_end\": \"$(bv /tromcho0)\"}"
cell anyone "deleterange everything" refused /v3/kv/deleterange "{\"key\": \"AA==\", \"range_end\": \"AA==\"}"
cell osd "deleterange /config/" refused /v3/kv/deleterange "{\"key\": \"$(b /config/)\", \"range_end\": \"$(bv /tromcho/config0)\"}"
cell alice "delete /config/inode/1/3 (own)" allowed /v3/kv/deleterange "{\"key\": \"$(b /config/inode/1/3)\"}"
cell carol "compaction" refused /v3/kv/compaction '{"revision": "2"}'
cell osd "compaction" refused /v3/kv/compaction '{"revision": "2"}'
[ -n "$(kv_get /config/inode/1/2)" ] && [ -n "$(kv_get /config/user/admin)" ] || fail "a refused deleterange changed data"

# A txn is checked whole before it runs: one forbidden key refuses it, names
# the key, and nothing of it happens.
NEW=${ALICE_IMG/1048576/8192}
cell alice "txn: put own image + put /config/user/alice" refused /v3/kv/txn "{\"success\": [{\"request_put\": {\"key\": \"$(b /config/inode/1/1)\", \"value\": \"$(bv "$NEW")\"}}, {\"request_put\": {\"key\": \"$(b /config/user/alice)\", \"value\": \"$(bv '{"type":"admin"}')\"}}]}"
echo "$LAST" | grep -q "/tromcho/config/user/alice" || fail "the txn refusal does not name the key: $LAST"
kv_get /config/inode/1/1 | grep -q 1048576 || fail "half of a refused txn was applied"
cell alice "txn: forbidden put in the failure branch" refused /v3/kv/txn "{\"compare\": [{\"key\": \"$(b /config/inode/1/1)\", \"target\": \"VERSION\", \"result\": \"GREATER\", \"version\": \"0\"}], \"success\": [], \"failure\": [{\"request_delete_range\": {\"key\": \"$(b /config/inode/1/2)\"}}]}"
cell alice "txn: compare on carol's image" refused /v3/kv/txn "{\"compare\": [{\"key\": \"$(b /config/inode/1/2)\", \"target\": \"VERSION\", \"result\": \"GREATER\", \"version\": \"0\"}], \"success\": [{\"request_put\": {\"key\": \"$(b /index/maxid/1)\", \"value\": \"$(bv 9)\"}}]}"
cell alice "txn: compare + put own image" allowed /v3/kv/txn "{\"compare\": [{\"key\": \"$(b /config/inode/1/1)\", \"target\": \"VERSION\", \"result\": \"GREATER\", \"version\": \"0\"}], \"success\": [{\"request_put\": {\"key\": \"$(b /config/inode/1/1)\", \"value\": \"$(bv "$ALICE_IMG")\"}}]}"

# A range over everything: carol gets her own image, nothing of alice's
# (no key material), no other user, and the count matches what she sees.
curl_as carol -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"$(b /)\", \"range_end\": \"$(bv /tromcho0)\"}" | KEY1=$KEY1 python3 -c '
import base64, json, os, sys
r = json.load(sys.stdin)
keys = [base64.b64decode(kv["key"]).decode() for kv in r.get("kvs", [])]
vals = "".join(base64.b64decode(kv.get("value", "")).decode() for kv in r.get("kvs", []))
want = ["/tromcho/config/inode/1/2", "/tromcho/config/pools", "/tromcho/config/user/carol",
        "/tromcho/index/image/carol-img", "/tromcho/index/maxid/1", "/tromcho/osd/state/8", "/tromcho/osd/state/9", "/tromcho/pg/config",
        "/tromcho/pg/state/1/0"]
assert keys == want, keys
assert os.environ["KEY1"] not in vals
assert int(r.get("count", 0)) == len(keys), r
' || fail "carol's range over everything shows what she may not read"

# Watches deliver only readable events; a right taken away is gone at once.
wpids=""
for id in bob carol; do
  curl_as $id -N --max-time 4 -X POST "$KV_URL/v3/watch" -d "{\"create_request\": {\"key\": \"$(b /config/inode/)\", \"range_end\": \"$(bv /tromcho/config/inode0)\"}}" > "$TESTDIR/watch-$id" &
  wpids="$wpids $!"
done
sleep 1
kv_put /config/inode/1/1 "${ALICE_IMG/1048576/2097152}"
kv_put /config/inode/1/2 "{\"name\": \"carol-img\", \"size\": 8192, \"owner\": \"carol\", \"enc_key\": \"$KEY2\"}"
# shellcheck disable=SC2086
wait $wpids
grep -q "$(b /config/inode/1/1)" "$TESTDIR/watch-bob" || fail "bob's watch missed alice's image: $(cat "$TESTDIR/watch-bob")"
grep -q "$(b /config/inode/1/2)" "$TESTDIR/watch-bob" && fail "bob's watch saw carol's image"
grep -q '"created":true' "$TESTDIR/watch-carol" || fail "carol's watch did not start"
grep -q "$(b /config/inode/1/1)" "$TESTDIR/watch-carol" && fail "carol's watch saw alice's image"
grep -q "$(b /config/inode/1/2)" "$TESTDIR/watch-carol" || fail "carol's watch missed her own image"
printf '%-10s %-44s %-8s (%s)\n' bob "watch /config/inode/: alice's image" visible visible carol "watch /config/inode/: alice's image" hidden hidden
kv_put /config/user/bob '{"groups": []}'
see bob /config/inode/1/1 hidden

# Leases are their granter's.
cell alice "lease grant" allowed /v3/lease/grant '{"TTL": 30, "ID": 4242}'
cell carol "lease keepalive (alice's)" refused /v3/lease/keepalive '{"ID": 4242}'
cell carol "lease revoke (alice's)" refused /v3/lease/revoke '{"ID": 4242}'
cell alice "lease keepalive (own)" allowed /v3/lease/keepalive '{"ID": 4242}'
curl_as carol -X POST "$KV_URL/v3/lease/leases" -d '{}' | grep -q 4242 && fail "carol lists alice's lease"
cell alice "lease revoke (own)" allowed /v3/lease/revoke '{"ID": 4242}'

# Certificates that prove nothing: refused with the reason, logged.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=admin \
  -keyout "$P/foreign.key" -out "$P/foreign.crt" 2>/dev/null || fail "openssl"
certtool -p --key-type ecdsa --outfile "$P/expired.key" 2>/dev/null || fail "certtool key"
cp "$P/expired.key" "$P/server-only.key"
printf 'cn = "admin"\ntls_www_client\nsigning_key\nactivation_date = "2020-01-01 00:00:00"\nexpiration_date = "2021-01-01 00:00:00"\n' > "$TESTDIR/t1"
printf 'cn = "admin"\ntls_www_server\nsigning_key\nexpiration_days = 2\n' > "$TESTDIR/t2"
for t in expired:t1 server-only:t2; do
  certtool -c --load-privkey "$P/${t%:*}.key" --load-ca-certificate "$P/client_ca.crt" --load-ca-privkey "$P/client_ca.key" \
    --template "$TESTDIR/${t#*:}" --outfile "$P/${t%:*}.crt" 2>/dev/null || fail "certtool ${t%:*}"
done
cell foreign "put /config/user/x (foreign CA, CN=admin)" refused /v3/kv/put "{\"key\": \"$(b /config/user/x)\", \"value\": \"e30=\"}"
echo "$LAST" | grep -q "issued by none" || fail "no reason for the foreign certificate: $LAST"
cell expired "put /config/user/x (expired, CN=admin)" refused /v3/kv/put "{\"key\": \"$(b /config/user/x)\", \"value\": \"e30=\"}"
echo "$LAST" | grep -qi "expired" || fail "no reason for the expired certificate: $LAST"
cell server-only "put /config/user/x (serverAuth only)" refused /v3/kv/put "{\"key\": \"$(b /config/user/x)\", \"value\": \"e30=\"}"
echo "$LAST" | grep -q "clientAuth" || fail "no reason for the wrong-usage certificate: $LAST"
cell alice "malformed request" error-400 /v3/kv/put '{"key": 12'
[ -z "$(kv_get /config/user/x)" ] || fail "a refused certificate changed data"
grep -q "user carol may not delete" "$GW_LOG" || fail "refusals are not logged with the caller"
grep -q "refused: .*issued by none" "$GW_LOG" || fail "refused certificates are not logged"

# The embedded monitor works under the filter as a monitor (it wrote /pg/config for the pools).
WAIT_SECS=10 wait_for sh -c "curl -sf $KV_CURL_OPTS -X POST $KV_URL/v3/kv/range -d '{\"key\": \"$(b /pg/config)\"}' | grep -q kvs" ||
  fail "the monitor did not write /pg/config"
grep -q "monitor.*permission denied\|monitor.*refused" "$GW_LOG" && fail "the monitor was refused: $(grep monitor "$GW_LOG")"
echo "test-kv-perms: ok"
