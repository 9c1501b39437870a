#!/usr/bin/env bash
# The gateway's admin HTTPS API (server_cert/server_pkey, callers proven by
# certificates chaining to client_ca) with use_perms: the seed's API rights
# for a client (alice, creator in pool 1), a client with no rights (bob)
# and an administrator, through curl and through `tromcho --api_url`; image
# work done for real (create, snapshot, clone, flatten with data on OSDs,
# delete); bad certificates, bad requests and bad options refused with a
# clear error and the right HTTP status.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-gateway tromcho-osd curl python3 openssl certtool

P=$TESTDIR/pki
tromcho make-certs --dir "$P" >/dev/null || fail "make-certs"
for u in alice bob; do tromcho make-certs user $u --dir "$P" >/dev/null || fail "make-certs user $u"; done

# A gateway (embedded KV over HTTPS, no monitor: the test writes
# /pg/config) serving the admin API; its own client acts as admin (cert),
# as `vitastor-cli serve` does. The first run, without use_perms, writes the
# user records (the bootstrap); then it runs with use_perms.
port=$(free_port); api=$(free_port)
KV_URL=https://127.0.0.1:$port
API=https://127.0.0.1:$api
EXTRA_CONF=", \"use_perms\": true, \"osd_ca\": \"$P/osd_ca.crt\", \"client_ca\": \"$P/client_ca.crt\", \"mon_ca\": \"$P/mon_ca.crt\",
 \"osd_cert\": \"$P/osd_ca.crt\", \"osd_pkey\": \"$P/osd_ca.key\", \"cert\": \"$P/admin.crt\", \"pkey\": \"$P/admin.key\",
 \"antietcd_cert\": \"$P/antietcd.crt\", \"antietcd_key\": \"$P/antietcd.key\", \"etcd_ca\": \"$P/antietcd.crt\",
 \"server_cert\": \"$P/antietcd.crt\", \"server_pkey\": \"$P/antietcd.key\", \"gateway_api_address\": \"127.0.0.1:$api\",
 \"api_ca\": \"$P/antietcd.crt\", \"etcd_quick_timeout\": 5000, \"etcd_slow_timeout\": 30000" write_conf
KVC=(--cacert "$P/antietcd.crt" --cert "$P/admin.crt" --key "$P/admin.key")
kv_put () {
  curl -sf "${KVC[@]}" -X POST "$KV_URL/v3/kv/put" \
    -d "{\"key\":\"$(printf '%s' "/tromcho$1" | base64 -w0)\",\"value\":\"$(printf '%s' "$2" | base64 -w0)\"}" >/dev/null ||
    fail "kv_put $1"
}
kv_get () {
  curl -sf "${KVC[@]}" -X POST "$KV_URL/v3/kv/range" -d "{\"key\":\"$(printf '%s' "/tromcho$1" | base64 -w0)\"}" |
    python3 -c 'import sys, json, base64; r = json.load(sys.stdin); [print(base64.b64decode(x["value"]).decode()) for x in r.get("kvs", [])]'
}
mkdir -p "$TESTDIR/gw"
gw_cmd="tromcho-gateway --gateway_address 127.0.0.1:$port --gateway_data $TESTDIR/gw/data --gateway_monitor false --log_level info"
echo "$gw_cmd --use_perms false" > "$TESTDIR/gw/cmd"
echo "$KV_URL" > "$TESTDIR/gw/url"
echo "${KVC[*]}" > "$TESTDIR/gw/curlopts"
cleanup_fn "kv_stop gw"
kv_spawn gw
kv_put /config/user/admin '{"type": "admin"}'
kv_put /config/user/alice '{"type": "client", "groups": ["staff"]}'
kv_put /config/user/bob '{"groups": []}'
kv_put /config/pools '{"1": {"name": "pool1", "pg_count": 2, "pg_size": 2, "pg_minsize": 1, "creator_group": "staff"}, "2": {"name": "pool2", "pg_count": 1, "pg_size": 1, "pg_minsize": 1}}'
kv_put /pg/config '{"items": {"1": {"0": {"osd_set": [1, 2], "primary": 1}, "1": {"osd_set": [2, 1], "primary": 2}}, "2": {"0": {"osd_set": [1], "primary": 1}}}}' # (the monitor's key: written in the bootstrap)
echo "$gw_cmd" > "$TESTDIR/gw/cmd"
kv_restart gw
wait_for curl -s --cacert "$P/antietcd.crt" "$API/" || { cat "$TESTDIR/gw/log"; fail "admin API did not start"; }
curl -s --cacert "$P/antietcd.crt" --cert "$P/bob.crt" --key "$P/bob.key" -X POST "$KV_URL/v3/kv/put" \
  -d '{"key": "L3Ryb21jaG8vY29uZmlnL3VzZXIvYm9i", "value": "e30="}' | grep -q 'permission denied' ||
  fail "the KV runs without its filter: the admin API's test would prove nothing"
