#!/usr/bin/env bash
# The KV conformance cases (kv_conformance.py) against a real etcd and
# against tromcho-gateway: both must pass, and the replies must have the
# same shapes (field names and JSON types).
. "${top_srcdir:-..}/tests/functions.sh"
requires etcd python3 tromcho-gateway
set -e

conf="${top_srcdir}/tests/kv_conformance.py"
many=${KV_CONFORMANCE_MANY:-100000}

# A restartable server: a script that (re)starts it and records its PID.
etcd_port=$(free_port)
peer_port=$(free_port)
cat > "$TESTDIR/start-etcd" <<SCRIPT
#!/bin/sh
[ -s "$TESTDIR/etcd.pid" ] && kill \$(cat "$TESTDIR/etcd.pid") 2>/dev/null
while [ -s "$TESTDIR/etcd.pid" ] && kill -0 \$(cat "$TESTDIR/etcd.pid") 2>/dev/null; do sleep 0.1; done
etcd --name default --data-dir "$TESTDIR/etcd" \
  --listen-client-urls http://127.0.0.1:$etcd_port --advertise-client-urls http://127.0.0.1:$etcd_port \
  --listen-peer-urls http://127.0.0.1:$peer_port --initial-advertise-peer-urls http://127.0.0.1:$peer_port \
  --initial-cluster default=http://127.0.0.1:$peer_port >> "$TESTDIR/etcd.log" 2>&1 &
echo \$! > "$TESTDIR/etcd.pid"
SCRIPT
gw_port=$(free_port)
echo '{}' > "$TESTDIR/empty.conf"
cat > "$TESTDIR/start-gateway" <<SCRIPT
#!/bin/sh
[ -s "$TESTDIR/gw.pid" ] && kill \$(cat "$TESTDIR/gw.pid") 2>/dev/null
while [ -s "$TESTDIR/gw.pid" ] && kill -0 \$(cat "$TESTDIR/gw.pid") 2>/dev/null; do sleep 0.1; done
tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address 127.0.0.1:$gw_port --gateway_data "$TESTDIR/gw" \
  >> "$TESTDIR/gw.log" 2>&1 &
echo \$! > "$TESTDIR/gw.pid"
SCRIPT
chmod +x "$TESTDIR/start-etcd" "$TESTDIR/start-gateway"
# Stop the process whose PID is in file $1, if any (never `kill 0`).
stop_pidfile () { local p; p=$(cat "$1" 2>/dev/null) || return 0; [ -n "$p" ] && [ "$p" -gt 1 ] && stop_pid "$p"; }
cleanup_fn stop_pidfile "$TESTDIR/etcd.pid"
cleanup_fn stop_pidfile "$TESTDIR/gw.pid"
cleanup_fn 'test $? = 0 || tail -20 "$TESTDIR/etcd.log" "$TESTDIR/gw.log" 2>/dev/null'

healthy () { curl -sf "$1/health" | grep -q '"true"'; }

"$TESTDIR/start-etcd"
wait_for healthy http://127.0.0.1:$etcd_port
python3 "$conf" --url http://127.0.0.1:$etcd_port --restart-cmd "$TESTDIR/start-etcd" \
  --many "$many" --shapes "$TESTDIR/etcd.shapes" || fail "the cases fail against etcd"
stop_pidfile "$TESTDIR/etcd.pid"

"$TESTDIR/start-gateway"
wait_for healthy http://127.0.0.1:$gw_port
python3 "$conf" --url http://127.0.0.1:$gw_port --restart-cmd "$TESTDIR/start-gateway" \
  --many "$many" --shapes "$TESTDIR/gateway.shapes" || fail "the cases fail against tromcho-gateway"

python3 "$conf" --compare "$TESTDIR/etcd.shapes" "$TESTDIR/gateway.shapes" ||
  fail "replies of tromcho-gateway differ in shape from etcd's"

# A clean stop: SIGTERM ends the gateway with status 0.
pid=$(cat "$TESTDIR/gw.pid")
kill "$pid"
for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "gateway still running 5 s after SIGTERM"
wait "$pid" 2>/dev/null || true
grep -q "signal 15: stopping" "$TESTDIR/gw.log" || fail "no clean stop in the log"
# Under --enable-sanitizers a leak or an error shows in the log.
! grep -E "ERROR: [A-Za-z]+Sanitizer|runtime error:" "$TESTDIR/gw.log" || fail "sanitizer report in the gateway's log"
echo "PASS"
