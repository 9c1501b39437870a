# Starting a KV server for the tests: real etcd, or tromcho-gateway's
# embedded KV when TROMCHO_KV=gateway (and gateway/tromcho-gateway exists;
# its monitor runs only with KV_MONITOR=true).
# Source after functions.sh. Each server lives in $TESTDIR/<name>/ with its
# command line (cmd), PID (pid), log (log) and data (data/).

# start_kv [NAME]: start a server, wait until /health answers, stop it on
# exit. Sets KV_URL (and <NAME>_URL) to its http://127.0.0.1:PORT.
start_kv () {
  local name=${1:-kv} port peer dir
  dir=$TESTDIR/$name
  mkdir -p "$dir"
  port=$(free_port)
  if [ "${TROMCHO_KV:-etcd}" = gateway ]; then
    requires tromcho-gateway
    echo "tromcho-gateway --gateway_address 127.0.0.1:$port --gateway_data $dir/data --gateway_monitor ${KV_MONITOR:-false}" > "$dir/cmd"
  else
    requires etcd
    peer=$(free_port)
    echo "etcd --name default --data-dir $dir/data --listen-client-urls http://127.0.0.1:$port" \
         "--advertise-client-urls http://127.0.0.1:$port --listen-peer-urls http://127.0.0.1:$peer" \
         "--initial-advertise-peer-urls http://127.0.0.1:$peer --initial-cluster default=http://127.0.0.1:$peer" \
         "--logger zap --log-level error" > "$dir/cmd"
  fi
  echo "http://127.0.0.1:$port" > "$dir/url"
  KV_URL=http://127.0.0.1:$port
  eval "${name}_URL=\$KV_URL"
  cleanup_fn "kv_stop $name"
  kv_spawn "$name"
}

# kv_spawn NAME: (re)start the server of NAME with its saved command line.
kv_spawn () {
  local dir=$TESTDIR/$1
  sh -c "exec $(cat "$dir/cmd")" >>"$dir/log" 2>&1 &
  echo $! > "$dir/pid"
  # shellcheck disable=SC2046
  WAIT_SECS=30 wait_for curl -sf $(cat "$dir/curlopts" 2>/dev/null) "$(cat "$dir/url")/health" \
    || { cat "$dir/log" >&2; fail "KV server $1 did not start"; }
}

# kv_stop NAME: stop the server of NAME (kill -9 with `kv_stop NAME -9`).
kv_stop () {
  local dir=$TESTDIR/$1 pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  if [ "${2:-}" = -9 ]; then kill -9 "$pid" 2>/dev/null || true; else stop_pid "$pid"; fi
  # A child that died stays a zombie until reaped: wait for it or for /proc.
  wait "$pid" 2>/dev/null || true
  rm -f "$dir/pid"
}

# kv_restart NAME: stop and start again on the same port and data.
kv_restart () {
  kv_stop "$1"
  kv_spawn "$1"
}

# kv_get KEY: print the value of KEY (nothing if absent) from $KV_URL, through
# the JSON API itself, so it works against etcd and the gateway alike.
kv_get () {
  local k
  k=$(printf '%s' "$1" | base64 -w0)
  curl -sf -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"$k\"}" | python3 -c '
import base64, json, sys
r = json.load(sys.stdin)
for kv in r.get("kvs", []):
    sys.stdout.write(base64.b64decode(kv.get("value", "")).decode())'
}

# make_kv_pki DIR: a CA, a server certificate for 127.0.0.1 and a client
# certificate (CN root) in DIR, made with openssl.
make_kv_pki () {
  local d=$1
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=test-ca \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null || return 1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' > "$d/ext"
  for n in server client; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=${n/client/root}" \
      -keyout "$d/$n.key" -out "$d/$n.csr" 2>/dev/null &&
    openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
      -extfile "$d/ext" -out "$d/$n.crt" 2>/dev/null || return 1
  done
}

# start_kv_tls [NAME]: like start_kv, but etcd over https requiring client
# certificates from $TESTDIR/NAME/pki (ca.crt, client.crt, client.key).
# etcd only (skips with TROMCHO_KV=gateway). Sets KV_URL (https).
start_kv_tls () {
  local name=${1:-kvtls} port peer dir
  [ "${TROMCHO_KV:-etcd}" = etcd ] || skip kv-etcd-only "this TLS test runs against etcd"
  requires etcd openssl
  dir=$TESTDIR/$name
  make_kv_pki "$dir/pki" || fail "making certificates"
  port=$(free_port); peer=$(free_port)
  echo "etcd --name default --data-dir $dir/data --listen-client-urls https://127.0.0.1:$port" \
       "--advertise-client-urls https://127.0.0.1:$port --listen-peer-urls http://127.0.0.1:$peer" \
       "--initial-advertise-peer-urls http://127.0.0.1:$peer --initial-cluster default=http://127.0.0.1:$peer" \
       "--cert-file $dir/pki/server.crt --key-file $dir/pki/server.key --client-cert-auth" \
       "--trusted-ca-file $dir/pki/ca.crt --logger zap --log-level error" > "$dir/cmd"
  echo "https://127.0.0.1:$port" > "$dir/url"
  echo "--cacert $dir/pki/ca.crt --cert $dir/pki/client.crt --key $dir/pki/client.key" > "$dir/curlopts"
  KV_URL=https://127.0.0.1:$port
  eval "${name}_URL=\$KV_URL"
  cleanup_fn "kv_stop $name"
  kv_spawn "$name"
}

