#!/usr/bin/env bash
# FUSE benchmark: the profiles of bench/fio-nbd.sh (fio, libaio, O_DIRECT)
# on an image file, in one run:
#   tromcho-fuse   the image as a file under tromcho-fuse's mount point
#   nbdfuse        the same cluster's image under nbdfuse over nbdkit tromcho
#                  (4 connections, nbdfuse's default), the reference the
#                  FUSE path should at least match
# Cases (each a cluster: tromcho-gateway + 3 OSDs on sparse files, pool_size 3):
#   (a) unencrypted image, transport mode none
#   (c) AES-256-XTS image, mode gcm everywhere (everything sealed)
#   bench/fuse.sh [SECONDS per profile] [SIZE]      (from a built tree)
#   CASES="a c" and PROFILES="..." (environment) as in bench/nbd.sh.
# Each front end gets its own image, prefilled by fio-nbd.sh as nbd.sh does.
# Prints figures and the load average; never passes or fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-10} size=${2:-1G}
. "$top/bench/bench-functions.sh"

# fuse_pair NAME CERTS MODE LABEL: one cluster, an image under each front end
fuse_pair () {
  local name=$1 label=$4 mnt
  cluster "$name" "$2" "$3"
  local enc=()
  [ "$3" = none ] || enc=(--enc_key auto)
  TROMCHO_CONFIG=$CONF tromcho create "$name-fuse" -s "$size" "${enc[@]}" >/dev/null
  TROMCHO_CONFIG=$CONF tromcho create "$name-nbd" -s "$size" "${enc[@]}" >/dev/null

  mnt=$work/$name-fuse.mnt
  mkdir -p "$mnt"
  TROMCHO_CONFIG=$CONF tromcho-fuse "$mnt" -f >"$work/$name-fuse.log" 2>&1 &
  local fpid=$!
  mounts+=("$mnt")
  wait_until test -e "$mnt/$name-fuse" || { echo "$me: tromcho-fuse did not show $name-fuse: $(tail -3 "$work/$name-fuse.log")" >&2; exit 1; }
  "$top/bench/fio-nbd.sh" "($name) tromcho-fuse" "$mnt/$name-fuse" "$secs" "$size"
  local rss
  rss=$(ps -o rss= -p "$fpid" || echo "?")

  serve "$name-nbd" "$CONF" "$name-nbd" proto_checksums="$3"
  mnt=$work/$name-nbdfuse.mnt
  mkdir -p "$mnt"
  nbdfuse -P "$work/$name-nbdfuse.pid" "$mnt" "$URI" >"$work/$name-nbdfuse.log" 2>&1 &
  mounts+=("$mnt")
  wait_until test -s "$work/$name-nbdfuse.pid" || { echo "$me: nbdfuse did not start: $(tail -3 "$work/$name-nbdfuse.log")" >&2; exit 1; }
  "$top/bench/fio-nbd.sh" "($name) nbdfuse" "$mnt/nbd" "$secs" "$size"
  echo "# ($label) tromcho-fuse RSS after its profiles: $rss KiB"
}

want=" ${CASES:-a c} "
has () { case $want in *" $1 "*) return 0 ;; esac; return 1; }
bench_stamp "fio $secs s per profile over $size" "profiles: ${PROFILES:-all}"
has a && fuse_pair fa 0 none "plain, none"
has c && fuse_pair fc 1 gcm "xts, gcm"
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
