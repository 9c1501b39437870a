#!/usr/bin/env bash
# nbdkit tromcho as one cluster user per instance (use_perms, certificates
# from make-certs): each user's instance lists exactly the images that user
# may read, serves read-only what the user may only read (writes: EPERM),
# and does not reveal images the user may not read.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit nbdinfo curl python3 openssl
start_kv
P=$TESTDIR/pki
tromcho make-certs --dir "$P" >/dev/null || fail "make-certs"
for u in alice bob; do tromcho make-certs user $u --dir "$P" >/dev/null || fail "make-certs user $u"; done
EXTRA_CONF=", \"use_perms\": true, \"proto_checksums\": \"gcm\", \"osd_ca\": \"$P/osd_ca.crt\", \"client_ca\": \"$P/client_ca.crt\", \"osd_cert\": \"$P/osd_ca.crt\", \"osd_pkey\": \"$P/osd_ca.key\", \"cert\": \"$P/admin.crt\", \"pkey\": \"$P/admin.key\"" write_conf
kv_put /config/user/admin '{"type": "admin"}'
kv_put /config/user/alice '{"type": "client", "groups": ["staff"]}'
kv_put /config/user/bob '{"groups": []}'
make_pool 1 4 2 1
start_osd 1
start_osd 2
set_pgs 1 4 "1 2"
tromcho create owned -s 8M --owner alice --enc_key auto >/dev/null || fail "create owned"
tromcho create shared -s 8M --owner carol --reader_group staff >/dev/null || fail "create shared"
tromcho create secret -s 8M --owner carol >/dev/null || fail "create secret"

# exports NAME: the export names an instance lists, sorted, one line
exports () {
  nbdinfo --list --json "nbd+unix:///?socket=$TESTDIR/$1.sock" |
    python3 -c 'import json,sys; print(" ".join(sorted(e["export-name"] for e in json.load(sys.stdin)["exports"])))'
}
start_nbdkit admin -- config="$CONF"
start_nbdkit alice -- config="$CONF" cert="$P/alice.crt" pkey="$P/alice.key"
start_nbdkit bob -- config="$CONF" cert="$P/bob.crt" pkey="$P/bob.key"
[ "$(exports admin)" = "owned secret shared" ] || fail "admin lists: $(exports admin)"
[ "$(exports alice)" = "owned shared" ] || fail "alice lists: $(exports alice)"
[ "$(exports bob)" = "" ] || fail "bob lists: $(exports bob)"

nbdinfo --json "$(uri alice owned)" | python3 -c 'import json,sys; assert not json.load(sys.stdin)["exports"][0]["is_read_only"]' ||
  fail "alice's own image is not writable"
nbdinfo --json "$(uri alice shared)" | python3 -c 'import json,sys; assert json.load(sys.stdin)["exports"][0]["is_read_only"]' ||
  fail "a reader's export is not read-only"
nbdsh -u "$(uri alice shared)" -c '
try:
    h.pwrite(b"x" * 4096, 0)
    raise SystemExit("alice wrote to an image she may only read")
except nbd.Error as e:
    assert e.errno == "EPERM", e
' || fail "write to a read-only export"
nbdsh -u "$(uri alice owned)" -c 'h.pwrite(b"a" * 8192, 4096); h.flush(); assert h.pread(8192, 4096) == b"a" * 8192' ||
  fail "alice writes her image through nbdkit"
expect_fail "" nbdinfo "$(uri alice secret)"
expect_fail "" nbdinfo "$(uri bob owned)"
echo "test-nbd-perms: ok"
