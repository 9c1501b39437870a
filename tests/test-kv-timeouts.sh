#!/usr/bin/env bash
# The KV client's timeouts against misbehaving endpoints (kv-stub.py): a
# server that stops answering fails a request after about the request
# timeout and the client moves to the next endpoint; a slow server that
# keeps answering is waited for. See test-kv-timeouts.c.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
requires curl python3
start_kv kv
# start_stub MODE: a kv-stub.py in MODE; prints its URL.
start_stub () {
  python3 "$top_srcdir/tests/kv-stub.py" "$1" "$TESTDIR/$1.port" >"$TESTDIR/$1.log" 2>&1 &
  echo $! > "$TESTDIR/$1.pid"
  cleanup_fn "stop_pid $!"
  WAIT_SECS=10 wait_for test -s "$TESTDIR/$1.port" || fail "kv-stub.py $1 did not start"
}
start_stub silent
start_stub drip
KV_URL=$KV_URL KV_SILENT_URL="http://127.0.0.1:$(cat "$TESTDIR/silent.port")" \
  KV_DRIP_URL="http://127.0.0.1:$(cat "$TESTDIR/drip.port")" \
  timeout 120 "$top_builddir/tests/test-kv-timeouts" || fail "test-kv-timeouts"
echo "test-kv-timeouts: ok"
