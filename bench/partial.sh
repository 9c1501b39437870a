#!/usr/bin/env bash
# What partial-sector safety costs (issue 18): fio (nbd engine) random
# writes of 512 bytes and 4 KiB, at QD 1 and 16, against nbdkit tromcho on
# an unencrypted and an AES-256-XTS image, for one or more builds of the
# tree in one run (so the disk is the same), e.g. before and after a change:
#   [ROUNDS=2] bench/partial.sh [SECONDS] [BUILD-DIR...]   (default: this tree)
# Each build gets its own cluster: tromcho-gateway + 3 OSDs on sparse files,
# pool_size 3, transport mode none. 4 KiB writes are aligned (fio aligns to
# bs), so they must cost nothing; 512-byte writes are partial sectors.
# Prints figures; never passes or fails.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-10}
shift || true
rounds=${ROUNDS:-2}
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=("$here")
size=256M
work=$(mktemp -d /var/tmp/tromcho-bench-partial.XXXXXX)
pids=()
cleanup () {
  local i
  for (( i=${#pids[@]}-1; i>=0; i-- )); do kill "${pids[$i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 1" INT TERM
port () { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_until () { local i; for i in $(seq 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

# cluster DIR TOP: gateway + 3 OSDs from build TOP; sets CONF
cluster () {
  local d=$1 top=$2 kv n
  mkdir -p "$d"
  kv=$(port)
  cat > "$d/tromcho.conf" <<JSON
{"etcd_address": ["http://127.0.0.1:$kv"], "gateway_address": "127.0.0.1:$kv", "gateway_data": "$d/gw",
 "proto_checksums": "none", "log_level": "warn"}
JSON
  CONF=$d/tromcho.conf
  TROMCHO_CONFIG=$CONF "$top/gateway/tromcho-gateway" >"$d/gw.log" 2>&1 &
  pids+=($!)
  wait_until curl -sf "http://127.0.0.1:$kv/health"
  for n in 1 2 3; do
    TROMCHO_CONFIG=$CONF "$top/cli/tromcho" osd-create --data "$d/osd$n" --osd_num $n --size 2G >/dev/null
    TROMCHO_CONFIG=$CONF "$top/osd/tromcho-osd" --osd_num $n --osd_data "$d/osd$n" >"$d/osd$n.log" 2>&1 &
    pids+=($!)
  done
  TROMCHO_CONFIG=$CONF "$top/cli/tromcho" pool-create rep3 --pg-size 3 --pg-minsize 2 --pg-count 32 \
    --failure-domain osd >/dev/null
  wait_until sh -c "TROMCHO_CONFIG=$CONF '$top/cli/tromcho' pool-ls --json | grep -q '\"pgs_active\": *32'"
}

echo "# $(date -u +%FT%TZ), $(nproc) cores, fio randwrite $secs s per profile over $size," \
     "builds interleaved per profile, ${rounds} rounds"
socks=() labels=()
i=0
for top in "${builds[@]}"; do
  top=$(cd "$top" && pwd)
  rev=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || basename "$top")
  i=$((i + 1))
  cluster "$work/c$i" "$top"
  TROMCHO_CONFIG=$CONF "$top/cli/tromcho" create plain -s $size >/dev/null
  TROMCHO_CONFIG=$CONF "$top/cli/tromcho" create xts -s $size --enc_key auto >/dev/null
  for img in plain xts; do
    sock=$work/c$i-$img.sock
    nbdkit -U "$sock" -P "$work/c$i-$img.pid" "$top/nbdkit-plugin/.libs/nbdkit-tromcho-plugin.so" \
      config="$CONF" image=$img
    for _ in $(seq 200); do [ -s "$work/c$i-$img.pid" ] && break; sleep 0.05; done   # written by nbdkit's child
    pids+=($(cat "$work/c$i-$img.pid"))
    # Fill the image once, so no profile pays for first writes.
    fio --name=fill --ioengine=nbd --uri="nbd+unix:///?socket=$sock" --size=$size --rw=write --bs=1M \
        --iodepth=4 >/dev/null 2>&1
    socks+=("$sock") labels+=("$rev $img")
  done
done
for r in $(seq "$rounds"); do
  for img in plain xts; do
    for p in "512 1" "512 16" "4k 1" "4k 16"; do
      set -- $p
      for k in "${!socks[@]}"; do
        [ "${labels[$k]##* }" = $img ] || continue
        out=$(fio --name=w --ioengine=nbd --uri="nbd+unix:///?socket=${socks[$k]}" --size=$size --time_based \
                  --runtime="$secs" --ramp_time=1 --output-format=json --rw=randwrite --bs=$1 --iodepth=$2 2>/dev/null)
        echo "$out" | python3 -c '
import json, sys
t = sys.stdin.read()
j = json.loads(t[t.index("{"):])["jobs"][0]["write"]
print("round %s %-20s randwrite bs=%-4s qd=%-3s %9.0f IOPS %9.1f us" % tuple(sys.argv[1:5] + [j["iops"],
      j["clat_ns"]["mean"] / 1000]))' "$r" "${labels[$k]}" $1 $2
      done
    done
  done
done
