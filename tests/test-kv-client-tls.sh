#!/usr/bin/env bash
# The KV client over https with client certificates (etcd with
# --client-cert-auth): the whole test-kv-client run, plus the CLI with
# etcd_ca/etcd_client_cert/etcd_client_key, with cert/pkey, and refusals
# without a client certificate or with the wrong CA.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
requires curl tromcho
start_kv_tls kvtls
pki=$TESTDIR/kvtls/pki
KV_URL=$KV_URL KV_CA=$pki/ca.crt KV_CERT=$pki/client.crt KV_KEY=$pki/client.key \
  KV_CURLOPTS="$(cat "$TESTDIR/kvtls/curlopts")" KV_RESTART="$top_srcdir/tests/kv-restart.sh $TESTDIR/kvtls" \
  timeout 120 "$top_builddir/tests/test-kv-client" || fail "test-kv-client over https"

echo "{}" > "$TESTDIR/empty.conf"
export TROMCHO_CONFIG=$TESTDIR/empty.conf
tromcho --etcd_address "$KV_URL" --etcd_ca "$pki/ca.crt" --etcd_client_cert "$pki/client.crt" \
  --etcd_client_key "$pki/client.key" pool-create tls --pg-size 2 --pg-count 4 | grep -q created || fail "pool-create over https"
tromcho --etcd_address "$KV_URL" --etcd_ca "$pki/ca.crt" --cert "$pki/client.crt" --pkey "$pki/client.key" \
  pool-ls | grep -q "tls" || fail "pool-ls over https with cert/pkey"
expect_fail "kv: https://127.0.0.1:[0-9]+: " tromcho --etcd_address "$KV_URL" --etcd_ca "$pki/ca.crt" --etcd_slow_timeout 1000 pool-ls
make_kv_pki "$TESTDIR/other" || fail "second PKI"
expect_fail "kv: https://127.0.0.1:[0-9]+: .*(certificate|SSL|verif)" tromcho --etcd_address "$KV_URL" \
  --etcd_ca "$TESTDIR/other/ca.crt" --cert "$pki/client.crt" --pkey "$pki/client.key" --etcd_slow_timeout 1000 pool-ls
expect_fail "without its key" tromcho --etcd_address "$KV_URL" --cert "$pki/client.crt" pool-ls
echo "test-kv-client-tls: ok"
