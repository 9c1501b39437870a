#!/usr/bin/env bash
# bench/osd.sh: 3 OSDs on files, pool pg_size 3 (pg_minsize 2, 16 PGs with
# their primaries spread over the OSDs), driven by tests/osd-client from one
# process: 4 KiB random write and read at 1 and 32 in flight, 1 MiB
# sequential write and read, in transport modes none, payload and gcm (with
# certificates from `tromcho make-certs`, so payload seals the headers too).
# Prints one line per run and the OSDs' resident memory. Figures only: it
# never decides pass or fail.
#
#   bench/osd.sh [SECONDS-PER-RUN (default 5)] [MODES (default "none payload gcm")]
#
# Run from the build tree after `make`; etcd must be installed.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
top_builddir=${top_builddir:-$here}
top_srcdir=${top_srcdir:-$here}
. "$top_srcdir/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires etcd tromcho tromcho-osd "$OSD_CLIENT"
SECS=${1:-5}
MODES=${2:-none payload gcm}

C=$TESTDIR/certs
tromcho make-certs --dir "$C" >/dev/null || fail "make-certs"
start_kv
make_pool 1 3 2 16
set_pgs 1 16 "1 2 3" "1,2,3"
for n in 1 2 3; do
  tromcho osd-create --data "$TESTDIR/osd$n.data" --osd_num $n --size 2G --etcd_address "$KV_URL" >/dev/null ||
    fail "osd-create $n"
done
I=$(( (1 << 48) | 1 ))
SIZE=128M
echo "bench/osd: 3 OSDs, pg_size 3, pg_minsize 2, 16 PGs, block 128 KiB, $SECS s a run, $(nproc) CPUs"
echo "$(uname -r); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"

for mode in $MODES; do
  OSD_OPTS="--config $C/tromcho.conf --proto_checksums $mode --log_level warn"
  for n in 1 2 3; do start_osd $n; done
  client () { "$OSD_CLIENT" --config "$C/tromcho.conf" --proto_checksums "$mode" --etcd_address "$KV_URL" "$@"; }
  client wait-clean --pool 1 --timeout 30 >/dev/null || fail "PGs not clean"
  # Fill the region once so reads find data (and the first mode's writes
  # are not all first writes).
  [ "$mode" = "${MODES%% *}" ] && { client write --inode $I --offset 0 --len $SIZE --seed 1 >/dev/null || fail "prefill"; }
  echo "== mode $mode"
  for run in "randwrite 4k 1" "randwrite 4k 32" "randread 4k 1" "randread 4k 32" "write 1M 1" "read 1M 1"; do
    set -- $run
    client bench --inode $I --rw $1 --bs $2 --iodepth $3 --seconds "$SECS" --size $SIZE --timeout 10 ||
      echo "  (run failed)"
  done
  client sync >/dev/null || echo "  (sync failed)"
  rss=""
  for n in 1 2 3; do
    rss="$rss osd$n=$(awk '/VmRSS/ {print $2 $3}' /proc/"$(cat "$TESTDIR/osd$n.pid")"/status)"
  done
  echo "  resident memory:$rss"
  for n in 1 2 3; do kill_osd $n; done
done
