#!/usr/bin/env bash
# Open handles follow their image to a new top layer (common/README.md,
# "Layer switch and re-key"): a verified write load runs through two
# connections of nbdkit and a tromcho-fuse file while three snapshots are
# taken; no I/O error reaches the clients, every byte verifies at the end,
# and each snapshot is a read-only layer that takes no write after it was
# taken (read twice, seconds apart, it is the same).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd tromcho-fuse fusermount3 nbdkit curl python3
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
PY=/usr/bin/python3
$PY -c 'import nbd' || fail "python3-libnbd is not installed"

start_kv
write_conf
start_rep3
SIZE=$((16 << 20))
tromcho create sw -s $SIZE --enc_key auto >/dev/null || fail "create sw"
start_nbdkit load -- config="$CONF" image=sw
MNT=$TESTDIR/mnt
mkdir -p "$MNT"
tromcho-fuse "$MNT" -f >"$TESTDIR/fuse.log" 2>&1 &
fuse_pid=$!
cleanup_fn "fusermount3 -u '$MNT' 2>/dev/null; stop_pid $fuse_pid"
wait_for test -f "$MNT/sw" || { cat "$TESTDIR/fuse.log"; fail "the FUSE mount did not show the image"; }
STOP=$TESTDIR/stop
$PY "$top_srcdir/tests/rekey-load.py" $SIZE "$STOP" "$(uri load "")" "$(uri load "")" --file "$MNT/sw" \
  >"$TESTDIR/writer.log" 2>&1 &
LOAD=$!
cleanup_fn "kill $LOAD 2>/dev/null"
wait_for grep -q "^filled" "$TESTDIR/writer.log" || { cat "$TESTDIR/writer.log"; fail "the load did not start"; }
for i in 1 2 3; do
  sleep 1
  tromcho snap-create sw@s$i >/dev/null || fail "snap-create sw@s$i under load"
  tromcho dd iimg=sw@s$i of="$TESTDIR/s$i.a" bs=1M 2>/dev/null || fail "read sw@s$i"
done
sleep 1
touch "$STOP"
wait $LOAD || { cat "$TESTDIR/writer.log"; fail "the write load failed (an I/O error or a wrong byte)"; }
cat "$TESTDIR/writer.log"
grep -q " 0 wrong" "$TESTDIR/writer.log" || fail "the load read wrong bytes"
for i in 1 2 3; do
  tromcho info sw@s$i --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["readonly"]' || fail "sw@s$i is not read-only"
  tromcho dd iimg=sw@s$i of="$TESTDIR/s$i.b" bs=1M 2>/dev/null || fail "read sw@s$i again"
  cmp "$TESTDIR/s$i.a" "$TESTDIR/s$i.b" || fail "sw@s$i changed after it was taken"
done
cmp -s "$TESTDIR/s1.a" "$TESTDIR/s3.a" && fail "the load wrote nothing between the snapshots"
tromcho dd iimg=sw of="$TESTDIR/final" bs=1M 2>/dev/null || fail "read sw"
cmp "$TESTDIR/final" "$STOP.model" || fail "the image is not what the load wrote"
tromcho info sw | grep -q "^layers: *4" || fail "sw has not 4 layers: $(tromcho info sw)"
stop_nbdkit load
fusermount3 -u "$MNT" || fail "unmount"
wait $fuse_pid 2>/dev/null
grep -Ei "error" "$TESTDIR/fuse.log" "$TESTDIR/load.log" && fail "errors logged by tromcho-fuse or nbdkit"
echo "test-image-switch: ok"
