#!/usr/bin/env bash
# What the use_perms access filter costs: two tromcho-gateways with the same
# store (10,000 images of user alice in pool 1, her user record, the pool),
# both over HTTPS with client certificates, one with use_perms and one
# without, and the same client load: alice puts and gets her own image
# records (/config/inode/1/<id>), which the filter checks against the
# record, her /config/user record and the pool on every request.
#
#   bench/kv-perms.sh [OPS] [CONNS] [IMAGES]   defaults: 5000 ops, 1,16 connections, 10000 images
# Needs a built tree (gateway/tromcho-gateway, cli/tromcho, bench/kv-bench).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=${top_builddir:-$(cd "$here/.." && pwd)}
ops=${1:-5000}
conns=${2:-1,16}
images=${3:-10000}
[ "$ops" -le "$images" ] || { echo "OPS ($ops) must not exceed IMAGES ($images): alice writes her own images"; exit 1; }
gateway=$top/gateway/tromcho-gateway
bench=${KV_BENCH:-$top/bench/kv-bench}
for p in "$gateway" "$bench" "$top/cli/tromcho"; do [ -x "$p" ] || { echo "$p: build the tree first"; exit 1; }; done

dir=$(mktemp -d /tmp/tromcho-kvperms.XXXXXX)
pids=()
cleanup () {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
port () { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P=$dir/pki
"$top/cli/tromcho" make-certs --dir "$P" >/dev/null
"$top/cli/tromcho" make-certs user alice --dir "$P" >/dev/null
tls=(--cacert "$P/antietcd.crt")
as_admin=("${tls[@]}" --cert "$P/admin.crt" --key "$P/admin.key")
as_alice=("${tls[@]}" --cert "$P/alice.crt" --key "$P/alice.key")
echo '{}' > "$dir/empty.conf"

# start NAME PORT USE_PERMS: a gateway over HTTPS (no monitor: this is the KV alone).
start () {
  "$gateway" --config "$dir/empty.conf" --gateway_address 127.0.0.1:$2 --gateway_data "$dir/$1" \
    --antietcd_cert "$P/antietcd.crt" --antietcd_key "$P/antietcd.key" --client_ca "$P/client_ca.crt" \
    --osd_ca "$P/osd_ca.crt" --mon_ca "$P/mon_ca.crt" --use_perms "$3" --gateway_monitor false \
    --log_level error >> "$dir/$1.log" 2>&1 &
  pids+=($!)
  for i in $(seq 300); do curl -sf "${as_admin[@]}" "https://127.0.0.1:$2/health" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "gateway $1 did not start: $(cat "$dir/$1.log")"; exit 1
}
put () {
  curl -sf "${as_admin[@]}" -X POST "$1/v3/kv/put" \
    -d "{\"key\":\"$(printf '%s' "$2" | base64 -w0)\",\"value\":\"$(printf '%s' "$3" | base64 -w0)\"}" >/dev/null
}
img='{"name":"img%d","size":4194304,"owner":"alice"}'
for g in perms noperms; do
  p=$(port)
  start "$g" "$p" false
  u=https://127.0.0.1:$p
  put "$u" /tromcho/config/user/alice '{"type":"client","groups":["staff"]}'
  put "$u" /tromcho/config/pools '{"1":{"name":"p1","pg_count":64,"pg_size":3,"pg_minsize":2,"creator_group":"staff"}}'
  "$bench" load="$u" "${as_admin[@]}" --ops "$images" --conns 16 --rounds 1 \
    --key-format '/tromcho/config/inode/1/%d' --value-format "$img" >/dev/null
  "$bench" load="$u" "${as_admin[@]}" --ops "$images" --conns 16 --rounds 1 \
    --key-format '/tromcho/index/image/img%d' --value-format '{"id":%d,"pool_id":1}' >/dev/null
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
  [ $g = perms ] && start "$g" "$p" true || start "$g" "$p" false
  eval "url_$g=$u"
done
# The filter is really on: alice may not write the pool.
out=$(curl -s "${as_alice[@]}" -X POST "$url_perms/v3/kv/put" \
  -d "{\"key\":\"$(printf /tromcho/config/pools | base64 -w0)\",\"value\":\"e30=\"}")
echo "$out" | grep -q 'permission denied' || { echo "use_perms is not in force: $out"; exit 1; }

echo "KV filter bench: $images images of alice (2 records each), $ops ops per row as alice over HTTPS with"
echo "client certificates; rows alternate between the servers in rounds of $((ops / 10)) ops"
echo "$(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "perms: use_perms true (every request checked); noperms: use_perms false (same TLS, no filter)"
"$bench" perms="$url_perms" noperms="$url_noperms" "${as_alice[@]}" --ops "$ops" --conns "$conns" \
  --key-format '/tromcho/config/inode/1/%d' --value-format "$img"
