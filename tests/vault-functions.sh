# The Vault stand-in (vault-standin.py) for the tests: OpenBao/Vault cannot
# be installed from Debian. Source after functions.sh.

# start_vault CLIENT_CA: make Vault's own self-signed TLS certificate as the
# seed's step 1 does (for 127.0.0.1), start the stand-in on a free port and
# stop it on exit. Sets VAULT_URL, VAULT_CA and VAULT_TOKEN (root).
start_vault () {
  local d=$TESTDIR/vault
  mkdir -p "$d"
  openssl req -days 2 -x509 -addext basicConstraints=critical,CA:TRUE,pathlen:1 \
    -addext subjectAltName=IP:127.0.0.1,DNS:localhost -subj /CN=vault \
    -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/vault.key" -out "$d/vault.crt" 2>/dev/null ||
    fail "vault certificate"
  VAULT_PORT=$(free_port)
  VAULT_URL=https://127.0.0.1:$VAULT_PORT
  VAULT_CA=$d/vault.crt
  echo "$1" > "$d/client_ca"
  cleanup_fn "stop_vault"
  vault_spawn
  VAULT_TOKEN=$(cat "$d/root")
}
vault_spawn () {
  local d=$TESTDIR/vault
  python3 "$top_srcdir/tests/vault-standin.py" --port "$VAULT_PORT" --cert "$d/vault.crt" --key "$d/vault.key" \
    --client-ca "$(cat "$d/client_ca")" --root-token-file "$d/root" --state "$d/state.json" 2>>"$d/log" &
  echo $! > "$d/pid"
  wait_for curl -sf --cacert "$d/vault.crt" "$VAULT_URL/v1/sys/health" || { cat "$d/log"; fail "vault did not start"; }
}
stop_vault () {
  local d=$TESTDIR/vault
  [ -f "$d/pid" ] || return 0
  stop_pid "$(cat "$d/pid")"
  wait "$(cat "$d/pid")" 2>/dev/null || true
  rm -f "$d/pid"
}
# vault_api METHOD PATH [JSON]: a request as the operator (root token).
vault_api () {
  curl -sf --cacert "$VAULT_CA" -H "X-Vault-Token: $VAULT_TOKEN" -X "$1" "$VAULT_URL/v1/$2" ${3:+-d "$3"}
}
# vault_count PATTERN: how many requests in the stand-in's log match.
vault_count () { grep -c -- "$1" "$TESTDIR/vault/log" || true; }
