#!/usr/bin/env bash
# KV throughput and latency: tromcho-gateway against etcd on this machine,
# with the same client and load (bench/kv-bench.py). Prints a table.
#
#   bench/kv.sh [OPS] [CONNS]        defaults: 10000 ops, 1,16 connections
#   bench/kv.sh --perms [OPS] [CONNS] [IMAGES]   the use_perms filter's cost (bench/kv-perms.sh)
# The C client (bench/kv-bench, built with the tree) drives the load;
# KV_BENCH_PYTHON=1 also runs the python3 one (kv-bench.py).
# Needs a built tree (gateway/tromcho-gateway) and etcd on PATH.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --perms ]; then shift; exec "$here/kv-perms.sh" "$@"; fi
top=${top_builddir:-$(cd "$here/.." && pwd)}
ops=${1:-10000}
conns=${2:-1,16}
gateway=$top/gateway/tromcho-gateway
command -v etcd >/dev/null || { echo "etcd is not installed (apt-get install etcd-server)"; exit 1; }
[ -x "$gateway" ] || { echo "$gateway: build the tree first"; exit 1; }

dir=$(mktemp -d /tmp/tromcho-kvbench.XXXXXX)
pids=()
cleanup () {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
port () { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_health () {
  for i in $(seq 100); do curl -sf "$1/health" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "no answer from $1"; exit 1
}

ep=$(port); pp=$(port); gp=$(port)
etcd --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:$ep --advertise-client-urls http://127.0.0.1:$ep \
  --listen-peer-urls http://127.0.0.1:$pp --initial-advertise-peer-urls http://127.0.0.1:$pp \
  --initial-cluster default=http://127.0.0.1:$pp > "$dir/etcd.log" 2>&1 &
pids+=($!)
echo '{}' > "$dir/empty.conf"
"$gateway" --config "$dir/empty.conf" --gateway_address 127.0.0.1:$gp --gateway_data "$dir/gw" \
  --log_level warn > "$dir/gw.log" 2>&1 &
pids+=($!)
# the same with one flush per commit (gateway_meta_sync false)
g1p=$(port)
"$gateway" --config "$dir/empty.conf" --gateway_address 127.0.0.1:$g1p --gateway_data "$dir/gw1" \
  --gateway_meta_sync false --log_level warn > "$dir/gw1.log" 2>&1 &
pids+=($!)
wait_health http://127.0.0.1:$ep
wait_health http://127.0.0.1:$gp
wait_health http://127.0.0.1:$g1p
# etcd answers /health before its first election settles
sleep 1

echo "KV bench: $ops ops per row, 100-byte values, one persistent HTTP connection per client process"
echo "$(nproc) CPUs, $(uname -r), etcd $(etcd --version | head -1 | awk '{print $3}')"
echo "rounds of $((ops / 10)) ops alternate between the servers, so all see the same background load"
echo "gateway: default (LMDB flushes data, then meta: 2 flushes per commit); gw-1flush: --gateway_meta_sync false"
if [ -x "$top/bench/kv-bench" ]; then
  echo "client: bench/kv-bench (C, libcurl, one thread per connection)"
  "$top/bench/kv-bench" etcd=http://127.0.0.1:$ep gateway=http://127.0.0.1:$gp gw-1flush=http://127.0.0.1:$g1p \
    --ops "$ops" --conns "$conns"
fi
if [ "${KV_BENCH_PYTHON:-0}" = 1 ] || [ ! -x "$top/bench/kv-bench" ]; then
  echo "client: bench/kv-bench.py (python3, one process per connection)"
  python3 "$here/kv-bench.py" --url etcd=http://127.0.0.1:$ep --url gateway=http://127.0.0.1:$gp \
    --url gw-1flush=http://127.0.0.1:$g1p --ops "$ops" --conns "$conns"
fi
