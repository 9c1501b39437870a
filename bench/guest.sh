#!/usr/bin/env bash
# A Linux guest on an export, the way a VM uses one (issue 17: "a Linux
# guest with nbd-client running mkfs.ext4 and a journaling workload"): a
# QEMU guest (TCG, or ACCEL=kvm; Debian's kernel, an
# initramfs with busybox, nbd-client, mkfs.ext4 and fio) attaches the
# export with the kernel's nbd-client through a guestfwd, as
# tests/test-nbd-kernel.sh does, times mkfs.ext4 of the whole device and
# runs bench/guest-init.sh's loads on ext4 (each fsync a journal commit).
# nbdkit runs with --filter=stats, so the NBD flushes and writes the guest's
# kernel sent are counted and timed at the export.
#   bench/guest.sh [SECONDS per load] [SIZE]      (from a built tree)
#   CASES="a c file" (environment) picks the cases: (a) plain image, mode
#   none; (c) XTS image, mode gcm everywhere; file: nbdkit file on a file
#   beside the OSDs' (what the guest path itself costs). NET=direct: the
#   guest reaches nbdkit through slirp's own forwarding to the host's
#   loopback (10.0.2.2) instead of the tests' guestfwd relay.
# Prints figures and the load average; never passes or fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-10} size=${2:-2G}
. "$top/bench/bench-functions.sh"
want=" ${CASES:-a c file} "
has () { case $want in *" $1 "*) return 0 ;; esac; return 1; }
G=$top/tests/guest
for t in qemu-system-x86_64 nbd-client fio busybox cpio; do
  command -v "$t" >/dev/null || { echo "$me: needs $t" >&2; exit 1; }
done
vmlinuz=$(ls -v /boot/vmlinuz-* 2>/dev/null | tail -n 1)
[ -n "$vmlinuz" ] || { echo "$me: no kernel in /boot (package linux-image-amd64)" >&2; exit 1; }
python3 "$G/vmlinux.py" "$vmlinuz" "$work/vmlinux"
GUEST_INIT=$top/bench/guest-init.sh GUEST_TOOLS=$(command -v fio) \
  "$G/make-initramfs.sh" "${vmlinuz#/boot/vmlinuz-}" /dev/null "$work/guest.cpio"
# TCG unless ACCEL=kvm: nested KVM inside this Firecracker VM stops with
# "KVM internal error ... emulation failure" while the kernel boots
accel=${ACCEL:-tcg}
bench_stamp "guest accel $accel, $secs s per load, $size"

# guest LABEL PORT EXPORT: boot the guest against 127.0.0.1:PORT, wait
guest () {
  local label=$1 p=$2 export=$3 con=$work/$1.console net=user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:10809-cmd:"python3 $G/relay.py 127.0.0.1 $p" host=10.0.2.100 gport=10809
  if [ "${NET:-}" = direct ]; then net=user,id=n0 host=10.0.2.2 gport=$p; fi
  timeout 1200 qemu-system-x86_64 -M pc -accel "$accel" -cpu max -m 1536 -smp 1 -nodefaults \
    -display none -no-reboot -bios /usr/share/qemu/qboot.rom -kernel "$work/vmlinux" -initrd "$work/guest.cpio" \
    -append "console=ttyS0 panic=-1 quiet tc.export=$export tc.secs=$secs tc.host=$host tc.port=$gport" -serial "file:$con" \
    -netdev "$net" \
    -device virtio-net-pci,netdev=n0 >"$work/$label.qemu" 2>&1 &
  local q=$!
  pids+=("$q")
  wait "$q" || { cat "$work/$label.qemu" >&2; echo "$me: qemu failed" >&2; exit 1; }
  grep -q "^TC-GUEST-OK" "$con" || { tail -n 30 "$con" >&2; echo "$me: $label: the guest failed" >&2; exit 1; }
}

# report LABEL: the guest's figures (its console) and the export's (nbdkit's stats file)
report () {
  python3 - "$1" "$work/$1.console" "$work/$1.stats" <<'PY'
import json, re, sys
label, con, stats = sys.argv[1:]
text = open(con, errors="replace").read()
times = dict(re.findall(r"^TC-TIME (\S+) (\S+)", text, re.M))
jobs = {m.group(1): json.loads(m.group(2))["jobs"][0]
        for m in re.finditer(r"^TC-JSON-BEGIN (\S+)\n(.*?)^TC-JSON-END", text, re.M | re.S)}
def sync_lat(j):
    pc = j.get("sync", {}).get("lat_ns", {}).get("percentile", {})
    return "%.0f / %.0f us" % (pc.get("50.000000", 0) / 1e3, pc.get("99.000000", 0) / 1e3)
print("%-16s mkfs.ext4 of the whole device %s s" % (label, times.get("mkfs", "?")))
for n in ("dev-write-4k", "dev-fsync-4k", "fsync-4k", "append-fdatasync", "fsync-4k-16jobs"):
    j = jobs[n]
    w = j["write"]["clat_ns"]["percentile"]
    print("%-16s %-18s %6.0f IOPS, write p50 %.0f us, sync p50 / p99 %s"
          % ("", n, j["write"]["iops"], w.get("50.000000", 0) / 1e3, sync_lat(j)))
j = jobs["dirty-256m"]
print("%-16s %-18s %6.0f MB/s into the page cache, then sync %s s"
      % ("", "dirty-256m", j["write"]["bw_bytes"] / 1e6, times.get("sync-after-256m", "?")))
# nbdkit's stats filter, the whole run: "flush: N ops, T s, ..."
for line in open(stats):
    m = re.match(r"(write|flush|trim|zero|read): (\d+) ops, ([\d.]+) s", line)
    if m and int(m.group(2)):
        n, t = int(m.group(2)), float(m.group(3))
        print("%-16s NBD %-14s %7d ops, %8.0f us each" % ("", m.group(1), n, t / n * 1e6))
PY
}

# serve_tcp LABEL EXPORT ARGS...: nbdkit ARGS on a loopback port with the
# stats filter; the guest against it; nbdkit stopped (it writes its stats
# on exit); the figures
serve_tcp () {
  local label=$1 export=$2 p n
  shift 2
  p=$(port)
  nbdkit -f -i 127.0.0.1 -p "$p" --filter=stats "$@" statsfile="$work/$label.stats" &
  n=$!
  pids+=("$n")
  wait_until nbdinfo --size "nbd://127.0.0.1:$p/$export" || { echo "$me: nbdkit ($label) did not start" >&2; exit 1; }
  guest "$label" "$p" "$export"
  kill "$n"
  wait "$n" 2>/dev/null || true
  report "$label"
}

if has a; then
  cluster plain 0 none
  TROMCHO_CONFIG=$CONF tromcho create a -s "$size" >/dev/null
  serve_tcp "(a) plain, none" a "$plugin" config="$CONF"
fi
if has c; then
  cluster sealed 1 gcm
  TROMCHO_CONFIG=$CONF tromcho create c -s "$size" --enc_key auto >/dev/null
  serve_tcp "(c) xts, gcm" c "$plugin" config="$CONF" proto_checksums=gcm
fi
if has file; then
  truncate -s "$size" "$work/raw.img"
  serve_tcp "nbdkit file" raw file "$work/raw.img"
fi
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
