#!/usr/bin/env bash
# Authenticated images (create --integrity) over real OSDs: the stored
# ciphertext of sectors is changed, swapped, moved and deleted behind the
# image layer's back (raw writes to the image's own inode, as someone who
# holds the disks would), and every read of such a sector fails with an I/O
# error naming the image and the sector, which is also logged; untouched
# sectors read fine. A plain XTS image under the same tampering returns
# garbage silently (the control). Also: layout (tags inside the inode),
# unaligned writes, snapshots (each layer its own tags), trim and extents,
# no shrink; and what it does not catch: the replay of an old version of a
# sector together with its tag sector.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3 openssl xxd
TOOL=$top_builddir/tests/client-tool
start_kv
write_conf
make_pool 1 2 2 1
start_osd 1
start_osd 2
set_pgs 1 2 "1 2"
G=127
phys () { echo $(( ($1 / G) * (G + 1) + 1 + $1 % G )); }     # stored sector of image sector $1
tagsec () { echo $(( ($1 / G) * (G + 1) )); }                # its tag sector
raw () { "$TOOL" rawread "$1" $(($2 * 4096)) 4096; }          # raw IMAGE STORED-SECTOR
rawput () { "$TOOL" rawwrite "$1" $(($2 * 4096)) || fail "raw write"; }
readsec () { tromcho dd iimg="$1" of="$TESTDIR/out" bs=4096 skip="$2" count=1 2>"$TESTDIR/err"; }

head -c 2M /dev/urandom > "$TESTDIR/data"
for img in auth plain; do
  extra=; [ $img = auth ] && extra=--integrity
  tromcho create $img -s 4M --enc_key auto $extra >/dev/null || fail "create $img"
  tromcho dd if="$TESTDIR/data" oimg=$img bs=64K 2>/dev/null || fail "write $img"
done
tromcho info auth | grep -q "integrity: *yes" || fail "info does not show integrity"
expect_fail "needs a key" tromcho create noauth -s 4M --integrity
tromcho dd iimg=auth of="$TESTDIR/back" bs=64K count=32 2>/dev/null || fail "read auth"
cmp "$TESTDIR/back" "$TESTDIR/data" || fail "auth reads back wrong"
# The layout: image sector 200 is stored at sector phys(200), its tag in tagsec(200).
cmp -s <(raw auth 200) <(raw plain 200) && fail "auth stores sector 200 where plain does"
[ "$(raw auth "$(tagsec 200)" | tr -d '\0' | wc -c)" -gt 0 ] || fail "no tag sector at $(tagsec 200)"
echo "layout: data at interleaved places, tag sectors inside the inode"

# flip: one bit of the stored ciphertext of sector 10
raw auth "$(phys 10)" | python3 -c 'import sys; b = bytearray(sys.stdin.buffer.read()); b[100] ^= 1; sys.stdout.buffer.write(b)' > "$TESTDIR/x"
rawput auth "$(phys 10)" < "$TESTDIR/x"
readsec auth 10 && fail "a flipped sector was returned"
grep -q "image auth: sector 10 (byte offset 40960): fails its integrity check" "$TESTDIR/err" || fail "flip: $(cat "$TESTDIR/err")"
# logged (the client's log line) as well as returned (the command's error)
[ "$(grep -c "image auth: sector 10 " "$TESTDIR/err")" -ge 2 ] || fail "flip: not logged: $(cat "$TESTDIR/err")"
readsec auth 9 && readsec auth 11 || fail "the neighbours of the flipped sector fail"
cmp "$TESTDIR/out" <(dd if="$TESTDIR/data" bs=4096 skip=11 count=1 2>/dev/null) || fail "sector 11 wrong"
# a whole read over it fails too, and never returns data
tromcho dd iimg=auth of="$TESTDIR/out" bs=64K count=1 2>/dev/null && fail "a 64 KiB read over the flipped sector succeeded"
# control: the plain image returns garbage silently
raw plain 10 | python3 -c 'import sys; b = bytearray(sys.stdin.buffer.read()); b[100] ^= 1; sys.stdout.buffer.write(b)' > "$TESTDIR/x"
rawput plain 10 < "$TESTDIR/x"
readsec plain 10 || fail "control: the plain image refuses the flipped sector"
cmp -s "$TESTDIR/out" <(dd if="$TESTDIR/data" bs=4096 skip=10 count=1 2>/dev/null) && fail "control: flip had no effect"
echo "flip: auth fails sector 10 with an I/O error; plain returns garbage"

