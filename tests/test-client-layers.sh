#!/usr/bin/env bash
# Snapshots, clones and flatten over real OSDs, each image checked against a
# plain-file model: an unencrypted base with an encrypted clone, an
# encrypted base with a re-keyed clone, writes to parents and children
# after the snapshot, flatten (the clone's stored sectors then decrypt with
# its own key), delete refusing images with children; unwritten space reads
# as zeros throughout.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3
TOOL=$top_builddir/tests/client-tool
start_kv
write_conf
make_pool 1 4 2 1
start_osd 1
start_osd 2
set_pgs 1 4 "1 2"
SIZE=$((16 << 20))
head -c $((4 << 20)) /dev/urandom > "$TESTDIR/r1"
head -c $((4 << 20)) /dev/urandom > "$TESTDIR/r2"
M=$TESTDIR/model
mkdir -p "$M"

# put IMAGE MODEL dd-args...: the same write into an image and its model.
put () {
  local img=$1 model=$2; shift 2
  tromcho dd oimg="$img" "$@" 2>/dev/null || fail "tromcho dd oimg=$img $*"
  dd of="$M/$model" conv=notrunc "$@" 2>/dev/null || fail "dd $*"
}
# check IMAGE MODEL: the whole image reads as its model.
check () {
  tromcho dd iimg="$1" of="$TESTDIR/back" bs=1M 2>/dev/null || fail "read $1"
  cmp "$TESTDIR/back" "$M/$2" >/dev/null || { cmp "$TESTDIR/back" "$M/$2" | head -2; fail "$1 differs from its model"; }
}

# An unencrypted base, snapshotted, with an encrypted clone.
tromcho create base -s 16M >/dev/null || fail "create base"
truncate -s $SIZE "$M/base"
put base base if="$TESTDIR/r1" bs=1M count=3
put base base if="$TESTDIR/r2" bs=777 count=100 seek=9000
tromcho snap-create base@s1 >/dev/null || fail "snap-create base@s1"
cp "$M/base" "$M/base@s1"
tromcho clone base@s1 c1 --enc_key auto >/dev/null || fail "clone base@s1 c1"
cp "$M/base@s1" "$M/c1"
put base base if="$TESTDIR/r2" bs=1000 count=1500 seek=100     # the live image moves on
put c1 c1 if="$TESTDIR/r1" bs=4096 count=300 seek=500 skip=7    # the clone too
put c1 c1 if="$TESTDIR/r2" bs=10 count=3 seek=1000001            # sub-sector, over parent data
expect_fail "read-only" tromcho dd if="$TESTDIR/r1" oimg=base@s1 bs=4096 count=1
for i in base base@s1 c1; do check $i $i; done
echo "unencrypted base, snapshot and encrypted clone match their models"

# An encrypted base with a re-keyed clone (and a clone keeping the key).
tromcho create eb -s 16M --enc_key auto >/dev/null || fail "create eb"
truncate -s $SIZE "$M/eb"
put eb eb if="$TESTDIR/r2" bs=64K count=40 seek=3
put eb eb if="$TESTDIR/r1" bs=5000 count=50 seek=2000
tromcho snap-create eb@s >/dev/null || fail "snap-create eb@s"
cp "$M/eb" "$M/eb@s"
tromcho clone eb@s e2 --enc_key auto >/dev/null || fail "clone eb@s e2 (re-keyed)"
tromcho clone eb@s e3 >/dev/null || fail "clone eb@s e3 (same key)"
cp "$M/eb@s" "$M/e2"
cp "$M/eb@s" "$M/e3"
put eb eb if="$TESTDIR/r1" bs=4096 count=100 seek=10
put e2 e2 if="$TESTDIR/r1" bs=3333 count=99 seek=700
put e3 e3 if="$TESTDIR/r2" bs=4096 count=10 seek=3000
for i in eb eb@s e2 e3; do check $i $i; done
echo "encrypted base, snapshot, re-keyed and same-key clones match their models"

# Delete refuses a parent; flatten copies the parents in.
expect_fail "has children" tromcho rm base@s1
expect_fail "has children" tromcho rm eb@s
tromcho flatten c1 >/dev/null || fail "flatten c1"
tromcho flatten e2 >/dev/null || fail "flatten e2"
for i in c1 e2; do
  tromcho info $i --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["layers"] == 1 and d["parent"] is None, d' ||
    fail "$i still has a parent after flatten"
  check $i $i
done
# e2's own stored sectors (also those that came from eb@s) decrypt with e2's key.
E2ID=$(kv_get /index/image/e2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
E2KEY=$(kv_get /config/inode/1/$E2ID | python3 -c 'import json,sys; print(json.load(sys.stdin)["enc_key"])')
for sector in 48 100 2442; do   # all three came from eb@s (64K writes from 192K, 5000-byte writes from 10 MB)
  "$TOOL" rawread e2 $((sector * 4096)) 4096 > "$TESTDIR/ct" || fail "raw read of e2"
  python3 - "$E2KEY" $sector "$TESTDIR/ct" "$M/e2" <<'PY' || fail "sector $sector of e2 is not encrypted with e2's key"
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
key, s = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
d = Cipher(algorithms.AES(key), modes.XTS(s.to_bytes(16, "little"))).decryptor()
pt = d.update(open(sys.argv[3], "rb").read()) + d.finalize()
with open(sys.argv[4], "rb") as m:
    m.seek(s * 4096)
    assert pt == m.read(4096)
PY
done
echo "flattened clones match their models; e2's sectors decrypt with e2's own key"
# Parents are untouched by the children's flatten; base@s1 still has a child (base).
for i in base base@s1 eb eb@s e3; do check $i $i; done
expect_fail "has children \\(base\\)" tromcho rm base@s1
tromcho rm c1 >/dev/null || fail "rm c1"
tromcho rm e3 >/dev/null || fail "rm e3"
tromcho rm e2 >/dev/null || fail "rm e2"
expect_fail "has children \\(eb\\)" tromcho rm eb@s
tromcho flatten eb >/dev/null || fail "flatten eb"
tromcho rm eb@s >/dev/null || fail "rm eb@s after flatten"
check eb eb
# A handle open for writing when a snapshot is taken elsewhere moves to the
# image's new top layer: its writes go on, and none reaches the snapshot.
tromcho create w -s 4M >/dev/null || fail "create w"
"$TOOL" snapwatch w || fail "an open handle did not follow its image to the new top layer"
tromcho info w@live --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["readonly"]' || fail "w@live"
tromcho ls
echo "test-client-layers: ok"
