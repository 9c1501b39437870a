# Helpers for the OSD tests: a KV (kv-functions.sh), a pool, N OSDs on
# files, and the PG map. Source after functions.sh and kv-functions.sh.
#
# The monitor that places PGs is not part of these tests: they write
# /pg/config themselves (set_pgs), which also lets them move a primary at
# a chosen moment, the way the monitor would after a failure.

OSD_CLIENT=${OSD_CLIENT:-$top_builddir/tests/osd-client}
PREFIX=/tromcho

# kv_put KEY VALUE (key without the prefix)
kv_put () {
  local k v
  k=$(printf '%s' "$PREFIX$1" | base64 -w0)
  v=$(printf '%s' "$2" | base64 -w0)
  curl -sf "$KV_URL/v3/kv/put" -d "{\"key\":\"$k\",\"value\":\"$v\"}" >/dev/null || fail "kv_put $1"
}

# kv_get KEY: print the value (empty if absent)
kv_get () {
  local k
  k=$(printf '%s' "$PREFIX$1" | base64 -w0)
  curl -sf "$KV_URL/v3/kv/range" -d "{\"key\":\"$k\"}" |
    python3 -c 'import sys,json,base64; r=json.load(sys.stdin); print(base64.b64decode(r["kvs"][0]["value"]).decode() if r.get("kvs") else "")'
}

# make_pool ID PG_SIZE PG_MINSIZE PG_COUNT
make_pool () {
  kv_put /config/pools "{\"$1\": {\"name\": \"pool$1\", \"pg_size\": $2, \"pg_minsize\": $3, \"pg_count\": $4, \"block_size\": 131072}}"
}

# one_pg_pool SIZE MINSIZE PRIMARY SET: pool 1 with one PG (primary
# PRIMARY, osd_set SET, e.g. "1,2"), the record of an image "img" on inode
# 1/5, and I = that inode's number (the PG tests' usual start).
one_pg_pool () {
  make_pool 1 "$1" "$2" 1
  set_pgs 1 1 "$3" "$4"
  kv_put /config/inode/1/5 '{"name": "img", "size": 1048576}'
  I=$(( (1 << 48) | 5 ))
}

# set_pgs POOL PG_COUNT PRIMARY_LIST SET...: e.g. set_pgs 1 4 "1 2 3 1" "1,2,3"
# (PG g gets primary = the g-th of PRIMARY_LIST, osd_set = SET)
set_pgs () {
  local pool=$1 count=$2 prims=($3) set=$4 g items=""
  for (( g=0; g<count; g++ )); do
    [ -n "$items" ] && items="$items, "
    items="$items\"$g\": {\"osd_set\": [$set], \"primary\": ${prims[$((g % ${#prims[@]}))]}}"
  done
  kv_put /pg/config "{\"items\": {\"$pool\": {$items}}}"
}

OSD_OPTS=${OSD_OPTS:-}
# create_osd N: format $TESTDIR/osdN.data through osd-create (records it in the KV)
create_osd () {
  tromcho osd-create --data "$TESTDIR/osd$1.data" --osd_num "$1" --size 256M \
    --etcd_address "$KV_URL" >/dev/null || fail "osd-create $1"
}

# start_osd N: run OSD N in the background (log $TESTDIR/osdN.log), wait
# until it registered.
start_osd () {
  tromcho-osd --osd_num "$1" --etcd_address "$KV_URL" --etcd_keepalive_timeout 3 \
    --log_level "${OSD_LOG_LEVEL:-info}" $OSD_OPTS >>"$TESTDIR/osd$1.log" 2>&1 &
  echo $! > "$TESTDIR/osd$1.pid"
  cleanup_fn "stop_pid $! 2>/dev/null"
  WAIT_SECS=20 wait_for osd_registered "$1" || { cat "$TESTDIR/osd$1.log" >&2; fail "osd $1 did not start"; }
}

osd_registered () {
  [ -n "$(kv_get /osd/state/$1)" ]
}

# kill_osd N [-9]
kill_osd () {
  local pid
  pid=$(cat "$TESTDIR/osd$1.pid")
  if [ "${2:-}" = -9 ]; then kill -9 "$pid"; else stop_pid "$pid"; fi
  wait "$pid" 2>/dev/null || true
}

# osd_port N: the port OSD N registered
osd_port () {
  kv_get /osd/state/$1 | python3 -c 'import sys,json; print(json.load(sys.stdin)["port"])'
}

# freeze_thread TID SECONDS NAME: stop that one thread (not its process)
# for SECONDS (tests/freeze-thread.py, ptrace) in the background, once it
# is stopped; FREEZE is its PID, $TESTDIR/NAME.out says "frozen", then
# "thawed". thawed NAME: whether it ran again.
freeze_thread () {
  python3 "$top_srcdir/tests/freeze-thread.py" "$1" "$2" >"$TESTDIR/$3.out" 2>&1 &
  FREEZE=$!
  cleanup_fn "stop_pid $FREEZE 2>/dev/null"
  WAIT_SECS=5 wait_for grep -q frozen "$TESTDIR/$3.out" || fail "could not freeze thread $1: $(cat "$TESTDIR/$3.out")"
}
thawed () { grep -q thawed "$TESTDIR/$1.out"; }
# thaw_wait NAME: wait for the freeze to end
thaw_wait () { wait "$FREEZE" || fail "freeze-thread.py failed: $(cat "$TESTDIR/$1.out")"; }

osd_client () {
  "$OSD_CLIENT" --etcd_address "$KV_URL" "$@"
}

# osd_finish: stop every OSD cleanly and fail on a sanitizer report or a
# crash in any OSD's log (the sanitizer build of the suite relies on it).
osd_finish () {
  local f pid
  for f in "$TESTDIR"/osd*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      stop_pid "$pid"
      wait "$pid" 2>/dev/null || true
    fi
  done
  if grep -lE "ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|Segmentation fault" "$TESTDIR"/osd*.log 2>/dev/null; then
    grep -hE -A12 "ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:" "$TESTDIR"/osd*.log | head -60 >&2
    fail "a sanitizer report or a crash in an OSD log"
  fi
}
