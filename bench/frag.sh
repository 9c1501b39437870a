#!/usr/bin/env bash
# What fragmentation costs 1 MiB writes, pass by pass: fio's nbd engine
# through nbdkit tromcho to 3 OSDs (pool_size 3). The image is prefilled
# (1 MiB blocks), rewritten once ("fresh"), scattered by 4 KiB random writes
# at QD32 for RANDSECS seconds, then rewritten in 1 MiB blocks PASSES
# times, SECONDS each. After each step: the MB/s and how much of the first
# OSD's data file is allocated (du), so the lines show where the store put
# the whole objects (in sectors it already used, or past them: the file
# grows, and the page cache with it) and what that cost.
#   bench/frag.sh [SECONDS] [CASES]                     (from a built tree)
#   CASES "a c" (default a); RANDSECS=8, PASSES=3; OSD_BIN=, PLUGIN_SO=
#   run another build (A/B), BENCH_BLOCK the block size (bench-functions.sh).
# Prints figures; never passes or fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-4} cases=${2:-a}
. "$top/bench/bench-functions.sh"
bench_stamp "1 GiB image, 1 MiB writes at QD4 for $secs s a pass" "osd ${OSD_BIN:-built}, plugin ${PLUGIN_SO:-built}"

# step LABEL MB/s: one line with osd1's allocated MiB
step () {
  printf '%-16s %-22s %8s MB/s   osd1 data file: %5s MiB allocated\n' \
    "$label" "$1" "$2" "$(du -sm "$work/$name/osd1" | cut -f1)"
}
# write1m SECONDS: MB/s of 1 MiB sequential writes from offset 0
write1m () {
  fio --name=x --ioengine=nbd --uri="$URI" --size=1G --rw=write --bs=1M --iodepth=4 \
      --time_based --runtime="$1" --output-format=terse 2>&1 | awk -F';' '/^3;/ {printf "%.1f", $48 * 1024 / 1e6}'
}

for c in $cases; do
  serve_case "$c"
  fio --name=prefill --ioengine=nbd --uri="$URI" --size=1G --rw=write --bs=1M --iodepth=4 >/dev/null 2>&1
  step "prefill" "-"
  step "write-1m (fresh)" "$(write1m "$secs")"
  mbs=$(fio --name=r --ioengine=nbd --uri="$URI" --size=1G --rw=randwrite --bs=4k --iodepth=32 \
        --time_based --runtime="${RANDSECS:-8}" --output-format=terse 2>&1 | awk -F';' '/^3;/ {printf "%.1f", $48 * 1024 / 1e6}')
  step "randwrite-4k-qd32" "$mbs"
  for p in $(seq "${PASSES:-3}"); do
    step "write-1m pass $p" "$(write1m "$secs")"
  done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
