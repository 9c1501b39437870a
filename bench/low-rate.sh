#!/usr/bin/env bash
# What a trickle of requests costs: fio's nbd engine at QD1, rate-limited
# (--rate_iops), 4 KiB random writes then reads over a prefilled image,
# through nbdkit tromcho to 3 OSDs (pool_size 3). Prints the CPU seconds
# (user + system, all threads) the OSDs and nbdkit spent and the latency
# percentiles fio saw. Idle polling (idle_poll_us) trades CPU for latency;
# at a low rate no poll catches the next request, which is what this shows.
#   bench/low-rate.sh [SECONDS] [CASES]      (from a built tree)
#   CASES "a c" (default c: XTS + gcm); RATE=300 requests a second;
#   RWS="randwrite randread"; PLUGIN_SO=, OSD_BIN= run another build (A/B);
#   BENCH_CONF='{"idle_poll_us": 0}' options for every daemon and client.
# Prints figures; never passes or fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-8} cases=${2:-c} rate=${RATE:-300}
. "$top/bench/bench-functions.sh"
bench_stamp "fio $secs s per pattern at QD1, $rate requests/s" "osd ${OSD_BIN:-built}, plugin ${PLUGIN_SO:-built}"
ticks=$(getconf CLK_TCK)
for c in $cases; do
  serve_case "$c"
  fio --name=prefill --ioengine=nbd --uri="$URI" --size=256M --rw=write --bs=1M --iodepth=4 >/dev/null 2>&1
  for rw in ${RWS:-randwrite randread}; do
    t0=$(case_cpu_ticks "$name" "$img")
    out=$(fio --name=x --ioengine=nbd --uri="$URI" --size=256M --rw="$rw" --bs=4k --iodepth=1 \
              --rate_iops="$rate" --time_based --runtime="$secs" --output-format=json 2>/dev/null)
    t1=$(case_cpu_ticks "$name" "$img")
    echo "$out" | python3 -c '
import json, sys
label, rw = sys.argv[1], sys.argv[2]
cpu = int(sys.argv[3]) / int(sys.argv[4])
t = sys.stdin.read()
j = json.loads(t[t.index("{"):])["jobs"][0]
s = j["write"] if j["write"]["io_bytes"] else j["read"]
p = s["clat_ns"]["percentile"]
print("%-18s %-10s %6.0f IOPS  OSDs+nbdkit %5.2f CPU s (%4.0f us a request)  p50 %5.0f  p90 %5.0f  p99 %6.0f us"
      % (label, rw, s["iops"], cpu, cpu / max(s["total_ios"], 1) * 1e6, p["50.000000"] / 1e3,
         p["90.000000"] / 1e3, p["99.000000"] / 1e3))' "$label" "$rw" "$((t1 - t0))" "$ticks"
  done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
