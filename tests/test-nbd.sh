#!/usr/bin/env bash
# nbdkit tromcho with real NBD clients: nbdinfo (size, --list, --map),
# nbdcopy in and out, qemu-img convert/compare, qemu-io patterns at odd
# offsets, fio with verify, trim -> hole, read-only exports, multi-conn.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit nbdinfo nbdcopy nbdsh qemu-img qemu-io fio curl python3
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"

SIZE_MB=${NBD_TEST_MB:-1024}
start_kv
write_conf
make_pool 1 8 3 2
OSD_SIZE=$(( (SIZE_MB + 256) ))M
for n in 1 2 3; do start_osd $n; done
set_pgs 1 8 "1 2 3"
tromcho create demo -s ${SIZE_MB}M --enc_key auto || fail "create demo"
tromcho create plain -s 64M || fail "create plain"

start_nbdkit srv -- config="$CONF"
# The plugin's facts and help.
nbdkit "$PLUGIN" --dump-plugin | grep -q '^tromcho_options=.*etcd_address' || fail "--dump-plugin"
nbdkit "$PLUGIN" --help | grep -q 'image=<NAME>' || fail "--help"

# Exports: every image, named after it.
nbdinfo --list "$URI" > "$TESTDIR/list" || fail "nbdinfo --list"
grep -q 'export="demo"' "$TESTDIR/list" && grep -q 'export="plain"' "$TESTDIR/list" || { cat "$TESTDIR/list"; fail "exports"; }
DEMO=$(uri srv demo) PLAIN=$(uri srv plain)
[ "$(nbdinfo --size "$DEMO")" = $((SIZE_MB << 20)) ] || fail "size of demo"
nbdinfo --json "$DEMO" | python3 -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
assert e["can_multi_conn"] and e["can_flush"] and e["can_trim"] and e["can_zero"] and not e["is_read_only"], e
assert e["block_size_minimum"] == 1 and e["block_size_preferred"] == 4096, e
# 1 MiB: nbdkit keeps a buffer as large as the largest request per worker
# thread, so a larger maximum lets clients that honour it pin more memory.
assert e["block_size_maximum"] == 1048576, e
' || fail "export flags"
nbdkit "$PLUGIN" --dump-plugin | grep -qx 'tromcho_block_size=1/4096/1048576' || fail "--dump-plugin block size"
# A client that ignores the maximum (fio's nbd engine does) is still served.
nbdsh -u "$PLAIN" -c '
import os
if hasattr(nbd, "STRICT_PAYLOAD"):   # libnbd >= 1.16 refuses to send it by default
    h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_PAYLOAD)
d = os.urandom(5 << 20)
h.pwrite(d, 3 << 20)
assert h.pread(5 << 20, 3 << 20) == d
' || fail "a 5 MiB request over the advertised 1 MiB maximum"

# nbdcopy of random data in and out.
head -c $((SIZE_MB << 20)) /dev/urandom > "$TESTDIR/rand"
start=$(date +%s.%N)
nbdcopy "$TESTDIR/rand" "$DEMO" || fail "nbdcopy in"
nbdcopy "$DEMO" "$TESTDIR/back" || fail "nbdcopy out"
echo "nbdcopy ${SIZE_MB} MiB in and out: $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
cmp "$TESTDIR/rand" "$TESTDIR/back" || fail "nbdcopy round trip differs"
rm -f "$TESTDIR/back"

# qemu-img between a local raw file and the export.
head -c $((48 << 20)) /dev/urandom > "$TESTDIR/raw"
truncate -s 64M "$TESTDIR/raw"
qemu-img convert -n -f raw -O raw "$TESTDIR/raw" "$PLAIN" || fail "qemu-img convert"
qemu-img compare -f raw -F raw "$TESTDIR/raw" "$PLAIN" || fail "qemu-img compare"

# qemu-io patterns at odd offsets and lengths.
qemu-io -f raw -c 'write -P 0xa5 12345 6789' -c 'write -P 0x3c 4095 2' -c 'write -P 0x11 70000 1' "$PLAIN" >/dev/null || fail "qemu-io write"
qemu-io -f raw -c 'read -P 0xa5 12345 6789' -c 'read -P 0x3c 4095 2' -c 'read -P 0x11 70000 1' "$PLAIN" |
  grep -q 'Pattern verification failed' && fail "qemu-io pattern"
qemu-io -f raw -c 'read -P 0xa5 12345 6789' -c 'read -P 0x3c 4095 2' -c 'read -P 0x11 70000 1' "$PLAIN" >/dev/null || fail "qemu-io read"
python3 - "$TESTDIR/raw" <<PY || fail "bytes around the qemu-io writes changed"
import subprocess, sys
raw = bytearray(open(sys.argv[1], "rb").read())
raw[12345:12345+6789] = b"\xa5" * 6789
raw[4095:4097] = b"\x3c" * 2
raw[70000] = 0x11
out = subprocess.run(["nbdcopy", "$PLAIN", "-"], capture_output=True, check=True).stdout
assert out == bytes(raw), "image differs from the model"
PY

# fio with the nbd engine, random writes verified with crc32c.
fio --name=verify --ioengine=nbd --uri="$DEMO" --rw=randwrite --bs=4k --size=32M --iodepth=16 \
    --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --output="$TESTDIR/fio.out" >/dev/null 2>&1 ||
  { cat "$TESTDIR/fio.out"; fail "fio verify"; }

