#!/usr/bin/env bash
# tromcho-fuse honours synchronous writes: a write through a file opened
# with O_DSYNC or O_SYNC (with and without O_DIRECT), or made with
# pwritev2(RWF_DSYNC), is durable when it returns, with no fsync after it.
# The kernel sends no FSYNC after an O_DIRECT write (only O_DSYNC in the
# write's flags), so tromcho-fuse must write it with FUA itself. Checked
# as test-nbd-fua.sh does: never flush, kill -9 every OSD and tromcho-fuse
# (an unsynced write dies with its OSD), start them again, and every
# synchronous write must read back; on a plain and an XTS image, aligned
# 4 KiB writes over every PG, a 1 MiB one across objects, and unaligned
# ones (read-modify-write of their sectors).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd tromcho-fuse fusermount3 curl python3
[ -c /dev/fuse ] || skip no-dev-fuse "no /dev/fuse"
start_kv
write_conf
start_rep3
tromcho create plain -s 16M >/dev/null || fail "create plain"
tromcho create enc -s 16M --enc_key auto >/dev/null || fail "create enc"

MNT=$TESTDIR/mnt
mkdir -p "$MNT"
fuse_pid=
mount_fuse () {
  tromcho-fuse "$MNT" -f >>"$TESTDIR/fuse.log" 2>&1 &
  fuse_pid=$!
  wait_for test -f "$MNT/enc" || { cat "$TESTDIR/fuse.log"; fail "mount did not show the images"; }
}
cleanup_fn 'fusermount3 -uz "$MNT" 2>/dev/null; [ -n "$fuse_pid" ] && stop_pid $fuse_pid'
mount_fuse

# sync_round SEED: synchronous writes only (each way of asking for them in
# turn), never a flush; each image's expected content in $TESTDIR/model-IMG.
# Then kill -9 every OSD, then tromcho-fuse (nothing left to flush at exit).
sync_round () {
  python3 - "$MNT" "$TESTDIR" "$1" <<'PY' || fail "synchronous writes (round $1)"
import mmap, os, random, sys
mnt, tdir, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
imgs = {}
for img in ("plain", "enc"):
    path = os.path.join(mnt, img)
    with open(path, "rb") as f:
        model = bytearray(f.read())
    fds = {
        "O_DIRECT|O_DSYNC": os.open(path, os.O_RDWR | os.O_DIRECT | os.O_DSYNC),
        "O_DIRECT|O_SYNC": os.open(path, os.O_RDWR | os.O_DIRECT | os.O_SYNC),
        "O_DSYNC": os.open(path, os.O_RDWR | os.O_DSYNC),
        "RWF_DSYNC": os.open(path, os.O_RDWR | os.O_DIRECT),
    }
    imgs[img] = (model, fds)   # left open: a close must not flush before the kill

def write(img, way, off, n):
    model, fds = imgs[img]
    data = rng.randbytes(n)
    buf = mmap.mmap(-1, max(n, 4096))   # page-aligned, as O_DIRECT wants
    buf[:n] = data
    view = memoryview(buf)[:n]
    if way == "RWF_DSYNC":
        done = os.pwritev(fds[way], [view], off, os.RWF_DSYNC)
    else:
        done = os.pwrite(fds[way], view, off)
    view.release()
    buf.close()
    assert done == n, (img, way, off, n, done)
    model[off:off + n] = data

# Through the page cache first, on both images (unaligned too): the kernel
# follows each of those writes with an FSYNC, which makes every earlier
# write of the client durable. Then O_DIRECT ones only, on both images,
# which it follows with nothing: only their own FUA can save them.
for img, (model, fds) in imgs.items():
    size = len(model)
    for i in range(6):
        write(img, "O_DSYNC", rng.randrange(size - 8192) + 1, rng.choice([1, 100, 4095, 5000]))
    for i in range(4):
        write(img, "O_DSYNC", rng.randrange(size // 4096) * 4096, 4096)
direct = ["O_DIRECT|O_DSYNC", "O_DIRECT|O_SYNC", "RWF_DSYNC"]
for img, (model, fds) in imgs.items():
    size = len(model)
    for i in range(30):
        write(img, direct[i % 3], rng.randrange(size // 4096) * 4096, 4096)
    for i in range(3):
        write(img, direct[i], rng.randrange(8) * 131072 + 65536, 1 << 20)
for img, (model, fds) in imgs.items():
    open(os.path.join(tdir, "model-" + img), "wb").write(model)
PY
  for n in 1 2 3; do stop_osd $n -9; done
  kill -9 "$fuse_pid" 2>/dev/null || true
  wait "$fuse_pid" 2>/dev/null || true
  fusermount3 -uz "$MNT" 2>/dev/null || true
  fuse_pid=
}

check_models () {
  for n in 1 2 3; do start_osd $n; done
  mount_fuse
  local img
  for img in plain enc; do
    python3 - "$MNT/$img" "$TESTDIR/model-$img" <<'PY' || fail "$1: image $img lost synchronous writes"
import sys
got = open(sys.argv[1], "rb").read()
want = open(sys.argv[2], "rb").read()
bad = [i // 4096 for i in range(0, len(want), 4096) if got[i:i + 4096] != want[i:i + 4096]]
assert not bad, "sectors %s of %d differ" % (bad[:10], len(bad))
PY
  done
  echo "$1: every synchronous write of every image is there"
}

sync_round 1
check_models "kill -9 of every OSD and tromcho-fuse"
sync_round 2
check_models "a second round"
echo "test-fuse-sync: ok"
