#!/usr/bin/env bash
# A user's first request for an image created a moment ago (a read, a
# write, a listing of that image), or as a user added a moment ago, is served: the OSD reads the KV again when a request
# names an image or user it does not know, instead of refusing it until the
# watch's reload (here held back 10 s by osd_kv_settle) catches up. What
# the rights refuse stays refused.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

C=$TESTDIR/certs
tromcho make-certs --dir "$C" >/dev/null || fail "make-certs"
for u in alice bob carol; do tromcho make-certs user $u --dir "$C" >/dev/null || fail "make-certs user $u"; done
OSD_OPTS="--config $C/tromcho.conf --use_perms true --osd_kv_settle 10000"

start_kv
make_pool 1 3 2 1
set_pgs 1 1 "1" "1,2,3"
kv_put /config/user/alice '{"type": "client"}'
kv_put /config/user/bob '{"type": "client"}'
for n in 1 2 3; do create_osd $n; start_osd $n; done
as () { local who=$1; shift; osd_client --osd_ca "$C/osd_ca.crt" --cert "$C/$who.crt" --pkey "$C/$who.key" "$@"; }

for i in 1 2 3; do
  kv_put /config/inode/1/$i "{\"name\": \"img$i\", \"size\": 1048576, \"owner\": \"alice\"}"
  as alice write --inode $(( (1 << 48) | i )) --offset 0 --len 65536 --seed $i ||
    fail "alice cannot write image $i created a moment ago"
  as alice read --inode $(( (1 << 48) | i )) --offset 0 --len 65536 --seed $i || fail "alice cannot read image $i"
done
# A listing limited to one image created a moment ago (what tromcho ls
# asks as a user) is answered too.
kv_put /config/inode/1/5 '{"name": "img5", "size": 1048576, "owner": "alice"}'
I5=$(( (1 << 48) | 5 ))
out=$(as alice raw SEC_LIST --inode $I5 --inode-last $I5 --port "$(osd_port 1)" 2>&1)
echo "$out" | grep -q '^status=0 ' || fail "alice cannot list image 5 created a moment ago: $out"
kv_put /config/user/carol '{"type": "client"}'
kv_put /config/inode/1/7 '{"name": "c", "size": 1048576, "owner": "carol"}'
as carol write --inode $(( (1 << 48) | 7 )) --offset 0 --len 4096 --seed 7 || fail "carol, added a moment ago, cannot write"
# The reload changes nothing for what the rights refuse.
kv_put /config/inode/1/8 '{"name": "d", "size": 1048576, "owner": "alice"}'
out=$(as bob raw WRITE --inode $(( (1 << 48) | 8 )) --offset 0 --len 4096 --port "$(osd_port 1)" 2>&1)
echo "$out" | grep -q '^status=-1 ' || fail "bob wrote alice's new image: $out"
osd_finish
echo "test-osd-new-image: ok"
