# A small cluster for the client tests: a KV (kv-functions.sh), a pool and
# OSDs on files, and /pg/config written here (a fixed placement, as the
# monitor would write it). Source after functions.sh and kv-functions.sh.

# kv_put KEY VALUE: write one key under the prefix (etcd v3 JSON API).
kv_put () {
  local k v
  k=$(printf '%s' "/tromcho$1" | base64 -w0)
  v=$(printf '%s' "$2" | base64 -w0)
  # shellcheck disable=SC2086
  curl -sf ${KV_CURL_OPTS:-} -X POST "$KV_URL/v3/kv/put" -d "{\"key\":\"$k\",\"value\":\"$v\"}" >/dev/null
}
# kv_range KEY EXPR: print EXPR (python, of x: one key-value of the
# answer) for the key under the prefix.
kv_range () {
  local k
  k=$(printf '%s' "/tromcho$1" | base64 -w0)
  # shellcheck disable=SC2086
  curl -sf ${KV_CURL_OPTS:-} -X POST "$KV_URL/v3/kv/range" -d "{\"key\":\"$k\"}" |
    python3 -c "import sys, json, base64; r = json.load(sys.stdin); [print($2) for x in r.get('kvs', [])]"
}
# kv_get KEY: print one value.
kv_get () { kv_range "$1" 'base64.b64decode(x["value"]).decode()'; }
# kv_lease KEY: the lease the key is held with (decimal; empty if none).
kv_lease () { kv_range "$1" 'x.get("lease", "")'; }

# The config file every tool of the test uses.
write_conf () {
  CONF=$TESTDIR/tromcho.conf
  cat > "$CONF" <<JSON
{"etcd_address": "$KV_URL", "log_level": "${LOG_LEVEL:-warn}", "client_op_timeout": ${OP_TIMEOUT:-60} ${EXTRA_CONF:-}}
JSON
  export TROMCHO_CONFIG=$CONF
}

# make_pool ID PG_COUNT PG_SIZE PG_MINSIZE [BLOCK_SIZE]
make_pool () {
  kv_put /config/pools "{\"$1\": {\"name\": \"pool$1\", \"pg_count\": $2, \"pg_size\": $3, \"pg_minsize\": $4, \"block_size\": ${5:-131072}}}"
}

# start_osd N: format a 256 MiB store and run OSD N on a free port
# (OSD_OPTS: more options for it).
start_osd () {
  local n=$1 dir=$TESTDIR/osd$1
  mkdir -p "$dir"
  [ -f "$dir/data" ] || tromcho osd-create --data "$dir/data" --osd_num "$n" --size ${OSD_SIZE:-256M} >"$dir/log" 2>&1 ||
    { cat "$dir/log"; fail "osd-create $n"; }
  # shellcheck disable=SC2086
  tromcho-osd --osd_num "$n" --osd_data "$dir/data" ${OSD_OPTS:-} >>"$dir/log" 2>&1 &
  echo $! > "$dir/pid"
  cleanup_fn "stop_osd $n"
  wait_for osd_registered "$n" || { cat "$dir/log"; fail "OSD $n did not register"; }
}
osd_registered () { [ -n "$(kv_get "/osd/state/$1")" ]; }
stop_osd () {
  local dir=$TESTDIR/osd$1
  [ -f "$dir/pid" ] || return 0
  if [ "${2:-}" = -9 ]; then kill -9 "$(cat "$dir/pid")" 2>/dev/null || true; else stop_pid "$(cat "$dir/pid")"; fi
  wait "$(cat "$dir/pid")" 2>/dev/null || true
  rm -f "$dir/pid"
}

# set_pgs POOL PG_COUNT "OSD OSD ..." [REPLICAS]: PG i gets REPLICAS (default:
# all) of the OSDs rotated by i, the first being the primary.
set_pgs () {
  local pool=$1 count=$2 osds=($3) items="" i j set
  local size=${4:-${#osds[@]}}
  for ((i = 0; i < count; i++)); do
    set=""
    for ((j = 0; j < size; j++)); do
      set="$set${set:+, }${osds[$(( (i + j) % ${#osds[@]} ))]}"
    done
    items="$items${items:+, }\"$i\": {\"osd_set\": [$set], \"primary\": ${osds[$(( i % ${#osds[@]} ))]}}"
  done
  kv_put /pg/config "{\"items\": {\"$pool\": {$items}}}"
}

# start_rep3: pool 1 of 8 PGs, 3 replicas (pg_minsize 2) on OSDs 1, 2 and 3,
# started; PG i led by OSD i % 3 + 1.
start_rep3 () {
  make_pool 1 8 3 2
  local n
  for n in 1 2 3; do start_osd $n; done
  set_pgs 1 8 "1 2 3"
}

# feed_paused MIB: $TESTDIR/src to stdout, its first MIB MiB at once, the
# rest once $TESTDIR/go exists ($TESTDIR/paused says the first part went),
# so a copy reading it is surely in the middle when the test acts.
feed_paused () {
  rm -f "$TESTDIR/go" "$TESTDIR/paused"
  head -c $(($1 << 20)) "$TESTDIR/src"
  touch "$TESTDIR/paused"
  while [ ! -e "$TESTDIR/go" ]; do sleep 0.05; done
  tail -c +$((($1 << 20) + 1)) "$TESTDIR/src"
}

# start_one_pg_rep3: the KV, the config (60 s operation timeout), pool 1 of
# one PG, 3 replicas (pg_minsize 2) on OSDs 1, 2 and 3, led by osd 1; the
# encrypted 16 MiB image img; $TESTDIR/w, 1 MiB of random bytes to write
# (the unsynced-write tests). Needs kv-functions.sh.
start_one_pg_rep3 () {
  start_kv
  OP_TIMEOUT=60 write_conf
  make_pool 1 1 3 2
  local n
  for n in 1 2 3; do start_osd $n; done
  set_pgs 1 1 "1 2 3"
  tromcho create img -s 16M --enc_key auto >/dev/null || fail "create img"
  head -c $((1 << 20)) /dev/urandom > "$TESTDIR/w"
}
