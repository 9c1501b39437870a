# The throw-away kernel guest (DESIGN.md section 9), for the tests that
# attach an NBD export with Linux's nbd-client: test-nbd-kernel.sh against
# ./appliance up, tests/test-vm.sh against the appliance VM. Source it after
# tests/functions.sh; it needs TESTDIR and fail.
#
#   kernel_guest_setup          the host's Debian kernel as an ELF for PVH
#   kernel_guest NAME PORT [TLSDIR]   boot the guest against 127.0.0.1:PORT's
#                               export demo; its console in NAME.console
#   kernel_guest_check NAME URI the host reads what the guest wrote
G=$top_srcdir/tests/guest
QBOOT=/usr/share/qemu/qboot.rom

kernel_guest_setup () {
  [ -f "$QBOOT" ] || fail "no $QBOOT (package qemu-system-data)"
  # the newest installed Debian kernel (package linux-image-amd64)
  local vmlinuz
  vmlinuz=$(ls -v /boot/vmlinuz-* 2>/dev/null | tail -n 1)
  [ -n "$vmlinuz" ] || fail "no kernel in /boot (package linux-image-amd64)"
  GUEST_KVER=${vmlinuz#/boot/vmlinuz-}
  python3 "$G/vmlinux.py" "$vmlinuz" "$TESTDIR/vmlinux" || fail "cannot extract vmlinux from $vmlinuz"
}

# The guest (TCG, the kernel's PVH entry with qboot, an initramfs with
# busybox, nbd-client and mkfs.ext4) reaches the host only through one
# guestfwd of a restrict=on user network, to 127.0.0.1:PORT.
kernel_guest () {
  local name=$1 port=$2 tlsdir=${3:-} tls=0 start
  [ -n "$tlsdir" ] && tls=1
  head -c 4M /dev/urandom > "$TESTDIR/$name.pattern"
  "$G/make-initramfs.sh" "$GUEST_KVER" "$TESTDIR/$name.pattern" "$TESTDIR/$name.cpio" $tlsdir ||
    fail "cannot build the guest's initramfs"
  start=$(date +%s)
  # In the background and waited for, so that a signal to the test stops
  # it at once (by PID, in the cleanup) instead of after the guest.
  timeout 600 qemu-system-x86_64 -M pc -accel tcg -cpu max -m 512 -smp 1 -nodefaults -display none -no-reboot \
    -bios "$QBOOT" -kernel "$TESTDIR/vmlinux" -initrd "$TESTDIR/$name.cpio" \
    -append "console=ttyS0 panic=-1 quiet tc.export=demo tc.tls=$tls" -serial "file:$TESTDIR/$name.console" \
    -netdev "user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:10809-cmd:python3 $G/relay.py 127.0.0.1 $port" \
    -device virtio-net-pci,netdev=n0 >"$TESTDIR/$name.qemu" 2>&1 &
  local pid=$!
  cleanup_fn "stop_pid $pid"
  wait "$pid" || { cat "$TESTDIR/$name.qemu"; fail "qemu failed"; }
  echo "$name: guest ran $(( $(date +%s) - start )) s"
  grep -E "^TC-" "$TESTDIR/$name.console"
  grep -q "^TC-GUEST-OK" "$TESTDIR/$name.console" ||
    { tail -n 30 "$TESTDIR/$name.console"; fail "$name: the guest failed"; }
  grep -q "^TC-ATTACHED size=$((1 << 30))" "$TESTDIR/$name.console" || fail "$name: /dev/nbd0 is not 1 GiB"
}

# The raw pattern at 64 MiB and the ext4 file system on the first 32 MiB,
# read by the host through nbdsh: the same bytes, e2fsck -fn clean, the files.
kernel_guest_check () {
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
