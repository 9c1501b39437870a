#!/usr/bin/env bash
# NBD benchmark: fio (nbd engine) against nbdkit tromcho and its peers on
# this machine, in one run:
#   raw   fio (libaio, O_DIRECT) on a file beside the OSDs' files: the
#         disk's own limit (a 3-replica cluster can reach a third of it)
#   (a)   unencrypted image, transport mode none (no certificates)
#   (b)   AES-256-XTS image; the OSDs run in mode payload among
#         themselves and with the client (certificates: sealed headers and
#         salted checksums, the seed's recommended secure setup)
#   (b-c) the cluster of (c), the client alone connecting in payload
#   (c)   AES-256-XTS image, mode gcm everywhere (everything sealed)
#   file  nbdkit file on a raw file; luks: nbdkit file --filter=luks.
# Each cluster: tromcho-gateway + 3 OSDs on sparse files, pool_size 3.
#   bench/nbd.sh [SECONDS per profile] [SIZE]      (from a built tree)
#   CASES="raw a b b-c c file luks" (environment) runs only those cases;
#   OSD_BIN=PATH runs that tromcho-osd (another build: A/B comparisons);
#   PROFILES="write-1m-qd4 ..." only those profiles (bench/fio-nbd.sh lists
#   them with their preconditions).
# Prints figures and the load average; never passes or fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-10} size=${2:-1G}
. "$top/bench/bench-functions.sh"

want=" ${CASES:-raw a b b-c c file luks} "
has () { case $want in *" $1 "*) return 0 ;; esac; return 1; }
bench_stamp "fio $secs s per profile over $size" "profiles: ${PROFILES:-all}"
fio=$top/bench/fio-nbd.sh
if has raw; then
  "$fio" "raw file (O_DIRECT)" "$work/rawdisk.img" "$secs" "$size"
  rm -f "$work/rawdisk.img"
fi
if has a; then
  cluster plain 0 none
  TROMCHO_CONFIG=$CONF tromcho create a -s "$size" >/dev/null
  serve a "$CONF" a
  "$fio" "(a) plain, none" "$URI" "$secs" "$size"
fi
if has b; then
  cluster payload 1 payload
  TROMCHO_CONFIG=$CONF tromcho create b -s "$size" --enc_key auto >/dev/null
  serve b "$CONF" b
  "$fio" "(b) xts, OSDs payload" "$URI" "$secs" "$size"
fi
if has b-c || has c; then
  cluster sealed 1 gcm
  TROMCHO_CONFIG=$CONF tromcho create bc -s "$size" --enc_key auto >/dev/null
  if has b-c; then
    serve bc "$CONF" bc proto_checksums=payload
    "$fio" "(b-c) xts, client payload" "$URI" "$secs" "$size"
  fi
  if has c; then
    serve c "$CONF" bc proto_checksums=gcm
    "$fio" "(c) xts, gcm" "$URI" "$secs" "$size"
  fi
fi
if has file; then
  truncate -s "$size" "$work/raw.img"
  nbdkit -U "$work/file.sock" -P "$work/file.pid" file "$work/raw.img"
  pids+=($(pid_file "$work/file.pid"))
  "$fio" "nbdkit file" "nbd+unix:///?socket=$work/file.sock" "$secs" "$size"
fi
if has luks; then
  # qemu-img times its PBKDF from the CPU time it used, and on this VM
  # sometimes fails ("Unable to get accurate CPU usage"): try again.
  for try in 1 2 3 4 5; do
    qemu-img create -q -f luks --object secret,id=s0,data=bench -o key-secret=s0 "$work/luks.img" "$size" && break
    [ $try -lt 5 ] || exit 1
  done
  nbdkit -U "$work/luks.sock" -P "$work/luks.pid" --filter=luks file "$work/luks.img" passphrase=bench
  pids+=($(pid_file "$work/luks.pid"))
  "$fio" "nbdkit file+luks" "nbd+unix:///?socket=$work/luks.sock" "$secs" "$size"
fi
for c in plain payload sealed; do
  for n in 1 2 3; do
    pid=$(pgrep -f "osd_data $work/$c/osd$n\$" | head -1 || true)
    [ -n "$pid" ] && echo "# ($c) OSD $n RSS: $(ps -o rss= -p "$pid") KiB"
  done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
