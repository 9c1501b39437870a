#!/usr/bin/env bash
# tromcho make-certs: the PKI of the seed's quick setup, checked with two
# independent verifiers (certtool and openssl), file modes, tromcho.conf,
# re-runs that keep the CAs, --force, user certificates and key types.
. "${top_srcdir:-..}/tests/functions.sh"
set -e
requires certtool openssl python3

D=$TESTDIR/pki
mkdir -p "$D"
echo '{"etcd_address": ["https://10.0.0.10:2379"], "use_perms": true}' >"$D/tromcho.conf"
tromcho make-certs --dir "$D" >"$TESTDIR/out"
for f in osd_ca client_ca mon_ca antietcd admin; do
  [ -s "$D/$f.crt" ] && [ -s "$D/$f.key" ] || fail "$f.crt/.key missing"
  [ "$(stat -c %a "$D/$f.key")" = 600 ] || fail "$f.key is mode $(stat -c %a "$D/$f.key"), not 600"
done

# verify CERT CA: both verifiers accept
verify () {
  certtool --verify --load-ca-certificate "$2" --infile "$1" 2>&1 | grep -q 'Chain verification output: Verified' ||
    fail "certtool does not verify $1 against $2"
  openssl verify -CAfile "$2" "$1" >/dev/null 2>&1 || fail "openssl does not verify $1 against $2"
}
# refuse CERT CA: both verifiers refuse
refuse () {
  certtool --verify --load-ca-certificate "$2" --infile "$1" 2>&1 | grep -q 'Chain verification output: Verified' &&
    fail "certtool verifies $1 against $2"
  openssl verify -CAfile "$2" "$1" >/dev/null 2>&1 && fail "openssl verifies $1 against $2"
  true
}
verify "$D/osd_ca.crt" "$D/osd_ca.crt"
verify "$D/client_ca.crt" "$D/client_ca.crt"
verify "$D/mon_ca.crt" "$D/mon_ca.crt"
verify "$D/antietcd.crt" "$D/antietcd.crt"
verify "$D/admin.crt" "$D/client_ca.crt"
refuse "$D/admin.crt" "$D/osd_ca.crt"
refuse "$D/osd_ca.crt" "$D/client_ca.crt"
openssl verify -purpose sslclient -CAfile "$D/client_ca.crt" "$D/admin.crt" >/dev/null || fail "admin is not a TLS client cert"
openssl verify -purpose sslserver -CAfile "$D/antietcd.crt" "$D/antietcd.crt" >/dev/null || fail "antietcd is not a TLS server cert"
openssl x509 -in "$D/admin.crt" -noout -subject | grep -q 'CN *= *admin' || fail "admin CN"
openssl x509 -in "$D/antietcd.crt" -noout -ext subjectAltName | grep -q 'IP Address:127.0.0.1' || fail "antietcd SAN"
openssl x509 -in "$D/osd_ca.crt" -noout -text | grep -q 'ecdsa-with-SHA256' || fail "default key type is not ECDSA"
# each key is its certificate's
for f in osd_ca client_ca mon_ca antietcd admin; do
  [ "$(openssl pkey -in "$D/$f.key" -pubout)" = "$(openssl x509 -in "$D/$f.crt" -noout -pubkey)" ] ||
    fail "$f.key does not match $f.crt"
done

# tromcho.conf: every path, other options kept
python3 - "$D" <<'PY'
import json, os, sys
d = sys.argv[1]
c = json.load(open(d + "/tromcho.conf"))
want = {"osd_ca": "osd_ca.crt", "client_ca": "client_ca.crt", "mon_ca": "mon_ca.crt",
        "osd_cert": "osd_ca.crt", "osd_pkey": "osd_ca.key", "antietcd_cert": "antietcd.crt",
        "antietcd_key": "antietcd.key", "etcd_ca": "antietcd.crt", "cert": "admin.crt", "pkey": "admin.key",
        "mon_etcd_client_cert": "mon_ca.crt", "mon_etcd_client_key": "mon_ca.key"}
for k, f in want.items():
    assert c.get(k) == os.path.join(d, f), (k, c.get(k))
assert c["etcd_address"] == ["https://10.0.0.10:2379"] and c["use_perms"] is True, c
PY
# and tromcho itself accepts the file
tromcho --config "$D/tromcho.conf" selftest >/dev/null || fail "tromcho rejects the tromcho.conf make-certs wrote"

# Re-running keeps every CA and certificate.
sums=$(sha256sum "$D"/*.crt "$D"/*.key)
tromcho make-certs --dir "$D" >"$TESTDIR/out2"
[ "$sums" = "$(sha256sum "$D"/*.crt "$D"/*.key)" ] || fail "a re-run replaced certificates"
grep -q 'kept .*osd_ca.crt' "$TESTDIR/out2" || fail "re-run does not say it kept osd_ca"
# --force replaces them; admin is re-signed by the new client_ca
tromcho make-certs --dir "$D" --force >/dev/null
[ "$(sha256sum <"$D/osd_ca.crt")" != "$(echo "$sums" | awk '/osd_ca.crt/ {print $1}')  -" ] || fail "--force kept osd_ca"
verify "$D/admin.crt" "$D/client_ca.crt"

# User certificates
tromcho make-certs user alice --dir "$D" >/dev/null
verify "$D/alice.crt" "$D/client_ca.crt"
openssl x509 -in "$D/alice.crt" -noout -subject | grep -q 'CN *= *alice' || fail "alice CN"
[ "$(stat -c %a "$D/alice.key")" = 600 ] || fail "alice.key mode"
out=$(tromcho make-certs user bob --admin --dir "$D") || fail "user --admin: $out"
grep -q '"type":"admin"' <<<"$out" || fail "--admin does not say how to grant admin: $out"
expect_fail 'exists' tromcho make-certs user alice --dir "$D"
tromcho make-certs user alice --dir "$D" --force >/dev/null
expect_fail 'not a valid user name' tromcho make-certs user ../evil --dir "$D"
expect_fail 'not a valid user name' tromcho make-certs user client_ca --dir "$D"
expect_fail 'make-certs --dir' tromcho make-certs user carol --dir "$TESTDIR/empty"
expect_fail 'required' tromcho make-certs
expect_fail 'not one of ecdsa, ed25519, rsa' tromcho make-certs --dir "$TESTDIR/x" --key-type dsa
expect_fail 'days' tromcho make-certs --dir "$TESTDIR/x" --days 0

# Key types and validity
tromcho make-certs --dir "$TESTDIR/ed" --key-type ed25519 --days 1 >/dev/null
verify "$TESTDIR/ed/admin.crt" "$TESTDIR/ed/client_ca.crt"
openssl x509 -in "$TESTDIR/ed/admin.crt" -noout -text | grep -q 'ED25519' || fail "not an Ed25519 certificate"
openssl x509 -in "$TESTDIR/ed/admin.crt" -noout -checkend 3600 >/dev/null || fail "--days 1 expires within the hour"
openssl x509 -in "$TESTDIR/ed/admin.crt" -noout -checkend $((2 * 86400)) >/dev/null && fail "--days 1 lasts more than 2 days"
tromcho make-certs --dir "$TESTDIR/rsa" --key-type rsa >/dev/null
verify "$TESTDIR/rsa/admin.crt" "$TESTDIR/rsa/client_ca.crt"
openssl x509 -in "$TESTDIR/rsa/admin.crt" -noout -text | grep -q '3072 bit' || fail "not RSA-3072"
echo "make-certs checks passed"
