# Starting a KV server for the tests: real etcd, or tromcho-gateway's
# embedded KV when TROMCHO_KV=gateway (and gateway/tromcho-gateway exists).
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
    echo "tromcho-gateway --gateway_address 127.0.0.1:$port --gateway_data $dir/data" > "$dir/cmd"
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
  WAIT_SECS=30 wait_for curl -sf "$(cat "$dir/url")/health" || { cat "$dir/log" >&2; fail "KV server $1 did not start"; }
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
