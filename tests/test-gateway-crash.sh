#!/usr/bin/env bash
# tromcho-gateway under kill -9: every acknowledged put survives and the
# store reopens cleanly, a few times over. Then bad input gets etcd-like
# error JSON and the gateway keeps serving; bad options fail clearly.
. "${top_srcdir:-..}/tests/functions.sh"
requires python3 curl tromcho-gateway
set -e

port=$(free_port)
url=http://127.0.0.1:$port
echo '{}' > "$TESTDIR/empty.conf"
gw_pid=
start_gw () {
  tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address 127.0.0.1:$port \
    --gateway_data "$TESTDIR/data" --gateway_watch_progress_interval 1 ${gw_opts:-} >> "$TESTDIR/gw.log" 2>&1 &
  gw_pid=$!
  wait_for curl -sf "$url/health"
}
cleanup_fn 'test -n "$gw_pid" && stop_pid "$gw_pid"'
cleanup_fn 'test $? = 0 || tail -20 "$TESTDIR/gw.log"'

# Writers: 4 connections putting keys; each acknowledged put is appended to
# acked.<n> only after its reply arrived. Values are derived from the key.
cat > "$TESTDIR/writer.py" <<'EOF'
import base64, http.client, json, sys, threading
port, rnd, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def value(key):
    n = (hash(key) % 7) ** 4 * 8 + 10          # 10 bytes .. 10 KiB
    return (key * (n // len(key) + 1))[:n].encode()
def run(t):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    with open('%s.%d' % (out, t), 'w') as f:
        i = 0
        while True:
            key = '/crash/%s/%d/%06d' % (rnd, t, i)
            body = json.dumps({'key': base64.b64encode(key.encode()).decode(),
                               'value': base64.b64encode(value(key)).decode()})
            try:
                c.request('POST', '/v3/kv/put', body)
                r = c.getresponse()
                r.read()
            except Exception:
                return
            if r.status != 200:
                return
            f.write(key + '\n')
            f.flush()
            i += 1
ts = [threading.Thread(target=run, args=(t,)) for t in range(4)]
for t in ts: t.start()
for t in ts: t.join()
EOF
cat > "$TESTDIR/verify.py" <<'EOF'
import base64, glob, http.client, json, sys
port, rnd, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def value(key):
    n = (hash(key) % 7) ** 4 * 8 + 10
    return (key * (n // len(key) + 1))[:n].encode()
acked = [l.strip() for f in glob.glob(out + '.*') for l in open(f) if l.strip()]
c = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
pfx = '/crash/%s/' % rnd
end = pfx[:-1] + chr(ord(pfx[-1]) + 1)
c.request('POST', '/v3/kv/range', json.dumps({'key': base64.b64encode(pfx.encode()).decode(),
                                              'range_end': base64.b64encode(end.encode()).decode()}))
r = json.loads(c.getresponse().read())
stored = {base64.b64decode(kv['key']).decode(): base64.b64decode(kv.get('value', '')) for kv in r.get('kvs', [])}
missing = [k for k in acked if k not in stored]
wrong = [k for k in acked if k in stored and stored[k] != value(k)]
print('round %s: %d acknowledged, %d stored, %d missing, %d wrong' % (rnd, len(acked), len(stored), len(missing), len(wrong)))
if missing or wrong or not acked:
    print('missing:', missing[:5], 'wrong:', wrong[:5])
    sys.exit(1)
EOF
export PYTHONHASHSEED=0

# Compaction at the current revision, over and over, during the stream.
compactor () {
  while :; do
    rev=$(curl -s -X POST "$url/v3/kv/range" -d '{"key":"eA=="}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])') || return 0
    curl -s -X POST "$url/v3/kv/compaction" -d "{\"revision\":$rev}" >/dev/null || return 0
    sleep 0.2
  done
}

start_gw
# Leases live through kill -9: a long one keeps its key, a short one still expires.
curl -sf -X POST "$url/v3/lease/grant" -d '{"TTL":60,"ID":1001}' >/dev/null
curl -sf -X POST "$url/v3/lease/grant" -d '{"TTL":2,"ID":1002}' >/dev/null
curl -sf -X POST "$url/v3/kv/put" -d '{"key":"bG9uZw==","value":"MQ==","lease":1001}' >/dev/null
curl -sf -X POST "$url/v3/kv/put" -d '{"key":"c2hvcnQ=","value":"MQ==","lease":1002}' >/dev/null
for round in 1 2 3 4 5; do
  python3 "$TESTDIR/writer.py" $port $round "$TESTDIR/acked$round" &
  writer=$!
  compactor > /dev/null 2>&1 &
  compactor_pid=$!
  # a random moment between 0.3 and 1.5 s into the stream
  sleep "$(python3 -c 'import random; print(round(random.uniform(0.3, 1.5), 2))')"
  kill -9 "$gw_pid"
  wait "$gw_pid" 2>/dev/null || true
  wait "$writer" || true
  kill "$compactor_pid" 2>/dev/null || true
  wait "$compactor_pid" 2>/dev/null || true
  # the last rounds with one flush per commit: kill -9 must lose nothing either
  [ $round -ge 3 ] && gw_opts="--gateway_meta_sync false"
  start_gw
  python3 "$TESTDIR/verify.py" $port $round "$TESTDIR/acked$round" ||
    fail "round $round: an acknowledged put was lost or changed by kill -9"
  # the earlier rounds are all still there too
  for r in $(seq 1 $((round - 1))); do
    python3 "$TESTDIR/verify.py" $port $r "$TESTDIR/acked$r" >/dev/null || fail "round $r lost data in round $round"
  done
done

# the compactions did happen, and survived too
curl -s -X POST "$url/v3/kv/range" -d '{"key":"bG9uZw==","revision":2}' | grep -q "required revision has been compacted" ||
  fail "no compaction happened during the rounds"
ttl=$(curl -sf -X POST "$url/v3/lease/timetolive" -d '{"ID":1001,"keys":true}')
echo "$ttl" | grep -q '"grantedTTL":"60".*"keys":\["bG9uZw=="\]' || fail "lease 1001 after kill -9: $ttl"
curl -sf -X POST "$url/v3/kv/range" -d '{"key":"bG9uZw=="}' | grep -q '"lease":"1001"' || fail "leased key lost"
# (each start gives a lease its full TTL again, as etcd does)
key_gone () { ! curl -sf -X POST "$url/v3/kv/range" -d "{\"key\":\"$1\"}" | grep -q '"kvs"'; }
WAIT_SECS=5 wait_for key_gone c2hvcnQ= || fail "the 2 s lease did not expire after the restarts"
curl -sf -X POST "$url/v3/lease/revoke" -d '{"ID":1001}' >/dev/null || fail "revoke after restarts"
curl -sf -X POST "$url/v3/kv/range" -d '{"key":"bG9uZw=="}' | grep -q '"kvs"' && fail "revoke left its key"

# Bad input: an etcd-like error ({"error", "message", "code"}) that says
# what is wrong, and the gateway keeps serving.
bad () {   # bad PATH BODY STATUS PATTERN
  local out code
  out=$(curl -s -o "$TESTDIR/reply" -w '%{http_code}' -X POST "$url$1" --data-binary "$2")
  code=$out
  out=$(cat "$TESTDIR/reply")
  [ "$code" = "$3" ] || fail "$1 $2: HTTP $code, expected $3: $out"
  echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); assert isinstance(j["error"], str) and j["message"] == j["error"] and isinstance(j["code"], int)' ||
    fail "$1 $2: not an etcd error reply: $out"
  echo "$out" | grep -qE -- "$4" || fail "$1 $2: message does not match '$4': $out"
}
bad /v3/kv/put '{bad' 400 'invalid JSON'
bad /v3/kv/put '{"key":"YQ==","value":"YQ=="' 400 'invalid JSON'
bad /v3/kv/put '{"key":"YQ=="} trailing' 400 'invalid JSON'
bad /v3/kv/put '[1,2]' 400 'expected a JSON object'
bad /v3/kv/put '{"key":"!!!!","value":"YQ=="}' 400 'illegal base64 data at input byte 0'
bad /v3/kv/put '{"key":"YQ==","value":"YQ=x"}' 400 'illegal base64'
bad /v3/kv/put '{"key":5}' 400 'field key: expected a base64 string'
bad /v3/kv/put '{"value":"YQ=="}' 400 'key is not provided'
bad /v3/kv/range '{"key":"YQ==","limit":"many"}' 400 'field limit: expected an integer'
bad /v3/kv/txn '{"compare":[{"key":"YQ==","target":"SIZE"}]}' 400 'field target: unknown value'
bad /v3/kv/txn '{"success":[{"request_nothing":{}}]}' 400 'expected one of request_range'
bad /v3/kv/txn "$(python3 -c 'print("{\"success\":[{\"request_txn\":" * 40 + "{}" + "}]}" * 40)')" 400 'too many operations|invalid JSON'
bad /v3/kv/nothing '{}' 404 'unknown path /v3/kv/nothing'
bad /v2/keys '{}' 404 'unknown path'
bad /v3/watch '{"cancel_request":{}}' 400 'create_request'
python3 -c 'print("{\"key\":\"" + "A" * (17 << 20) + "\"}")' > "$TESTDIR/huge"
code=$(curl -s -o "$TESTDIR/reply" -w '%{http_code}' -X POST "$url/v3/kv/put" --data-binary @"$TESTDIR/huge")
[ "$code" = 400 ] && grep -q 'request is too large' "$TESTDIR/reply" || fail "oversized body: $code $(head -c 300 "$TESTDIR/reply")"
code=$(curl -s -o "$TESTDIR/reply" -w '%{http_code}' "$url/v3/kv/range")
[ "$code" = 405 ] && grep -q 'use POST' "$TESTDIR/reply" || fail "GET on /v3/kv/range: $code $(cat "$TESTDIR/reply")"
# a client that hangs up mid-request
python3 - $port <<'EOF'
import socket, sys
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
s.sendall(b'POST /v3/kv/put HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"key":')
s.close()
EOF
curl -sf "$url/health" | grep -q '"true"' || fail "gateway stopped serving after bad input"
curl -sf -X POST "$url/v3/kv/put" -d '{"key":"b2s=","value":"eWVz"}' | grep -q revision || fail "put after bad input"
kill -0 "$gw_pid" || fail "gateway died"

# progress_notify: a quiet watch hears how far it has got, a plain one nothing.
timeout 2.6 curl -sN -X POST "$url/v3/watch" -d '{"create_request":{"key":"cQ==","progress_notify":true}}' > "$TESTDIR/progress" || true
timeout 2.6 curl -sN -X POST "$url/v3/watch" -d '{"create_request":{"key":"cQ=="}}' > "$TESTDIR/noprogress" || true
python3 - "$TESTDIR/progress" "$TESTDIR/noprogress" <<'EOF' || fail "progress notifications"
import json, sys
p = [json.loads(l)["result"] for l in open(sys.argv[1]) if l.strip()]
n = [json.loads(l)["result"] for l in open(sys.argv[2]) if l.strip()]
assert p[0].get("created") and len(p) >= 2, p
assert all(set(r) == {"header"} and int(r["header"]["revision"]) > 0 for r in p[1:]), p
assert len(n) == 1 and n[0].get("created"), n
EOF

# A watch ends when its client hangs up: the stream goes away. Watches
# take no thread of their own (a fixed worker pool serves every
# connection; a waiting watch is suspended), so the thread count stays put.
nthreads () { ls "/proc/$gw_pid/task" | wc -l; }
metric () {
  curl -sf "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
watches_are () { [ "$(metric tromcho_gateway_watches)" = "$1" ]; }
sleep 1
base=$(nthreads)
# (the embedded monitor keeps its own watches open)
w0=$(metric tromcho_gateway_watches)
[ -n "$w0" ] || fail "no tromcho_gateway_watches in /metrics: $(curl -s "$url/metrics" | head -c 300)"
wpids=()
next=$(curl -s -X POST "$url/v3/kv/range" -d '{"key":"eA=="}' |
       python3 -c 'import json,sys; print(int(json.load(sys.stdin)["header"]["revision"]) + 1)')
for i in $(seq 20); do
  curl -sN -X POST "$url/v3/watch" -d '{"create_request":{"key":"d2F0Y2g=","start_revision":'$next'}}' > "$TESTDIR/watch$i" &
  wpids+=($!)
done
wait_for watches_are $((w0 + 20)) || fail "20 watches did not start: $(metric tromcho_gateway_watches) open, $w0 before"
[ "$(nthreads)" -le "$base" ] || fail "20 watches took threads: $(nthreads), $base before"
curl -sf -X POST "$url/v3/kv/put" -d '{"key":"d2F0Y2g=","value":"MQ=="}' >/dev/null
for i in $(seq 20); do wait_for grep -q '"events"' "$TESTDIR/watch$i" || fail "watch $i got no event"; done
kill "${wpids[@]}"
wait "${wpids[@]}" 2>/dev/null || true
wait_for watches_are "$w0" || fail "watches stay after their clients left: $(metric tromcho_gateway_watches) open, $w0 before"

# Bad options fail at start with a message that names the problem.
expect_fail "gateway_address 'nonsense': expected HOST:PORT" \
  tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address nonsense --gateway_data "$TESTDIR/d2"
expect_fail "gateway_address '127.0.0.1:99999': bad port" \
  tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address 127.0.0.1:99999 --gateway_data "$TESTDIR/d2"
expect_fail "gateway_address '127.0.0.1:$port': cannot listen: Address already in use" \
  tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address 127.0.0.1:$port --gateway_data "$TESTDIR/d2"
touch "$TESTDIR/afile"
expect_fail "gateway_data $TESTDIR/afile/sub: cannot create the folder: Not a directory" \
  tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address 127.0.0.1:$(free_port) --gateway_data "$TESTDIR/afile/sub"
expect_fail "gateway_data $TESTDIR/data: in use by another tromcho-gateway" \
  tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_address 127.0.0.1:$(free_port) --gateway_data "$TESTDIR/data"
expect_fail "option gateway_store_size: 'big' is not an integer" \
  tromcho-gateway --config "$TESTDIR/empty.conf" --gateway_store_size big
tromcho-gateway --help | grep -q -- "--gateway_data" || fail "--help does not list gateway_data"
tromcho-gateway --help | grep -q "gateway_address" || fail "--help does not list gateway_address"
# A clean stop on SIGINT too, without sanitizer reports.
kill -INT "$gw_pid"
wait "$gw_pid" || fail "gateway exited with status $? on SIGINT"
gw_pid=
! grep -E "ERROR: [A-Za-z]+Sanitizer|runtime error:" "$TESTDIR/gw.log" || fail "sanitizer report in the gateway's log"

# A stop while parked watches are being resumed: with a progress event
# every second, the watch thread resumes each watch once a second, outside
# its lock; a stop in that window once left connections suspended and
# libmicrohttpd aborted ("MHD_stop_daemon() called while we have suspended
# connections": a third of the rounds before the fix). 250 watches stay
# open; SIGINT about when they are resumed (1 s after parking); 12 rounds.
cat > "$TESTDIR/hold.py" <<'EOF'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
body = b'{"create_request":{"key":"d2F0Y2g="}}'
req = b"POST /v3/watch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
for s in socks:
    s.sendall(req)
print("held", flush=True)
time.sleep(60)
EOF
hold_pid=
cleanup_fn 'test -n "$hold_pid" && stop_pid "$hold_pid"'
for round in $(seq 12); do
  port=$(free_port)
  url=http://127.0.0.1:$port
  rm -rf "$TESTDIR/data"
  : > "$TESTDIR/gw.log"
  start_gw
  python3 "$TESTDIR/hold.py" "$port" 250 > "$TESTDIR/hold.out" &
  hold_pid=$!
  wait_for grep -q held "$TESTDIR/hold.out" || fail "round $round: 250 watches were not opened"
  sleep "$(python3 -c 'import random; print(random.uniform(0.9, 1.2))')"
  kill -INT "$gw_pid"
  wait "$gw_pid" || fail "round $round: gateway exited with status $? on SIGINT with 250 watches parked: $(tail -2 "$TESTDIR/gw.log")"
  gw_pid=
  kill "$hold_pid" 2>/dev/null || true
  wait "$hold_pid" 2>/dev/null || true
  hold_pid=
done
echo PASS
