#!/usr/bin/env bash
# ./appliance up as a user runs it: a cluster in DIR serving the encrypted
# image demo over NBD and FUSE; SIGTERM stops every process; a second up on
# the same DIR serves the same data.
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
  "$top_srcdir/appliance" up --dir "$DIR" --port "$PORT" >"$LOG" 2>&1 &
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

up
grep -q "nbd://127.0.0.1:$PORT/demo" "$LOG" || fail "the URI is not printed"
[ "$(nbdinfo --size "nbd://127.0.0.1:$PORT/demo")" = $((1 << 30)) ] || fail "demo is not 1 GiB"
TROMCHO_CONFIG=$DIR/tromcho.conf "$top_builddir/cli/tromcho" info demo --json |
  python3 -c 'import json,sys; assert json.load(sys.stdin)["encrypted"]' || fail "demo is not encrypted"
grep -q '"proto_checksums": "gcm"' "$DIR/tromcho.conf" || fail "the cluster does not run gcm"
head -c 8M /dev/urandom > "$TESTDIR/data"
nbdcopy "$TESTDIR/data" "nbd://127.0.0.1:$PORT/demo" || fail "nbdcopy in"
if [ -f "$DIR/mnt/demo" ]; then
  cmp <(head -c 8M "$DIR/mnt/demo") "$TESTDIR/data" || fail "FUSE shows other data"
fi
down
up
nbdcopy "nbd://127.0.0.1:$PORT/demo" - | head -c 8M | cmp - "$TESTDIR/data" || fail "data lost across a restart"
down
echo "test-appliance: ok"
