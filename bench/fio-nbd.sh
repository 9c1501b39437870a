#!/usr/bin/env bash
# Run the NBD benchmark profiles with fio against one target and print one
# line per profile: "<label> <profile> <IOPS> <MB/s> <mean lat us>".
#   bench/fio-nbd.sh LABEL URI|FILE [SECONDS] [SIZE]
# URI (nbd+unix://...): fio's nbd engine. FILE (a path): fio with libaio and
# O_DIRECT on that file, the physical limit of the disk under it.
# PROFILES="name ..." (environment) runs only those profiles, in the
# order below. Benchmarks print figures; they never pass or fail.
#
# Order and preconditions (each line says which it ran under):
#   prefill             1 MiB sequential writes over the whole image, once,
#                       untimed (not printed), also when PROFILES picks
#                       only some profiles: every later profile finds the
#                       image allocated, laid out sequentially ("fresh")
#   write-1m-qd4        fresh
#   read-1m-qd4         fresh
#   randwrite-4k-qd1, randwrite-4k-qd32, randwrite-4k-qd1-fsync (a flush
#                       after each write: fio --fsync=1),
#                       randwrite-4k-qd1-fua (each write with NBD's FUA
#                       flag: bench/nbd-fua.py, as fio's nbd engine has no
#                       FUA; on a FILE, fio --sync=1: O_SYNC writes, the
#                       block layer's FUA), randread-4k-*
#   write-1m-qd4-frag   after the 4 KiB random writes ("fragmented": the
#                       store's copy-on-write sectors scattered)
#   read-1m-qd4-frag    likewise
set -euo pipefail
label=$1 target=$2 secs=${3:-10} size=${4:-1G}
profiles=(
  "prefill            --rw=write --bs=1M --iodepth=4"
  "write-1m-qd4       --rw=write --bs=1M --iodepth=4"
  "read-1m-qd4        --rw=read --bs=1M --iodepth=4"
  "randwrite-4k-qd1   --rw=randwrite --bs=4k --iodepth=1"
  "randwrite-4k-qd32  --rw=randwrite --bs=4k --iodepth=32"
  "randwrite-4k-qd1-fsync --rw=randwrite --bs=4k --iodepth=1 --fsync=1"
  "randwrite-4k-qd1-fua --rw=randwrite --bs=4k --iodepth=1 --sync=1"
  "randread-4k-qd1    --rw=randread --bs=4k --iodepth=1"
  "randread-4k-qd32   --rw=randread --bs=4k --iodepth=32"
  "write-1m-qd4-frag  --rw=write --bs=1M --iodepth=4"
  "read-1m-qd4-frag   --rw=read --bs=1M --iodepth=4"
)
want=" ${PROFILES:-} "
case $target in
  nbd*) engine=(--ioengine=nbd --uri="$target") ;;
  *) engine=(--ioengine=libaio --direct=1 --filename="$target") ;;
esac
for p in "${profiles[@]}"; do
  name=${p%% *}
  args=${p#* }
  # prefill runs always, whatever PROFILES picks: a read of a block never
  # written is answered without touching the disk (the OSD has no object,
  # a sparse file has no extent), so a profile run alone on an empty
  # image measures less work than the same profile in a full run
  if [ "$want" != "  " ] && [ "$name" != prefill ]; then
    case $want in *" $name "*) ;; *) continue ;; esac
  fi
  if [ "$name" = prefill ]; then
    # shellcheck disable=SC2086
    fio --name=prefill "${engine[@]}" --size="$size" $args >/dev/null 2>&1
    continue
  fi
  if [ "$name" = randwrite-4k-qd1-fua ] && [ "${engine[0]}" = --ioengine=nbd ]; then
    # fio's nbd engine cannot set FUA: a small nbdsh-style loop does
    /usr/bin/python3 "$(dirname "$0")/nbd-fua.py" "$label" "$name" "$target" "$secs" \
      "$(numfmt --from=iec "$size")"
    continue
  fi
  # shellcheck disable=SC2086
  out=$(fio --name="$name" "${engine[@]}" --size="$size" --time_based --runtime="$secs" \
            --ramp_time=1 --output-format=json $args 2>/dev/null)
  echo "$out" | python3 -c '
import json, sys
label, name = sys.argv[1], sys.argv[2]
t = sys.stdin.read()
j = json.loads(t[t.index("{"):])["jobs"][0]
side = j["write"] if j["write"]["io_bytes"] else j["read"]
extra = ""
if j.get("sync", {}).get("lat_ns", {}).get("mean"):
    extra = "  sync %.1f us" % (j["sync"]["lat_ns"]["mean"] / 1000)
print("%-22s %-22s %10.0f IOPS %9.1f MB/s %9.1f us%s" % (label, name, side["iops"], side["bw_bytes"] / 1e6,
      side["clat_ns"]["mean"] / 1000, extra))' "$label" "$name"
done
