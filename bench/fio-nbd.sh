#!/usr/bin/env bash
# Run the NBD benchmark profiles with fio's nbd engine against one URI and
# print one line per profile: "<label> <profile> <IOPS> <MB/s> <mean lat us>".
#   bench/fio-nbd.sh LABEL URI [SECONDS] [SIZE]
# The profiles: 4 KiB randwrite/randread at QD 1 and 32, 1 MiB sequential
# write and read (QD 4). Benchmarks print figures; they never pass or fail.
set -euo pipefail
label=$1 uri=$2 secs=${3:-10} size=${4:-1G}
profiles=(
  "randwrite-4k-qd1  --rw=randwrite --bs=4k --iodepth=1"
  "randwrite-4k-qd32 --rw=randwrite --bs=4k --iodepth=32"
  "randread-4k-qd1   --rw=randread --bs=4k --iodepth=1"
  "randread-4k-qd32  --rw=randread --bs=4k --iodepth=32"
  "write-1m-qd4      --rw=write --bs=1M --iodepth=4"
  "read-1m-qd4       --rw=read --bs=1M --iodepth=4"
)
for p in "${profiles[@]}"; do
  name=${p%% *}
  args=${p#* }
  # shellcheck disable=SC2086
  out=$(fio --name="$name" --ioengine=nbd --uri="$uri" --size="$size" --time_based --runtime="$secs" \
            --ramp_time=1 --output-format=json $args 2>/dev/null)
  echo "$out" | python3 -c '
import json, sys
label, name = sys.argv[1], sys.argv[2]
t = sys.stdin.read()
j = json.loads(t[t.index("{"):])["jobs"][0]
side = j["write"] if j["write"]["io_bytes"] else j["read"]
print("%-22s %-18s %10.0f IOPS %9.1f MB/s %9.1f us" % (label, name, side["iops"], side["bw_bytes"] / 1e6,
      side["clat_ns"]["mean"] / 1000))' "$label" "$name"
done