start_osd 1
start_osd 2

# call WHO CALL BODY: POST to the API as WHO (a user, or none); prints the
# reply and the HTTP status on its last line.
call () {
  local who=$1 c=()
  [ "$who" = none ] || c=(--cert "$P/$who.crt" --key "$P/$who.key")
  curl -s --cacert "$P/antietcd.crt" "${c[@]}" -w '\n%{http_code}' -X POST "$API/api/v1/$2" -d "${3:-{\}}"
}
# expect STATUS PATTERN WHO CALL [BODY]
expect () {
  local st=$1 pat=$2 out; shift 2
  out=$(call "$@")
  [ "$(echo "$out" | tail -n1)" = "$st" ] || fail "$*: expected HTTP $st, got: $out"
  echo "$out" | head -n -1 | grep -qE -- "$pat" || fail "$*: reply does not match '$pat': $out"
}
as () { local u=$1; shift; tromcho --api_url "$API" --cert "$P/$u.crt" --pkey "$P/$u.key" "$@"; }
names () { python3 -c 'import json,sys; print(" ".join(i["name"] + ":" + ("w" if i["writable"] else "r") for i in json.load(sys.stdin)["images"]))'; }

# --- who may call at all ---
expect 401 'no client certificate' none image/list
# A certificate with the CN of the admin, from a CA the gateway does not trust.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=admin \
  -keyout "$P/forged.key" -out "$P/forged.crt" 2>/dev/null || fail "openssl"
expect 401 'CN=admin refused' forged user/list
# An expired certificate of a user, signed by client_ca itself.
certtool --generate-privkey --key-type ecdsa --outfile "$P/expired.key" 2>/dev/null || fail "certtool key"
printf 'cn = alice\ntls_www_client\nsigning_key\nactivation_date = "2020-01-01 00:00:00 UTC"\nexpiration_date = "2021-01-01 00:00:00 UTC"\n' > "$P/expired.tmpl"
certtool --generate-certificate --load-privkey "$P/expired.key" --load-ca-certificate "$P/client_ca.crt" \
  --load-ca-privkey "$P/client_ca.key" --template "$P/expired.tmpl" --outfile "$P/expired.crt" 2>/dev/null ||
  fail "certtool: an expired certificate"
expect 401 'CN=alice refused.*expired' expired image/list
# A certificate of client_ca that is not for clients (serverAuth only).
printf 'cn = alice\ntls_www_server\nsigning_key\nexpiration_days = 2\n' > "$P/server-only.tmpl"
certtool --generate-privkey --key-type ecdsa --outfile "$P/server-only.key" 2>/dev/null &&
certtool --generate-certificate --load-privkey "$P/server-only.key" --load-ca-certificate "$P/client_ca.crt" \
  --load-ca-privkey "$P/client_ca.key" --template "$P/server-only.tmpl" --outfile "$P/server-only.crt" 2>/dev/null ||
  fail "certtool: a serverAuth certificate"
expect 401 'CN=alice refused.*clientAuth' server-only image/list
grep -q 'CN=alice refused' "$TESTDIR/gw/log" || fail "the refused certificate is not logged"

