#!/usr/bin/env bash
# Identities over real connections (DESIGN.md section 2): the server learns
# the peer's role from the CA its chain verifies against, the client only
# accepts an OSD. Certificates come from tromcho make-certs and, as an
# independent issuer, from certtool (a foreign CA, expired and not yet
# valid certificates). Each refusal must be a clear log line, never a crash.
. "${top_srcdir:-..}/tests/functions.sh"
set -e
ECHO=${top_builddir}/tests/msgr-echo
[ -x "$ECHO" ] || skip not-built "msgr-echo not built"
requires certtool

P=$TESTDIR/pki
F=$TESTDIR/foreign
mkdir -p "$F"
tromcho make-certs --dir "$P" >/dev/null
tromcho make-certs user alice --dir "$P" >/dev/null

# certtool KEYFILE CERTFILE TEMPLATE-TEXT [CA-CERT CA-KEY]
ct_issue () {
  local key=$1 crt=$2 tmpl=$3 cacrt=${4:-} cakey=${5:-}
  printf '%s\n' "$tmpl" >"$TESTDIR/tmpl"
  certtool --generate-privkey --key-type ecdsa --outfile "$key" 2>/dev/null
  if [ -n "$cacrt" ]; then
    certtool --generate-certificate --load-privkey "$key" --load-ca-certificate "$cacrt" \
      --load-ca-privkey "$cakey" --template "$TESTDIR/tmpl" --outfile "$crt" 2>/dev/null
  else
    certtool --generate-self-signed --load-privkey "$key" --template "$TESTDIR/tmpl" --outfile "$crt" 2>/dev/null
  fi
}
ct_issue "$F/ca.key" "$F/ca.crt" $'cn = "foreign ca"\nca\ncert_signing_key\nsigning_key\nexpiration_days = 30'
ct_issue "$F/user.key" "$F/user.crt" $'cn = "mallory"\ntls_www_client\nsigning_key\nexpiration_days = 30' "$F/ca.crt" "$F/ca.key"
ct_issue "$F/osd.key" "$F/osd.crt" $'cn = "foreign osd"\ntls_www_server\nsigning_key\nexpiration_days = 30' "$F/ca.crt" "$F/ca.key"
# Signed by OUR CAs, but out of their validity window.
ct_issue "$F/old.key" "$F/old.crt" $'cn = "old-user"\ntls_www_client\nsigning_key\nactivation_date = "2020-01-01 00:00:00"\nexpiration_date = "2020-12-31 00:00:00"' "$P/client_ca.crt" "$P/client_ca.key"
ct_issue "$F/future.key" "$F/future.crt" $'cn = "future-user"\ntls_www_client\nsigning_key\nactivation_date = "2090-01-01 00:00:00"\nexpiration_date = "2091-01-01 00:00:00"' "$P/client_ca.crt" "$F/../pki/client_ca.key"
ct_issue "$F/oldosd.key" "$F/oldosd.crt" $'cn = "old-osd"\ntls_www_server\nsigning_key\nactivation_date = "2020-01-01 00:00:00"\nexpiration_date = "2020-12-31 00:00:00"' "$P/osd_ca.crt" "$P/osd_ca.key"
# Sanity: certtool agrees these chain to our CA (so only the dates are wrong).
certtool --verify --load-ca-certificate "$P/client_ca.crt" --infile "$F/old.crt" 2>&1 | grep -q expired ||
  fail "certtool does not see old.crt as expired"

pids=()
cleanup_fn 'for p in "${pids[@]}"; do stop_pid $p; done'
n=0
start_server () {
  n=$((n + 1))
  SOUT=$TESTDIR/srv$n.out SERR=$TESTDIR/srv$n.err
  "$ECHO" server --port 0 "$@" >"$SOUT" 2>"$SERR" &
  SPID=$!
  pids+=($SPID)
  WAIT_SECS=10 wait_for grep -q '^PORT ' "$SOUT"
  PORT=$(awk '/^PORT/ {print $2}' "$SOUT")
}
OSD="--osd_cert $P/osd_ca.crt --osd_pkey $P/osd_ca.key --osd_ca $P/osd_ca.crt --client_ca $P/client_ca.crt --mon_ca $P/mon_ca.crt"

