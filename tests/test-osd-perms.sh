#!/usr/bin/env bash
# The seed's OSD data access rights with use_perms, identities proven by
# certificates from `tromcho make-certs`: every operation of the table tried
# by a caller who may not do it gets EPERM (logged by the OSD, and the
# connection goes on); what the table allows is not refused; replication
# between the OSDs (their own certificates) works. A peer without a
# certificate is refused at the handshake (issue 12: it may not hold a byte
# of the OSD's memory).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-osd curl python3 certtool "$OSD_CLIENT"

C=$TESTDIR/certs
tromcho make-certs --dir "$C" >/dev/null || fail "make-certs"
for u in alice bob; do tromcho make-certs user $u --dir "$C" >/dev/null || fail "make-certs user $u"; done
OSD_OPTS="--config $C/tromcho.conf --use_perms true --force_proto_checksums payload"

start_kv
make_pool 1 3 2 1
set_pgs 1 1 "1" "1,2,3"
kv_put /config/user/alice '{"type": "client", "groups": ["g1"]}'
kv_put /config/user/bob '{"type": "client"}'
kv_put /config/user/admin '{"type": "admin"}'
kv_put /config/inode/1/1 '{"name": "a", "size": 1048576, "owner": "alice"}'
kv_put /config/inode/1/2 '{"name": "r", "size": 1048576, "owner": "carol", "reader_group": "g1"}'
for n in 1 2 3; do create_osd $n; start_osd $n; done
P=$(osd_port 1)
A=$(( (1 << 48) | 1 ))
R=$(( (1 << 48) | 2 ))

# as WHO: client options of a user (admin, alice, bob), osd, or anon
as () {
  local who=$1; shift
  case $who in
    anon) osd_client --osd_ca "$C/osd_ca.crt" "$@" ;;
    osd) osd_client --osd_ca "$C/osd_ca.crt" --cert "$C/osd_ca.crt" --pkey "$C/osd_ca.key" "$@" ;;
    *) osd_client --osd_ca "$C/osd_ca.crt" --cert "$C/$who.crt" --pkey "$C/$who.key" "$@" ;;
  esac
}
# refused WHO OP ARGS...: EPERM, and a PING on the same connection still works
refused () {
  local who=$1 out; shift
  out=$(as $who raw "$@" --port $P --then-ping 2>&1)
  echo "$out" | grep -q '^status=-1 ' || fail "$who $*: not refused: $out"
  echo "$out" | grep -q '^then PING status=0' || fail "$who $*: the connection did not go on: $out"
}
# allowed WHO OP ARGS...: anything but EPERM
allowed () {
  local who=$1 out; shift
  out=$(as $who raw "$@" --port $P 2>&1) || fail "$who $*: $out"
  echo "$out" | grep -q '^status=' || fail "$who $*: $out"
  echo "$out" | grep -q '^status=-1 ' && fail "$who $*: refused: $out"
  return 0
}

# Data through the primary works for the owner (replication under use_perms).
as alice write --inode $A --offset 0 --len 262144 --seed 3 || fail "alice cannot write her image"
as alice read --inode $A --offset 0 --len 262144 --seed 3 || fail "alice cannot read her image"
for n in 2 3; do
  as osd raw SEC_READ --port "$(osd_port $n)" --inode $A --offset 0 --len 4096 | grep -q '^status=1 ' ||
    fail "the write did not reach osd $n"
done

# Client operations.
refused bob READ --inode $A --offset 0 --len 4096
refused bob WRITE --inode $A --offset 0 --len 4096
refused bob DELETE --inode $A --offset 0 --len 4096
refused bob SCRUB --inode $A --offset 0
refused alice WRITE --inode $R --offset 0 --len 4096       # reader only
refused alice DELETE --inode $R --offset 0 --len 4096
refused alice SCRUB --inode $R --offset 0
allowed alice READ --inode $R --offset 0 --len 4096
allowed alice READ --inode $A --offset 0 --len 4096
allowed alice SCRUB --inode $A --offset 0
refused alice READ --inode $(( (1 << 48) | 9 )) --offset 0 --len 4096   # no image record
# The aliasing attack: a record at /config/inode/1/(2^48 + 1) names inode
# 1/1 when read leniently; the OSDs take inode keys only in canonical form,
# so bob's record there gives him nothing of alice's image (logged).
kv_put /config/inode/1/281474976710657 '{"name": "alias", "size": 1048576, "owner": "bob"}'
kv_put /config/inode/01/1 '{"name": "alias2", "size": 1048576, "owner": "bob"}'
WAIT_SECS=10 wait_for grep -q "ignoring /tromcho/config/inode/01/1" "$TESTDIR/osd1.log" ||
  fail "osd 1 did not ignore the non-canonical inode keys"
grep -q "ignoring /tromcho/config/inode/1/281474976710657" "$TESTDIR/osd1.log" || fail "osd 1 did not log the alias"
refused bob READ --inode $A --offset 0 --len 4096
refused bob WRITE --inode $A --offset 0 --len 4096
allowed alice READ --inode $A --offset 0 --len 4096
refused alice DESCRIBE
refused bob DESCRIBE
allowed admin DESCRIBE
for who in bob alice admin osd; do
  allowed $who SYNC
  allowed $who PING
  allowed $who SHOW_CONFIG
