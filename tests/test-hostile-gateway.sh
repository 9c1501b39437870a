#!/usr/bin/env bash
# Hostile peers against the gateway's KV API (issue 12, gateway/README.md
# "Limits against hostile peers"): thousands of idle sockets from other
# addresses and from the cluster's own address, half-finished TLS
# handshakes, slowloris headers, a huge announced body, a body trickled
# byte by byte. While each attack holds its sockets and after it: the
# gateway is alive, its RSS stays under baseline + 48 MiB, an OSD keeps its
# lease alive (fake-osd, osd_ca certificate, on its kept-alive connection),
# and new connections still get in: an OSD grants and keeps alive a lease,
# a client puts and gets a key, each within 30 s.
# The attacker is tests/hostile-http.py.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
requires tromcho tromcho-gateway curl python3
FAKE_OSD=$top_builddir/tests/fake-osd
HOSTILE=$top_srcdir/tests/hostile-http.py
[ -x "$FAKE_OSD" ] || skip not-built "fake-osd not built"
# 3000 attacking sockets plus the gateway's own: both ends are this machine's.
[ "$(ulimit -Hn)" -ge 8192 ] || fail "the hard limit of open files ($(ulimit -Hn)) is below the 8192 this test needs"
ulimit -n "$(ulimit -Hn)"

P=$TESTDIR/pki
tromcho make-certs --dir "$P" >/dev/null || fail "make-certs"
echo '{}' > "$TESTDIR/empty.conf"
export TROMCHO_CONFIG=$TESTDIR/empty.conf
cat > "$TESTDIR/gw.conf" <<EOF
{"use_perms": true, "etcd_ca": "$P/antietcd.crt", "osd_ca": "$P/osd_ca.crt", "client_ca": "$P/client_ca.crt",
 "mon_ca": "$P/mon_ca.crt", "antietcd_cert": "$P/antietcd.crt", "antietcd_key": "$P/antietcd.key",
 "mon_etcd_client_cert": "$P/mon_ca.crt", "mon_etcd_client_key": "$P/mon_ca.key", "etcd_mon_ttl": 5,
 "etcd_quick_timeout": 5000, "etcd_slow_timeout": 30000, "log_level": "info"}
EOF
# The limits under test, small enough for a test machine (GW_LIMITS= runs
# the attacks against a gateway without them).
GW_LIMITS=${GW_LIMITS-"--gateway_max_connections 1000 --gateway_max_connections_per_addr 200
  --gateway_idle_timeout 5 --gateway_request_timeout 5 --gateway_threads 4"}
mkdir -p "$TESTDIR/gw"
port=$(free_port)
# shellcheck disable=SC2086
echo "tromcho-gateway --config $TESTDIR/gw.conf --gateway_address 127.0.0.1:$port --gateway_data $TESTDIR/gw/data" \
  "--gateway_bootstrap_admin admin --gateway_monitor true" $GW_LIMITS > "$TESTDIR/gw/cmd"
echo "https://127.0.0.1:$port" > "$TESTDIR/gw/url"
echo "--cacert $P/antietcd.crt --cert $P/admin.crt --key $P/admin.key" > "$TESTDIR/gw/curlopts"
URL=https://127.0.0.1:$port
cleanup_fn "kv_stop gw"
# Under AddressSanitizer freed blocks wait in its quarantine and count in
# RSS; without it RSS measures what the gateway holds, as in a plain build
# (the same as test-hostile-osd.sh).
ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}quarantine_size_mb=0" kv_spawn gw
PID=$(cat "$TESTDIR/gw/pid")
LOG=$TESTDIR/gw/log

# as CERT PATH BODY: one request with that certificate, 30 s at most.
as () {
  curl -s --max-time 30 --cacert "$P/antietcd.crt" --cert "$P/$1.crt" --key "$P/$1.key" -X POST "$URL/v3/$2" -d "$3"
}
b64 () { printf '%s' "$1" | base64 -w0; }

"$FAKE_OSD" --id 1 --host h1 --etcd_address "$URL" --etcd_ca "$P/antietcd.crt" \
  --etcd_client_cert "$P/osd_ca.crt" --etcd_client_key "$P/osd_ca.key" --etcd_keepalive_timeout 6 \
  --etcd_quick_timeout 5000 --etcd_slow_timeout 30000 >>"$TESTDIR/osd1.log" 2>&1 &
OSDPID=$!
cleanup_fn "stop_pid $OSDPID"
osd_lease () {
  as admin kv/range "{\"key\": \"$(b64 /tromcho/osd/state/1)\"}" |
    python3 -c 'import sys, json; print(json.load(sys.stdin)["kvs"][0]["lease"])'
}
WAIT_SECS=30 wait_for osd_lease || { cat "$TESTDIR/osd1.log"; fail "fake-osd did not register"; }
LEASE=$(osd_lease)

