#!/usr/bin/env bash
# Keys per layer and key destruction, over real OSDs with use_perms:
# - snap-create --enc_key gives the image's new top layer its own key while
#   the snapshot keeps the old one (auto, HEX, none), checked by decrypting
#   the stored sectors with each key;
# - the seed's example: an unencrypted base owned by alice, readable by a
#   group; bob, a reader of it, clones its snapshot with his own key;
# - rm --shred: the KV-held key is destroyed first (new opens fail, an open
#   handle's I/O fails), then the data; refused for Vault keys and plain
#   images; a snapshot holding the same key is warned of.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3 openssl xxd
TOOL=$top_builddir/tests/client-tool
start_kv
P=$TESTDIR/pki
tromcho make-certs --dir "$P" >/dev/null || fail "make-certs"
for u in alice bob; do tromcho make-certs user $u --dir "$P" >/dev/null || fail "make-certs user $u"; done
EXTRA_CONF=", \"use_perms\": true, \"osd_ca\": \"$P/osd_ca.crt\", \"client_ca\": \"$P/client_ca.crt\", \"osd_cert\": \"$P/osd_ca.crt\", \"osd_pkey\": \"$P/osd_ca.key\", \"cert\": \"$P/admin.crt\", \"pkey\": \"$P/admin.key\"" write_conf
admin_cn=$(openssl x509 -noout -subject -nameopt multiline -in "$P/admin.crt" | sed -n 's/ *commonName *= *//p')
kv_put "/config/user/$admin_cn" '{"type": "admin"}'
kv_put /config/user/alice '{"groups": ["staff"]}'
kv_put /config/user/bob '{"groups": ["staff", "basereaders"]}'
kv_put /config/pools '{"1": {"name": "pool1", "pg_count": 2, "pg_size": 2, "pg_minsize": 1, "creator_group": "staff"}}'
start_osd 1
start_osd 2
set_pgs 1 2 "1 2"
as () { local u=$1; shift; tromcho --cert "$P/$u.crt" --pkey "$P/$u.key" "$@"; }
# key_of IMAGE: enc_key of its record (as the admin sees it)
key_of () {
  local idx pool id
  idx=$(kv_get "/index/image/$1")
  pool=$(echo "$idx" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pool_id"])')
  id=$(echo "$idx" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  kv_get "/config/inode/$pool/$id" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("enc_key", ""))'
}
# stored IMAGE SECTOR KEY: the image's own stored sector, decrypted with KEY ("" = as is)
stored () {
  "$TOOL" rawread "$1" $(($2 * 4096)) 4096 > "$TESTDIR/ct" || fail "raw read $1"
  if [ -z "$3" ]; then cat "$TESTDIR/ct"; return; fi
  python3 - "$3" "$2" "$TESTDIR/ct" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
key, sector = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
d = Cipher(algorithms.AES(key), modes.XTS(sector.to_bytes(16, "little"))).decryptor()
sys.stdout.buffer.write(d.update(open(sys.argv[3], "rb").read()) + d.finalize())
PY
}
sector_of () { dd if="$1" bs=4096 skip="$2" count=1 2>/dev/null; }
head -c 1M /dev/urandom > "$TESTDIR/a"
head -c 1M /dev/urandom > "$TESTDIR/b"

# --- snap-create --enc_key ---
K1=$(openssl rand -hex 64)
tromcho create vm -s 8M --enc_key "$K1" >/dev/null || fail "create vm"
tromcho dd if="$TESTDIR/a" oimg=vm bs=64K 2>"$TESTDIR/err" || fail "write a: $(tail -n 3 "$TESTDIR/err")"
tromcho snap-create vm@s1 --enc_key auto >/dev/null || fail "snap-create --enc_key auto"
K2=$(key_of vm)
[ "$(key_of vm@s1)" = "$K1" ] || fail "the snapshot lost its key"
[ ${#K2} = 128 ] && [ "$K2" != "$K1" ] || fail "the new top layer has no new key: $K2"
tromcho dd if="$TESTDIR/b" oimg=vm bs=4096 count=16 2>"$TESTDIR/err" || fail "write b over the first 64 KiB: $(tail -n 3 "$TESTDIR/err")"
cp "$TESTDIR/a" "$TESTDIR/model"; dd if="$TESTDIR/b" of="$TESTDIR/model" bs=4096 count=16 conv=notrunc 2>/dev/null
tromcho dd iimg=vm of="$TESTDIR/back" bs=64K count=16 2>"$TESTDIR/err" || fail "read vm: $(tail -n 3 "$TESTDIR/err")"
cmp "$TESTDIR/back" "$TESTDIR/model" || fail "vm (new key over the snapshot's) reads wrong"
tromcho dd iimg=vm@s1 of="$TESTDIR/back" bs=64K count=16 2>"$TESTDIR/err" || fail "read vm@s1: $(tail -n 3 "$TESTDIR/err")"
cmp "$TESTDIR/back" "$TESTDIR/a" || fail "vm@s1 changed"
cmp <(stored vm 3 "$K2") <(sector_of "$TESTDIR/b" 3) || fail "vm's own sector is not XTS under its new key"
cmp -s <(stored vm 3 "$K1") <(sector_of "$TESTDIR/b" 3) && fail "vm's own sector decrypts with the old key"
cmp <(stored vm@s1 3 "$K1") <(sector_of "$TESTDIR/a" 3) || fail "vm@s1's sector is not under the old key"
# an unaligned write over a sector of the snapshot: read (old key), modify, write (new key)
printf 'UNALIGNED' > "$TESTDIR/u"
tromcho dd if="$TESTDIR/u" oimg=vm bs=1 seek=$((20 * 4096 + 100)) 2>"$TESTDIR/err" || fail "unaligned write: $(tail -n 3 "$TESTDIR/err")"
dd if="$TESTDIR/u" of="$TESTDIR/model" bs=1 seek=$((20 * 4096 + 100)) conv=notrunc 2>/dev/null
tromcho dd iimg=vm of="$TESTDIR/back" bs=64K count=16 2>"$TESTDIR/err" || fail "read vm: $(tail -n 3 "$TESTDIR/err")"
cmp "$TESTDIR/back" "$TESTDIR/model" || fail "vm after an unaligned write over the snapshot's sector"
# HEX and none
K3=$(openssl rand -hex 64)
tromcho snap-create vm@s2 --enc_key "$K3" >/dev/null || fail "snap-create --enc_key HEX"
[ "$(key_of vm)" = "$K3" ] && [ "$(key_of vm@s2)" = "$K2" ] || fail "HEX: keys of vm and vm@s2"
tromcho snap-create vm@s3 --enc_key none >/dev/null || fail "snap-create --enc_key none"
[ -z "$(key_of vm)" ] && [ "$(key_of vm@s3)" = "$K3" ] || fail "none: keys of vm and vm@s3"
tromcho dd if="$TESTDIR/b" oimg=vm bs=4096 seek=40 count=1 2>"$TESTDIR/err" || fail "write to the plain top: $(tail -n 3 "$TESTDIR/err")"
dd if="$TESTDIR/b" of="$TESTDIR/model" bs=4096 seek=40 count=1 conv=notrunc 2>/dev/null
cmp <(stored vm 40 "") <(sector_of "$TESTDIR/b" 0) || fail "the plain top layer's sector is not plain"
tromcho dd iimg=vm of="$TESTDIR/back" bs=64K count=16 2>"$TESTDIR/err" || fail "read vm (4 layers, 3 keys): $(tail -n 3 "$TESTDIR/err")"
cmp "$TESTDIR/back" "$TESTDIR/model" || fail "vm through 4 layers with 3 keys reads wrong"
expect_fail "enc_key must be auto, none, 128 hex digits or vault:ID" tromcho snap-create vm@s4 --enc_key 1234
expect_fail "two halves are equal" tromcho snap-create vm@s4 --enc_key "${K1:0:64}${K1:0:64}"
echo "snap-create --enc_key: new top layers under auto, HEX and none keys; snapshots keep theirs"

# --- the seed's example: alice's plain base, bob's encrypted clone ---
as alice create base -s 8M --reader_group basereaders >/dev/null || fail "alice creates base"
as alice dd if="$TESTDIR/a" oimg=base bs=64K 2>"$TESTDIR/err" || fail "alice writes base: $(tail -n 3 "$TESTDIR/err")"
as alice snap-create base@v1 >/dev/null || fail "alice snapshots base"
expect_fail "permission denied" as bob snap-create base@bob
as bob clone base@v1 bobvm --enc_key auto >/dev/null || fail "bob, a reader of base, clones it with his key"
KB=$(key_of bobvm)
[ ${#KB} = 128 ] || fail "bob's clone has no key"
as bob dd if="$TESTDIR/b" oimg=bobvm bs=4096 seek=2 count=1 2>"$TESTDIR/err" || fail "bob writes his clone: $(tail -n 3 "$TESTDIR/err")"
cp "$TESTDIR/a" "$TESTDIR/bm"; dd if="$TESTDIR/b" of="$TESTDIR/bm" bs=4096 seek=2 count=1 conv=notrunc 2>/dev/null
as bob dd iimg=bobvm of="$TESTDIR/back" bs=64K count=16 2>"$TESTDIR/err" || fail "bob reads his clone: $(tail -n 3 "$TESTDIR/err")"
cmp "$TESTDIR/back" "$TESTDIR/bm" || fail "bob's clone reads wrong"
cmp <(stored bobvm 2 "$KB") <(sector_of "$TESTDIR/b" 0) || fail "bob's sector is not under his key"
cmp -s <(stored bobvm 2 "") <(sector_of "$TESTDIR/b" 0) && fail "bob's sector is stored in the clear"
as alice dd iimg=base of="$TESTDIR/back" bs=64K count=16 2>"$TESTDIR/err" || fail "alice reads base: $(tail -n 3 "$TESTDIR/err")"
cmp "$TESTDIR/back" "$TESTDIR/a" || fail "base changed"
expect_fail "no such image" as alice dd iimg=bobvm of=/dev/null count=1
echo "seed example: bob clones alice's plain base with his own key"

# --- rm --shred ---
tromcho create sh -s 8M --enc_key auto >/dev/null || fail "create sh"
tromcho dd if="$TESTDIR/a" oimg=sh bs=64K 2>"$TESTDIR/err" || fail "write sh: $(tail -n 3 "$TESTDIR/err")"
coproc LOOP { "$TOOL" keyloop sh 2>&1; }
cleanup_fn "kill $LOOP_PID 2>/dev/null"
ask () { echo "$1" >&"${LOOP[1]}"; read -r -t 30 line <&"${LOOP[0]}" || fail "keyloop: no answer to $1"; echo "$line"; }
[ "$(ask open)" = "ok $(head -c 16 "$TESTDIR/a" | xxd -p)" ] || fail "open sh"
idx=$(kv_get /index/image/sh); id=$(echo "$idx" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
out=$(tromcho rm sh --shred 2>&1) || fail "rm --shred: $out"
echo "$out"
rev=$(echo "$out" | sed -n 's/.*shredded at KV revision \([0-9]*\).*/\1/p')
[ -n "$rev" ] || fail "no revision printed"
# the revision printed is the write that destroyed the key
at () { curl -sf -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"$(printf '/tromcho/config/inode/1/%s' "$id" | base64 -w0)\", \"revision\": $1}" |
  python3 -c 'import base64,json,sys; [print(json.loads(base64.b64decode(k["value"]))["enc_key"]) for k in json.load(sys.stdin).get("kvs", [])]'; }
[ "$(at "$rev")" = shredded ] || fail "at revision $rev the record is not shredded: $(at "$rev")"
[ "$(at $((rev - 1)) | tr -d '\n' | wc -c)" = 128 ] || fail "just before revision $rev the record held no key"
[ -z "$(kv_get /index/image/sh)" ] || fail "sh still indexed"
[ "$("$TOOL" objects 1 "$id")" = 0 ] || fail "sh's objects are still on the OSDs"
for i in $(seq 50); do r=$(ask read); case $r in err*shredded*) break;; esac; sleep 0.1; done
echo "$r" | grep -q "^err image: image sh: its key was shredded" || fail "the open handle still reads after the shred: $r"
echo "rm --shred: key destroyed at revision $rev (open handle: $r), then data and records"
# the key is destroyed before the data: with the OSDs down the data cannot
# go, but the key is gone already and the image no longer opens
tromcho create sh2 -s 8M --enc_key auto >/dev/null || fail "create sh2"
tromcho dd if="$TESTDIR/a" oimg=sh2 bs=64K count=2 2>"$TESTDIR/err" || fail "write sh2: $(tail -n 3 "$TESTDIR/err")"
tromcho snap-create sh2@keep >/dev/null || fail "snapshot sh2"
tromcho dd if="$TESTDIR/a" oimg=sh2 bs=64K count=2 2>"$TESTDIR/err" || fail "write sh2 again: $(tail -n 3 "$TESTDIR/err")"
stop_osd 2
out=$(tromcho --client_op_timeout 3 rm sh2 --shred 2>&1) && fail "rm --shred with an OSD down succeeded: $out"
echo "$out" | grep -q "sh2@keep holds the same key" || fail "no warning about the snapshot with the same key: $out"
expect_fail "image sh2: its key was shredded" tromcho dd iimg=sh2 of=/dev/null count=1
start_osd 2
WAIT_SECS=30 wait_for tromcho rm sh2 --shred || fail "rm --shred again once the OSD is back"
[ -z "$(kv_get /index/image/sh2)" ] || fail "sh2 still indexed"
tromcho dd iimg=sh2@keep of="$TESTDIR/back" bs=64K count=2 2>"$TESTDIR/err" || fail "sh2@keep (its own record and key) reads: $(tail -n 3 "$TESTDIR/err")"
cmp "$TESTDIR/back" <(head -c 128K "$TESTDIR/a") || fail "sh2@keep differs"
echo "rm --shred: key first (image unreadable while the data cannot be deleted), data on the next try"
tromcho create plainimg -s 4M >/dev/null || fail "create plainimg"
expect_fail "image plainimg: not encrypted: --shred" tromcho rm plainimg --shred
tromcho create vaultimg -s 4M --enc_key vault:x/y >/dev/null || fail "create vaultimg"
expect_fail "image vaultimg: its key is in Vault \(vault:x/y\), not in the KV" tromcho rm vaultimg --shred
exec {LOOP[1]}>&-
echo "test-image-keys: ok"
