#!/usr/bin/env bash
# The KV client against a real KV server (etcd; tromcho-gateway with
# TROMCHO_KV=gateway): see test-kv-client.c for what it asserts.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
requires curl
start_kv kv
KV_URL=$KV_URL KV_RESTART="$top_srcdir/tests/kv-restart.sh $TESTDIR/kv" \
  timeout 120 "$top_builddir/tests/test-kv-client" || fail "test-kv-client"
echo "test-kv-client: ok"
