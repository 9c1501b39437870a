#!/usr/bin/env bash
# The client over real OSDs: tromcho dd round trips (aligned, unaligned,
# sub-sector; plain and encrypted) checked against a plain-file model with
# GNU dd; the API (flush, zero, trim, extents, resize, read-only); 8 threads
# of overlapping unaligned writers on an encrypted image; status; rm
# deletes the objects.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3 sha256sum
TOOL=$top_builddir/tests/client-tool
start_kv
write_conf
make_pool 1 4 2 1
start_osd 1
start_osd 2
set_pgs 1 4 "1 2"

SIZE=$((32 << 20))
tromcho create plain -s 32M || fail "create plain"
tromcho create enc -s 32M --enc_key auto || fail "create enc"
head -c $((6 << 20)) /dev/urandom > "$TESTDIR/rand"
# idle_poll_us: out of range is refused by name; 0 (never poll) works.
expect_fail "option idle_poll_us: 20001 is out of range" tromcho --idle_poll_us 20001 dd iimg=plain of=/dev/null bs=1M count=1
tromcho --idle_poll_us 0 dd iimg=plain of=/dev/null bs=1M count=1 2>/dev/null || fail "dd with idle_poll_us 0"

for img in plain enc; do
  model=$TESTDIR/model-$img
  truncate -s $SIZE "$model"
  # dd_both ARGS...: the same copy into the image (oimg) and into the model (of).
  dd_both () {
    tromcho dd oimg=$img "$@" 2>/dev/null || fail "tromcho dd oimg=$img $*"
    dd of="$model" conv=notrunc "$@" 2>/dev/null || fail "dd $*"
  }
  dd_both if="$TESTDIR/rand" bs=1M count=4                       # aligned
  dd_both if="$TESTDIR/rand" bs=1000 count=777 seek=4321 skip=3  # unaligned
  dd_both if="$TESTDIR/rand" bs=100 count=1 seek=41000           # sub-sector, in one sector
  dd_both if="$TESTDIR/rand" bs=6000 count=1 seek=5000 skip=9    # straddles sectors
  dd_both if="$TESTDIR/rand" bs=64K count=20 seek=400 iflag=direct
  tromcho dd iimg=$img of="$TESTDIR/back-$img" bs=1M 2>/dev/null || fail "read $img back"
  [ "$(sha256sum < "$TESTDIR/back-$img")" = "$(sha256sum < "$model")" ] || {
    cmp "$TESTDIR/back-$img" "$model" | head -3; fail "$img: image and model differ"; }
  # Unaligned reads and direct output.
  tromcho dd iimg=$img of="$TESTDIR/part" bs=3000 skip=1234 count=17 2>/dev/null || fail "unaligned read"
  dd if="$model" of="$TESTDIR/part-model" bs=3000 skip=1234 count=17 2>/dev/null
  cmp "$TESTDIR/part" "$TESTDIR/part-model" || fail "$img: unaligned read differs"
  tromcho dd iimg=$img of="$TESTDIR/direct" bs=1M count=3 oflag=direct 2>/dev/null || fail "oflag=direct"
  cmp "$TESTDIR/direct" <(head -c $((3 << 20)) "$model") || fail "$img: oflag=direct copy differs"
  echo "$img: dd round trips match the model"
done

# Errors name what is wrong.
expect_fail "oimg=nope: .*no such image" tromcho dd if="$TESTDIR/rand" oimg=nope
expect_fail "no space" tromcho dd if="$TESTDIR/rand" oimg=plain bs=1M seek=30
expect_fail "bs=0 is not a valid size" tromcho dd if="$TESTDIR/rand" oimg=plain bs=0
expect_fail "iflag=sync: only iflag=direct" tromcho dd if="$TESTDIR/rand" oimg=plain iflag=sync

"$TOOL" api enc || fail "client API checks"
"$TOOL" threads enc 25 || fail "concurrent unaligned writers"

tromcho status
tromcho status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["osds_up"] == 2 and s["osds_down"] == 0, s
assert s["pgs"] == 4 and s["pgs_clean"] == 4, s
' || fail "status"
tromcho ls
used=$(tromcho info plain --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["used"])')
[ "$used" -gt $((4 << 20)) ] || fail "used of plain is $used"

# rm deletes the data on the OSDs, then the records.
id=$(kv_get /index/image/plain | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
[ "$("$TOOL" objects 1 "$id")" -gt 0 ] || fail "plain has no objects?"
tromcho rm plain || fail "rm"
[ "$("$TOOL" objects 1 "$id")" = 0 ] || fail "objects of plain remain after rm"
expect_fail "no such image" tromcho info plain
echo "test-client-io: ok"
