#!/usr/bin/env bash
# tromcho-fuse: every image the user may read is a file of the image's size
# (snapshots read-only); reads, writes (also O_DIRECT), fsync, truncate
# (resize), punch hole; the data matches what NBD and the CLI see.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd tromcho-fuse fusermount3 curl python3 fallocate setpriv
[ -c /dev/fuse ] || skip no-dev-fuse "no /dev/fuse"
start_kv
write_conf
make_pool 1 4 2 1
start_osd 1
start_osd 2
set_pgs 1 4 "1 2"
tromcho create enc -s 32M --enc_key auto >/dev/null || fail "create enc"
tromcho create plain -s 16M >/dev/null || fail "create plain"

MNT=$TESTDIR/mnt
mkdir -p "$MNT"
tromcho-fuse "$MNT" -f >"$TESTDIR/fuse.log" 2>&1 &
fuse_pid=$!
cleanup_fn "fusermount3 -u '$MNT' 2>/dev/null; stop_pid $fuse_pid"
wait_for test -f "$MNT/enc" || { cat "$TESTDIR/fuse.log"; fail "mount did not show the images"; }
[ "$(ls "$MNT" | tr '\n' ' ')" = "enc plain " ] || fail "listing: $(ls "$MNT")"
! grep -q "Ignoring invalid" "$TESTDIR/fuse.log" || fail "libfuse warns at start: $(cat "$TESTDIR/fuse.log")"
[ "$(stat -c %s "$MNT/enc")" = $((32 << 20)) ] || fail "size of enc"

# Writes at odd offsets through the file, then read back through the CLI.
head -c $((5 << 20)) /dev/urandom > "$TESTDIR/rand"
truncate -s 32M "$TESTDIR/model"
dd if="$TESTDIR/rand" of="$MNT/enc" bs=1M count=3 seek=1 conv=notrunc,fsync 2>/dev/null || fail "dd into the file"
dd if="$TESTDIR/rand" of="$TESTDIR/model" bs=1M count=3 seek=1 conv=notrunc 2>/dev/null
dd if="$TESTDIR/rand" of="$MNT/enc" bs=777 count=33 seek=12345 skip=7 conv=notrunc,fsync 2>/dev/null || fail "unaligned dd"
dd if="$TESTDIR/rand" of="$TESTDIR/model" bs=777 count=33 seek=12345 skip=7 conv=notrunc 2>/dev/null
dd if="$TESTDIR/rand" of="$MNT/enc" bs=4096 count=64 seek=2000 oflag=direct conv=notrunc 2>/dev/null || fail "O_DIRECT dd"
dd if="$TESTDIR/rand" of="$TESTDIR/model" bs=4096 count=64 seek=2000 conv=notrunc 2>/dev/null
cmp "$MNT/enc" "$TESTDIR/model" || fail "file differs from the model"
tromcho dd iimg=enc of="$TESTDIR/back" bs=1M 2>/dev/null || fail "CLI read"
cmp "$TESTDIR/back" "$TESTDIR/model" || fail "CLI sees other data than the file"

# Punch hole reads zeros.
fallocate -p -o $((1 << 20)) -l $((1 << 20)) "$MNT/enc" || fail "punch hole"
dd if=/dev/zero of="$TESTDIR/model" bs=1M count=1 seek=1 conv=notrunc 2>/dev/null
cmp "$MNT/enc" "$TESTDIR/model" || fail "after punch hole"

# truncate resizes (owner); the new tail reads zeros.
truncate -s 48M "$MNT/plain" || fail "truncate"
[ "$(stat -c %s "$MNT/plain")" = $((48 << 20)) ] || fail "size after truncate"
[ "$(tromcho info plain --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')" = $((48 << 20)) ] ||
  fail "the image was not resized"
cmp <(tail -c 1M "$MNT/plain") <(head -c 1M /dev/zero) || fail "grown tail is not zeros"

# Snapshots are read-only files.
tromcho snap-create enc@s1 >/dev/null || fail "snap-create"
wait_for test -f "$MNT/enc@s1" || fail "snapshot not shown"
cmp "$MNT/enc@s1" "$TESTDIR/model" || fail "snapshot content"
[ "$(stat -c %a "$MNT/enc@s1")" = 400 ] || fail "snapshot mode $(stat -c %a "$MNT/enc@s1")"
expect_fail "" dd if=/dev/zero of="$MNT/enc@s1" bs=4096 count=1 conv=notrunc

# Safe defaults (issue 12): the kernel checks modes (default_permissions),
# the modes are the mounting user's rights and nobody else's, and other
# local users are not let in (no allow_other unless asked for).
[ "$(stat -c %a "$MNT/enc")" = 600 ] || fail "writable image mode $(stat -c %a "$MNT/enc")"
[ "$(stat -c %a "$MNT")" = 700 ] || fail "mount point mode $(stat -c %a "$MNT")"
opts=$(awk -v m="$MNT" '$2 == m {print $4}' /proc/mounts)
echo "$opts" | grep -q default_permissions || fail "mounted without default_permissions: $opts"
echo "$opts" | grep -q allow_other && fail "mounted with allow_other unasked: $opts"
chmod 755 "$TESTDIR"
expect_fail "" setpriv --reuid=65534 --regid=65534 --clear-groups head -c 4096 "$MNT/plain"

# A write the cluster refuses (the image turned read-only under an open
# file): the application gets EROFS, the log says why.
python3 - "$MNT/plain" <<'PY' || fail "a write to an image turned read-only"
import errno, mmap, os, subprocess, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
subprocess.run(["tromcho", "modify", "plain", "--readonly"], check=True, stdout=subprocess.DEVNULL)
buf = mmap.mmap(-1, 4096)
buf.write(b"x" * 4096)
for _ in range(100):   # the handle hears through its KV watch, the OSD through its own
    try:
        os.pwrite(fd, buf, 0)
    except OSError as e:
        sys.exit(0 if e.errno == errno.EROFS else "errno %d, not EROFS" % e.errno)
    time.sleep(0.1)
sys.exit("writes still passed 10 s after the image turned read-only")
PY
grep -Eq "write: .*read-only" "$TESTDIR/fuse.log" || { cat "$TESTDIR/fuse.log"; fail "the log does not say why the write failed"; }
echo "test-fuse: ok"