# --- bad requests ---
expect 400 'not valid JSON' alice image/create '{"name": "x", '
expect 400 'unknown field colour' alice image/create '{"name": "x", "size": 4194304, "colour": "red"}'
expect 400 'field size must be a positive integer' alice image/create '{"name": "x", "size": "big"}'
expect 400 'field name is required' alice image/delete '{}'
expect 404 'unknown path /api/v1/image/explode' alice image/explode
out=$(curl -s --cacert "$P/antietcd.crt" --cert "$P/alice.crt" --key "$P/alice.key" -w '\n%{http_code}' "$API/api/v1/image/list")
[ "$(echo "$out" | tail -n1)" = 405 ] || fail "GET image/list: $out"

# --- images, as the seed's API rights say ---
expect 200 '"ok":true' admin image/create '{"name": "shared", "pool": "pool1", "size": 8388608, "owner": "carol", "reader_group": "staff"}'
expect 200 '"ok":true' admin image/create '{"name": "secret", "pool": 1, "size": 8388608, "owner": "carol"}'
as alice create owned -s 8M --pool pool1 --enc_key auto >/dev/null || fail "alice creates in the pool of her group"
[ "$(kv_get /config/inode/1/3 | python3 -c 'import json,sys; print(json.load(sys.stdin)["owner"])')" = alice ] ||
  fail "alice does not own what she created"
expect_fail 'permission denied for user alice: you may not create images in pool 2 \(HTTP 403\)' as alice create p2 -s 4M --pool pool2
expect_fail 'only an administrator may create an image owned by someone else \(HTTP 403\)' as alice create x -s 4M --pool pool1 --owner carol
expect_fail 'permission denied for user bob: you may not create images in pool 1' as bob create b -s 4M --pool 1
[ "$(call alice image/list | head -n1 | names)" = "owned:w shared:r" ] || fail "alice's list: $(call alice image/list)"
[ "$(call bob image/list | head -n1 | names)" = "" ] || fail "bob's list: $(call bob image/list)"
[ "$(call admin image/list | head -n1 | names)" = "owned:w secret:w shared:w" ] || fail "admin's list"
call alice image/list | grep -q enc_key && fail "image/list shows a key"
as alice ls | grep -qE '^owned +1 +8 MiB +yes -$' || fail "alice's ls through the API: $(as alice ls)"
expect 403 'permission denied for user alice: the image is not yours' alice image/modify '{"name": "shared", "resize": 16777216}'
expect 403 'not yours' alice image/delete '{"name": "shared"}'
expect 403 'snapshots need write access' alice image/create '{"name": "shared@s"}'
expect 404 'image/delete: image secret: no such image' alice image/delete '{"name": "secret"}'
expect 404 'no such image' bob image/flatten '{"name": "owned"}'
expect_fail 'only an administrator may give an image away' as alice modify owned --owner bob

# alice's own images: data written, snapshot, clone, flatten, resize, delete.
head -c 1M /dev/urandom > "$TESTDIR/data"
tromcho --cert "$P/alice.crt" --pkey "$P/alice.key" dd if="$TESTDIR/data" oimg=owned bs=64K 2>"$TESTDIR/dd.err" || { tail -n3 "$TESTDIR/dd.err"; fail "alice writes"; }
as alice snap-create owned@s1 >/dev/null || fail "alice snapshots her image"
as alice clone owned@s1 copy >/dev/null || fail "alice clones her snapshot"
as alice flatten copy >/dev/null || fail "alice flattens her clone"
tromcho --cert "$P/alice.crt" --pkey "$P/alice.key" dd iimg=copy of="$TESTDIR/back" bs=64K count=16 2>/dev/null || fail "alice reads the copy"
cmp "$TESTDIR/back" "$TESTDIR/data" || fail "the flattened clone reads back wrong"
tromcho info copy --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["parent"] is None' || fail "copy still has a parent"
as alice modify copy --resize 16M --rename copy2 >/dev/null || fail "alice resizes and renames her image"
[ "$(tromcho info copy2 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')" = 16777216 ] || fail "resize"
as alice rm copy2 >/dev/null || fail "alice deletes her image"
expect_fail 'no such image' tromcho info copy2
expect 409 'children' alice image/delete '{"name": "owned@s1"}'
expect 409 'exist' alice image/create '{"name": "owned", "pool": "pool1", "size": 4194304}'

