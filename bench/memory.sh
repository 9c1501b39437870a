#!/usr/bin/env bash
# Resident memory under load: nbdkit tromcho (the plugin's process) and the
# three OSDs while fio writes random 4 KiB - 1 MiB blocks through four NBD
# connections at once (16 in flight each), then reads them back, then an
# fsx run (tests/partial-writes.py fsx: unaligned writes, zeroes and reads
# of 1 byte to 20 KiB sharing sectors, over four connections, checked
# against a model, never flushed; the load issue 17 saw nbdkit grow to 606
# MB under) for as long again; peak and end RSS of each process, sampled
# every 0.2 s.
#   bench/memory.sh [SECONDS] [SIZE]      (from a built tree)
#   CASES="a c" (environment): (a) plain image, mode none; (c) XTS, gcm.
#   PHASES="randwrite randread fsx" (environment): the loads, in order;
#   CONNS=4, BS=4k-1m: fio's connections and block size range (fio's nbd engine
#   sends any size, whatever maximum the export advertises).
# Prints figures; never passes or fails. The goals (bench/README.md): OSD
# under 100 MiB, nbdkit under 256 MiB whatever its connections do.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-30} size=${2:-1G}
. "$top/bench/bench-functions.sh"

want=" ${CASES:-a c} "
bench_stamp "$secs s each of ${PHASES:-randwrite randread fsx} (fio: ${CONNS:-4} connections x QD16, ${BS:-4k-1m}; fsx: 4 connections) over $size"

# fsx_loop SECONDS LOG: fsx runs of 2000 operations over four connections to
# the export until SECONDS have passed (each run connects anew)
fsx_loop () {
  local end=$((SECONDS + $1)) seed=1
  while [ $SECONDS -lt "$end" ]; do
    /usr/bin/python3 "$top/tests/partial-writes.py" fsx $seed 2000 "$URI" "$URI" "$URI" "$URI" >>"$2" 2>&1 || return 1
    seed=$((seed + 1))
  done
}

# run_case LABEL NAME: load the export served as NAME, sample its processes
run_case () {
  local label=$1 name=$2 d=$3
  local nbd osds p
  nbd=$(cat "$work/$name.pid")
  osds=$(for n in 1 2 3; do pgrep -f "osd_data $d/osd$n\$" | head -1; done)
  local -A peak=()
  for rw in ${PHASES:-randwrite randread fsx}; do
    if [ $rw = fsx ]; then
      fsx_loop "$secs" "$work/$name.fsx" &
    else
      fio --name=mem --ioengine=nbd --uri="$URI" --size="$size" --rw=$rw --bsrange="${BS:-4k-1m}" --iodepth=16 \
          --numjobs="${CONNS:-4}" --group_reporting --time_based --runtime="$secs" >"$work/$name.fio" 2>&1 &
    fi
    local f=$!
    while kill -0 "$f" 2>/dev/null; do
      for p in $nbd $osds; do
        local r
        r=$(awk '/^Rss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
        [ "${r:-0}" -gt "${peak[$p]:-0}" ] && peak[$p]=$r
      done
      sleep 0.2
    done
    if [ $rw = fsx ]; then
      wait "$f" || { echo "$me: fsx failed: $(tail -n 3 "$work/$name.fsx")" >&2; exit 1; }
      printf '%-22s fsx: %s\n' "$label" "$(awk '/ops in/ {n++; ops += $3} END {printf "%d runs, %d ops", n, ops}' "$work/$name.fsx")"
    else
      wait "$f" || { echo "$me: fio $rw failed: $(tail -n 3 "$work/$name.fio")" >&2; exit 1; }
      printf '%-22s %s: %s\n' "$label" $rw "$(grep -o '\(IOPS\|BW\)=[^ ,]*' "$work/$name.fio" | head -2 | tr '\n' ' ')"
    fi
  done
  printf '%-22s nbdkit peak %6d MiB, end %6d MiB\n' "$label" $(( ${peak[$nbd]:-0} / 1024 )) \
    $(( $(awk '/^Rss:/ {print $2}' "/proc/$nbd/smaps_rollup") / 1024 ))
  local n=1
  for p in $osds; do
    printf '%-22s OSD %d   peak %6d MiB, end %6d MiB\n' "$label" $n $(( ${peak[$p]:-0} / 1024 )) \
      $(( $(awk '/^Rss:/ {print $2}' "/proc/$p/smaps_rollup") / 1024 ))
    n=$((n + 1))
  done
}

if [[ $want == *" a "* ]]; then
  cluster plain 0 none
  TROMCHO_CONFIG=$CONF tromcho create a -s "$size" >/dev/null
  serve a "$CONF" a
  run_case "(a) plain, none" a "$work/plain"
fi
if [[ $want == *" c "* ]]; then
  cluster sealed 1 gcm
  TROMCHO_CONFIG=$CONF tromcho create c -s "$size" --enc_key auto >/dev/null
  serve c "$CONF" c proto_checksums=gcm
  run_case "(c) xts, gcm" c "$work/sealed"
fi
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