# swap: the stored sectors of 20 and 21
raw auth "$(phys 20)" > "$TESTDIR/s20"; raw auth "$(phys 21)" > "$TESTDIR/s21"
rawput auth "$(phys 20)" < "$TESTDIR/s21"; rawput auth "$(phys 21)" < "$TESTDIR/s20"
readsec auth 20 && fail "swapped sector 20 returned"
grep -q "image auth: sector 20 " "$TESTDIR/err" || fail "swap 20: $(cat "$TESTDIR/err")"
readsec auth 21 && fail "swapped sector 21 returned"
grep -q "image auth: sector 21 " "$TESTDIR/err" || fail "swap 21: $(cat "$TESTDIR/err")"
# and the two tags swapped too (the whole group's tag sector can't be swapped per slot: swap across groups)
raw auth "$(phys 30)" > "$TESTDIR/s30"
rawput auth "$(phys $((30 + G)))" < "$TESTDIR/s30"
readsec auth $((30 + G)) && fail "moved sector returned"
grep -q "image auth: sector $((30 + G)) " "$TESTDIR/err" || fail "move: $(cat "$TESTDIR/err")"
echo "swap and move: both sectors fail"

# a sector moved together with its tag slot into another image with the same key
tromcho create auth2 -s 4M --enc_key "$(kv_get /config/inode/1/1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["enc_key"])')" --integrity >/dev/null ||
  fail "create auth2"
tromcho dd if="$TESTDIR/data" oimg=auth2 bs=64K count=1 2>/dev/null || fail "write auth2"
raw auth "$(tagsec 0)" > "$TESTDIR/t0"; raw auth "$(phys 5)" > "$TESTDIR/s5"
rawput auth2 "$(tagsec 0)" < "$TESTDIR/t0"; rawput auth2 "$(phys 5)" < "$TESTDIR/s5"
readsec auth2 5 && fail "a sector (with its tag sector) taken from another image verified"
grep -q "image auth2: sector 5 " "$TESTDIR/err" || fail "cross-image: $(cat "$TESTDIR/err")"
echo "moved from another image with the same key (tag sector and all): fails"

# deleted on the OSDs while its tag says written
"$TOOL" rawdelete auth $(( $(phys 40) * 4096 )) 4096 || fail "raw delete"
readsec auth 40 && fail "a deleted sector read as zeros"
grep -q "image auth: sector 40 .*missing" "$TESTDIR/err" || fail "delete: $(cat "$TESTDIR/err")"
echo "deleted: fails as missing"

# a rewrite repairs a sector; unaligned writes; snapshots keep their own tags
for s in 10 20 21 $((30 + G)) 40; do
  tromcho dd if="$TESTDIR/data" oimg=auth bs=4096 seek=$s skip=$((s % 512)) count=1 2>/dev/null || fail "rewrite $s"
