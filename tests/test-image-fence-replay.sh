#!/usr/bin/env bash
# A flush after an OSD was lost writes the client's unsynced writes again
# (the replay, common/cluster/cluster_replay.c); when their layer was fenced
# meanwhile (a snapshot taken, or a re-key started: the layer is read-only
# and the OSDs answer EROFS) they are not written again: the layer's new
# owner took its content from the surviving copies, which the flush's sync
# of every OSD makes durable. Before, the flush failed (EROFS, EPERM on the
# NBD wire), and so did every later one on that connection (seen in
# test-image-rekey.sh). Here: 32 MiB (every PG) written without a flush,
# OSD 3 killed -9, its PGs moved to the other two, a snapshot taken; then
# the flush succeeds, and the image and the snapshot both hold the data.
# Twice: through tromcho dd (the cluster client alone, also under the
# sanitizers), then through nbdkit (not in the sanitizer build).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires tromcho tromcho-osd curl python3 cmp

start_kv
LOG_LEVEL=info write_conf
start_rep3
head -c $((32 << 20)) /dev/urandom > "$TESTDIR/src"
# replayed LOG: the replay met the fenced layer (else the test proves nothing)
replayed () {
  grep -q "unsynced writes not written again: their inodes became read-only" "$1" ||
    fail "no replay met the fenced layer in $1: the test proves nothing"
}
# lose_and_snapshot IMAGE: OSD 3 dies, its PGs go to OSDs 1 and 2, and a
# snapshot IMAGE@s1 fences the image's layer.
lose_and_snapshot () {
  stop_osd 3 -9
  set_pgs 1 8 "1 2"
  tromcho snap-create "$1@s1" >/dev/null 2>&1 || fail "snap-create $1@s1"
}
# check IMAGE: the image and its snapshot hold the 32 MiB.
check () {
  tromcho dd iimg="$1" of="$TESTDIR/back" bs=1M count=32 2>/dev/null || fail "read $1"
  cmp "$TESTDIR/back" "$TESTDIR/src" || fail "$1 does not hold the data written before the snapshot"
  tromcho dd iimg="$1@s1" of="$TESTDIR/back" bs=1M count=32 2>/dev/null || fail "read $1@s1"
  cmp "$TESTDIR/back" "$TESTDIR/src" || fail "$1@s1 does not hold the data acknowledged before it was taken"
}

# 1. tromcho dd: its one flush comes at the end of its input.
tromcho create dd1 -s 64M --enc_key auto >/dev/null 2>&1 || fail "create dd1"
feed_paused 32 | tromcho dd if=/dev/stdin oimg=dd1 bs=256K iodepth=4 2>"$TESTDIR/dd.err" &
dd_pid=$!
wait_for test -e "$TESTDIR/paused" || fail "the feed did not start"
sleep 1   # the last writes acknowledged
lose_and_snapshot dd1
touch "$TESTDIR/go"
wait $dd_pid || { tail -5 "$TESTDIR/dd.err"; fail "tromcho dd's flush failed after the OSD loss and the snapshot"; }
replayed "$TESTDIR/dd.err"
check dd1
echo "tromcho dd: flushed after the loss and the snapshot"
start_osd 3
set_pgs 1 8 "1 2 3"

# 2. nbdkit: one connection, its flush when told.
if ldd "$PLUGIN" 2>/dev/null | grep -q libasan; then
  echo "test-image-fence-replay: ok (the nbdkit part skipped: nbdkit cannot load a sanitizer-built plugin)"
  exit 0
fi
requires nbdkit
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
PY=/usr/bin/python3
$PY -c 'import nbd' || fail "python3-libnbd is not installed"
tromcho create img -s 64M --enc_key auto >/dev/null 2>&1 || fail "create img"
start_nbdkit load -- config="$CONF" image=img
cat > "$TESTDIR/writer.py" <<'PYEOF'
import os, sys, time
import nbd
uri, data, go, out = sys.argv[1:5]
h = nbd.NBD()
h.connect_uri(uri)
buf = open(data, "rb").read()
for off in range(0, len(buf), 256 << 10):
    h.pwrite(buf[off:off + (256 << 10)], off)
open(out, "w").write("written\n")
while not os.path.exists(go):
    time.sleep(0.05)
try:
    h.flush()
except nbd.Error as e:
    open(out, "a").write("flush failed: %s\n" % e)
    sys.exit(1)
if h.pread(len(buf), 0) != buf:
    open(out, "a").write("read back differs\n")
    sys.exit(1)
h.pwrite(b"\xa5" * 4096, 40 << 20)
h.flush()
open(out, "a").write("ok\n")
PYEOF
rm -f "$TESTDIR/go"
$PY "$TESTDIR/writer.py" "$URI" "$TESTDIR/src" "$TESTDIR/go" "$TESTDIR/writer.out" &
wpid=$!
cleanup_fn "kill $wpid 2>/dev/null"
wait_for grep -q written "$TESTDIR/writer.out" || fail "the writer did not write"
lose_and_snapshot img
touch "$TESTDIR/go"
wait $wpid || { cat "$TESTDIR/writer.out"; tail -5 "$TESTDIR/load.log"; fail "the NBD flush (or what followed) failed after the OSD loss and the snapshot"; }
cat "$TESTDIR/writer.out"
replayed "$TESTDIR/load.log"
check img
echo "test-image-fence-replay: ok"
