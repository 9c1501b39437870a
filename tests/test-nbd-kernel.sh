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
. "$top_srcdir/tests/guest/guest-functions.sh"
kernel_guest_setup

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

up
kernel_guest plain "$PORT"
kernel_guest_check plain "nbd://127.0.0.1:$PORT/demo"
down
up --tls
TLS_URI="nbds://127.0.0.1:$PORT/demo?tls-certificates=$DIR/certs/nbd-client-tenant"
kernel_guest tls "$PORT" "$DIR/certs/nbd-client-tenant"
kernel_guest_check tls "$TLS_URI"
down
echo "test-nbd-kernel: ok"
