#!/usr/bin/env bash
# The errors an NBD client gets from nbdkit tromcho. NBD knows a handful of
# codes and nbdkit sends NBD_EINVAL ("Invalid argument") for any errno it
# does not know: a call timeout (ETIMEDOUT) reached clients as EINVAL. Now:
# a read the cluster cannot serve in time fails with EIO, after
# client_op_timeout, and nbdkit's log says why; a write to a read-only
# image fails with EPERM; a range past the end stays nbdkit's EINVAL.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit python3
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
/usr/bin/python3 -c 'import nbd' || fail "python3-libnbd is not installed"

start_kv
# The client: call timeout min(4 x 2 s, 4 s); the OSD: a 60 s lease, so it
# stays in the map while stopped.
OP_TIMEOUT=4 EXTRA_CONF=', "etcd_keepalive_timeout": 2' write_conf
make_pool 1 1 1 1
OSD_OPTS="--etcd_keepalive_timeout 60"
start_osd 1
OSD_OPTS=
set_pgs 1 1 "1"
tromcho create img -s 16M >/dev/null || fail "create img"
tromcho create ro -s 1M >/dev/null || fail "create ro"
tromcho modify ro --readonly >/dev/null || fail "modify ro --readonly"
start_nbdkit e -- config="$CONF"
cleanup_fn "kill -CONT \$(cat '$TESTDIR/osd1/pid') 2>/dev/null; true"

# nbd_call URI PYTHON-EXPR: the errno of the NBD call (0: it succeeded),
# and the seconds it took
nbd_call () {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import errno, nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
t0 = time.time()
try:
    eval(sys.argv[2])
    e = 0
except nbd.Error as x:
    e = x.errnum
print(errno.errorcode.get(e, str(e)) if e else "0", "%.1f" % (time.time() - t0))
PY
}

read -r e t < <(nbd_call "$(uri e img)" 'h.pwrite(b"x" * 4096, 0) or h.pread(4096, 0)')
[ "$e" = 0 ] || fail "a write and a read with the OSD up: $e"
read -r e t < <(nbd_call "$(uri e ro)" 'h.pwrite(b"x" * 4096, 0)')
[ "$e" = EPERM ] || fail "a write to a read-only image: $e, not EPERM"
read -r e t < <(nbd_call "$(uri e img)" 'h.pread(4096, 16 << 20)')
[ "$e" = EINVAL ] || fail "a read past the end: $e, not EINVAL"

kill -STOP "$(cat "$TESTDIR/osd1/pid")"
read -r e t < <(nbd_call "$(uri e img)" 'h.pread(4096, 65536)')
kill -CONT "$(cat "$TESTDIR/osd1/pid")"
echo "a read with the only OSD stopped: $e after $t s"
[ "$e" = EIO ] || fail "a read the cluster could not serve in time: $e, not EIO"
python3 -c "import sys; sys.exit(0 if 3 <= $t <= 20 else 1)" || fail "it failed after $t s, client_op_timeout is 4 s"
grep -q "could not serve it in time" "$TESTDIR/e.log" || { cat "$TESTDIR/e.log"; fail "nbdkit's log does not say why"; }
osd_registered 1 || fail "the OSD left the map: the test proves nothing"
read -r e t < <(nbd_call "$(uri e img)" 'h.pread(4096, 65536)')
[ "$e" = 0 ] || fail "a read once the OSD runs again: $e"
echo "test-nbd-errors: ok"
