#!/usr/bin/env bash
# kv-restart.sh DIR: restart the KV server that kv-functions.sh started in
# DIR (for C tests that need a restart in the middle: $KV_RESTART).
dir=$1
pid=$(cat "$dir/pid")
kill "$pid" 2>/dev/null
# The server is not our child: wait until it is gone or a zombie.
for i in $(seq 100); do
  [ -d "/proc/$pid" ] || break
  grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && break
  sleep 0.1
done
sh -c "exec $(cat "$dir/cmd")" >>"$dir/log" 2>&1 &
echo $! > "$dir/pid"
for i in $(seq 300); do
  curl -sf "$(cat "$dir/url")/health" >/dev/null 2>&1 && exit 0
  sleep 0.1
done
echo "kv-restart: server in $dir did not come back" >&2
exit 1
