#!/usr/bin/env bash
# FUA writes among other writes: through one nbdkit tromcho, a QD1 stream
# of 4 KiB writes with NBD's FUA flag (bench/nbd-fua.py) while a second
# connection writes 4 KiB at QD8 without FUA or flush (a guest's data
# writes between its journal commits). OSDS OSDs (default 6) on files,
# pg_size 3, pg_minsize 2, 48 PGs. An emulated FUA (write + flush) syncs
# every OSD written since the last flush; a native one only the written
# object's replicas. Prints both streams per build.
#   bench/fua-mixed.sh [SECONDS] [OSDS] [BUILD-DIR...]   (default: this tree)
# Several build dirs run one after the other (A B A B: give them twice).
# Figures only: it never decides pass or fail.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-5} nosd=${2:-6}
shift $(( $# > 2 ? 2 : $# ))
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=("$here")
echo "# $(date -u +%FT%TZ), $(nproc) cores, $nosd OSDs, $secs s, load $(cut -d' ' -f1-3 /proc/loadavg)"
for b in "${builds[@]}"; do
  (
    top_builddir=$b top_srcdir=$here
    . "$here/tests/functions.sh"
    . "$here/tests/kv-functions.sh"
    . "$here/tests/cluster-functions.sh"
    . "$here/tests/nbd-functions.sh"
    PLUGIN=$b/nbdkit-plugin/.libs/nbdkit-tromcho-plugin.so
    label=$(git -C "$b" rev-parse --short HEAD 2>/dev/null || basename "$b")
    LOG_LEVEL=error start_kv >/dev/null
    write_conf
    make_pool 1 48 3 2
    osds=$(seq -s' ' 1 "$nosd")
    for n in $osds; do start_osd "$n"; done
    set_pgs 1 48 "$osds" 3
    tromcho create a -s 1G >/dev/null
    start_nbdkit srv -- config="$CONF"
    u=$(uri srv a)
    fio --name=bg --ioengine=nbd --uri="$u" --rw=randwrite --bs=4k --iodepth=8 --size=1G --time_based \
        --runtime=$((secs + 2)) --output-format=json >"$TESTDIR/bg.json" 2>/dev/null &
    bg=$!
    sleep 1
    /usr/bin/python3 "$here/bench/nbd-fua.py" "$label" "fua qd1 (with bg)" "$u" "$secs" $((1 << 30))
    wait $bg
    python3 - "$TESTDIR/bg.json" "$label" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]["write"]
print("%-22s %-22s %10.0f IOPS %9.1f MB/s %9.1f us" % (sys.argv[2], "background qd8", j["iops"], j["bw_bytes"] / 1e6,
                                                      j["clat_ns"]["mean"] / 1000))
PY
  )
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
