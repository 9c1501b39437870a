#!/usr/bin/env bash
# Online re-key (issue 13 item 4): `tromcho modify NAME --rekey KEY`
# re-encrypts an image while a verified write load runs through two
# connections of nbdkit and a file of a tromcho-fuse mount (O_DIRECT); the
# re-keying process is killed -9 at random points and resumed (`--rekey
# resume`) until it finishes, and an OSD is killed -9 and restarted in the
# middle. Then: no I/O
# error reached the NBD client and every byte verifies; `tromcho info` showed
# the progress meanwhile; the image's stored sectors decrypt with the new
# key and not with the old one, which is in no record any more; the old
# layer holds no data and its record is retired; a write sent straight to
# the old inode is refused by the OSD (EROFS); a snapshot taken afterwards
# still works. Also: rm, snap-create and flatten wait for a re-key in
# progress; an image with a snapshot below is re-keyed in its own layer
# only (the snapshot keeps its key and content); authenticated images and
# "none" are refused.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd tromcho-fuse fusermount3 nbdkit curl python3 openssl
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
PY=/usr/bin/python3
$PY -c 'import nbd' || fail "python3-libnbd is not installed"
$PY -c 'import cryptography' || fail "python3-cryptography is not installed"
TOOL=$top_builddir/tests/client-tool
OSDC=$top_builddir/tests/osd-client