# client_ok EXPECTED-PEER ARGS...: the echo works and the client saw EXPECTED-PEER
client_ok () {
  local want=$1; shift
  local out
  out=$("$ECHO" client --port "$PORT" --count 2 "$@" 2>&1) || fail "client $*: $out"
  grep -q "^UP .*peer=$want" <<<"$out" || fail "client $*: expected peer $want: $out"
  grep -q '^OK ops=2' <<<"$out" || fail "client $*: $out"
}
# client_refused CLIENT-PATTERN SERVER-PATTERN ARGS...
client_refused () {
  local cpat=$1 spat=$2; shift 2
  local out
  if out=$("$ECHO" client --port "$PORT" --count 2 --handshake_timeout 5 "$@" 2>&1); then
    fail "client $* was accepted: $out"
  fi
  grep -qE -- "$cpat" <<<"$out" || fail "client $*: refusal does not match '$cpat': $out"
  if grep -qE 'Sanitizer|runtime error' <<<"$out"; then fail "client $*: sanitizer report: $out"; fi
  if [ -n "$spat" ]; then
    WAIT_SECS=5 wait_for grep -qE -- "$spat" "$SERR" || fail "server log does not match '$spat': $(cat "$SERR")"
  fi
  kill -0 $SPID || fail "server died"
}

# --- an OSD port that accepts everyone with a certificate ---
start_server $OSD --roles osd,mon,user
S1=$SPID S1ERR=$SERR S1OUT=$SOUT
client_ok 'osd:tromcho osd_ca' --osd_ca "$P/osd_ca.crt" --cert "$P/alice.crt" --pkey "$P/alice.key"
grep -q 'peer=user:alice' "$S1OUT" || fail "server did not see user alice: $(cat "$S1OUT")"
client_ok 'osd:' --osd_ca "$P/osd_ca.crt" --cert "$P/osd_ca.crt" --pkey "$P/osd_ca.key"
grep -q 'peer=osd:tromcho osd_ca' "$S1OUT" || fail "server did not see an OSD"
client_ok 'osd:' --osd_ca "$P/osd_ca.crt" --cert "$P/mon_ca.crt" --pkey "$P/mon_ca.key"
grep -q 'peer=mon:tromcho mon_ca' "$S1OUT" || fail "server did not see a monitor"

SERR=$S1ERR
client_refused 'refused the handshake.*mallory.*not trusted' 'client certificate CN=mallory is not trusted' \
  --osd_ca "$P/osd_ca.crt" --cert "$F/user.crt" --pkey "$F/user.key"
client_refused 'refused the handshake.*old-user.*expired' 'CN=old-user.*expired' \
  --osd_ca "$P/osd_ca.crt" --cert "$F/old.crt" --pkey "$F/old.key"
client_refused 'refused the handshake.*future-user.*not yet (valid|activated)' 'CN=future-user.*not yet (valid|activated)' \
  --osd_ca "$P/osd_ca.crt" --cert "$F/future.crt" --pkey "$F/future.key"
# alice's certificate with admin's key: the peer does not hold alice's key
client_refused 'does not hold the key' 'does not hold the key of its certificate CN=alice' \
  --osd_ca "$P/osd_ca.crt" --cert "$P/alice.crt" --pkey "$P/admin.key" --unchecked-key
# ... and without --unchecked-key the client refuses to start with it
out=$("$ECHO" client --port "$PORT" --osd_ca "$P/osd_ca.crt" --cert "$P/alice.crt" --pkey "$P/admin.key" 2>&1) &&
  fail "client started with a key that is not its certificate's"
grep -q 'does not belong to certificate' <<<"$out" || fail "no key mismatch message: $out"
# no certificate and no anonymous role on this port
client_refused 'accepts only osd, mon, user' 'accepts only osd, mon, user' --osd_ca "$P/osd_ca.crt"
client_refused 'accepts only osd, mon, user' '' 

# --- an OSD-only port (OSD to OSD): a user certificate is refused ---
start_server $OSD --roles osd
client_refused 'refused the handshake: client CN=admin is a user; this server accepts only osd' \
  'client CN=admin is a user; this server accepts only osd' \
  --osd_ca "$P/osd_ca.crt" --cert "$P/admin.crt" --pkey "$P/admin.key"
client_ok 'osd:' --osd_ca "$P/osd_ca.crt" --cert "$P/osd_ca.crt" --pkey "$P/osd_ca.key"

# --- servers that are not OSDs of this cluster ---
# a user certificate presented as an OSD certificate
start_server --osd_cert "$P/admin.crt" --osd_pkey "$P/admin.key" --client_ca "$P/client_ca.crt"
client_refused 'server certificate CN=admin is not an OSD certificate of this cluster' 'client refused the handshake' \
  --osd_ca "$P/osd_ca.crt" --cert "$P/alice.crt" --pkey "$P/alice.key"
# our OSD certificate, but the server does not hold its key
start_server --osd_cert "$P/osd_ca.crt" --osd_pkey "$P/admin.key" --client_ca "$P/client_ca.crt" --unchecked-key
client_refused 'server CertificateVerify.*does not hold the key of its certificate CN=tromcho osd_ca' \
  'client refused the handshake: server CertificateVerify' \
  --osd_ca "$P/osd_ca.crt" --cert "$P/alice.crt" --pkey "$P/alice.key"
