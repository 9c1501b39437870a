#!/usr/bin/env bash
# The proto_checksums negotiation matrix: client mode x server mode x
# force_proto_checksums x certificates or not, with real msgr-echo
# processes. Each cell is the outcome the seed implies: the mode the
# connection runs in, or X (refused, with a log line saying why).
#
# The rules (seed "OSD transport encryption"; common/msgr/msgr.h):
#  - mode = the weaker of the two proto_checksums; without keys gcm is
#    impossible and counts as payload;
#  - with certificates (keys) the server, unless force_proto_checksums is
#    set, refuses a client below min(its own mode, payload): "disabling
#    checksums on the client side is forbidden by default", while gcm "may be
#    downgraded to payload";
#  - force_proto_checksums (either side) refuses anything weaker; gcm
#    without keys is always refused.
. "${top_srcdir:-..}/tests/functions.sh"
set -e
ECHO=${top_builddir}/tests/msgr-echo
[ -x "$ECHO" ] || skip not-built "msgr-echo not built"
requires python3

tromcho make-certs --dir "$TESTDIR/pki" >/dev/null
P=$TESTDIR/pki
SRV_CERTS="--osd_cert $P/osd_ca.crt --osd_pkey $P/osd_ca.key --osd_ca $P/osd_ca.crt --client_ca $P/client_ca.crt"
CLI_CERTS="--cert $P/admin.crt --pkey $P/admin.key --osd_ca $P/osd_ca.crt"

# certs server_force client_mode : vs server none, payload, gcm
MATRIX="
no  -       none    : none    none    none
no  -       payload : none    payload payload
no  -       gcm     : none    payload payload
no  none    none    : none    none    none
no  none    payload : none    payload payload
no  none    gcm     : none    payload payload
no  payload none    : X       X       X
no  payload payload : X       payload payload
no  payload gcm     : X       payload payload
no  gcm     none    : X       X       X
no  gcm     payload : X       X       X
no  gcm     gcm     : X       X       X
yes -       none    : none    X       X
yes -       payload : none    payload payload
yes -       gcm     : none    payload gcm
yes none    none    : none    none    none
yes none    payload : none    payload payload
yes none    gcm     : none    payload gcm
yes payload none    : X       X       X
yes payload payload : X       payload payload
yes payload gcm     : X       payload gcm
yes gcm     none    : X       X       X
yes gcm     payload : X       X       X
yes gcm     gcm     : X       X       gcm
"
# The client's own force_proto_checksums (server force unset):
# certs client_force client_mode : vs server none, payload, gcm
CLIENT_FORCE="
yes gcm     gcm     : X       X       gcm
yes payload payload : X       payload payload
no  payload payload : X       payload payload
no  gcm     gcm     : X       X       X
"

pids=()
cleanup_fn 'for p in "${pids[@]}"; do stop_pid $p; done'

# start_server NAME ARGS...: sets PORT
nserver=0
start_server () {
  local name=$1; shift
  nserver=$((nserver + 1))
  rm -f "$TESTDIR/$name.out" "$TESTDIR/$name.err"
  "$ECHO" server --port 0 "$@" >"$TESTDIR/$name.out" 2>"$TESTDIR/$name.err" &
  pids+=($!)
  SPID=$!
  WAIT_SECS=10 wait_for grep -q '^PORT ' "$TESTDIR/$name.out"
  PORT=$(awk '/^PORT/ {print $2}' "$TESTDIR/$name.out")
}

