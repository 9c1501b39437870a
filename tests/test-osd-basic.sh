#!/usr/bin/env bash
# tromcho-osd basics with real processes: etcd, 3 OSDs on files, pool
# pg_size 3: osd-create allocates numbers in the KV; write, read back and
# verify on every replica; delete stays deleted across re-peering
# (tombstones); a clean stop on SIGTERM unregisters; refusals of a missing
# or foreign data file, of an option out of range and of malformed requests.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 "$OSD_CLIENT"

start_kv
make_pool 1 3 2 4
set_pgs 1 4 "1 2 3 1" "1,2,3"

# osd-create without --osd_num: numbers 1, 2, 3 from the KV, paths recorded.
for n in 1 2 3; do
  out=$(tromcho osd-create --data "$TESTDIR/osd$n.data" --size 256M --etcd_address "$KV_URL") || fail "osd-create: $out"
  echo "$out" | grep -q "^osd_num=$n " || fail "osd-create did not allocate osd $n: $out"
  kv_get /config/osd/$n | grep -q "\"data\":\"$TESTDIR/osd$n.data\"" || fail "/config/osd/$n not recorded"
done
[ "$(kv_get /index/maxid/osd)" = 3 ] || fail "/index/maxid/osd is not 3"
for n in 1 2 3; do start_osd $n; done
kv_get /osd/state/1 | grep -q '"addr":"127.0.0.1","port":[0-9]' || fail "/osd/state/1: $(kv_get /osd/state/1)"

I=$(( (1 << 48) | 7 ))
osd_client wait-clean --pool 1 --timeout 20 || fail "PGs not clean at start"
osd_client write --inode $I --offset 0 --len 2M --seed 11 || fail "write"
osd_client write --inode $I --offset 131072 --len 8192 --seed 12 || fail "overwrite"
osd_client sync || fail "sync"
osd_client read --inode $I --offset 0 --len 131072 --seed 11 || fail "read object 0"
osd_client read --inode $I --offset 131072 --len 8192 --seed 12 || fail "read the overwrite"
osd_client read --inode $I --offset 139264 --len 1900544 --seed 11 || fail "read the rest"

# Every replica holds the same objects (SEC_LIST on each OSD).
for n in 1 2 3; do
  osd_client raw SEC_LIST --port "$(osd_port $n)" --inode $I --inode-last $I | grep -q 'status=16 ' ||
    fail "osd $n does not list 16 objects: $(osd_client raw SEC_LIST --port "$(osd_port $n)" --inode $I --inode-last $I)"
done

# A delete leaves zeros, and the object stays deleted after re-peering.
osd_client delete --inode $I --offset 262144 --len 131072 | grep -q 'status=0' || fail "delete"
osd_client read --inode $I --offset 262144 --len 131072 --zero || fail "deleted object is not zeros"
set_pgs 1 4 "2 3 1 2" "1,2,3"     # every PG gets a new primary, which peers
sleep 1
osd_client wait-clean --pool 1 --timeout 20 || fail "PGs not clean after the primary moved"
osd_client read --inode $I --offset 262144 --len 131072 --zero || fail "a deleted object came back after peering"
osd_client read --inode $I --offset 0 --len 131072 --seed 11 || fail "read after peering"

# Malformed requests get EINVAL, and the connection goes on.
P1=$(osd_port 2)
osd_client raw READ --port $P1 --inode $I --offset 100 --len 4096 | grep -q 'status=-22 ' || fail "unaligned READ not EINVAL"
osd_client raw READ --port $P1 --inode $I --offset 126976 --len 8192 | grep -q 'status=-22 ' || fail "READ across objects not EINVAL"
osd_client raw SEC_WRITE_STABLE --port $P1 --inode $I --offset 4096 --len 131072 | grep -q 'status=-22 ' || fail "SEC_WRITE_STABLE off an object start not EINVAL"
osd_client raw SEC_STABILIZE --port $P1 | grep -q 'status=-95 ' || fail "SEC_STABILIZE not ENOTSUP"
osd_client raw SHOW_CONFIG --port $P1 --print | grep -q '"osd_num":2,"block_size":131072' || fail "SHOW_CONFIG"
osd_client raw PING --port $P1 | grep -q 'status=0 ' || fail "PING"
grep -q "refused a request from .*not whole 4 KiB sectors" "$TESTDIR/osd2.log" || fail "no log line for the bad request"
# Protocol 2 on: SEC_DELETE's length is in its header; the 8-byte payload
# of protocol 1 is refused, and so is a peer that speaks protocol 1 at all
# (the alert carries this build's version, 3).
osd_client raw SEC_DELETE --port $P1 --inode $I --offset 0 --version 5 --hex-payload 0020000000000000 |
  grep -q 'status=-22 ' || fail "a protocol-1 SEC_DELETE (length as payload) not EINVAL"
