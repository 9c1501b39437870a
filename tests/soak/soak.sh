#!/usr/bin/env bash
# Soak tests, outside the default suite (issue 15 item 6); run them with
#   ./appliance test --soak [kill|stop|gateway|all] [--seconds N]   (default all, 600 s each)
# or directly: tests/soak/soak.sh MODE [SECONDS] (after a build).
#
# On ./appliance up (gateway, 3 supervised OSDs, pg_size 3 / pg_minsize 2,
# the encrypted image demo over NBD), for SECONDS:
# - fio writes 64 KiB blocks at random over the upper half of demo with a
#   checksum in each, verifying them as it goes (verify_backlog), and
#   reports every I/O error;
# - the lower 256 MiB hold random data written once before the chaos and
#   compared in full after it (every block, after the PGs are clean again);
# - the chaos, by MODE:
#     kill     a random OSD killed with -9 every 3-8 s while all three run
#              (the appliance restarts it, with a growing backoff)
#     stop     a random OSD stopped (SIGSTOP) for 5-20 s, then continued, every 10-25 s
#     gateway  the gateway (KV and monitor) killed with -9 every 15-30 s, restarted
#     partition  not on the appliance: the gateway (embedded KV, monitor)
#              and nbdkit in one network namespace, each of 3 OSDs in its
#              own, all on veth pairs to a bridge in a hub namespace
#              (10.231.0.0/24; nothing leaves the namespaces this script
#              made); every 20-40 s two OSDs are cut off from each other
#              (a blackhole route each way: packets vanish, TCP just waits)
#              for 15-30 s while both still reach the gateway and the
#              client, then healed; fio reaches nbdkit on a Unix socket.
#              The namespaces are deleted on every exit path.
# Prints: operations, chaos events, I/O errors (goal 0), verify failures
# (goal 0), the longest stall (fio's longest write). Exit 0 only when all
# goals hold.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: soak.sh kill|stop|gateway|partition [SECONDS]}
secs=${2:-600}
case $mode in kill|stop|gateway|partition) ;; *) echo "soak.sh: unknown mode $mode" >&2; exit 2 ;; esac
W=$(mktemp -d /var/tmp/tromcho-soak.XXXXXX)
DIR=$W/app
LOG=$W/up.log
PORT=$(python3 "$top/tests/free-port.py")
URI="nbd://127.0.0.1:$PORT/demo"
UP_PID= FIO= STOPPED= FAILED=
NS_PIDS=() NETNS=()
say () { printf 'soak %s: %s\n' "$mode" "$*"; }
cleanup () {
  [ -z "$STOPPED" ] || kill -CONT "$STOPPED" 2>/dev/null || true
  [ -z "$FIO" ] || kill "$FIO" 2>/dev/null || true
  [ -z "${CUT:-}" ] || heal $CUT
  if [ -n "$UP_PID" ]; then
    kill -TERM "$UP_PID" 2>/dev/null || true
    wait "$UP_PID" 2>/dev/null || true
  fi
  # partition: the daemons started in the namespaces, newest first, then
  # the namespaces themselves (deleting one takes its links with it)
  local i p
  for ((i = ${#NS_PIDS[@]} - 1; i >= 0; i--)); do
    p=${NS_PIDS[$i]}
    kill -TERM "$p" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  for ((i = ${#NETNS[@]} - 1; i >= 0; i--)); do ip netns del "${NETNS[$i]}" 2>/dev/null || true; done
  if [ -z "${KEEP:-}" ] && [ -z "$FAILED" ]; then rm -rf "$W"; else echo "soak: kept $W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP   # the EXIT trap then cleans up too
# On a failure the folder stays, and the daemons' last error lines are shown.
die () {
  say "FAIL: $*"
  FAILED=1
  local f
  for f in "$DIR"/logs/*.log; do
    [ -f "$f" ] && grep -iE "error|refused|fail" "$f" | tail -n 3 | sed "s|^|  $(basename "$f"): |"
  done
  exit 1
}

if [ "$mode" = partition ]; then
  # ---- the cluster in network namespaces ----
  NS=tcs$$
  NET=10.231.0
  GW_NS=$NS-gw
  nsx () { local n=$1; shift; ip netns exec "$n" "$@"; }
  # netns_add NAME: a namespace with lo up (recorded for the cleanup)
  netns_add () { ip netns add "$1" && NETNS+=("$1") && ip -n "$1" link set lo up; }
  # attach NAME IP: a veth pair from NAME (address IP/24) to the hub's bridge
  attach () {
    ip -n "$NS-hub" link add "h-$2" type veth peer name eth0 netns "$1" &&
      ip -n "$NS-hub" link set "h-$2" master br0 up &&
      ip -n "$1" addr add "$NET.$2/24" dev eth0 && ip -n "$1" link set eth0 up
  }
  netns_add "$NS-hub" && ip -n "$NS-hub" link add br0 type bridge && ip -n "$NS-hub" link set br0 up ||
    die "cannot make the hub namespace (ip netns needs root)"
  netns_add "$GW_NS" && attach "$GW_NS" 10 || die "cannot make the gateway's namespace"
  for n in 1 2 3; do netns_add "$NS-o$n" && attach "$NS-o$n" $n || die "cannot make osd $n's namespace"; done
  mkdir -p "$DIR/logs"
  KVURL=http://$NET.10:2379
  CONF=$DIR/tromcho.conf
  echo "{\"etcd_address\": \"$KVURL\", \"log_level\": \"warn\", \"client_op_timeout\": 120}" > "$CONF"
  # spawn NS LOG CMD...: run CMD in namespace NS in the background (stopped by the cleanup)
  spawn () { local n=$1 l=$2; shift 2; ip netns exec "$n" "$@" >>"$l" 2>&1 & NS_PIDS+=($!); }
  spawn "$GW_NS" "$DIR/logs/gateway.log" "$top/gateway/tromcho-gateway" --gateway_address "$NET.10:2379" \
    --gateway_data "$DIR/gateway" --gateway_monitor true --etcd_address "$KVURL" --etcd_mon_ttl 3 --log_level info
  T () { TROMCHO_CONFIG=$CONF nsx "$GW_NS" "$top/cli/tromcho" "$@"; }
  for _ in $(seq 100); do T pool-ls >/dev/null 2>&1 && break; sleep 0.1; done
  T pool-create rep3 --pg-size 3 --pg-minsize 2 --pg-count 16 --failure-domain osd >/dev/null || die "pool-create"
  for n in 1 2 3; do
    T osd-create --data "$DIR/osd$n.data" --osd_num $n --size 4G >/dev/null || die "osd-create $n"
    spawn "$NS-o$n" "$DIR/logs/osd$n.log" "$top/osd/tromcho-osd" --etcd_address "$KVURL" --osd_num $n \
      --osd_data "$DIR/osd$n.data" --bind_address "$NET.$n" --etcd_keepalive_timeout 5 --log_level info
  done
  T create demo -s 1G --enc_key auto >/dev/null || die "create demo"
  SOCK=$DIR/nbd.sock
  spawn "$GW_NS" "$DIR/logs/nbdkit.log" nbdkit -f -U "$SOCK" "$top/nbdkit-plugin/.libs/nbdkit-tromcho-plugin.so" \
    config="$CONF" image=demo
  URI="nbd+unix:///?socket=$SOCK"
  for _ in $(seq 300); do nbdinfo --size "$URI" >/dev/null 2>&1 && break; sleep 0.1; done
  nbdinfo --size "$URI" >/dev/null || die "nbdkit did not start"
  status () { T status --json 2>/dev/null; }
  osd_pid () { pgrep -f "tromcho-osd .*--osd_num $1 --osd_data $DIR/" | head -1 || true; }
  CUT=
  # cut A B / heal A B: packets between OSDs A and B vanish / flow again
  cut () { ip -n "$NS-o$1" route add blackhole "$NET.$2/32" && ip -n "$NS-o$2" route add blackhole "$NET.$1/32"; }
  # reaches FROM IP PORT: a TCP connect from osd FROM's namespace to IP:PORT
  # gets an answer (accepted or refused), not a routing error
  reaches () {
    local out
    out=$(ip netns exec "$NS-o$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/$3" 2>&1) && return 0
    ! echo "$out" | grep -qiE "invalid argument|unreachable|timed out|time"
  }
  # the cut holds: A and B do not reach each other, both still reach the gateway
  cut_holds () {
    ! reaches "$1" "$NET.$2" 1 && ! reaches "$2" "$NET.$1" 1 && reaches "$1" "$NET.10" 2379 && reaches "$2" "$NET.10" 2379
  }
  heal () { ip -n "$NS-o$1" route del blackhole "$NET.$2/32" 2>/dev/null; ip -n "$NS-o$2" route del blackhole "$NET.$1/32" 2>/dev/null; true; }
else
"$top/appliance" up --dir "$DIR" --port "$PORT" >"$LOG" 2>&1 &
UP_PID=$!
for _ in $(seq 1200); do grep -q "tromcho is up" "$LOG" && break; sleep 0.1; done
grep -q "tromcho is up" "$LOG" || { cat "$LOG"; die "appliance up did not come up"; }
status () { TROMCHO_CONFIG=$DIR/admin.conf "$top/cli/tromcho" status --json 2>/dev/null; }
osd_pid () { pgrep -f "tromcho-osd .*--osd_num $1 --osd_data $DIR/" | head -1 || true; }
gw_pid () { pgrep -f "tromcho-gateway --config $DIR/gateway.conf" | head -1 || true; }
fi
all_clean () { status | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if s["pgs"] and s["pgs_clean"] == s["pgs"] and s["osds_down"] == 0 else 1)'; }
wait_clean () { local i; for i in $(seq "$1"); do all_clean && return 0; sleep 1; done; return 1; }
# all three OSD processes run (a killed one is restarted by the appliance)
all_running () { local n; for n in 1 2 3; do [ -n "$(osd_pid $n)" ] || return 1; done; }
wait_clean 120 || die "the PGs are not clean at the start"

head -c 256M /dev/urandom > "$W/base"
timeout 600 nbdcopy "$W/base" "$URI" || die "writing the base data"
size=$(nbdinfo --size "$URI")
half=$((size / 2))
# fio ends by itself after SECONDS; a hung NBD request must not hang the soak
timeout -k 10 $((secs + 300)) fio --name=soak --ioengine=nbd --uri="$URI" --rw=randwrite --bs=64k --iodepth=8 --rate=8m \
    --offset="$half" --size=256M --time_based --runtime="$secs" \
    --verify=crc32c --verify_backlog=256 --verify_fatal=1 --verify_state_save=0 \
    --output-format=json --output="$W/fio.json" >/dev/null 2>"$W/fio.err" &
FIO=$!
events=0
start=$(date +%s)
while kill -0 "$FIO" 2>/dev/null; do
  case $mode in
    kill)
      sleep $((3 + RANDOM % 6))
      all_running || continue   # one at a time: pg_minsize 2 of 3
      n=$((1 + RANDOM % 3)); p=$(osd_pid $n)
      if [ -n "$p" ] && kill -9 "$p" 2>/dev/null; then events=$((events + 1)); fi ;;
    stop)
      sleep $((10 + RANDOM % 16))
      n=$((1 + RANDOM % 3)); p=$(osd_pid $n)
      if [ -n "$p" ] && kill -STOP "$p" 2>/dev/null; then
        STOPPED=$p; events=$((events + 1))
        sleep $((5 + RANDOM % 16))
        kill -CONT "$p" 2>/dev/null || true; STOPPED=
      fi ;;
    partition)
      sleep $((20 + RANDOM % 21))
      kill -0 "$FIO" 2>/dev/null || break
      a=$((1 + RANDOM % 3)); b=$((1 + (a + RANDOM % 2) % 3))
      if cut $a $b; then
        CUT="$a $b"; events=$((events + 1))
        cut_holds $a $b || die "osd $a and osd $b are not cut off from each other, or lost the gateway"
        say "osd $a and osd $b cut off from each other (both still reach the gateway)"
        sleep $((15 + RANDOM % 16))
        heal $a $b; CUT=
        reaches $a "$NET.$b" 1 || die "osd $a does not reach osd $b after the heal"
        say "healed"
      fi ;;
    gateway)
      sleep $((15 + RANDOM % 16))
      p=$(gw_pid)
      if [ -n "$p" ] && kill -9 "$p" 2>/dev/null; then events=$((events + 1)); fi ;;
  esac
done
fio_rc=0
wait "$FIO" || fio_rc=$?
FIO=
elapsed=$(( $(date +%s) - start ))
wait_clean 300 || die "the PGs did not become clean after the chaos: $(status)"
timeout 600 nbdcopy "$URI" "$W/back" || die "reading the image back"
if cmp -s -n $((256 << 20)) "$W/back" "$W/base"; then base_ok=1; else
  base_ok=0
  python3 - "$W/base" "$W/back" <<'PY'
import sys
a = open(sys.argv[1], "rb").read()
b = open(sys.argv[2], "rb").read(len(a))
bad = [i for i in range(0, len(a), 4096) if a[i:i + 4096] != b[i:i + 4096]]
zero = sum(1 for i in bad if b[i:i + 4096] == bytes(4096))
print("base data: %d of %d sectors differ (%d read as zeros); first at %s" % (
    len(bad), len(a) // 4096, zero, ", ".join("%#x" % i for i in bad[:8])))
PY
fi
python3 - "$W/fio.json" "$W/fio.err" "$mode" "$events" "$elapsed" "$base_ok" "$fio_rc" <<'PY' || { FAILED=1; exit 1; }
import json, re, sys
path, errpath, mode, events, elapsed, base_ok, fio_rc = sys.argv[1:]
try:
    j = json.load(open(path))["jobs"][0]
except Exception as e:
    sys.exit("soak %s: FAIL: no fio result (%s): %s" % (mode, e, open(errpath).read()[-2000:]))
err = open(errpath).read()
verify_fail = len(re.findall(r"verify: bad|bad magic|crc32c: verify failed|verify type mismatch", err))
ios = j["write"]["total_ios"] + j["read"]["total_ios"]
stall = max(j["write"]["clat_ns"]["max"], j["read"]["clat_ns"]["max"]) / 1e9
ok = j["error"] == 0 and verify_fail == 0 and base_ok == "1" and fio_rc == "0"
print("soak %s: %s s, %d operations (%d writes), %s %s, I/O errors %d, verify failures %d, "
      "base data %s, longest stall %.1f s: %s" % (
          mode, elapsed, ios, j["write"]["total_ios"], events,
          {"kill": "OSD kills", "stop": "OSD stops", "gateway": "gateway kills", "partition": "OSD-to-OSD partitions"}[mode],
          j["error"], verify_fail, "intact" if base_ok == "1" else "CHANGED", stall, "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
