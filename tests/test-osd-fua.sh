#!/usr/bin/env bash
# The OSD protocol's FUA flag (osd_proto.h) and the primary's fan-out order:
# - a WRITE's SEC_WRITEs leave for the secondaries before the primary's own
#   store write (strace of the primary: both writev()s of the SEC_WRITE
#   frames come before the pwrite() of the data);
# - WRITE and DELETE with FUA are answered with the flag, without it
#   without; SEC_WRITE with FUA straight to a secondary too; the flag on a
#   READ or a SYNC is EINVAL; an OSD with TROMCHO_OSD_IGNORE_FUA answers
#   like one built before FUA (no flag);
# - after kill -9 of every OSD, a FUA write is there and a plain one that
#   no SYNC covered is not (the premise of test-nbd-fua).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 strace "$OSD_CLIENT"

start_kv
make_pool 1 3 2 1
set_pgs 1 1 "1" "1,2,3"
for n in 1 2 3; do create_osd $n; start_osd $n; done
I=$(( (1 << 48) | 1 ))
osd_client write --inode $I --offset 0 --len 4096 --seed 1 >/dev/null || fail "first write"
P1=$(osd_port 1) P2=$(osd_port 2)

# 1. Fan-out before the local write.
strace -f -e trace=writev,pwrite64 -p "$(cat "$TESTDIR/osd1.pid")" -o "$TESTDIR/strace" 2>/dev/null &
st=$!
cleanup_fn "kill $st 2>/dev/null"
sleep 1   # attached to every thread
osd_client write --inode $I --offset 8192 --len 4096 --seed 2 >/dev/null || fail "traced write"
sleep 0.3
kill $st; wait $st 2>/dev/null
python3 - "$TESTDIR/strace" <<'PY' || { cat "$TESTDIR/strace" >&2; fail "the primary wrote locally before its SEC_WRITEs left"; }
import re, sys
calls = [l for l in open(sys.argv[1]) if "writev(" in l or "pwrite64(" in l]
# SEC_WRITE frames: magic TRM1, opcode 33 ('!'), 64-byte header + 4096 bytes
sec = [i for i, l in enumerate(calls) if "writev(" in l and '"TRM1!' in l and l.rstrip().endswith("= 4160")]
data = [i for i, l in enumerate(calls) if "pwrite64(" in l and l.rstrip().endswith("= 4096")]
assert len(sec) == 2 and data, (sec, data)
assert max(sec) < data[0], "SEC_WRITEs at %s, the local data write at %d" % (sec, data[0])
print("SEC_WRITEs to both secondaries before the primary's data write")
PY

# 2. The flag in requests and replies.
raw () { osd_client raw "$@"; }
out=$(raw WRITE --port $P1 --inode $I --offset 16384 --len 4096 --seed 3 --fua)
[[ $out == "status=0 "*" fua" ]] || fail "FUA WRITE: $out"
out=$(raw WRITE --port $P1 --inode $I --offset 20480 --len 4096 --seed 4)
[[ $out == "status=0 "* && $out != *fua ]] || fail "plain WRITE: $out"
out=$(raw DELETE --port $P1 --inode $I --offset 20480 --len 4096 --fua)
[[ $out == "status=0 "*" fua" ]] || fail "FUA DELETE: $out"
# (an inode of a pool not in the map: no PG lock fences it, no peering sees it)
I2=$(( (2 << 48) | 1 ))
out=$(raw SEC_WRITE --port $P2 --inode $I2 --offset 0 --len 4096 --version 1000 --seed 5 --fua)
[[ $out == "status=0 "*" fua" ]] || fail "FUA SEC_WRITE to a secondary: $out"
out=$(raw READ --port $P1 --inode $I --offset 0 --len 4096 --fua)
[[ $out == "status=-22 "* ]] || fail "FUA READ: $out"
out=$(raw SYNC --port $P1 --fua)
[[ $out == "status=-22 "* ]] || fail "FUA SYNC: $out"
grep -q "FUA on an operation that writes nothing" "$TESTDIR/osd1.log" || fail "the refusal is not logged"

# 3. kill -9 of every OSD: the FUA write stays, the unsynced plain one goes.
raw WRITE --port $P1 --inode $I --offset 32768 --len 4096 --seed 6 --fua | grep -q " fua$" || fail "FUA write"
sleep 0.5   # every sync that write started has ended: none covers the next one
raw WRITE --port $P1 --inode $I --offset 40960 --len 4096 --seed 7 | grep -q "^status=0 " || fail "plain write"
for n in 1 2 3; do kill_osd $n -9; done
for n in 1 2 3; do start_osd $n; done
osd_client read --inode $I --offset 32768 --len 4096 --seed 6 >/dev/null || fail "the FUA write was lost"
osd_client read --inode $I --offset 40960 --len 4096 --zero >/dev/null ||
  fail "an unsynced plain write survived kill -9 of every OSD: this test cannot tell FUA from no FUA"
echo "kill -9 of every OSD: the FUA write is there, the unsynced plain one is not"

# 4. An OSD from before FUA (the test hook) takes the flag and ignores it.
kill_osd 2
TROMCHO_OSD_IGNORE_FUA=1 start_osd 2
P2=$(osd_port 2)
out=$(raw SEC_WRITE --port $P2 --inode $I2 --offset 8192 --len 4096 --version 2000 --seed 8 --fua)
[[ $out == "status=0 "* && $out != *fua ]] || fail "an OSD ignoring FUA: $out"
osd_finish
