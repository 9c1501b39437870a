#!/usr/bin/env bash
# The cluster client's write window (client_max_dirty_bytes): the bytes of
# writes in flight plus the unsynced ones kept for replay stay under the
# option whatever the callers do, so nbdkit's memory is bounded however
# many requests its connections bring. Here nbdcopy writes 48 MiB in 1 MiB
# requests, 16 at a time per connection, through an nbdkit whose window is
# 2 MiB: the client reports (at exit) how full the window got and how many
# writes waited for room; it must never have been fuller than 2 MiB, writes
# must have waited, and every byte must read back.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit nbdcopy curl
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"

WINDOW=2097152
start_kv
LOG_LEVEL=info EXTRA_CONF=", \"client_max_dirty_bytes\": $WINDOW" write_conf
start_rep3
tromcho create img -s 64M --enc_key auto >/dev/null || fail "create img"
head -c 48M /dev/urandom > "$TESTDIR/data"

start_nbdkit srv -v -- config="$CONF" image=img
nbdcopy --connections=4 --requests=16 --request-size=1048576 "$TESTDIR/data" "$URI" ||
  fail "nbdcopy into the export"
nbdcopy --connections=4 --requests=16 "$URI" "$TESTDIR/back" || fail "nbdcopy out of the export"
head -c 48M "$TESTDIR/back" | cmp - "$TESTDIR/data" || fail "the data read back differs"
stop_nbdkit srv

line=$(grep "write window: fullest" "$TESTDIR/srv.log" | tail -n 1)
[ -n "$line" ] || { tail -n 20 "$TESTDIR/srv.log"; fail "the client did not report its write window"; }
echo "${line##*cluster: }"
read -r fullest size waits < <(sed -E 's/.*fullest ([0-9]+) of ([0-9]+) bytes, ([0-9]+) writes.*/\1 \2 \3/' <<<"$line")
[ "$size" = "$WINDOW" ] || fail "the window is $size bytes, not the $WINDOW of client_max_dirty_bytes"
[ "$fullest" -le "$WINDOW" ] || fail "the window held $fullest bytes, over its $WINDOW"
[ "$fullest" -ge $((WINDOW / 2)) ] || fail "the window never got half full ($fullest bytes): the load did not test it"
[ "$waits" -gt 0 ] || fail "no write waited for room with 16 MiB in flight and a 2 MiB window"
echo "test-client-window: ok"
