#!/usr/bin/env bash
# The fence of a read-only inode (common/README.md, "Layer switch and
# re-key"): the OSD refuses client writes (WRITE, WRITE_PARTIAL, WRITE_IF)
# and deletes to an inode whose record is read-only with EROFS, and reads of
# a retired inode with ESTALE (whose data it deletes). A READ that carries a KV
# revision is served only once the OSD's image records are that recent:
# with the watch's reload held back 10 s (osd_kv_settle), a write sent
# right after the record turned read-only still lands, but once a READ at
# that revision was answered, every write is refused (the race a re-key's
# copier closes with it).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

OSD_OPTS="--osd_kv_settle 10000"
start_kv
make_pool 1 3 2 1
set_pgs 1 1 "1" "1,2,3"
for n in 1 2 3; do create_osd $n; start_osd $n; done
I=$(( (1 << 48) | 5 ))
PORT=$(osd_port 1)
raw () { osd_client raw "$1" --host 127.0.0.1 --port "$PORT" --inode $I "${@:2}"; }
# kv_put_rev KEY VALUE: put, print the KV revision of the write
kv_put_rev () {
  curl -sf "$KV_URL/v3/kv/put" -d "{\"key\":\"$(printf '%s' "$PREFIX$1" | base64 -w0)\",\"value\":\"$(printf '%s' "$2" | base64 -w0)\"}" |
    python3 -c 'import sys,json; print(json.load(sys.stdin)["header"]["revision"])'
}

kv_put /config/inode/1/5 '{"name": "img", "size": 1048576}'
# a request for an inode the OSD knows nothing of does not reload: send one
# first so that the record above is known (an unknown image reloads once)
osd_client write --inode $I --offset 0 --len 8192 --seed 1 || fail "write to a read-write inode"
raw READ --offset 0 --len 4096 --version "$(kv_put_rev /config/inode/1/6 '{"name": "x", "size": 4096}')" |
  grep -q '^status=[0-9]' || fail "fence read"

rev=$(kv_put_rev /config/inode/1/5 '{"name": "img", "size": 1048576, "readonly": true}')
# The watch's reload is 10 s away: this write still lands.
osd_client write --inode $I --offset 0 --len 4096 --seed 2 || fail "a write before the fence was refused"
out=$(raw READ --offset 0 --len 4096 --version "$rev")
echo "$out" | grep -q '^status=[0-9]' || fail "READ at the fence revision: $out"
zeros () { head -c "$1" /dev/zero | od -An -v -tx1 | tr -d ' \n'; }
out=$(raw WRITE --offset 4096 --len 4096 --hex-payload "$(zeros 4096)")
echo "$out" | grep -q "^status=-30 " || fail "WRITE to a read-only inode after the fence read: $out"
out=$(raw WRITE_PARTIAL --offset 4100 --len 100 --hex-payload "$(zeros 100)")
echo "$out" | grep -q "^status=-30 " || fail "WRITE_PARTIAL to a read-only inode after the fence read: $out"
out=$(raw WRITE_IF --offset 8192 --len 4096 --hex-payload "$(zeros $((16 + 4096)))")
echo "$out" | grep -q "^status=-30 " || fail "WRITE_IF to a read-only inode after the fence read: $out"
out=$(osd_client write --inode $I --offset 0 --len 4096 --seed 3 --timeout 3 2>&1) && fail "write after the fence: $out"
echo "$out" | grep -qi "read-only" || fail "the refused write does not say why: $out"
grep -q "EROFS: WRITE.* on read-only inode 1/5" "$TESTDIR"/osd1.log || fail "the OSD did not log the refusal"
osd_client read --inode $I --offset 0 --len 4096 --seed 2 || fail "the write before the fence is not there"
out=$(raw DELETE --offset 0 --len 4096)
echo "$out" | grep -q "^status=-30 " || fail "DELETE (a trim) of a read-only inode: $out"
osd_client read --inode $I --offset 0 --len 4096 --seed 2 || fail "the refused DELETE deleted"
# Back to read-write: writes pass again.
rev=$(kv_put_rev /config/inode/1/5 '{"name": "img", "size": 1048576}')
raw READ --offset 0 --len 4096 --version "$rev" | grep -q '^status=[0-9]' || fail "fence read 2"
osd_client write --inode $I --offset 0 --len 4096 --seed 4 || fail "write after readonly was cleared"
# Retired: reads refused with ESTALE (the reader reloads its layers).
rev=$(kv_put_rev /config/inode/1/5 '{"name": "img", "size": 1048576, "readonly": true, "retired": true}')
out=$(raw READ --offset 0 --len 4096 --version "$rev")
echo "$out" | grep -q "^status=-116 " || fail "READ of a retired inode: $out"
# ... and its data may be deleted (rm retires a read-only image first).
out=$(raw DELETE --offset 0 --len 8192)
echo "$out" | grep -q "^status=[0-9]" || fail "DELETE of a retired inode: $out"
out=$(raw WRITE --offset 4096 --len 4096 --hex-payload "$(zeros 4096)")
echo "$out" | grep -q "^status=-30 " || fail "WRITE to a retired inode: $out"
# A fence revision the KV has not reached: EAGAIN, the OSD keeps serving.
out=$(raw READ --offset 0 --len 4096 --version 99999999)
echo "$out" | grep -q "^status=-11 " || fail "READ at a future revision: $out"
raw PING | grep -q '^status=0 ' || fail "PING after the refusals"
osd_finish
echo "test-osd-fence: ok"
