#!/usr/bin/env bash
# ./appliance up as a user runs it: a cluster in DIR serving the encrypted
# image demo over NBD and FUSE; SIGTERM stops every process; a second up on
# the same DIR serves the same data. Safe defaults (issue 12): NBD beyond
# loopback is refused without TLS, NBD is served as the client user tenant
# (never the administrator), and the second up serves it with --tls on
# 0.0.0.0, where only tenant's NBD client certificate gets in.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires nbdinfo nbdcopy curl python3
[ "$top_srcdir" = "$top_builddir" ] || skip out-of-tree "./appliance up needs an in-tree build"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
DIR=$TESTDIR/app
PORT=$(free_port)
UPS=0
up () {
  UPS=$((UPS + 1))
  LOG=$TESTDIR/up$UPS.log
  "$top_srcdir/appliance" up --dir "$DIR" --port "$PORT" "$@" >"$LOG" 2>&1 &
  UP_PID=$!
  cleanup_fn "stop_pid $UP_PID"
  WAIT_SECS=120 wait_for grep -q "tromcho is up" "$LOG" || { cat "$LOG"; fail "appliance up did not come up"; }
}
down () {
  kill -TERM "$UP_PID"
  wait "$UP_PID" 2>/dev/null || true
  ! nbdinfo --size "nbd://127.0.0.1:$PORT/demo" 2>/dev/null || fail "nbdkit still serving after SIGTERM"
  ! pgrep -f "osd_data $DIR/" >/dev/null || fail "OSDs still running after SIGTERM"
  ! pgrep -f "tromcho-fuse $DIR/mnt" >/dev/null || fail "FUSE still running after SIGTERM"
}

out=$(timeout 60 "$top_srcdir/appliance" up --dir "$DIR" --port "$PORT" --listen 0.0.0.0 2>&1) &&
  fail "up --listen 0.0.0.0 without TLS started"
echo "$out" | grep -q "refusing to serve NBD on 0.0.0.0 without TLS" || fail "no refusal message: $out"
[ -e "$DIR" ] && fail "the refused up left $DIR behind"

out=$(timeout 60 "$top_srcdir/appliance" up --dir "$DIR" --port "$PORT" --connections 08 2>&1) &&
  fail "up --connections 08 started"
echo "$out" | grep -q "connections wants a number of NBD clients" || fail "no message for a bad --connections: $out"

up
grep -q "nbd://127.0.0.1:$PORT/demo" "$LOG" || fail "the URI is not printed"
grep -q "at most 8 clients at once" "$LOG" || fail "the connection limit is not printed"
# nbdkit's memory is bounded by its connections (each may hold 16 worker
# threads' request buffers): eight are served at once, a ninth is refused
# until one of them closes.
PYNBD=python3
/usr/bin/python3 -c 'import nbd' 2>/dev/null && PYNBD=/usr/bin/python3
$PYNBD - "nbd://127.0.0.1:$PORT/demo" <<'PY' || fail "the appliance's nbdkit does not hold to 8 connections"
import nbd, sys, time
uri = sys.argv[1]
held = []
for i in range(8):
    h = nbd.NBD()
    h.connect_uri(uri)
    held.append(h)
for h in held:
    assert h.pread(4096, 0) is not None
extra = nbd.NBD()
try:
    extra.connect_uri(uri)
    sys.exit("a ninth connection was served")
except nbd.Error:
    pass
held.pop().shutdown()
for i in range(100):
    h = nbd.NBD()
    try:
        h.connect_uri(uri)
        break
    except nbd.Error:
        time.sleep(0.1)
else:
    sys.exit("no connection served after one of the eight closed")