done
printf 'HELLO' > "$TESTDIR/h"
head -c 4096 /dev/urandom > "$TESTDIR/h4k"
tromcho dd if="$TESTDIR/h" oimg=auth bs=1 seek=$((300 * 4096 + 7)) 2>/dev/null || fail "unaligned write"
cp "$TESTDIR/data" "$TESTDIR/model"; truncate -s 4M "$TESTDIR/model"
for s in 10 20 21 $((30 + G)) 40; do dd if="$TESTDIR/data" of="$TESTDIR/model" bs=4096 seek=$s skip=$((s % 512)) count=1 conv=notrunc 2>/dev/null; done
dd if="$TESTDIR/h" of="$TESTDIR/model" bs=1 seek=$((300 * 4096 + 7)) conv=notrunc 2>/dev/null
tromcho dd iimg=auth of="$TESTDIR/back" bs=64K 2>/dev/null || fail "read auth after rewrites: $(tromcho dd iimg=auth of=/dev/null bs=64K 2>&1)"
cmp "$TESTDIR/back" "$TESTDIR/model" || fail "auth after rewrites"
tromcho snap-create auth@s1 >/dev/null || fail "snapshot"
tromcho dd if="$TESTDIR/h4k" oimg=auth bs=4096 seek=50 count=1 2>/dev/null || fail "write after snapshot"
raw auth@s1 "$(phys 60)" | python3 -c 'import sys; b = bytearray(sys.stdin.buffer.read()); b[0] ^= 1; sys.stdout.buffer.write(b)' > "$TESTDIR/x"
# (the OSDs refuse writes to a read-only inode: the tampering lifts that first)
tromcho modify auth@s1 --readwrite >/dev/null || fail "modify auth@s1 --readwrite"
WAIT_SECS=5 wait_for sh -c "\"$TOOL\" rawwrite auth@s1 $(( $(phys 60) * 4096 )) < \"$TESTDIR/x\"" || fail "raw write"
tromcho modify auth@s1 --readonly >/dev/null || fail "modify auth@s1 --readonly"
readsec auth 60 && fail "a flipped sector of the parent layer returned through the child"
grep -q "image auth@s1: sector 60 " "$TESTDIR/err" || fail "parent layer: $(cat "$TESTDIR/err")"
readsec auth 50 || fail "the child's own sector"
echo "rewrites repair, unaligned writes, the parent layer checked through the child"

# trim writes zeros with tags; extents see them; no shrink
tromcho dd if=/dev/zero oimg=auth bs=4096 seek=100 count=4 2>/dev/null || fail "zero write"
expect_fail "cannot shrink" tromcho modify auth --resize 2M
tromcho modify auth --resize 8M >/dev/null || fail "grow"
tromcho dd iimg=auth of="$TESTDIR/back" bs=64K skip=64 2>/dev/null || fail "read the grown part"
cmp "$TESTDIR/back" <(head -c 4M /dev/zero) || fail "grown part is not zeros"

# a reader process holding the image open sees another process's writes verify
coproc LOOP { "$TOOL" keyloop auth 2>&1; }
cleanup_fn "kill $LOOP_PID 2>/dev/null"
ask () { echo "$1" >&"${LOOP[1]}"; read -r -t 30 line <&"${LOOP[0]}" || fail "keyloop: no answer to $1"; echo "$line"; }
[ "$(ask open)" = "ok $(head -c 16 "$TESTDIR/model" | xxd -p)" ] || fail "reader: open"
tromcho dd if="$TESTDIR/h4k" oimg=auth bs=4096 count=1 2>/dev/null || fail "write sector 0 from another process"
[ "$(ask read)" = "ok $(head -c 16 "$TESTDIR/h4k" | xxd -p)" ] || fail "the open reader does not verify the other process's write"
exec {LOOP[1]}>&-
echo "a reader beside the writer: the writer's new sector verifies in the reader"

# a writer killed at random moments (8 threads, overlapping unaligned
# writes): every sector still verifies, holding its old or its new data
tromcho create crash -s 4M --enc_key auto --integrity >/dev/null || fail "create crash"
for round in 1 2 3 4; do
  "$TOOL" threads crash 100000 >/dev/null 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  tromcho dd iimg=crash of=/dev/null bs=64K 2>"$TESTDIR/err" || fail "round $round: a sector fails after kill -9 of its writer: $(cat "$TESTDIR/err")"
done
echo "writer killed 4 times at random moments: every sector verifies"
# the crash window itself, made exact: a write whose tag sector landed but
# whose data did not (the stored data put back as it was) reads as the old data
tromcho dd if="$TESTDIR/data" oimg=crash bs=4096 seek=80 skip=80 count=1 2>/dev/null || fail "v1 of 80"
raw crash "$(phys 80)" > "$TESTDIR/v1"
tromcho dd if="$TESTDIR/h4k" oimg=crash bs=4096 seek=80 count=1 2>/dev/null || fail "v2 of 80"
rawput crash "$(phys 80)" < "$TESTDIR/v1"
readsec crash 80 || fail "old data under a newer tag sector (a crash between tag and data writes) fails: $(cat "$TESTDIR/err")"
cmp "$TESTDIR/out" <(dd if="$TESTDIR/data" bs=4096 skip=80 count=1 2>/dev/null) || fail "not the old data"
echo "tag written, data lost: the old data still verifies (the previous tag)"
# ... and twice in a row (each time a new process): still the old data
tromcho dd if="$TESTDIR/h4k" oimg=crash bs=4096 seek=80 count=1 2>/dev/null || fail "v3 of 80"
rawput crash "$(phys 80)" < "$TESTDIR/v1"
readsec crash 80 || fail "old data after two lost data writes fails: $(cat "$TESTDIR/err")"
cmp "$TESTDIR/out" <(dd if="$TESTDIR/data" bs=4096 skip=80 count=1 2>/dev/null) || fail "not the old data (twice)"
echo "two lost data writes in a row: the old data still verifies"

