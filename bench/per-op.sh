#!/usr/bin/env bash
# What one 4 KiB request costs each process on the path: fio's nbd engine
# at QD32 through nbdkit tromcho to 3 OSDs (pool_size 3), random reads then
# random writes over a prefilled image; for fio, nbdkit and each OSD, the
# CPU time (user + system, all threads), the context switches (voluntary
# and not) and the system calls (both with perf, from linux-perf), each
# divided by the requests fio completed meanwhile. On a VM every wake-up of
# a sleeping thread or vCPU is costly, so the switches say as much as the
# CPU. The window is the middle of each run (after 2 s, for SECONDS - 3 s).
#   bench/per-op.sh [SECONDS] [CASES]      (from a built tree)
#   CASES "a c" (default c: XTS + gcm); PLUGIN_SO=, OSD_BIN= run another
#   build (A/B); RWS="randread randwrite" the patterns, QD=32 the depth.
# Prints figures; never passes or fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-8} cases=${2:-c}
[ "$secs" -ge 5 ] || { echo "per-op.sh: SECONDS must be at least 5" >&2; exit 2; }
. "$top/bench/bench-functions.sh"
bench_stamp "fio $secs s per pattern at QD${QD:-32}" "osd ${OSD_BIN:-built}, plugin ${PLUGIN_SO:-built}"
ticks=$(getconf CLK_TCK)
have_perf=0
perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1 && have_perf=1

# CPU ticks (user + system) of process $1, its exited threads included
ticks_of () { awk '{print $14 + $15}' "/proc/$1/stat"; }

for c in $cases; do
  serve_case "$c"
  fio --name=prefill --ioengine=nbd --uri="$URI" --size=1G --rw=write --bs=1M --iodepth=4 >/dev/null 2>&1
  nbd=$(cat "$work/$c.pid")
  osds=$(pgrep -f "osd_data $work/$name/osd[0-9]\$" | tr '\n' ' ')
  for rw in ${RWS:-randread randwrite}; do
    fio --name=x --ioengine=nbd --uri="$URI" --size=1G --rw="$rw" --bs=4k --iodepth="${QD:-32}" \
        --time_based --runtime="$secs" --output-format=terse >"$work/fio.txt" 2>&1 &
    fpid=$!
    pids+=("$fpid")
    sleep 2
    fiop=$(pgrep -P "$fpid" -x fio || echo "$fpid")   # the job runs in a child
    procs="$fiop $nbd $osds"
    declare -A u0=() u1=()
    for p in $procs; do u0[$p]=$(ticks_of "$p"); done
    win=$((secs - 3))
    perfs=()
    if [ $have_perf = 1 ]; then
      for p in $procs; do
        perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$p" -o "$work/sc-$p.txt" -- sleep "$win" >/dev/null 2>&1 &
        perfs+=($!)
      done
    fi
    sleep "$win"
    for p in $procs; do u1[$p]=$(ticks_of "$p"); done
    wait "$fpid" || true
    for p in "${perfs[@]}"; do wait "$p" || true; done
    iops=$(awk -F';' '/^3;/ {print int($8 + $49)}' "$work/fio.txt")
    if [ -z "$iops" ] || [ "$iops" = 0 ]; then
      echo "$label $rw: fio failed: $(tail -2 "$work/fio.txt")"
      continue
    fi
    ops=$((iops * win))
    printf '%-16s %-10s %6d IOPS   per request:\n' "$label" "$rw" "$iops"
    for p in $procs; do
      role=$(cat "/proc/$p/comm" 2>/dev/null || echo "?")
      [ "$p" = "$fiop" ] && role=fio
      [ "$p" = "$nbd" ] && role=nbdkit
      sc=- cs=-
      if [ $have_perf = 1 ] && [ -s "$work/sc-$p.txt" ]; then
        sc=$(awk -F, -v o="$ops" '/raw_syscalls/ {printf "%.1f", $1 / o}' "$work/sc-$p.txt")
        cs=$(awk -F, -v o="$ops" '/context-switches/ {printf "%.2f", $1 / o}' "$work/sc-$p.txt")
      fi
      awk -v r="$role" -v p="$p" -v t=$((u1[$p] - u0[$p])) -v hz="$ticks" -v o="$ops" -v sc="${sc:--}" -v cs="${cs:--}" \
        'BEGIN {printf "    %-12s %7d  cpu %6.1f us  switches %5s  syscalls %s\n", r, p, t * 1e6 / hz / o, cs, sc}'
    done
    unset u0 u1
  done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
