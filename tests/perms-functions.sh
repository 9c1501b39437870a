# A gateway in the secure setup for the use_perms tests: HTTPS with
# antietcd_cert, client certificates (client_ca, osd_ca, mon_ca), use_perms,
# the embedded monitor acting as a monitor (mon_etcd_client_cert), and the
# first administrator bootstrapped into the store (never an open KV).
# Source after functions.sh. Sets P (the PKI folder), KV_URL (https),
# KV_CURL_OPTS (curl options of the administrator) and GW_LOG.

# start_secure_gateway USER...: make the PKI with `tromcho make-certs`, a
# certificate per USER, and start the gateway. With GW_ETCD_PROXY (the
# JSON of option etcd_proxy) it is the filtering proxy to that etcd.
start_secure_gateway () {
  local port dir=$TESTDIR/gw u
  requires tromcho tromcho-gateway curl
  P=$TESTDIR/pki
  mkdir -p "$dir"
  tromcho make-certs --dir "$P" >/dev/null || fail "make-certs"
  for u in "$@"; do tromcho make-certs user "$u" --dir "$P" >/dev/null || fail "make-certs user $u"; done
  port=$(free_port)
  KV_URL=https://127.0.0.1:$port
  GW_LOG=$dir/log
  local -a store=(--gateway_data "$dir/data")
  [ -z "${GW_ETCD_PROXY:-}" ] || store=(--etcd_proxy "$GW_ETCD_PROXY")
  printf '%q ' tromcho-gateway --config "$P/tromcho.conf" --use_perms true --gateway_address "127.0.0.1:$port" \
    "${store[@]}" --gateway_bootstrap_admin admin --gateway_monitor "${KV_MONITOR:-true}" --log_level info >"$dir/cmd"
  KV_CURL_OPTS="--cacert $P/antietcd.crt --cert $P/admin.crt --key $P/admin.key"
  cleanup_fn 'test ! -f "$TESTDIR/gw/pid" || stop_pid "$(cat "$TESTDIR/gw/pid")"'
  secure_gateway_spawn
}

# secure_gateway_spawn: (re)start the gateway of start_secure_gateway, same
# port, store and options; secure_gateway_kill: kill -9 it.
secure_gateway_spawn () {
  local dir=$TESTDIR/gw
  ( eval "exec $(cat "$dir/cmd")" ) >>"$GW_LOG" 2>&1 &
  echo $! > "$dir/pid"
  # shellcheck disable=SC2086
  WAIT_SECS=30 wait_for curl -sf $KV_CURL_OPTS "$KV_URL/health" || { cat "$GW_LOG" >&2; fail "gateway did not start"; }
}
secure_gateway_kill () {
  local pid
  pid=$(cat "$TESTDIR/gw/pid")
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$TESTDIR/gw/pid"
}

# curl_as ID ARGS...: curl as identity ID: anyone (no certificate), osd,
# mon, or a user with a certificate in $P (admin, alice, ...), or any
# NAME with $P/NAME.crt and $P/NAME.key.
curl_as () {
  local id=$1; shift
  case $id in
    anyone) curl -s --cacert "$P/antietcd.crt" "$@" ;;
    osd) curl -s --cacert "$P/antietcd.crt" --cert "$P/osd_ca.crt" --key "$P/osd_ca.key" "$@" ;;
    mon) curl -s --cacert "$P/antietcd.crt" --cert "$P/mon_ca.crt" --key "$P/mon_ca.key" "$@" ;;
    *) curl -s --cacert "$P/antietcd.crt" --cert "$P/$id.crt" --key "$P/$id.key" "$@" ;;
  esac
}
