#!/usr/bin/env bash
# CPU cost of the data path: seconds of CPU (user + system) that the three
# OSDs and nbdkit tromcho spend per GiB written and read, 1 MiB blocks at
# QD4 through fio's nbd engine, case (c) (XTS + gcm) or (a) (plain, none).
# On a machine whose CPUs are the limit this is steadier than MB/s (which
# follows whatever else runs), so it is the figure to compare builds by.
#   bench/cpu-per-gib.sh [GIB per direction] [CASES]     (from a built tree)
#   CASES "a c" (default c); OSD_BIN=, PLUGIN_SO= run another build (A/B).
# Prints figures; never passes or fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=${1:-3} cases=${2:-c}
. "$top/bench/bench-functions.sh"
bench_stamp "$gib GiB each way over a 1 GiB image" "osd ${OSD_BIN:-built}, plugin ${PLUGIN_SO:-built}"
ticks=$(getconf CLK_TCK)
for c in $cases; do
  serve_case "$c"
  fio --name=prefill --ioengine=nbd --uri="$URI" --size=1G --rw=write --bs=1M --iodepth=4 >/dev/null 2>&1
  for rw in write read; do
    c0=$(case_cpu_ticks $name $img) s0=$(date +%s%N)
    fio --name=x --ioengine=nbd --uri="$URI" --size=1G --io_size="${gib}G" --rw=$rw --bs=1M --iodepth=4 >/dev/null 2>&1
    c1=$(case_cpu_ticks $name $img) s1=$(date +%s%N)
    awk -v c="($c)" -v rw="$rw" -v t=$((c1 - c0)) -v hz="$ticks" -v g="$gib" -v ns=$((s1 - s0)) \
      'BEGIN { printf "%-5s %-6s %6.3f CPU s/GiB  %7.1f MB/s\n", c, rw, t / hz / g, g * 1073741824 / (ns / 1e9) / 1e6 }'
  done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
