#!/usr/bin/env bash
# Unaligned O_DIRECT writes through FUSE from several descriptors at once
# (issue 18), checked against a model: through two tromcho-fuse processes
# on one image (two opens each), and through nbdfuse with four NBD
# connections to nbdkit tromcho; plain and encrypted images.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires tromcho tromcho-osd tromcho-fuse fusermount3 curl python3
[ -c /dev/fuse ] || skip no-dev-fuse "no /dev/fuse"
PY=/usr/bin/python3

start_kv
write_conf
start_rep3
tromcho create plain -s 16M >/dev/null || fail "create plain"
tromcho create enc -s 16M --enc_key auto >/dev/null || fail "create enc"

mount_fuse () {
  local m=$TESTDIR/$1
  mkdir -p "$m"
  tromcho-fuse "$m" -f >"$TESTDIR/$1.log" 2>&1 &
  local pid=$!
  cleanup_fn "fusermount3 -u '$m' 2>/dev/null; stop_pid $pid"
  wait_for test -f "$m/enc" || { cat "$TESTDIR/$1.log"; fail "tromcho-fuse $1 did not mount"; }
}
mount_fuse a
mount_fuse b
OPS=${FSX_OPS:-600}
for img in plain enc; do
  echo "== tromcho-fuse x2, $img"
  $PY "$top_srcdir/tests/partial-writes.py" files $RANDOM "$OPS" \
    "$TESTDIR/a/$img" "$TESTDIR/a/$img" "$TESTDIR/b/$img" "$TESTDIR/b/$img" || fail "tromcho-fuse x2 on $img"
done

# nbdfuse -C 4 (nbdkit in a plain build only: see requires_plain_plugin).
if ! ldd "$PLUGIN" 2>/dev/null | grep -q libasan; then
  requires nbdkit nbdfuse
  start_nbdkit srv -- config="$CONF"
  for img in plain enc; do
    m=$TESTDIR/nbdfuse-$img
    mkdir -p "$m"
    nbdfuse -C 4 -P "$TESTDIR/nbdfuse-$img.pid" "$m/disk" "$(uri srv $img)" >"$TESTDIR/nbdfuse-$img.log" 2>&1 &
    cleanup_fn "fusermount3 -u '$m' 2>/dev/null; stop_pid $!"
    wait_for test -f "$m/disk" || { cat "$TESTDIR/nbdfuse-$img.log"; fail "nbdfuse did not mount"; }
    echo "== nbdfuse -C 4, $img"
    $PY "$top_srcdir/tests/partial-writes.py" files $RANDOM "$OPS" "$m/disk" "$m/disk" "$m/disk" "$m/disk" ||
      fail "nbdfuse -C 4 on $img"
  done
fi
