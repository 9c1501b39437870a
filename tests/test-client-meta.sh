#!/usr/bin/env bash
# The image commands' metadata side against a real KV: create, ls, info,
# modify (resize, rename, readonly, owner), snap-create, clone records, and
# the errors that name what is wrong. Two OSDs hold no data here: a snapshot
# fences the old top at every PG's primary (common/README.md, "Layer switch
# and re-key"), so snap-create needs the PGs served.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho curl python3
start_kv
LOG_LEVEL=warn write_conf

expect_fail "no pool yet" tromcho create a -s 1M
make_pool 1 4 2 1
expect_fail "-s SIZE is required" tromcho create a
expect_fail "not a positive size" tromcho create a -s 1000
expect_fail "not a positive size" tromcho create a -s lots
expect_fail "'@' separates" tromcho create a@b -s 1M
expect_fail "pool nope: no such pool" tromcho create a -s 1M --pool nope
expect_fail "enc_key must be" tromcho create a -s 1M --enc_key 1234
expect_fail "halves are equal" tromcho create a -s 1M --enc_key "$(printf '%064d%064d' 0 0)"
expect_fail "unknown option '--colour'" tromcho create a -s 1M --colour blue

tromcho create a -s 64M --owner alice --reader_group staff | grep -q "Image a created" || fail "create a"
tromcho create b -s 1G --enc_key auto || fail "create b"
KEY=$(openssl rand -hex 64)
tromcho create c -s 4M --enc_key "$KEY" --pool pool1 || fail "create c"
expect_fail "image a: image exists" tromcho create a -s 1M

# Records as Vitastor lays them out.
idx=$(kv_get /index/image/b)
python3 - "$idx" "$(kv_get /config/inode/1/2)" "$(kv_get /index/maxid/1)" <<'PY' || fail "records of b"
import json, sys
idx, rec, maxid = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
assert idx == {"id": 2, "pool_id": 1}, idx
assert rec["name"] == "b" and rec["size"] == 1 << 30, rec
assert len(rec["enc_key"]) == 128 and int(rec["enc_key"], 16) >= 0, rec
assert maxid == 3, maxid
PY
[ "$(kv_get /config/inode/1/3 | python3 -c 'import json,sys; print(json.load(sys.stdin)["enc_key"])')" = "$KEY" ] ||
  fail "c's key is not the one given"

out=$(tromcho ls)
echo "$out"
echo "$out" | grep -qE '^a +1 +64 MiB .* 1 +no ' || fail "ls line of a"
echo "$out" | grep -qE '^b +1 +1 GiB .* 1 +yes ' || fail "ls line of b"
[ "$(echo "$out" | sed 1d | awk '{print $1}' | tr '\n' ' ')" = "a b c " ] || fail "ls is not in name order"
tromcho ls --json | python3 -c '
import json, sys
v = {i["name"]: i for i in json.load(sys.stdin)}
assert set(v) == {"a", "b", "c"}, v
assert v["a"]["owner"] == "alice" and v["a"]["reader_group"] == "staff" and not v["a"]["encrypted"]
assert v["b"]["encrypted"] and v["b"]["size"] == 1 << 30 and v["b"]["layers"] == 1
' || fail "ls --json"
tromcho info a | grep -q "owner: *alice" || fail "info a"
tromcho info c --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["encrypted"] and d["key_source"] == "kv" and "enc_key" not in d' ||
  fail "info --json must say encrypted without showing the key"
expect_fail "image nope: no such image" tromcho info nope

# modify
tromcho modify a --resize 128M || fail "resize"
[ "$(tromcho info a --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')" = $((128 << 20)) ] || fail "size after resize"
tromcho modify a --rename a2 --owner bob --reader_group "" || fail "rename"
expect_fail "no such image" tromcho info a
tromcho info a2 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["owner"] == "bob" and d["reader_group"] is None, d' ||
  fail "owner after modify"
expect_fail "image exists" tromcho modify a2 --rename b
tromcho modify a2 --readonly || fail "readonly"
tromcho ls | grep -qE '^a2 .* RO$' || fail "ls shows RO"
expect_fail "read-only" tromcho modify a2 --resize 256M
tromcho modify a2 --readwrite || fail "readwrite"
expect_fail "contradict" tromcho modify a2 --readonly --readwrite

# snapshots and clones (records; the snapshot's fence reaches every PG)
start_osd 1
start_osd 2
set_pgs 1 4 "1 2"
tromcho snap-create b@s1 || fail "snap-create"
expect_fail "snapshot b@s1: image exists" tromcho snap-create b@s1
expect_fail "IMAGE@SNAPSHOT" tromcho snap-create b
python3 - "$(kv_get /index/image/b)" "$(kv_get /index/image/b@s1)" <<'PY' || fail "snapshot records"
import json, sys
live, snap = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert snap["id"] == 2 and live["id"] == 4, (live, snap)
PY
tromcho info b@s1 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["readonly"] and d["layers"] == 1, d' || fail "snapshot is read-only"
tromcho info b --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["parent"] == "b@s1" and d["layers"] == 2 and d["encrypted"], d' ||
  fail "b's parent is b@s1"
tromcho clone b@s1 b-plain --enc_key none || fail "clone without a key"
tromcho clone b@s1 b-same || fail "clone with the parent's key"
tromcho clone b@s1 b-new --enc_key auto || fail "clone with a new key"
python3 - "$(kv_get /config/inode/1/2)" "$(kv_get /config/inode/1/6)" "$(kv_get /config/inode/1/7)" "$(kv_get /config/inode/1/5)" <<'PY' || fail "clone keys"
import json, sys
snap, same, new, plain = (json.loads(a) for a in sys.argv[1:])
assert same["enc_key"] == snap["enc_key"] and new["enc_key"] != snap["enc_key"] and "enc_key" not in plain
assert same["parent_id"] == 2 and new["parent_id"] == 2 and plain["parent_id"] == 2
PY
expect_fail "no such image" tromcho clone b@nope x
echo "test-client-meta: ok"
