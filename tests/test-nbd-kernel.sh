#!/usr/bin/env bash
# The Linux kernel's NBD client against ./appliance up, the way users
# attach images (DESIGN.md section 9): a throw-away QEMU guest (TCG,
# Debian's kernel booted through its PVH entry with qboot, an initramfs with
# busybox, nbd-client and mkfs.ext4) reaches the host's NBD port only
# through one guestfwd of a restrict=on user network. The guest attaches
# demo as /dev/nbd0, writes and reads raw bytes, makes an ext4 file system
# and mounts it; the host then checks the same bytes and the file system
# through nbdsh. Once over plain NBD on loopback, once over TLS with the
# tenant's NBD client certificate.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires qemu-system-x86_64 nbd-client busybox cpio e2fsck debugfs python3 nbdinfo
[ "$top_srcdir" = "$top_builddir" ] || skip out-of-tree "./appliance up needs an in-tree build"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
G=$top_srcdir/tests/guest
QBOOT=/usr/share/qemu/qboot.rom
[ -f "$QBOOT" ] || fail "no $QBOOT (package qemu-system-data)"
# the newest installed Debian kernel (package linux-image-amd64)
vmlinuz=$(ls -v /boot/vmlinuz-* 2>/dev/null | tail -n 1)
[ -n "$vmlinuz" ] || fail "no kernel in /boot (package linux-image-amd64)"
kver=${vmlinuz#/boot/vmlinuz-}
python3 "$G/vmlinux.py" "$vmlinuz" "$TESTDIR/vmlinux" || fail "cannot extract vmlinux from $vmlinuz"

DIR=$TESTDIR/app
PORT=$(free_port)
up () {
  LOG=$TESTDIR/up.log
  "$top_srcdir/appliance" up --dir "$DIR" --port "$PORT" "$@" >"$LOG" 2>&1 &
  UP_PID=$!
  cleanup_fn "stop_pid $UP_PID"
  WAIT_SECS=120 wait_for grep -q "tromcho is up" "$LOG" || { cat "$LOG"; fail "appliance up did not come up"; }
}
down () { kill -TERM "$UP_PID"; wait "$UP_PID" 2>/dev/null || true; }

# guest NAME [TLSDIR]: boot the guest against demo; its console in NAME.console
guest () {
  local name=$1 tlsdir=${2:-} tls=0 start
  [ -n "$tlsdir" ] && tls=1
  head -c 4M /dev/urandom > "$TESTDIR/$name.pattern"
  "$G/make-initramfs.sh" "$kver" "$TESTDIR/$name.pattern" "$TESTDIR/$name.cpio" $tlsdir ||
    fail "cannot build the guest's initramfs"
  start=$(date +%s)
  timeout 600 qemu-system-x86_64 -M pc -accel tcg -cpu max -m 512 -smp 1 -nodefaults -display none -no-reboot \
    -bios "$QBOOT" -kernel "$TESTDIR/vmlinux" -initrd "$TESTDIR/$name.cpio" \
    -append "console=ttyS0 panic=-1 quiet tc.export=demo tc.tls=$tls" -serial "file:$TESTDIR/$name.console" \
    -netdev "user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:10809-cmd:python3 $G/relay.py 127.0.0.1 $PORT" \
    -device virtio-net-pci,netdev=n0 >"$TESTDIR/$name.qemu" 2>&1 || { cat "$TESTDIR/$name.qemu"; fail "qemu failed"; }
  echo "$name: guest ran $(( $(date +%s) - start )) s"
  grep -E "^TC-" "$TESTDIR/$name.console"
  grep -q "^TC-GUEST-OK" "$TESTDIR/$name.console" ||
    { tail -n 30 "$TESTDIR/$name.console"; fail "$name: the guest failed"; }
  grep -q "^TC-ATTACHED size=$((1 << 30))" "$TESTDIR/$name.console" || fail "$name: /dev/nbd0 is not 1 GiB"
}

# check NAME URI: the host reads what the guest wrote
check () {
  local name=$1 uri=$2
  nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$uri')
open('$TESTDIR/raw', 'wb').write(h.pread(4 << 20, 64 << 20))
open('$TESTDIR/fs.img', 'wb').write(h.pread(32 << 20, 0))" || fail "$name: nbdsh read"
  cmp "$TESTDIR/raw" "$TESTDIR/$name.pattern" || fail "$name: the host reads other bytes than the guest wrote"
  e2fsck -fn "$TESTDIR/fs.img" >"$TESTDIR/fsck.out" 2>&1 || { cat "$TESTDIR/fsck.out"; fail "$name: e2fsck"; }
  debugfs -R "cat /pattern" "$TESTDIR/fs.img" 2>/dev/null | cmp - "$TESTDIR/$name.pattern" ||
    fail "$name: /pattern in the guest's file system differs"
  [ "$(debugfs -R "cat /dir/hello" "$TESTDIR/fs.img" 2>/dev/null)" = "written by the guest's kernel" ] ||
    fail "$name: /dir/hello in the guest's file system differs"
  echo "$name: the host sees the guest's bytes and a clean ext4 with its files"
}

up
guest plain
check plain "nbd://127.0.0.1:$PORT/demo"
down
up --tls
TLS_URI="nbds://127.0.0.1:$PORT/demo?tls-certificates=$DIR/certs/nbd-client-tenant"
guest tls "$DIR/certs/nbd-client-tenant"
check tls "$TLS_URI"
down
echo "test-nbd-kernel: ok"
