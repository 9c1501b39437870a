#!/usr/bin/env bash
# use_perms end to end with certificates: the client knows who it is (CN of
# its certificate + /config/user), lists and opens only what it may read,
# opens read-only what it may only read, refuses modifications of images it
# does not own and creation outside its pools, and the OSDs let its data
# through (their own checks pass for what the client is allowed).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3
start_kv
P=$TESTDIR/pki
tromcho make-certs --dir "$P" >/dev/null || fail "make-certs"
for u in alice bob; do tromcho make-certs user $u --dir "$P" >/dev/null || fail "make-certs user $u"; done
EXTRA_CONF=", \"use_perms\": true, \"osd_ca\": \"$P/osd_ca.crt\", \"client_ca\": \"$P/client_ca.crt\", \"osd_cert\": \"$P/osd_ca.crt\", \"osd_pkey\": \"$P/osd_ca.key\", \"cert\": \"$P/admin.crt\", \"pkey\": \"$P/admin.key\"" write_conf
admin_cn=$(openssl x509 -noout -subject -nameopt multiline -in "$P/admin.crt" | sed -n 's/ *commonName *= *//p')
kv_put "/config/user/$admin_cn" '{"type": "admin"}'
kv_put /config/user/alice '{"type": "client", "groups": ["staff"]}'
kv_put /config/user/bob '{"groups": []}'
kv_put /config/pools '{"1": {"name": "pool1", "pg_count": 2, "pg_size": 2, "pg_minsize": 1, "creator_group": "staff"}}'
start_osd 1
start_osd 2
set_pgs 1 2 "1 2"
as () { local u=$1; shift; tromcho --cert "$P/$u.crt" --pkey "$P/$u.key" "$@"; }

tromcho create owned -s 8M --owner alice --enc_key auto >/dev/null || fail "admin creates owned"
tromcho create shared -s 8M --owner carol --reader_group staff >/dev/null || fail "admin creates shared"
tromcho create secret -s 8M --owner carol >/dev/null || fail "admin creates secret"
head -c 1M /dev/urandom > "$TESTDIR/data"
tromcho dd if="$TESTDIR/data" oimg=shared bs=64K 2>/dev/null || fail "admin writes shared"

# alice: sees owned (writable) and shared (read-only), not secret.
out=$(as alice ls) || fail "alice ls"
echo "$out"
[ "$(echo "$out" | sed 1d | awk '{print $1 ":" $NF}' | tr '\n' ' ')" = "owned:- shared:r " ] || fail "alice's ls: $out"
as alice ls --json | python3 -c 'import json,sys; v={i["name"]: i for i in json.load(sys.stdin)}; assert v["shared"]["used"] == 1 << 20, v' ||
  fail "alice's ls does not show what shared uses (per-image listing)"
expect_fail "secret: no such image" as alice info secret
expect_fail "oimg=secret: .*no such image" as alice dd if="$TESTDIR/data" oimg=secret
as alice dd if="$TESTDIR/data" oimg=owned bs=64K 2>/dev/null || fail "alice writes her image"
as alice dd iimg=owned of="$TESTDIR/back" bs=64K count=16 2>/dev/null || fail "alice reads her image"
cmp "$TESTDIR/back" "$TESTDIR/data" || fail "alice's image reads back wrong"
as alice dd iimg=shared of="$TESTDIR/back2" bs=64K count=16 2>/dev/null || fail "alice reads shared"
cmp "$TESTDIR/back2" "$TESTDIR/data" || fail "shared reads back wrong"
expect_fail "oimg=shared: read-only" as alice dd if="$TESTDIR/data" oimg=shared
expect_fail "permission denied" as alice modify shared --resize 16M
expect_fail "permission denied" as alice rm shared
expect_fail "permission denied" as alice snap-create shared@s
as alice snap-create owned@s1 >/dev/null || fail "alice snapshots her image"
as alice create mine -s 4M >/dev/null || fail "alice creates in a pool of her group"
as alice info mine --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["owner"] == "alice"' || fail "alice owns what she creates"

# bob: no group, no images.
[ "$(as bob ls | sed 1d | wc -l)" = 0 ] || fail "bob sees images"
expect_fail "permission denied" as bob create b -s 4M
expect_fail "no such image" as bob dd iimg=owned of=/dev/null
echo "test-client-perms: ok"