# kv_put KEY VALUE: write KEY = VALUE at $KV_URL through the JSON API.
kv_put () {
  curl -sf -X POST "$KV_URL/v3/kv/put" \
    -d "{\"key\": \"$(printf '%s' "$1" | base64 -w0)\", \"value\": \"$(printf '%s' "$2" | base64 -w0)\"}" >/dev/null
}

# make_etcd_proxy_pki DIR: certificates for etcd behind the gateway's proxy
# (the seed's "Mon as an etcd proxy"), with openssl: etcd.crt/key (etcd's
# own, self-signed, for 127.0.0.1, server and peer), proxy_ca.crt (a CA
# that signs only gw_etcd.crt/key, the gateway's etcd client certificate)
# and trust.crt, what etcd's --trusted-ca-file gets: proxy_ca plus etcd.crt
# itself, because etcd 3.4's JSON gateway reaches etcd's own gRPC port with
# etcd's certificate (without it every /v3 call fails "connection closed").
make_etcd_proxy_pki () {
  local d=$1
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=etcd \
    -addext 'subjectAltName=IP:127.0.0.1,DNS:localhost' -addext 'extendedKeyUsage=serverAuth,clientAuth' \
    -keyout "$d/etcd.key" -out "$d/etcd.crt" 2>/dev/null || return 1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=proxy-ca \
    -keyout "$d/proxy_ca.key" -out "$d/proxy_ca.crt" 2>/dev/null || return 1
  printf 'extendedKeyUsage=clientAuth\n' > "$d/ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=tromcho-gateway \
    -keyout "$d/gw_etcd.key" -out "$d/gw_etcd.csr" 2>/dev/null &&
  openssl x509 -req -in "$d/gw_etcd.csr" -CA "$d/proxy_ca.crt" -CAkey "$d/proxy_ca.key" -CAcreateserial \
    -days 2 -extfile "$d/ext" -out "$d/gw_etcd.crt" 2>/dev/null || return 1
  cat "$d/proxy_ca.crt" "$d/etcd.crt" > "$d/trust.crt"
}

# start_etcd_members NAME N PKI: an etcd cluster of N members on loopback
# (NAME1..NAMEN, each in $TESTDIR/NAMEi like start_kv's), with the seed's
# flags: client TLS with --client-cert-auth (trusting PKI/trust.crt, see
# make_etcd_proxy_pki), peer TLS with --peer-client-cert-auth. Waits until
# every member answers, stops them on exit; sets ETCD_URLS (a JSON list).
start_etcd_members () {
  local name=$1 n=$2 pki=$3 i cluster="" dir
  local -a cport pport
  requires etcd openssl
  for ((i = 1; i <= n; i++)); do
    cport[i]=$(free_port); pport[i]=$(free_port)
    cluster="$cluster${cluster:+,}$name$i=https://127.0.0.1:${pport[i]}"
  done
  ETCD_URLS=""
  for ((i = 1; i <= n; i++)); do
    dir=$TESTDIR/$name$i
    mkdir -p "$dir"
    echo "etcd --name $name$i --data-dir $dir/data --listen-client-urls https://127.0.0.1:${cport[i]}" \
         "--advertise-client-urls https://127.0.0.1:${cport[i]} --listen-peer-urls https://127.0.0.1:${pport[i]}" \
         "--initial-advertise-peer-urls https://127.0.0.1:${pport[i]} --initial-cluster $cluster" \
         "--initial-cluster-token $name --initial-cluster-state new" \
         "--client-cert-auth --cert-file $pki/etcd.crt --key-file $pki/etcd.key --trusted-ca-file $pki/trust.crt" \
         "--peer-client-cert-auth --peer-cert-file $pki/etcd.crt --peer-key-file $pki/etcd.key" \
         "--peer-trusted-ca-file $pki/etcd.crt --logger zap --log-level error" > "$dir/cmd"
    echo "https://127.0.0.1:${cport[i]}" > "$dir/url"
    echo "--cacert $pki/etcd.crt --cert $pki/gw_etcd.crt --key $pki/gw_etcd.key" > "$dir/curlopts"
    ETCD_URLS="$ETCD_URLS${ETCD_URLS:+, }\"https://127.0.0.1:${cport[i]}\""
    cleanup_fn "kv_stop $name$i"
    # A member of a new cluster is healthy only once a quorum runs: start
    # them all, then wait.
    sh -c "exec $(cat "$dir/cmd")" >>"$dir/log" 2>&1 &
    echo $! > "$dir/pid"
  done
  ETCD_URLS="[$ETCD_URLS]"
  for ((i = 1; i <= n; i++)); do
    dir=$TESTDIR/$name$i
    # shellcheck disable=SC2046
    WAIT_SECS=60 wait_for curl -sf $(cat "$dir/curlopts") "$(cat "$dir/url")/health" ||
      { cat "$dir/log" >&2; fail "etcd member $name$i did not start"; }
  done
}