done
refused alice SHOW_CONFIG --text-payload '{"osd_num": 2}'   # claims to be an OSD
allowed osd SHOW_CONFIG --text-payload '{"osd_num": 2}'
# SEC_LIST: OSDs and admins any; clients only limited to an image they read.
allowed admin SEC_LIST --inode 0 --inode-last $(( (2 << 48) - 1 ))
allowed osd SEC_LIST --inode 0 --inode-last $(( (2 << 48) - 1 ))
refused alice SEC_LIST --inode 0 --inode-last $(( (2 << 48) - 1 ))
allowed alice SEC_LIST --inode $R --inode-last $R
refused bob SEC_LIST --inode $A --inode-last $A
# Cluster operations: only OSDs.
for who in alice admin; do
  refused $who SEC_READ --inode $A --offset 0 --len 4096
  refused $who SEC_READ_BMP --inode $A --offset 0 --len 4096
  refused $who SEC_WRITE --inode $A --offset 0 --len 4096 --version 99
  refused $who SEC_WRITE_STABLE --inode $A --offset 0 --len 131072 --version 99
  refused $who SEC_DELETE --inode $A --offset 0 --len 4096 --version 99
  refused $who SEC_SYNC
  refused $who SEC_STABILIZE
  refused $who SEC_ROLLBACK
  refused $who SEC_LOCK --pool 1 --pg 0 --pg-count 1
done
allowed osd SEC_SYNC
# The PG is locked on the secondaries by its primary (SEC_LOCK at peering):
# SEC_WRITEs of it from another OSD connection are fenced off with EBUSY.
as osd raw SEC_WRITE --port "$(osd_port 2)" --inode $A --offset 0 --len 4096 --version 99 | grep -q '^status=-16 ' ||
  fail "a SEC_WRITE from outside the PG's lock was not refused with EBUSY"
grep -q "SEC_WRITE from .* refused: pg 1/0 is locked by another primary" "$TESTDIR/osd2.log" || fail "no log line for the fenced SEC_WRITE"
allowed osd SEC_READ --inode $A --offset 0 --len 4096
# An OSD is no client: it may not READ through the client operations.
refused osd READ --inode $A --offset 0 --len 4096
# A certificate made to serve (serverAuth only, CN=localhost: an NBD server
# certificate of the old make-certs, signed by client_ca) is no user.
printf '%s\n' 'cn = "localhost"' tls_www_server signing_key 'expiration_days = 30' >"$TESTDIR/nbdsrv.tmpl"
certtool --generate-privkey --key-type ecdsa --outfile "$TESTDIR/nbdsrv.key" 2>/dev/null &&
  certtool --generate-certificate --load-privkey "$TESTDIR/nbdsrv.key" --load-ca-certificate "$C/client_ca.crt" \
    --load-ca-privkey "$C/client_ca.key" --template "$TESTDIR/nbdsrv.tmpl" --outfile "$TESTDIR/nbdsrv.crt" 2>/dev/null ||
  fail "certtool: NBD server certificate"
out=$(osd_client --osd_ca "$C/osd_ca.crt" --cert "$TESTDIR/nbdsrv.crt" --pkey "$TESTDIR/nbdsrv.key" raw PING --port $P 2>&1) &&
  fail "the OSD accepted a serverAuth-only certificate as a client: $out"
grep -q "CN=localhost.*lacks clientAuth" "$TESTDIR/osd1.log" ||
  fail "no log line for the certificate's purpose: $(grep -i localhost "$TESTDIR/osd1.log" | tail -n 2)"
# Anonymous callers may do nothing at all: refused at the handshake.
for op in PING SYNC SHOW_CONFIG READ; do
  out=$(as anon raw $op --inode $A --offset 0 --len 4096 --port $P 2>&1) && fail "anon $op: not refused: $out"
  echo "$out" | grep -q refused || fail "anon $op: not refused at the handshake: $out (osd: $(grep -i refused "$TESTDIR/osd1.log" | tail -n 2))"
done
grep -q "handshake refused: .*presents no certificate" "$TESTDIR/osd1.log" ||
  fail "no log line for the refused anonymous peer: $(grep -i refused "$TESTDIR/osd1.log" | head -3)"

grep -q "EPERM: READ from user bob (127.0.0.1:[0-9]*) on inode 0x1000000000001" "$TESTDIR/osd1.log" ||
  fail "no EPERM log line naming the peer and the object: $(grep EPERM "$TESTDIR/osd1.log" | head -3)"
# A user granted access later (watched from the KV) may then read.
kv_put /config/inode/1/1 '{"name": "a", "size": 1048576, "owner": "alice", "reader_group": "readers"}'
kv_put /config/user/bob '{"type": "client", "groups": ["readers"]}'
sleep 0.5
allowed bob READ --inode $A --offset 0 --len 4096
as bob read --inode $A --offset 0 --len 262144 --seed 3 || fail "bob cannot read after being granted"
osd_finish
echo "test-osd-perms: ok"