# the same window for a first write (the sector never written before): its
# tag sector landed, marked "first write", and its data did not: the sector
# reads as never written (zeros), not as an error; once a first write's
# data has landed the mark is gone, so deleting that data is caught
tromcho create first -s 4M --enc_key auto --integrity >/dev/null || fail "create first"
U=100
tromcho dd if="$TESTDIR/h4k" oimg=first bs=4096 seek=$U count=1 2>/dev/null || fail "first write of $U"
raw first "$(tagsec $U)" > "$TESTDIR/t100"
python3 - "$TESTDIR/t100" $((U % G)) <<'PY' || fail "the first write's data landed but its tag still says first write"
import sys
b = open(sys.argv[1], "rb").read(); k = int(sys.argv[2])
assert b[k * 32:k * 32 + 16] != bytes(16), "no current tag"
assert b[k * 32 + 16:k * 32 + 32] == bytes(16), b[k * 32 + 16:k * 32 + 32].hex()
PY
python3 - "$TESTDIR/t100" $((U % G)) <<'PY' > "$TESTDIR/t100m"
import sys
b = bytearray(open(sys.argv[1], "rb").read()); k = int(sys.argv[2])
b[k * 32 + 16:k * 32 + 32] = b"\xff" * 16
sys.stdout.buffer.write(b)
PY
"$TOOL" rawdelete first $(( $(phys $U) * 4096 )) 4096 || fail "raw delete"
readsec first $U && fail "a first write's data deleted after it landed reads as never written"
rawput first "$(tagsec $U)" < "$TESTDIR/t100m"
readsec first $U || fail "a first write that died between its tag and its data fails: $(cat "$TESTDIR/err")"
cmp "$TESTDIR/out" <(head -c 4096 /dev/zero) || fail "a first write that died reads as something else than zeros"
tromcho dd if="$TESTDIR/data" oimg=first bs=4096 seek=$U skip=$U count=1 2>/dev/null || fail "write $U again"
readsec first $U || fail "$U after it is written again: $(cat "$TESTDIR/err")"
cmp "$TESTDIR/out" <(dd if="$TESTDIR/data" bs=4096 skip=$U count=1 2>/dev/null) || fail "$U holds the wrong data"
echo "tag written, data of a first write lost: reads as never written; after it landed, a deletion is caught"

# not caught: an old version of a sector replayed with its tag sector
tromcho dd if="$TESTDIR/data" oimg=auth bs=4096 seek=70 skip=70 count=1 2>/dev/null || fail "old version of 70"
raw auth "$(tagsec 70)" > "$TESTDIR/oldtag"; raw auth "$(phys 70)" > "$TESTDIR/olddata"
tromcho dd if="$TESTDIR/h4k" oimg=auth bs=4096 seek=70 count=1 2>/dev/null || fail "new version of 70"
tromcho dd if="$TESTDIR/h4k" oimg=auth bs=4096 seek=70 count=1 2>/dev/null || fail "newer version of 70"
rawput auth "$(tagsec 70)" < "$TESTDIR/oldtag"; rawput auth "$(phys 70)" < "$TESTDIR/olddata"
readsec auth 70 || fail "the replayed old version is refused (then update the documented limits): $(cat "$TESTDIR/err")"
cmp "$TESTDIR/out" <(dd if="$TESTDIR/data" bs=4096 skip=70 count=1 2>/dev/null) || fail "replay returned something else"
echo "documented limit: an old version replayed with its tag sector reads as that old version"
echo "test-image-integrity: ok"
