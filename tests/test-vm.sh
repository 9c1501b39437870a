#!/usr/bin/env bash
# The appliance VM end to end, as `./appliance test --vm` runs it (not part
# of `make check`: it boots a whole Debian system under TCG, minutes).
# Usage: tests/test-vm.sh IMAGE.qcow2 (vm/build-image.sh makes one).
#
# The image boots under QEMU (TCG, UEFI with OVMF, systemd-boot) on a
# throw-away overlay with a fresh data disk; its first boot
# (tromcho-firstboot.service) makes the certificates and a cluster on the
# data disk and serves the image demo with nbdkit-tromcho@tenant; the host
# reaches it only through a hostfwd of a restrict=on user network on
# 127.0.0.1. Then the throw-away kernel guest of test-nbd-kernel.sh
# (tests/guest/) attaches that export as /dev/nbd0 with nbd-client, writes
# and reads raw bytes, runs mkfs.ext4, mounts, writes files and mounts
# again; the host checks the bytes with nbdsh and nbdcopy and the file
# system with e2fsck -fn. Then the same over TLS: the host made the tenant's
# NBD CA (tromcho make-certs nbd) and gave the VM the server's files through
# fw_cfg; the guest's nbd-client presents the client certificate, a client
# without one or with another CA's is refused. Last, the appliance is
# powered off through ACPI and booted again: its enabled units serve what
# was written.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires tromcho qemu-system-x86_64 qemu-img nbd-client busybox cpio e2fsck debugfs python3 nbdinfo nbdcopy nbdsh
if [ $# != 1 ] || [ ! -f "$1" ]; then fail "usage: tests/test-vm.sh IMAGE.qcow2"; fi
IMAGE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
OVMF=/usr/share/ovmf/OVMF.fd
[ -f "$OVMF" ] || fail "no $OVMF (package ovmf)"
. "$top_srcdir/tests/nbd-functions.sh"   # nbdsh with the python3 that has nbd
. "$top_srcdir/tests/guest/guest-functions.sh"
kernel_guest_setup

# The built image stays as it is: the VM boots an overlay of it.
qemu-img create -q -f qcow2 -b "$IMAGE" -F qcow2 "$TESTDIR/system.qcow2" || fail "qemu-img create overlay"
qemu-img create -q -f qcow2 "$TESTDIR/data.qcow2" 8G || fail "qemu-img create data disk"
PORT=$(free_port) TPORT=$(free_port)
URI=nbd://127.0.0.1:$PORT/demo
NBD=$TESTDIR/nbd
tromcho make-certs nbd --dir "$NBD" --user tenant >/dev/null || fail "make-certs nbd"
tromcho make-certs nbd --dir "$TESTDIR/other" --user tenant >/dev/null || fail "make-certs nbd (another CA)"
TLS_URI="nbds://127.0.0.1:$TPORT/demo?tls-certificates=$NBD/nbd-client-tenant"
FW_CFG=()
for f in ca-cert.pem server-cert.pem server-key.pem; do
  FW_CFG+=(-fw_cfg "name=opt/tromcho/nbd-tls/$f,file=$NBD/nbd-server-tenant/$f")
done
APP_PID=

# appliance_boot NAME: boot the appliance; its console in NAME.console
appliance_boot () {
  local name=$1
  rm -f "$TESTDIR/qmp.sock"
  timeout 1800 qemu-system-x86_64 -M q35 -accel tcg -cpu max -m 2048 -smp 2 \
    -nodefaults -display none -no-reboot -bios "$OVMF" \
    -drive "file=$TESTDIR/system.qcow2,if=virtio,format=qcow2" \
    -drive "file=$TESTDIR/data.qcow2,if=none,id=data,format=qcow2" -device virtio-blk-pci,drive=data,serial=tromcho-data \
    -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$PORT-:10809,hostfwd=tcp:127.0.0.1:$TPORT-:10810" \
    -device virtio-net-pci,netdev=n0 "${FW_CFG[@]}" -qmp "unix:$TESTDIR/qmp.sock,server=on,wait=off" \
    -serial "file:$TESTDIR/$name.console" >"$TESTDIR/$name.qemu" 2>&1 &
  APP_PID=$! APP_CONSOLE=$TESTDIR/$name.console
  cleanup_fn "stop_pid $APP_PID"
}
# the export answers, or the appliance died or its first boot failed (then
# stop waiting)
export_up () {
  kill -0 "$APP_PID" 2>/dev/null && ! grep -aq TROMCHO-FIRSTBOOT-FAIL "$APP_CONSOLE" || return 0
  nbdinfo --size "$URI" >/dev/null 2>&1
}
# appliance_wait NAME: wait for the export (at most 15 min) and print the time
appliance_wait () {
  local name=$1 start=$2
  WAIT_SECS=900 wait_for export_up ||
    { tail -n 40 "$TESTDIR/$name.console"; fail "$name: no NBD export after 900 s"; }
  kill -0 "$APP_PID" 2>/dev/null || { cat "$TESTDIR/$name.qemu"; tail -n 40 "$TESTDIR/$name.console"; fail "$name: the appliance VM exited"; }
  ! grep -aq TROMCHO-FIRSTBOOT-FAIL "$APP_CONSOLE" || { tail -n 40 "$APP_CONSOLE"; fail "$name: the first boot failed"; }
  echo "$name: boot to export $(( $(date +%s) - start )) s"
  [ "$(nbdinfo --size "$URI")" = $((1 << 30)) ] || fail "$name: the export is not 1 GiB"
  WAIT_SECS=60 wait_for nbdinfo --size "$TLS_URI" || fail "$name: no NBD export over TLS"
}
# appliance_poweroff: ACPI power button through QMP, wait for QEMU to exit
appliance_poweroff () {
  python3 - "$TESTDIR/qmp.sock" <<'PY' || fail "QMP system_powerdown"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
f = s.makefile("rw")
json.loads(f.readline())
for cmd in ("qmp_capabilities", "system_powerdown"):
    f.write(json.dumps({"execute": cmd}) + "\n")
    f.flush()
    while "return" not in json.loads(f.readline()):
        pass
PY
  for _ in $(seq 1800); do kill -0 "$APP_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$APP_PID" 2>/dev/null && fail "the appliance did not power off within 180 s"
  wait "$APP_PID" 2>/dev/null || true
}

start=$(date +%s)
appliance_boot first
appliance_wait first "$start"
grep -a "TROMCHO-FIRSTBOOT-" "$TESTDIR/first.console" || true
grep -aq "TROMCHO-FIRSTBOOT-OK" "$TESTDIR/first.console" || fail "no TROMCHO-FIRSTBOOT-OK on the console"
nbdinfo --list "nbd://127.0.0.1:$PORT" | grep -q 'export="demo"' || fail "demo is not in the export list"
nbdinfo --list "nbd://127.0.0.1:$PORT" | grep -q 'encrypted' || fail "demo is not an encrypted image"

# The user's way: Linux's nbd-client in the throw-away guest, through the
# host's forwarded port.
kernel_guest vm "$PORT"
kernel_guest_check vm "$URI"

# nbdcopy sees the same: the whole export, sparse, to a file.
nbdcopy "$URI" "$TESTDIR/export.img" || fail "nbdcopy from the export"
[ "$(stat -c %s "$TESTDIR/export.img")" = $((1 << 30)) ] || fail "nbdcopy copied $(stat -c %s "$TESTDIR/export.img") bytes"
cmp -n $((4 << 20)) "$TESTDIR/vm.pattern" <(dd if="$TESTDIR/export.img" bs=1M skip=64 count=4 status=none) ||
  fail "nbdcopy reads other bytes at 64 MiB than the guest wrote"
cmp -n $((32 << 20)) "$TESTDIR/fs.img" "$TESTDIR/export.img" || fail "nbdcopy reads another file system than nbdsh"

# Nothing else was written: zeros between the file system and the pattern
# and after the pattern.
cmp -n $((32 << 20)) -i $((32 << 20)):0 "$TESTDIR/export.img" /dev/zero || fail "bytes at 32-64 MiB are not zero"
cmp -n $(( (1 << 30) - (68 << 20) )) -i $((68 << 20)):0 "$TESTDIR/export.img" /dev/zero || fail "bytes after 68 MiB are not zero"
rm -f "$TESTDIR/export.img"
echo "vm: nbdcopy reads the guest's bytes and file system, and zeros elsewhere"

# TLS: only a client certificate of the tenant's NBD CA gets in.
expect_fail '' nbdinfo --size "nbd://127.0.0.1:$TPORT/demo"
expect_fail '' nbdinfo --size "nbds://127.0.0.1:$TPORT/demo?tls-certificates=$TESTDIR/other/nbd-client-tenant"
echo "vm: the TLS port refuses plain NBD and another CA's client certificate"
kernel_guest tls "$TPORT" "$NBD/nbd-client-tenant"
kernel_guest_check tls "$TLS_URI"

# A second boot: no first-boot step, the enabled units serve what was written.
appliance_poweroff
echo "vm: powered off"
start=$(date +%s)
appliance_boot second
appliance_wait second "$start"
grep -aq "tromcho-firstboot" "$TESTDIR/second.console" && fail "the first-boot step ran again"
kernel_guest_check tls "$URI"
kernel_guest_check tls "$TLS_URI"
echo "vm: after a reboot both exports hold what the TLS guest wrote"
appliance_poweroff
echo "test-vm: ok"
