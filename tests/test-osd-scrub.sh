#!/usr/bin/env bash
# Bad bytes at rest: flip a byte inside an OSD's data file (a sector of one
# object on the primary, of another on a secondary, of a third on the
# primary again). Reads still return the right data (the primary reads a
# replica and repairs itself); SCRUB finds the other two, repairs them from
# a good copy and reports it; a second SCRUB finds nothing.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
make_pool 1 3 2 4
set_pgs 1 4 "1" "1,2,3"
for n in 1 2 3; do create_osd $n; start_osd $n; done
osd_client wait-clean --pool 1 --timeout 20 || fail "PGs not clean at start"

I=$(( (1 << 48) | 5 ))
osd_client write --inode $I --offset 0 --len 1M --seed 21 || fail "write"
osd_client sync || fail "sync"

# flip FILE OFFSET: flip one byte in the middle of the 4 KiB sector that
# holds the pattern of (I, OFFSET, seed 21) in FILE.
flip () {
  python3 - "$1" "$I" "$2" <<'EOF' || fail "could not find the sector of offset $2 in $1"
import struct, sys
path, inode, off = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
M = (1 << 64) - 1
def pat(o, n):
    out = b""
    for i in range(0, n, 8):
        x = ((inode * 0x9E3779B97F4A7C15) ^ ((o + i) * 0xC2B2AE3D27D4EB4F) ^ (21 * 0x165667B19E3779F9)) & M
        x ^= x >> 31
        x = (x * 0xD6E8FEB86659FD93) & M
        x ^= x >> 32
        out += struct.pack("<Q", x)
    return out
data = open(path, "rb").read()
pos = data.find(pat(off, 64))
if pos < 0 or pos % 4096:
    sys.exit(1)
with open(path, "r+b") as f:
    f.seek(pos + 1000)
    b = f.read(1)
    f.seek(pos + 1000)
    f.write(bytes([b[0] ^ 0x5A]))
print("flipped byte %d of %s (offset %d of the inode)" % (pos + 1000, path, off))
EOF
}
flip "$TESTDIR/osd1.data" 0          # object 0 on the primary
flip "$TESTDIR/osd2.data" 135168     # object 1 (sector 1) on a secondary
flip "$TESTDIR/osd1.data" 270336     # object 2 (sector 1) on the primary

# Reads are right: object 0 comes from a replica and is repaired on osd 1.
osd_client read --inode $I --offset 0 --len 131072 --seed 21 || fail "a read returned bad data"
grep -q "checksum mismatch in inode" "$TESTDIR/osd1.log" || fail "osd 1 did not log the checksum error"
grep -q "repaired inode .* offset 0 .* from a replica" "$TESTDIR/osd1.log" || fail "osd 1 did not repair object 0"
osd_client raw SEC_READ --port "$(osd_port 1)" --inode $I --offset 0 --len 131072 | grep -q 'status=32 ' ||
  fail "object 0 on osd 1 is not readable after the repair"

# SCRUB finds the other two and repairs them.
out=$(osd_client scrub-all --pool 1) || fail "scrub-all: $out"
echo "$out"
echo "$out" | grep -q "scrub objects=8 bad=2 repaired=2" || fail "scrub did not report 2 bad, 2 repaired: $out"
grep -q "scrub: inode .* offset 131072: 1 bad sectors, 1 repaired" "$TESTDIR/osd1.log" || fail "no scrub log line for object 1"
out=$(osd_client scrub-all --pool 1) || fail "scrub-all: $out"
echo "$out" | grep -q "scrub objects=8 bad=0 repaired=0" || fail "second scrub not clean: $out"
# Each copy reads fine on its own now.
for n in 1 2 3; do
  osd_client raw SEC_READ --port "$(osd_port $n)" --inode $I --offset 131072 --len 131072 | grep -q 'status=32 ' ||
    fail "object 1 on osd $n is not readable after the scrub"
  osd_client raw SEC_READ --port "$(osd_port $n)" --inode $I --offset 262144 --len 131072 | grep -q 'status=32 ' ||
    fail "object 2 on osd $n is not readable after the scrub"
done
osd_client read --inode $I --offset 0 --len 1M --seed 21 || fail "data differs after the scrub"

# A copy that is bad on every replica is an error (EIO), never wrong data.
for n in 1 2 3; do flip "$TESTDIR/osd$n.data" 524288; done
out=$(osd_client read --inode $I --offset 524288 --len 4096 --seed 21 --timeout 2 2>&1) && fail "read of a sector bad everywhere succeeded"
echo "$out" | grep -q "Input/output error" || fail "read of a sector bad everywhere: $out"
osd_finish
echo "test-osd-scrub: ok"