start_kv
write_conf
start_rep3
SIZE=$((96 << 20))
K1=$(openssl rand -hex 64)
K2=$(openssl rand -hex 64)
tromcho create img -s $SIZE --enc_key "$K1" >/dev/null || fail "create img"
# inode_of IMAGE: "POOL ID" of its index
inode_of () { kv_get "/index/image/$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["pool_id"], d["id"])'; }
read -r POOL OLD < <(inode_of img)

start_nbdkit load -- config="$CONF" image=img
MNT=$TESTDIR/mnt
mkdir -p "$MNT"
tromcho-fuse "$MNT" -f >"$TESTDIR/fuse.log" 2>&1 &
fuse_pid=$!
cleanup_fn "fusermount3 -u '$MNT' 2>/dev/null; stop_pid $fuse_pid"
wait_for test -f "$MNT/img" || { cat "$TESTDIR/fuse.log"; fail "the FUSE mount did not show the image"; }
STOP=$TESTDIR/stop
$PY "$top_srcdir/tests/rekey-load.py" $SIZE "$STOP" "$(uri load "")" "$(uri load "")" --file "$MNT/img" \
  >"$TESTDIR/writer.log" 2>&1 &
LOAD=$!
cleanup_fn "kill $LOAD 2>/dev/null"
wait_for grep -q "^filled" "$TESTDIR/writer.log" || { cat "$TESTDIR/writer.log"; fail "the load did not start"; }

# Start, kill, resume, kill ... until a run finishes.
kills=0 seen_progress=0 finished=0
for round in $(seq 1 30); do
  if [ $round = 1 ]; then spec=$K2; else spec=resume; fi
  # An OSD crashes in the middle (kill -9; its PGs move to the other two, as
  # the monitor would move them), and comes back two rounds later.
  if [ $round = 3 ]; then stop_osd 3 -9; set_pgs 1 8 "1 2"; echo "OSD 3 killed"; fi
  if [ $round = 5 ]; then start_osd 3; set_pgs 1 8 "1 2 3"; echo "OSD 3 back"; fi
  # rekey_rate: the copy takes about 8 s, so the kills land all along it
  # and six of them cannot finish it (at 24 MB/s, 4 s, a slow machine's
  # rounds each copied a quarter and round 4 finished before its kill)
  tromcho modify img --rekey "$spec" --rekey_rate 12 >"$TESTDIR/rekey.$round.log" 2>&1 &
  pid=$!
  # 0.05 .. 0.8 s, then kill -9 (the first 6 rounds; later ones may finish)
  t0=$(date +%s.%N)
  sleep "$(python3 -c "import random; print(random.uniform(0.05, 0.8))")"
  if [ $round -le 6 ] && kill -9 $pid 2>/dev/null; then
    wait $pid 2>/dev/null || true
    kills=$((kills + 1))
    info=$(tromcho info img) || fail "info after kill $kills: $info"
    if echo "$info" | grep -Eq '^rekey: +[0-9]+% \([0-9]+/[0-9]+, (copying|deleting)'; then
      seen_progress=$((seen_progress + 1))
      echo "after kill $kills: $(echo "$info" | grep '^rekey:')"
      if [ $seen_progress = 1 ]; then
        # While it is in progress: what would break it waits, ls hides the old layer.
        expect_fail "a re-key is in progress" tromcho rm img
        expect_fail "a re-key is in progress" tromcho snap-create img@during
        expect_fail "a re-key is in progress" tromcho flatten img
        tromcho ls | grep -q "@.rekey" && fail "ls shows the hidden old layer"
        [ "$(ls "$MNT")" = img ] || fail "the FUSE mount shows more than the image: $(ls "$MNT")"
      fi
    elif echo "$info" | grep -q '^rekey: *-$'; then
      echo "kill $kills came after the end"
      finished=1
      break
    else
      fail "info shows no re-key state after kill $kills: $info"
    fi
    continue
  fi
  wait $pid || { cat "$TESTDIR/rekey.$round.log"; fail "modify --rekey (round $round) failed"; }
  echo "round $round finished after $(python3 -c "import time; print(round(time.time() - $t0, 2))") s"
  grep -q "re-keyed" "$TESTDIR/rekey.$round.log" || fail "round $round: $(cat "$TESTDIR/rekey.$round.log")"
  finished=1
  break
done
[ $finished = 1 ] || fail "the re-key did not finish in 30 rounds"
[ $kills -ge 4 ] || fail "only $kills kills landed"
[ $seen_progress -ge 1 ] || fail "info never showed the re-key in progress"
tromcho info img | grep -q '^rekey: *-$' || fail "info still shows a re-key: $(tromcho info img)"
# A resume with nothing to resume says so.
expect_fail "no re-key in progress" tromcho modify img --rekey resume

# The load goes on a little on the re-keyed image, then verifies everything.
sleep 2
touch "$STOP"
wait $LOAD || { cat "$TESTDIR/writer.log"; fail "the write load failed (an I/O error or a wrong byte)"; }
cat "$TESTDIR/writer.log"
grep -q " 0 wrong" "$TESTDIR/writer.log" || fail "the load read wrong bytes"
grep -Eqi "error|EROFS|ESTALE" "$TESTDIR/writer.log" && fail "errors in the load's log"

# The image's key is the new one; the old key is in no record.
read -r POOL NEW < <(inode_of img)
[ "$NEW" != "$OLD" ] || fail "the image is still on its old inode"
rec=$(kv_get "/config/inode/$POOL/$NEW")
echo "$rec" | grep -q "$K2" || fail "the image's record does not hold the new key: $rec"
echo "$rec" | grep -q '"parent_id"' && fail "the image still has a parent: $rec"
echo "$rec" | grep -q 'rekey_from' && fail "the re-key is still recorded: $rec"
old=$(kv_get "/config/inode/$POOL/$OLD")
echo "$old" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["retired"] and d["readonly"] and d["hidden"] and "enc_key" not in d, d' ||
  fail "the old layer's record is not retired: $old"
all=$(curl -sf -X POST "$KV_URL/v3/kv/range" -d "{\"key\":\"$(printf /tromcho/ | base64 -w0)\",\"range_end\":\"$(printf /tromcho0 | base64 -w0)\"}" |
      python3 -c 'import sys,json,base64; [print(base64.b64decode(k["value"]).decode()) for k in json.load(sys.stdin).get("kvs", [])]')
echo "$all" | grep -q "$K1" && fail "the old key is still in the KV"
tromcho ls | grep -q "@.rekey" && fail "ls shows the hidden old layer"
# The old layer holds no data.
[ "$("$TOOL" usage $(( (POOL << 48) | OLD )))" = 0 ] || fail "the old layer still holds data"
# Stored sectors: the new key decrypts them to the verified content, the old one does not.
MODEL=$STOP.model
# (sectors with data: a zeroed or trimmed one may be absent, and read as zeros)
sectors=$(python3 -c '
import sys, random
m = open(sys.argv[1], "rb").read()
full = [s for s in range(len(m) // 4096) if any(m[s * 4096:(s + 1) * 4096])]
print(" ".join(str(s) for s in [full[0], full[-1]] + random.sample(full, 6)))' "$MODEL")
for s in $sectors; do
  "$TOOL" rawread img $((s * 4096)) 4096 > "$TESTDIR/ct" || fail "raw read of sector $s"
  python3 - "$K2" "$K1" $s "$TESTDIR/ct" "$MODEL" <<'PY' || fail "sector $s: not encrypted with the new key only"
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
k2, k1, s = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2]), int(sys.argv[3])
ct = open(sys.argv[4], "rb").read()
want = open(sys.argv[5], "rb").read()[s * 4096:(s + 1) * 4096]
def dec(k):
    d = Cipher(algorithms.AES(k), modes.XTS(s.to_bytes(16, "little"))).decryptor()
    return d.update(ct) + d.finalize()
assert ct != want, "stored in plain"
assert dec(k2) == want, "the new key does not decrypt it"
assert dec(k1) != want, "the old key still decrypts it"
PY
done
# A write sent straight to the old inode is refused by the OSD.
out=$("$OSDC" --etcd_address "$KV_URL" write --inode $(( (POOL << 48) | OLD )) --offset 0 --len 4096 --seed 1 --timeout 3 2>&1) &&
  fail "a write to the old inode passed: $out"
echo "$out" | grep -qi "read-only" || fail "the write to the old inode failed otherwise: $out"
# Afterwards the image lives on as any other: a snapshot, a read through nbdkit.
tromcho snap-create img@after >/dev/null || fail "snap-create after the re-key"
nbdsh -u "$(uri load "")" -c "assert h.pread(4096, 0) == open('$MODEL', 'rb').read(4096)" || fail "read after the snapshot"
# An image with a snapshot below: the re-key copies its own layer only; the
# snapshot keeps its key and its content, and stays the image's parent.
K3=$(openssl rand -hex 64)
head -c 4M /dev/urandom > "$TESTDIR/a"
head -c 1M /dev/urandom > "$TESTDIR/b"
tromcho create lay -s 4M --enc_key "$K1" >/dev/null || fail "create lay"
tromcho dd if="$TESTDIR/a" oimg=lay bs=64K 2>/dev/null || fail "write lay"
tromcho snap-create lay@s >/dev/null || fail "snap-create lay@s"
tromcho dd if="$TESTDIR/b" oimg=lay bs=64K seek=16 conv=notrunc 2>/dev/null || fail "write lay after the snapshot"
cp "$TESTDIR/a" "$TESTDIR/lay.model"
dd if="$TESTDIR/b" of="$TESTDIR/lay.model" bs=64K seek=16 conv=notrunc 2>/dev/null
tromcho modify lay --rekey "$K3" >/dev/null || fail "re-key lay"
tromcho dd iimg=lay of="$TESTDIR/lay.back" bs=64K 2>/dev/null || fail "read lay"
cmp "$TESTDIR/lay.back" "$TESTDIR/lay.model" || fail "lay after its re-key"
tromcho dd iimg=lay@s of="$TESTDIR/s.back" bs=64K 2>/dev/null || fail "read lay@s"
cmp "$TESTDIR/s.back" "$TESTDIR/a" || fail "the snapshot changed"
tromcho info lay --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["parent"] == "lay@s" and "rekey" not in d, d' ||
  fail "lay's parent after its re-key: $(tromcho info lay --json)"
read -r POOL LAY < <(inode_of lay)
kv_get "/config/inode/$POOL/$LAY" | grep -q "$K3" || fail "lay's record does not hold the new key"
read -r POOL LS < <(inode_of lay@s)
kv_get "/config/inode/$POOL/$LS" | grep -q "$K1" || fail "the snapshot lost its key"
"$TOOL" rawread lay $((16 * 65536)) 4096 > "$TESTDIR/ct" || fail "raw read of lay"
python3 - "$K3" $((16 * 16)) "$TESTDIR/ct" "$TESTDIR/lay.model" <<'PY' || fail "lay's own sector is not under the new key"
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
k, s = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
d = Cipher(algorithms.AES(k), modes.XTS(s.to_bytes(16, "little"))).decryptor()
assert d.update(open(sys.argv[3], "rb").read()) + d.finalize() == open(sys.argv[4], "rb").read()[s * 4096:(s + 1) * 4096]
PY
# The retired old layer is nobody's child: the snapshot can go after a flatten.
expect_fail "has children \(lay\)" tromcho rm lay@s
tromcho flatten lay >/dev/null || fail "flatten lay"
tromcho rm lay@s >/dev/null || fail "rm lay@s after the re-key and a flatten"
tromcho dd iimg=lay of="$TESTDIR/lay.back" bs=64K 2>/dev/null || fail "read lay after rm lay@s"
cmp "$TESTDIR/lay.back" "$TESTDIR/lay.model" || fail "lay after rm lay@s"
expect_fail "authenticated image cannot be re-keyed" sh -c "tromcho create auth -s 1M --enc_key auto --integrity >/dev/null && tromcho modify auth --rekey auto"
expect_fail "a re-key needs a new key" tromcho modify lay --rekey none

stop_nbdkit load
fusermount3 -u "$MNT" || fail "unmount"
wait $fuse_pid 2>/dev/null
grep -Ei "error|EROFS|ESTALE" "$TESTDIR/fuse.log" && fail "tromcho-fuse logged errors"
grep -E "tromcho: .*(error|EIO)" "$TESTDIR/load.log" 2>/dev/null | grep -v "0 wrong" && fail "nbdkit logged errors"
echo "test-image-rekey: ok ($kills kills)"