# --- administrator-only calls ---
for c in pool/list user/list status; do expect 403 'this call is for administrators' alice $c; done
expect 403 'for administrators' bob user/set '{"name": "bob", "type": "admin"}'
[ "$(kv_get /config/user/bob)" = '{"groups": []}' ] || fail "bob promoted himself: $(kv_get /config/user/bob)"
expect 200 '"ok":true' admin user/set '{"name": "dave", "type": "client", "groups": ["staff"]}'
[ "$(kv_get /config/user/dave)" = '{"type":"client","groups":["staff"]}' ] || fail "user/set wrote: $(kv_get /config/user/dave)"
expect 200 '"name":"dave"' admin user/list
expect 200 '"ok":true' admin user/delete '{"name": "dave"}'
expect 404 'user dave: no such user' admin user/delete '{"name": "dave"}'
expect 400 "user name 'a/b'" admin user/set '{"name": "a/b"}'
expect 200 '"name":"pool1".*"creator_group":"staff"' admin pool/list
expect 200 '"osds_up":\[1,2\].*"pgs":3,"pgs_active":3' admin status
grep -q 'admin API: image/delete by user alice: image/delete: permission denied' "$TESTDIR/gw/log" ||
  fail "refusals are not logged with the caller"

# --- options: refused with an error naming them ---
echo '{}' > "$TESTDIR/empty.conf"
g () { tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address 127.0.0.1:0 --gateway_data "$TESTDIR/g2" --gateway_monitor false "$@"; }
expect_fail 'option server_cert is set but server_pkey is not' g --server_cert "$P/antietcd.crt"
expect_fail 'option gateway_api_address is set but server_cert is not' g --gateway_api_address 127.0.0.1:0
expect_fail 'use_perms.*client_ca' g --use_perms true --server_cert "$P/antietcd.crt" --server_pkey "$P/antietcd.key"
expect_fail 'options cert and pkey: with use_perms the admin API works as the gateway.s own user' g --use_perms true \
  --antietcd_cert "$P/antietcd.crt" --antietcd_key "$P/antietcd.key" --client_ca "$P/client_ca.crt" \
  --server_cert "$P/antietcd.crt" --server_pkey "$P/antietcd.key"
expect_fail 'server_cert/server_pkey' g --server_cert "$P/antietcd.crt" --server_pkey "$P/alice.key"
: > "$TESTDIR/empty.pem"
head -c 1100000 /dev/zero > "$TESTDIR/big.pem"
expect_fail 'option server_cert/server_pkey: load certificate .*/empty.pem' g --server_cert "$TESTDIR/empty.pem" \
  --server_pkey "$P/antietcd.key"
# A plain-HTTP gateway starts without libmicrohttpd's warnings about
# HTTPS options (it was given them, empty, before).
timeout 3 tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address 127.0.0.1:0 --gateway_data "$TESTDIR/g3" \
  --gateway_monitor false > "$TESTDIR/plain.out" 2>&1 || true
grep -q 'KV API on http://' "$TESTDIR/plain.out" || fail "the plain-HTTP gateway did not start: $(tail -3 "$TESTDIR/plain.out")"
! grep -q 'MHD' "$TESTDIR/plain.out" || fail "libmicrohttpd warns at start: $(grep MHD "$TESTDIR/plain.out" | head -1)"
# The PEM files of both HTTP services are read by one function (listen.c).
expect_fail 'option antietcd_cert: .*/empty.pem is empty' g --antietcd_cert "$TESTDIR/empty.pem" \
  --antietcd_key "$P/antietcd.key"
expect_fail 'option antietcd_cert: cannot read .*/big.pem: larger than 1 MiB' g --antietcd_cert "$TESTDIR/big.pem" \
  --antietcd_key "$P/antietcd.key"
expect_fail 'option antietcd_key: cannot read .*/none.key: No such file' g --antietcd_cert "$P/antietcd.crt" \
  --antietcd_key "$TESTDIR/none.key"
echo "test-admin-api: ok"
