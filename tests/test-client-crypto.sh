#!/usr/bin/env bash
# End-to-end image encryption over real OSDs: a marker written into an
# encrypted image is in no OSD data file and in no captured traffic (while
# the same marker written to a plain image is, proving both probes see
# data), and the stored ciphertext of a 4 KiB sector decrypts with
# `openssl enc -d -aes-256-xts` and the DESIGN.md section 6 tweak.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd curl python3 openssl xxd
# The traffic capture (a raw socket on lo) is half of what this test proves.
[ "$(id -u)" = 0 ] || skip needs-root "the traffic capture needs a raw socket (run as root)"
TOOL=$top_builddir/tests/client-tool
start_kv
write_conf
make_pool 1 2 2 1
start_osd 1
start_osd 2
set_pgs 1 2 "1 2"

KEY=$(openssl rand -hex 64)
tromcho create enc -s 8M --enc_key "$KEY" || fail "create enc"
tromcho create plain -s 8M || fail "create plain"
MARK="TROMCHO-E2E-MARKER-$(openssl rand -hex 8)"
# One 4 KiB sector full of the marker (padded to 4096 bytes).
python3 -c "import sys; m = sys.argv[1].encode() + b'|'; sys.stdout.buffer.write((m * (4096 // len(m) + 1))[:4096])" "$MARK" > "$TESTDIR/sector"

OSD_PORTS=$(for n in 1 2; do kv_get /osd/state/$n | python3 -c 'import json,sys; print(json.load(sys.stdin)["port"])'; done)
capture () {   # capture FILE COMMAND...: run the command while capturing its OSD traffic
  local cap=$1; shift
  # shellcheck disable=SC2086
  python3 "$top_srcdir/tests/lo-capture.py" "$cap" $OSD_PORTS > "$TESTDIR/cap.out" &
  local pid=$!
  wait_for grep -q READY "$TESTDIR/cap.out" || fail "capture did not start"
  "$@"
  local rc=$?
  kill $pid
  wait $pid
  return $rc
}

SECTOR=5
# The probe may miss packets on a loaded machine: the plain image's capture
# is its control, and a run only counts when the control saw the marker.
for attempt in 1 2 3; do
  capture "$TESTDIR/enc.pcap" tromcho dd if="$TESTDIR/sector" oimg=enc bs=4096 seek=$SECTOR 2>/dev/null || fail "dd to enc"
  grep -qa "$MARK" "$TESTDIR/enc.pcap" && fail "the marker of the encrypted image crossed the wire in the clear"
  capture "$TESTDIR/plain.pcap" tromcho dd if="$TESTDIR/sector" oimg=plain bs=4096 seek=$SECTOR 2>/dev/null || fail "dd to plain"
  grep -qa "$MARK" "$TESTDIR/plain.pcap" && break
  [ $attempt = 3 ] && fail "control: the plain image's marker is not in its capture (3 tries)"
  echo "capture probe missed the control; again"
done
echo "capture: marker absent from the encrypted image's traffic, present in the plain one's"
# Control: the plain image's copy is in an OSD data file.
n=$(cat "$TESTDIR"/osd*/data | grep -ac "$MARK")
[ "$n" -ge 1 ] || fail "control: the plain image's marker is not in any OSD data file"
tromcho rm plain >/dev/null || fail "rm plain"
sync
# The encrypted image's stored sector holds no marker.
"$TOOL" rawread enc $((SECTOR * 4096)) 4096 > "$TESTDIR/ct" || fail "raw read"
grep -qa "$MARK" "$TESTDIR/ct" && fail "the encrypted image's stored sector holds the marker"
cmp -s "$TESTDIR/ct" "$TESTDIR/sector" && fail "stored sector equals the plaintext"

# OpenSSL: AES-256-XTS, key = the 64-byte enc_key, tweak = the sector index
# as a 128-bit little-endian number. OpenSSL 3.0's `openssl enc` refuses XTS
# ("enc XTS ciphers not supported"), so when it does the same EVP cipher of
# libcrypto is driven through python3-cryptography.
xts_decrypt () {   # xts_decrypt SECTOR IN OUT
  local iv
  iv=$(printf '%02x' "$1"; printf '%030d' 0)
  if openssl enc -d -aes-256-xts -K "$KEY" -iv "$iv" -nopad -in "$2" -out "$3" 2>/dev/null; then return 0; fi
  python3 - "$KEY" "$1" "$2" "$3" <<'PY'
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
key, sector = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
d = Cipher(algorithms.AES(key), modes.XTS(sector.to_bytes(16, "little"))).decryptor()
open(sys.argv[4], "wb").write(d.update(open(sys.argv[3], "rb").read()) + d.finalize())
PY
}
xts_decrypt $SECTOR "$TESTDIR/ct" "$TESTDIR/pt" || fail "OpenSSL XTS decryption"
cmp "$TESTDIR/pt" "$TESTDIR/sector" || fail "OpenSSL's decryption of the stored sector is not what was written"
# ... and the wrong tweak does not decrypt it.
xts_decrypt $((SECTOR + 1)) "$TESTDIR/ct" "$TESTDIR/pt2" || fail "OpenSSL XTS decryption"
cmp -s "$TESTDIR/pt2" "$TESTDIR/sector" && fail "another tweak decrypted the sector too"
echo "OpenSSL AES-256-XTS with tweak $SECTOR decrypts the stored sector"

# Data files: 64 sectors of a second marker, never written in the clear,
# are in no OSD file (the plain image's copy of the first one was: control).
MARK2="TROMCHO-E2E-SECOND-$(openssl rand -hex 8)"
python3 -c "import sys; m = sys.argv[1].encode() + b'|'; sys.stdout.buffer.write((m * (4096 * 64 // len(m) + 1))[:4096 * 64])" "$MARK2" > "$TESTDIR/marks"
tromcho dd if="$TESTDIR/marks" oimg=enc bs=64K seek=16 2>/dev/null || fail "dd marks"
sync
n2=$(cat "$TESTDIR"/osd*/data "$TESTDIR"/osd*/data.meta 2>/dev/null | grep -ac "$MARK2" || true)
[ "$n2" = 0 ] || fail "the encrypted image's marker is in OSD files ($n2 matches)"
tromcho dd iimg=enc of="$TESTDIR/marks-back" bs=64K skip=16 count=4 2>/dev/null || fail "read marks back"
cmp "$TESTDIR/marks" "$TESTDIR/marks-back" || fail "marks read back differ"
# A sector of that 256 KiB write past its first 128 KiB object (the
# default block size: the write goes out as one operation per object):
# stored as XTS with its own index as tweak, not its write's first.
S2=$((16 * 16 + 32 + 3))
"$TOOL" rawread enc $((S2 * 4096)) 4096 > "$TESTDIR/ct2" || fail "raw read of sector $S2"
dd if="$TESTDIR/marks" of="$TESTDIR/sector2" bs=4096 skip=$((S2 - 256)) count=1 status=none
xts_decrypt $S2 "$TESTDIR/ct2" "$TESTDIR/pt3" || fail "OpenSSL XTS decryption"
cmp "$TESTDIR/pt3" "$TESTDIR/sector2" || fail "sector $S2 of a multi-object write is not stored as XTS with tweak $S2"
echo "test-client-crypto: ok"