rss_kb () { awk '/^VmRSS:/ {print $2}' "/proc/$PID/status"; }
n=0
# legit_new NAME: new connections get in: an OSD grants and keeps alive a
# lease, a client puts and gets a key.
legit_new () {
  n=$((n + 1))
  local out id
  # A new connection with the OSD's certificate: grant and keep alive.
  out=$(as osd_ca lease/grant '{"TTL": 10}') || fail "$1: an OSD could not grant a lease: $out"
  id=$(echo "$out" | python3 -c 'import sys, json; print(json.load(sys.stdin)["ID"])') ||
    fail "$1: lease grant answered: $out"
  out=$(as osd_ca lease/keepalive "{\"ID\": \"$id\"}") || fail "$1: an OSD's keepalive failed: $out"
  echo "$out" | grep -q '"TTL":"10"' || fail "$1: keepalive answered: $out"
  # A client's put and get.
  out=$(as admin kv/put "{\"key\": \"$(b64 /tromcho/config/hostile)\", \"value\": \"$(b64 "v$n")\"}") ||
    fail "$1: a client's put failed: $out"
  echo "$out" | grep -q revision || fail "$1: the put answered: $out"
  out=$(as admin kv/range "{\"key\": \"$(b64 /tromcho/config/hostile)\"}") || fail "$1: a client's get failed: $out"
  echo "$out" | grep -q "\"$(b64 "v$n")\"" || fail "$1: the get answered: $out"
}
# legit NAME: that, and the running OSD kept its lease all along; the
# monitor kept its own.
legit () {
  legit_new "$1"
  kill -0 $OSDPID 2>/dev/null || fail "$1: fake-osd exited: $(tail -n 5 "$TESTDIR/osd1.log")"
  ! grep -q 'lost' "$TESTDIR/osd1.log" || fail "$1: the OSD lost its lease: $(grep lost "$TESTDIR/osd1.log")"
  [ "$(osd_lease)" = "$LEASE" ] || fail "$1: the OSD's lease changed"
  ! grep -qi 'lease .* lost\|lost the master' "$LOG" || fail "$1: the monitor lost its lease"
}
alive () {
  kill -0 "$PID" 2>/dev/null || { tail -n 20 "$LOG"; fail "$1: the gateway died"; }
  local rss; rss=$(rss_kb)
  echo "$1: gateway RSS ${rss} kB (peak $(awk '/^VmHWM:/ {print $2}' "/proc/$PID/status") kB)," \
    "threads $(awk '/^Threads:/ {print $2}' "/proc/$PID/status")"
  [ "$rss" -le "$BOUND" ] || fail "$1: gateway RSS ${rss} kB over the bound ${BOUND} kB"
}

legit warmup
BASE=$(rss_kb)
BOUND=$(( BASE + 48 * 1024 ))
echo "gateway RSS baseline ${BASE} kB, bound ${BOUND} kB"

