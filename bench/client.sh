#!/usr/bin/env bash
# The cluster client's throughput: tromcho dd and bench/client-load (4 KiB
# random, 1 MiB sequential; reads and writes) on plain and encrypted images,
# in each transport mode (none, payload, gcm with certificates). A KV (etcd)
# and 2 OSDs on files (2 replicas) on this machine. Prints a table; never
# pass/fail. enc "auth" is an authenticated image (--enc_key auto --integrity),
# to compare with plain XTS ("yes").
# Usage: [MODES="none payload gcm"] [ENCS="no yes auth"] bench/client.sh [SECONDS per run, default 5]
set -u
top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
top_builddir=${top_builddir:-$top_srcdir}
export top_srcdir top_builddir
. "$top_srcdir/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
SECS=${1:-5}
LOAD=$top_builddir/bench/client-load
start_kv
tromcho make-certs --dir "$TESTDIR/pki" >/dev/null || fail "make-certs"
P=$TESTDIR/pki
CERTS=", \"osd_ca\": \"$P/osd_ca.crt\", \"client_ca\": \"$P/client_ca.crt\", \"osd_cert\": \"$P/osd_ca.crt\", \"osd_pkey\": \"$P/osd_ca.key\", \"cert\": \"$P/admin.crt\", \"pkey\": \"$P/admin.key\""
printf '%-8s %-5s %-22s %10s %10s %10s\n' mode enc test IOPS MB/s "avg us"
for mode in ${MODES:-none payload gcm}; do
  extra=", \"proto_checksums\": \"$mode\""
  [ $mode = gcm ] && extra="$extra$CERTS"
  EXTRA_CONF=$extra write_conf
  for n in 1 2; do stop_osd $n; done
  make_pool 1 32 2 2
  OSD_SIZE=4G start_osd 1
  OSD_SIZE=4G start_osd 2
  set_pgs 1 32 "1 2"
  for enc in ${ENCS:-no yes auth}; do
    img=b-$mode-$enc
    case $enc in yes) key="--enc_key auto";; auth) key="--enc_key auto --integrity";; *) key="";; esac
    # shellcheck disable=SC2086
    tromcho create $img -s 512M $key >/dev/null || fail "create $img"
    out=$(tromcho dd if=/dev/zero oimg=$img bs=1M count=256 iodepth=8 2>&1 | tail -1)
    printf '%-8s %-5s %-22s %10s %10s %10s\n' $mode $enc "dd write 1M qd8" - "$(echo "$out" | grep -o '[0-9.]* MB/s' | cut -d' ' -f1)" -
    out=$(tromcho dd iimg=$img of=/dev/null bs=1M count=256 iodepth=8 2>&1 | tail -1)
    printf '%-8s %-5s %-22s %10s %10s %10s\n' $mode $enc "dd read 1M qd8" - "$(echo "$out" | grep -o '[0-9.]* MB/s' | cut -d' ' -f1)" -
    for t in "randwrite 4k 1" "randwrite 4k 32" "randread 4k 1" "randread 4k 32" "write 1M 8" "read 1M 8"; do
      set -- $t
      out=$("$LOAD" $img $1 $2 $3 "$SECS" 2>&1 | tail -1)
      printf '%-8s %-5s %-22s %10s %10s %10s\n' $mode $enc "$1 $2 qd$3" \
        "$(echo "$out" | sed -n 's/.*: \([0-9]*\) IOPS.*/\1/p')" "$(echo "$out" | sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p')" \
        "$(echo "$out" | sed -n 's/.*avg \([0-9]*\) us.*/\1/p')"
    done
  done
done