cells=0
# check CERTS SERVER_FORCE CLIENT_FORCE CLIENT_MODE SERVER_MODE EXPECT
check () {
  local certs=$1 sforce=$2 cforce=$3 cmode=$4 smode=$5 expect=$6
  local cargs=(--proto_checksums "$cmode" --handshake_timeout 5)
  [ "$certs" = yes ] && cargs+=($CLI_CERTS)
  [ "$cforce" != - ] && cargs+=(--force_proto_checksums "$cforce")
  local out
  out=$("$ECHO" client --port "$PORT" --count 3 --size 1000 "${cargs[@]}" 2>"$TESTDIR/client.err") || true
  local got
  case "$out" in
    *"OK ops=3 mode="*) got=$(echo "$out" | sed -n 's/^OK ops=3 mode=\([a-z]*\).*/\1/p') ;;
    *FAIL:*) got=X ;;
    *) got="?" ;;
  esac
  cells=$((cells + 1))
  if grep -qE 'Sanitizer|runtime error' "$TESTDIR/client.err"; then fail "client: sanitizer report: $(cat "$TESTDIR/client.err")"; fi
  local what="certs=$certs server(mode=$smode force=$sforce) client(mode=$cmode force=$cforce)"
  [ "$got" = "$expect" ] || fail "$what: expected $expect, got $got: $out $(cat "$TESTDIR/client.err")"
  if [ "$got" = X ]; then
    # a refusal names its reason on the client
    grep -qE 'handshake refused|refused the handshake' <<<"$out$(cat "$TESTDIR/client.err")" ||
      fail "$what: refused without a reason: $out"
  elif [ "$certs" = yes ]; then
    grep -q 'peer=osd:tromcho osd_ca' <<<"$out" || fail "$what: client did not see an OSD: $out"
  fi
}

run_table () {
  local table=$1 kind=$2
  while read -r certs force cmode colon e_none e_payload e_gcm; do
    [ -n "$certs" ] || continue
    local i=0
    for smode in none payload gcm; do
      local sargs=(--proto_checksums "$smode")
      [ "$certs" = yes ] && sargs+=($SRV_CERTS)
      [ "$kind" = server ] && [ "$force" != - ] && sargs+=(--force_proto_checksums "$force")
      start_server srv "${sargs[@]}"
      local expect
      case $smode in none) expect=$e_none ;; payload) expect=$e_payload ;; gcm) expect=$e_gcm ;; esac
      if [ "$kind" = server ]; then
        check "$certs" "$force" - "$cmode" "$smode" "$expect"
      else
        check "$certs" - "$force" "$cmode" "$smode" "$expect"
      fi
      # the server saw the same thing: UP in that mode, as user admin with certificates
      if [ "$expect" != X ]; then
        grep -q "^UP mode=$expect keyed=$([ $certs = yes ] && echo 1 || echo 0) peer=$([ $certs = yes ] && echo user:admin || echo anonymous:-)" \
          "$TESTDIR/srv.out" || fail "server did not log UP mode=$expect: $(cat "$TESTDIR/srv.out")"
      else
        stop_pid $SPID
        grep -qE 'handshake refused|refused the handshake' "$TESTDIR/srv.err" ||
          fail "server logged no refusal: $(cat "$TESTDIR/srv.err")"
      fi
      stop_pid $SPID
      if grep -qE 'Sanitizer|runtime error' "$TESTDIR/srv.err"; then fail "server: sanitizer report: $(cat "$TESTDIR/srv.err")"; fi
    done
  done <<<"$table"
}

run_table "$MATRIX" server
run_table "$CLIENT_FORCE" client
echo "matrix: $cells cells as expected"
[ "$cells" -eq $(( (24 + 4) * 3 )) ] || fail "expected 84 cells, ran $cells"

# Stop the servers (they exit through their signal handler, so LeakSanitizer
# runs) and refuse any sanitizer report from any process of this test.
for p in "${pids[@]}"; do stop_pid $p; done
pids=()
if grep -lE 'Sanitizer|runtime error' "$TESTDIR"/*.err "$TESTDIR"/*.out 2>/dev/null; then
  fail "sanitizer report: $(grep -hE -A5 'Sanitizer|runtime error' "$TESTDIR"/*.err "$TESTDIR"/*.out | head -40)"
fi