grep -q "SEC_DELETE: unexpected payload of 8 bytes" "$TESTDIR/osd2.log" || fail "no log line for the protocol-1 SEC_DELETE"
python3 - "$P1" <<'PY' || fail "a protocol-1 peer got no alert"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"\x01\x01\x00\x00\x48\x00\x00\x00" + bytes(72))   # a version-1 ClientHello
s.settimeout(5)
data = b""
while True:
    d = s.recv(1000)
    if not d:
        break
    data += d
assert data[:2] == b"\x0f\x03", "no version-3 alert: %r" % data[:16]
PY
WAIT_SECS=5 wait_for grep -q "handshake message with version 1 (this is version 3) - the peer runs an older tromcho" "$TESTDIR/osd2.log" ||
  fail "a protocol-1 peer was not refused by name: $(tail -3 "$TESTDIR/osd2.log")"
osd_client raw PING --port $P1 | grep -q 'status=0 ' || fail "PING after the refusals"

# SIGTERM: a clean stop that drops /osd/state at once (lease revoked).
kill_osd 3
[ -z "$(kv_get /osd/state/3)" ] || fail "/osd/state/3 still there after SIGTERM"
grep -q "osd: stopped" "$TESTDIR/osd3.log" || fail "osd 3 did not log its stop"
# Writes go on with 2 of 3 (pg_minsize 2).
osd_client write --inode $I --offset 0 --len 262144 --seed 13 --timeout 20 || fail "write with one OSD down"
# A delete osd 3 misses: its old copy must not come back (tombstones).
osd_client delete --inode $I --offset 524288 --len 131072 | grep -q 'status=0' || fail "delete with one OSD down"
start_osd 3
osd_client wait-clean --pool 1 --timeout 30 || fail "PGs not clean after osd 3 came back"
osd_client read --inode $I --offset 0 --len 262144 --seed 13 || fail "read after recovery"
osd_client read --inode $I --offset 524288 --len 131072 --zero || fail "an object deleted while osd 3 was down came back"
osd_client raw SEC_READ --port "$(osd_port 3)" --inode $I --offset 524288 --len 4096 | grep -q 'status=0 ' ||
  fail "osd 3 still holds the object deleted while it was down"
P3=$(osd_port 3)
osd_client raw SEC_READ --port $P3 --inode $I --offset 0 --len 4096 | grep -q 'status=1 ' || fail "osd 3 has no recovered copy"

# A missing or foreign data file: a clear error and exit.
expect_fail "option idle_poll_us: 20000 is out of range \\(0..10000\\)" tromcho-osd --osd_num 9 --idle_poll_us 20000 --etcd_address "$KV_URL"
expect_fail "osd 9 has no data path.*osd-create" tromcho-osd --osd_num 9 --etcd_address "$KV_URL"
expect_fail "No such file|cannot open|does not exist" tromcho-osd --osd_num 9 --osd_data "$TESTDIR/nothing" --etcd_address "$KV_URL"
head -c 32M /dev/urandom > "$TESTDIR/foreign"
expect_fail "not a tromcho store|no valid store header|store header" tromcho-osd --osd_num 9 --osd_data "$TESTDIR/foreign" --etcd_address "$KV_URL"
tromcho osd-create --data "$TESTDIR/other" --osd_num 7 --size 32M >/dev/null || fail "osd-create 7"
expect_fail "belongs to osd 7, not osd 9" tromcho-osd --osd_num 9 --osd_data "$TESTDIR/other" --etcd_address "$KV_URL"
# osd_network: a malformed CIDR, a network with no local address.
expect_fail "osd_network: '10.0.0.0/99' is not an IPv4 CIDR" \
  timeout 10 tromcho-osd --osd_num 7 --osd_data "$TESTDIR/other" --osd_network 10.0.0.0/99 --etcd_address "$KV_URL"
expect_fail "osd_network: no local address" \
  timeout 10 tromcho-osd --osd_num 7 --osd_data "$TESTDIR/other" --osd_network 0.0.0.0/32 --etcd_address "$KV_URL"
osd_finish
echo "test-osd-basic: ok"