# attack NAME HOLD ARGS...: start the attacker, wait until its sockets are
# open, check the legitimate clients while it holds them, then its result.
attack () {
  local name=$1 hold=$2 out=$TESTDIR/$1.out
  shift 2
  "$HOSTILE" "$@" --port "$port" --hold "$hold" >"$out" 2>"$TESTDIR/$name.err" &
  local hp=$!
  cleanup_fn "kill $hp 2>/dev/null"
  WAIT_SECS=120 wait_for grep -q '^ready' "$out" || { cat "$TESTDIR/$name.err"; fail "$name: the attacker did not get going"; }
  echo "$name: $(head -n 1 "$out")"
  alive "$name (during)"
  legit "$name (during)"
  wait $hp || fail "$name: the attacker failed: $(cat "$TESTDIR/$name.err")"
  RESULT=$(tail -n 1 "$out")
  echo "$name: $RESULT"
  alive "$name (after)"
  legit "$name (after)"
}
field () { echo "$RESULT" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# metric NAME: its value in the gateway's /metrics (a certificate needed).
metric () {
  curl -s --max-time 30 --cacert "$P/antietcd.crt" --cert "$P/admin.crt" --key "$P/admin.key" "$URL/metrics" |
    awk -v m="$1" '$1 == m {print $2}'
}

# 1. 1600 idle sockets from 8 other addresses: the per-address cap (200)
# and the total cap (1000) hold them; the OSD's and client's still get in.
attack idle-many 20 idle --conns 1600 --from 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8,127.0.0.9
# 2. 3000 idle sockets from the cluster's own address (127.0.0.1): over
# both caps, the most silent unauthenticated sockets give way to new ones.
attack idle-own 20 idle --conns 3000
[ "$(metric tromcho_gateway_connections_evicted_total)" -gt 0 ] || fail "idle-own: no connection was evicted"
# 3. 1000 half-finished TLS handshakes: closed after gateway_idle_timeout.
attack tls-half 30 tls-half --conns 1000
[ "$(field closed_by_server)" = "$(field connected)" ] || fail "tls-half: the gateway left some open: $RESULT"
# 4. 300 slowloris requests (a header byte a second, after the handshake):
# each still closed after gateway_idle_timeout although bytes keep coming.
attack slow-headers 30 slow-headers --tls --conns 300 --from 127.0.0.2,127.0.0.3
[ "$(field closed_by_server)" = "$(field connected)" ] || fail "slow-headers: the gateway left some open: $RESULT"
[ "$(metric tromcho_gateway_connections_idle_timeout_total)" -ge 300 ] || fail "slow-headers: not closed by the idle timeout"
# 5. Puts announcing 10 GB bodies: without a certificate refused at the
# headers (401); with a user's certificate refused there too (400 "request
# is too large", as etcd); unread either way.
attack big-body-anon 30 big-body --tls --conns 50 --from 127.0.0.2
[ "$(field replies)" = "401:50" ] || fail "big-body-anon: not refused with 401: $RESULT"
[ "$(field closed_by_server)" = 50 ] || fail "big-body-anon: the gateway left some open: $RESULT"
attack big-body 30 big-body --tls --conns 50 --from 127.0.0.2 --cert "$P/admin.crt" --key "$P/admin.key"
[ "$(field replies)" = "400:50" ] || fail "big-body: not refused with 400: $RESULT"
[ "$(field closed_by_server)" = 50 ] || fail "big-body: the gateway left some open: $RESULT"
# 6. Bodies trickled a byte a second by a user: closed after
# gateway_request_timeout.
attack trickle 30 trickle --tls --conns 100 --from 127.0.0.3 --cert "$P/admin.crt" --key "$P/admin.key"
[ "$(field closed_by_server)" = 100 ] || fail "trickle: the gateway left some open: $RESULT"
grep -q 'gateway_request_timeout' "$LOG" || fail "trickle: no log line naming gateway_request_timeout"
[ "$(metric tromcho_gateway_connections_request_timeout_total)" -ge 100 ] || fail "trickle: not counted in /metrics"
[ "$(metric tromcho_gateway_auth_failures_total)" -ge 50 ] || fail "big-body-anon: the 401s are not counted in /metrics"
# 7. A gateway behind on a burst of sockets: its MHD workers stopped for
# 5 s (tests/freeze-thread.py: nothing new gets started meanwhile) while
# 400 sockets come from the cluster's own address, over its cap of 200.
# A client arriving then still gets in once the workers run: the newest
# sockets, not yet started, give way to it (before, only started ones
# could, so it was refused). The running OSD stops first: stopped
# workers serve no keepalive, and its 6 s lease would lapse.
stop_pid $OSDPID
workers=$(for t in /proc/$PID/task/*; do [ "$(cat "$t/comm")" = MHD-worker ] && basename "$t"; done)
[ "$(echo "$workers" | wc -w)" = 4 ] || fail "behind: not the 4 MHD workers of gateway_threads 4: $workers"
freezers=""
for t in $workers; do
  python3 "$top_srcdir/tests/freeze-thread.py" "$t" 5 >"$TESTDIR/freeze-$t.out" 2>&1 &
  freezers="$freezers $!"
  cleanup_fn "kill $! 2>/dev/null"
done
for t in $workers; do
  WAIT_SECS=5 wait_for grep -q frozen "$TESTDIR/freeze-$t.out" || fail "behind: could not stop worker $t: $(cat "$TESTDIR/freeze-$t.out")"
done
"$HOSTILE" tls-half --conns 400 --port "$port" --hold 20 >"$TESTDIR/behind.out" 2>"$TESTDIR/behind.err" &
hp=$!
cleanup_fn "kill $hp 2>/dev/null"
WAIT_SECS=5 wait_for grep -q '^ready' "$TESTDIR/behind.out" || fail "behind: the attacker did not get going"
sleep 0.5   # the accept thread takes them in (it runs; the workers do not)
grep -q thawed "$TESTDIR"/freeze-*.out && fail "behind: the workers ran again before the client came: the test proves nothing"
out=$(as osd_ca lease/grant '{"TTL": 10}') ||
  fail "behind: a client arriving while MHD was behind was refused: '$out' ($(head -n 1 "$TESTDIR/behind.out"))"
echo "$out" | grep -q '"ID"' || fail "behind: lease grant answered: $out"
for f in $freezers; do wait "$f" || fail "behind: freeze-thread.py failed"; done
echo "behind: a client got in while the gateway's workers were stopped under 400 new sockets"
wait $hp || fail "behind: the attacker failed: $(cat "$TESTDIR/behind.err")"
legit_new "behind (after)"
echo "ok"