assert h.get_size() == 1 << 30
PY
[ "$(nbdinfo --size "nbd://127.0.0.1:$PORT/demo")" = $((1 << 30)) ] || fail "demo is not 1 GiB"
TROMCHO_CONFIG=$DIR/tromcho.conf "$top_builddir/cli/tromcho" info demo --json |
  python3 -c 'import json,sys; assert json.load(sys.stdin)["encrypted"]' || fail "demo is not encrypted"
grep -q '"proto_checksums": "gcm"' "$DIR/tromcho.conf" || fail "the cluster does not run gcm"
# The secure setup by default: the KV over HTTPS, refusing anyone without a
# certificate; a config per role, none but the administrator's with the
# admin key; nbdkit and FUSE act as the ordinary user tenant, who owns demo.
KVURL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["etcd_address"][0])' "$DIR/tromcho.conf")
case $KVURL in https://*) ;; *) fail "the KV is not served over HTTPS: $KVURL" ;; esac
for c in tromcho osd gateway admin; do
  python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["use_perms"] is True' "$DIR/$c.conf" ||
    fail "$c.conf: use_perms is not on"
done
for c in tromcho osd gateway; do
  ! grep -q 'admin\.key' "$DIR/$c.conf" || fail "$c.conf holds the admin key"
done
grep -q '"cert": ".*/tenant.crt"' "$DIR/tromcho.conf" || fail "tromcho.conf is not the user tenant's"
out=$(curl -s --cacert "$DIR/certs/antietcd.crt" -X POST "$KVURL/v3/kv/deleterange" -d '{"key": "AA==", "range_end": "AA=="}')
echo "$out" | grep -q unauthenticated || fail "the KV did not refuse a deleterange without a certificate: $out"
out=$(curl -s --cacert "$DIR/certs/antietcd.crt" --cert "$DIR/certs/tenant.crt" --key "$DIR/certs/tenant.key" \
  -X POST "$KVURL/v3/kv/put" -d "{\"key\": \"$(printf /tromcho/config/user/tenant | base64 -w0)\", \"value\": \"$(printf '{"type":"admin"}' | base64 -w0)\"}")
echo "$out" | grep -q "permission denied" || fail "tenant made itself an administrator: $out"
TROMCHO_CONFIG=$DIR/tromcho.conf "$top_builddir/cli/tromcho" info demo --json |
  python3 -c 'import json,sys; assert json.load(sys.stdin)["owner"] == "tenant"' || fail "demo is not owned by tenant"
TROMCHO_CONFIG=$DIR/tromcho.conf expect_fail "permission denied" "$top_builddir/cli/tromcho" create other -s 4M
pgrep -af nbdkit | grep -q "config=$DIR/tromcho.conf" || fail "nbdkit does not run with the user's config"
# The pool is placed with all three OSDs up: each leads a share of the PGs
# (placed while one was still starting, it would lead none, for good).
TROMCHO_CONFIG=$DIR/admin.conf "$top_builddir/cli/tromcho" describe --json | python3 -c '
import json, sys
led = {o["osd_num"]: len(o["pgs"]) for o in json.load(sys.stdin)["osds"]}
assert sorted(led) == [1, 2, 3] and all(n >= 8 for n in led.values()), led' || fail "the OSDs do not share the PGs"
head -c 8M /dev/urandom > "$TESTDIR/data"
nbdcopy "$TESTDIR/data" "nbd://127.0.0.1:$PORT/demo" || fail "nbdcopy in"
if [ -f "$DIR/mnt/demo" ]; then
  cmp <(head -c 8M "$DIR/mnt/demo") "$TESTDIR/data" || fail "FUSE shows other data"
fi
down
up --listen 0.0.0.0 --tls
TLS_URI="nbds://127.0.0.1:$PORT/demo?tls-certificates=$DIR/certs/nbd-client-tenant"
grep -qF "$TLS_URI" "$LOG" || fail "the nbds:// URI is not printed: $(cat "$LOG")"
nbdcopy "$TLS_URI" - | head -c 8M | cmp - "$TESTDIR/data" || fail "data lost across a restart (over TLS)"
expect_fail "" nbdinfo --size "nbd://127.0.0.1:$PORT/demo"
down
echo "test-appliance: ok"
