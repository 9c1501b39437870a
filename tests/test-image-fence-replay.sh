#!/usr/bin/env bash
# A flush after an OSD was lost writes the client's unsynced writes again
# (the replay, common/cluster/cluster_replay.c); when their layer was fenced
# meanwhile (a snapshot taken, or a re-key started: the layer is read-only
# and the OSDs answer EROFS) they are not written again: the layer's new
# owner took its content from the surviving copies, which the flush's sync
# of every OSD makes durable. Before, the flush failed (EROFS, EPERM on the
# NBD wire), and so did every later one on that connection (seen in
# test-image-rekey.sh). Here: 32 MiB (every PG) written through nbdkit without a flush,
# OSD 3 killed -9, its PGs moved to the other two, a snapshot taken; then
# the flush succeeds, and the image and the snapshot both hold the data.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit curl python3 cmp
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
PY=/usr/bin/python3
$PY -c 'import nbd' || fail "python3-libnbd is not installed"

start_kv
LOG_LEVEL=info write_conf
start_rep3
tromcho create img -s 64M --enc_key auto >/dev/null || fail "create img"
start_nbdkit load -- config="$CONF" image=img
head -c $((32 << 20)) /dev/urandom > "$TESTDIR/data"
cat > "$TESTDIR/writer.py" <<'EOF'
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
EOF
$PY "$TESTDIR/writer.py" "$URI" "$TESTDIR/data" "$TESTDIR/go" "$TESTDIR/writer.out" &
wpid=$!
cleanup_fn "kill $wpid 2>/dev/null"
wait_for grep -q written "$TESTDIR/writer.out" || fail "the writer did not write"
stop_osd 3 -9
set_pgs 1 8 "1 2"
tromcho snap-create img@s1 >/dev/null || fail "snap-create img@s1"
touch "$TESTDIR/go"
wait $wpid || { cat "$TESTDIR/writer.out"; tail -5 "$TESTDIR/load.log"; fail "the flush (or what followed) failed after the OSD loss and the snapshot"; }
cat "$TESTDIR/writer.out"
grep -q "unsynced writes not written again: their inodes became read-only" "$TESTDIR/load.log" ||
  fail "no replay met the fenced layer: the test proves nothing"
tromcho dd iimg=img of="$TESTDIR/back" bs=1M count=32 2>/dev/null || fail "read img"
cmp "$TESTDIR/back" "$TESTDIR/data" || fail "the image does not hold the data written before the snapshot"
tromcho dd iimg=img@s1 of="$TESTDIR/snap" bs=1M count=32 2>/dev/null || fail "read img@s1"
cmp "$TESTDIR/snap" "$TESTDIR/data" || fail "the snapshot does not hold the data acknowledged before it was taken"
echo "test-image-fence-replay: ok"