# a foreign CA's OSD
start_server --osd_cert "$F/osd.crt" --osd_pkey "$F/osd.key" --client_ca "$P/client_ca.crt"
client_refused 'server certificate CN=foreign osd is not an OSD certificate.*not trusted|issuer' '' \
  --osd_ca "$P/osd_ca.crt" --cert "$P/alice.crt" --pkey "$P/alice.key"
# our osd_ca's certificate, expired
start_server --osd_cert "$F/oldosd.crt" --osd_pkey "$F/oldosd.key" --client_ca "$P/client_ca.crt"
client_refused 'server certificate CN=old-osd.*expired' '' --osd_ca "$P/osd_ca.crt"
# a server without any certificate, to a client that requires an OSD
start_server
client_refused 'server has none|no certificate' '' --osd_ca "$P/osd_ca.crt"

# --- certificate purposes (extended key usage, issue 12) ---
# An NBD server certificate of the old layout: signed by client_ca, but
# serverAuth only, CN=localhost. Presented by a client it is refused.
ct_issue "$F/nbdsrv.key" "$F/nbdsrv.crt" $'cn = "localhost"\ntls_www_server\nsigning_key\nexpiration_days = 30' "$P/client_ca.crt" "$P/client_ca.key"
certtool --verify --load-ca-certificate "$P/client_ca.crt" --infile "$F/nbdsrv.crt" >/dev/null 2>&1 ||
  fail "certtool does not see nbdsrv.crt as signed by client_ca"
start_server $OSD --roles osd,mon,user
client_refused 'refused the handshake.*CN=localhost.*lacks clientAuth' 'CN=localhost.*lacks clientAuth' \
  --osd_ca "$P/osd_ca.crt" --cert "$F/nbdsrv.crt" --pkey "$F/nbdsrv.key"
# An OSD certificate made for clients only (clientAuth): it may not serve.
ct_issue "$F/cliosd.key" "$F/cliosd.crt" $'cn = "client-only osd"\ntls_www_client\nsigning_key\nexpiration_days = 30' "$P/osd_ca.crt" "$P/osd_ca.key"
start_server --osd_cert "$F/cliosd.crt" --osd_pkey "$F/cliosd.key" --client_ca "$P/client_ca.crt"
client_refused 'server certificate CN=client-only osd.*lacks serverAuth' '' \
  --osd_ca "$P/osd_ca.crt" --cert "$P/alice.crt" --pkey "$P/alice.key"
# Two CA options naming one CA: every user would be an OSD. Refused at start.
out=$("$ECHO" server --port 0 --osd_cert "$P/osd_ca.crt" --osd_pkey "$P/osd_ca.key" --osd_ca "$P/client_ca.crt" \
  --client_ca "$P/client_ca.crt" 2>&1) && fail "a server started with osd_ca = client_ca"
grep -q 'osd_ca .* and client_ca .* name the same CA' <<<"$out" || fail "no message for osd_ca = client_ca: $out"
cp "$P/mon_ca.crt" "$TESTDIR/mon-copy.crt"
out=$("$ECHO" server --port 0 --osd_cert "$P/osd_ca.crt" --osd_pkey "$P/osd_ca.key" --osd_ca "$P/osd_ca.crt" \
  --mon_ca "$TESTDIR/mon-copy.crt" --client_ca "$P/mon_ca.crt" 2>&1) && fail "a server started with mon_ca = client_ca (a copy)"
grep -q 'mon_ca .* and client_ca .* name the same CA' <<<"$out" || fail "no message for mon_ca = client_ca: $out"

# --- a peer that is not a tromcho client at all ---
start_server $OSD
python3 - "$PORT" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(5)
data = s.recv(1000)       # an alert, then the close
while data:
    data = s.recv(1000)
PY
WAIT_SECS=5 wait_for grep -q 'handshake refused: handshake message with version' "$SERR" ||
  fail "garbage not refused: $(cat "$SERR")"
kill -0 $SPID || fail "server died on garbage"
echo "identity checks passed"

# Stop the servers (they exit through their signal handler, so LeakSanitizer
# runs) and refuse any sanitizer report from any process of this test.
for p in "${pids[@]}"; do stop_pid $p; done
pids=()
if grep -lE 'Sanitizer|runtime error' "$TESTDIR"/*.err "$TESTDIR"/*.out 2>/dev/null; then
  fail "sanitizer report: $(grep -hE -A5 'Sanitizer|runtime error' "$TESTDIR"/*.err "$TESTDIR"/*.out | head -40)"
fi
