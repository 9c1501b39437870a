#!/usr/bin/env bash
# The KV client's tests (test-kv-client.sh) against tromcho-gateway's
# embedded KV instead of etcd: one client, both servers.
export TROMCHO_KV=gateway
exec "${top_srcdir:-$(dirname "$0")/..}/tests/test-kv-client.sh" "$@"