# Trim: the range reads as zeros and nbdinfo --map shows a hole.
nbdsh -u "$PLAIN" -c 'h.trim(8 << 20, 16 << 20); h.flush()' || fail "trim"
nbdinfo --map "$PLAIN" > "$TESTDIR/map"
grep -qE "^ *$((16 << 20)) +$((8 << 20)) +3 +hole,zero" "$TESTDIR/map" || { cat "$TESTDIR/map"; fail "no hole after trim"; }
nbdsh -u "$PLAIN" -c 'assert h.pread(8 << 20, 16 << 20) == bytes(8 << 20)' || fail "trimmed range is not zeros"

# Multi-conn: 4 connections write different ranges, one flushes, all read the same.
nbdsh -c "
import nbd
hs = [nbd.NBD() for i in range(4)]
for h in hs: h.connect_uri('$DEMO')
for i, h in enumerate(hs): h.pwrite(bytes([0x40 + i]) * 65536, i * 65536)
hs[3].flush()
want = b''.join(bytes([0x40 + i]) * 65536 for i in range(4))
for h in hs: assert h.pread(4 * 65536, 0) == want
" || fail "multi-conn"

# Read-only exports refuse writes with EPERM: nbdkit -r, and a snapshot.
start_nbdkit ro -r -- config="$CONF" image=plain
nbdsh -u "$URI" -c '
import errno
try:
    h.pwrite(b"x", 0)
    raise SystemExit("write to a read-only export succeeded")
except nbd.Error as e:
    assert e.errno == "EPERM", e
' || fail "read-only export"
tromcho snap-create plain@s1 || fail "snap-create"
nbdinfo --json "$(uri srv plain@s1)" | python3 -c 'import json,sys; assert json.load(sys.stdin)["exports"][0]["is_read_only"]' ||
  fail "snapshot export is not read-only"

# TLS on the NBD hop, with certificates from make-certs: nbdcopy over
# nbds:// with a client certificate works; plain NBD and a client of a
# foreign CA are refused.
tromcho make-certs --dir "$TESTDIR/pki" >/dev/null && tromcho make-certs nbd --dir "$TESTDIR/pki" >/dev/null ||
  fail "make-certs nbd"
tromcho make-certs --dir "$TESTDIR/pki2" >/dev/null && tromcho make-certs nbd --dir "$TESTDIR/pki2" >/dev/null ||
  fail "make-certs nbd (foreign)"
start_nbdkit tls --tls=require --tls-certificates="$TESTDIR/pki/nbd-server-admin" --tls-verify-peer -- config="$CONF" image=plain
TLS_URI="nbds+unix:///plain?socket=$TESTDIR/tls.sock&tls-certificates=$TESTDIR/pki/nbd-client-admin"
nbdcopy "$TLS_URI" "$TESTDIR/tls-copy" || fail "nbdcopy over nbds://"
nbdcopy "$PLAIN" "$TESTDIR/plain-copy" || fail "nbdcopy plain"
cmp "$TESTDIR/tls-copy" "$TESTDIR/plain-copy" || fail "nbds:// copy differs"
head -c 1M /dev/urandom > "$TESTDIR/tls-in"
nbdcopy "$TESTDIR/tls-in" "$TLS_URI" || fail "nbdcopy into nbds://"
nbdsh -u "$PLAIN" -c "assert h.pread(1 << 20, 0) == open('$TESTDIR/tls-in', 'rb').read()" || fail "TLS write not seen"
expect_fail "TLS" nbdinfo "$URI"
expect_fail "" nbdinfo "nbds+unix:///plain?socket=$TESTDIR/tls.sock&tls-certificates=$TESTDIR/pki2/nbd-client-admin"

# Tenants of one cluster (issue 12): alice and bob each get their own NBD
# CA; bob's NBD client certificate does not open alice's nbdkit (nbdinfo,
# nbdcopy both ways), alice's does; and no NBD certificate chains to
# client_ca, so none is a cluster identity.
for u in alice bob; do
  tromcho make-certs user $u --dir "$TESTDIR/pki" >/dev/null && tromcho make-certs nbd --user $u --dir "$TESTDIR/pki" >/dev/null ||
    fail "make-certs nbd --user $u"
done
for f in nbd-server-alice/server nbd-client-alice/client nbd-client-bob/client nbd-server-admin/server; do
  certtool --verify --load-ca-certificate "$TESTDIR/pki/client_ca.crt" --infile "$TESTDIR/pki/$f-cert.pem" >/dev/null 2>&1 &&
    fail "$f-cert.pem chains to client_ca: an NBD certificate would be a cluster identity"
done
cmp -s "$TESTDIR/pki/nbd-client-alice/ca-cert.pem" "$TESTDIR/pki/nbd-client-bob/ca-cert.pem" &&
  fail "alice and bob share an NBD CA"
start_nbdkit alice --tls=require --tls-certificates="$TESTDIR/pki/nbd-server-alice" --tls-verify-peer -- config="$CONF" image=plain
ALICE="nbds+unix:///plain?socket=$TESTDIR/alice.sock&tls-certificates=$TESTDIR/pki/nbd-client-alice"
BOB="nbds+unix:///plain?socket=$TESTDIR/alice.sock&tls-certificates=$TESTDIR/pki/nbd-client-bob"
nbdinfo --size "$ALICE" >/dev/null || fail "alice cannot use her own nbdkit"
expect_fail "" nbdinfo --size "$BOB"
expect_fail "" nbdinfo --list "$BOB"
expect_fail "" nbdcopy "$BOB" "$TESTDIR/bob-copy"
expect_fail "" nbdcopy "$TESTDIR/tls-in" "$BOB"
# The admin tenant's client does not open alice's either.
expect_fail "" nbdinfo --size "nbds+unix:///plain?socket=$TESTDIR/alice.sock&tls-certificates=$TESTDIR/pki/nbd-client-admin"

# An export that does not exist.
expect_fail "" nbdinfo "$(uri srv nosuch)"
echo "test-nbd: ok"
