# Shared by the benchmark scripts (bench/nbd.sh, bench/fuse.sh): a work
# folder removed on exit with every process started (pids) stopped and every
# FUSE mount (mounts) unmounted, a local cluster (gateway + 3 OSDs on sparse
# files, pool rep3) and nbdkit tromcho on a Unix socket.
# Source it after setting top (the built tree). Sets work, CONF, URI.
me=$(basename "$0")
work=$(mktemp -d /var/tmp/tromcho-bench.XXXXXX)
pids=() mounts=()
cleanup () {
  local i
  for (( i=${#mounts[@]}-1; i>=0; i-- )); do fusermount3 -u "${mounts[$i]}" 2>/dev/null || true; done
  for (( i=${#pids[@]}-1; i>=0; i-- )); do kill "${pids[$i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 1" INT TERM
export PATH=$top/cli:$top/osd:$top/gateway:$top/fuse:$PATH
plugin=${PLUGIN_SO:-$top/nbdkit-plugin/.libs/nbdkit-tromcho-plugin.so}
# bench_stamp WHAT [MORE]: the two header lines every bench prints: the
# time, the cores, WHAT was run and the load; the commit (and MORE, e.g.
# which builds ran)
bench_stamp () {
  echo "# $(date -u +%FT%TZ), $(nproc) cores, $1, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)${2:+, $2}"
}
port () { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_until () { local i; for i in $(seq 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

# cluster NAME CERTS(0|1) MODE: gateway + 3 OSDs; sets CONF
cluster () {
  local d=$work/$1 kv
  mkdir -p "$d"
  kv=$(port)
  if [ "$2" = 1 ]; then tromcho make-certs --dir "$d/pki" >/dev/null; cp "$d/pki/tromcho.conf" "$d/base.conf"
  else echo '{}' > "$d/base.conf"; fi
  python3 - "$d" "$kv" "$3" <<'PY'
import json, os, sys
d, kv, mode = sys.argv[1:]
c = json.load(open(d + "/base.conf"))
# With certificates (make-certs' config names antietcd_cert) the gateway serves HTTPS.
scheme = "https" if c.get("antietcd_cert") else "http"
c.update({"etcd_address": [scheme + "://127.0.0.1:" + kv], "gateway_address": "127.0.0.1:" + kv,
          "gateway_data": d + "/gw", "proto_checksums": mode, "log_level": "warn"})
# BENCH_CONF='{"option": value}' (environment): more options for every daemon and client
c.update(json.loads(os.environ.get("BENCH_CONF") or "{}"))
json.dump(c, open(d + "/tromcho.conf", "w"))
PY
  CONF=$d/tromcho.conf
  TROMCHO_CONFIG=$CONF tromcho-gateway >"$d/gw.log" 2>&1 &
  pids+=($!)
  if [ "$2" = 1 ]; then
    wait_until curl -sf --cacert "$d/pki/antietcd.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key" \
      "https://127.0.0.1:$kv/health" || { echo "$me: the gateway of $1 did not answer: $(tail -3 "$d/gw.log")" >&2; exit 1; }
  else
    wait_until curl -sf "http://127.0.0.1:$kv/health" || { echo "$me: the gateway of $1 did not answer" >&2; exit 1; }
  fi
  local n
  for n in 1 2 3; do
    TROMCHO_CONFIG=$CONF tromcho osd-create --data "$d/osd$n" --osd_num $n --size 8G --block-size "${BENCH_BLOCK:-128k}" >/dev/null
    TROMCHO_CONFIG=$CONF "${OSD_BIN:-tromcho-osd}" --osd_num $n --osd_data "$d/osd$n" >"$d/osd$n.log" 2>&1 &
    pids+=($!)
  done
  # The pool is placed once all three OSDs are up: placed with two, it
  # would keep its primaries there (the monitor keeps a PG's primary), and
  # the third OSD would lead no PG, its share of the reads served by the
  # other two.
  wait_until sh -c "TROMCHO_CONFIG=$CONF tromcho status --json | grep -q '\"osds_up\": *3'" \
    || { echo "$me: the OSDs of $1 did not come up: $(tail -3 "$d"/osd*.log)" >&2; exit 1; }
  TROMCHO_CONFIG=$CONF tromcho pool-create rep3 --pg-size 3 --pg-minsize 2 --pg-count 32 --failure-domain osd \
    --block-size "${BENCH_BLOCK:-128k}" >/dev/null
  wait_until sh -c "TROMCHO_CONFIG=$CONF tromcho pool-ls --json | grep -q '\"pgs_active\": *32'"
}

# pid_file FILE: the PID in FILE once it is there (nbdkit's child writes
# its -P file after the parent returned; up to 10 s)
pid_file () {
  local i
  for i in $(seq 200); do [ -s "$1" ] && break; sleep 0.05; done
  cat "$1"
}

# serve NAME CONF IMAGE [option=value...]: nbdkit tromcho on a Unix socket;
# NBDKIT_OPTS (environment): more nbdkit options, e.g. "--threads 4"
serve () {
  local name=$1 conf=$2 img=$3; shift 3
  # shellcheck disable=SC2086 # NBDKIT_OPTS is a list of words
  nbdkit -U "$work/$name.sock" -P "$work/$name.pid" ${NBDKIT_OPTS:-} "$plugin" config="$conf" image="$img" "$@"
  pids+=($(pid_file "$work/$name.pid"))
  URI="nbd+unix:///?socket=$work/$name.sock"
}


# serve_case a|c: the cluster and image of case (a) plain/none or (c)
# XTS + gcm, served by nbdkit; sets name (the cluster's folder), img
# (nbdkit's pid file stem) and label, besides CONF and URI.
serve_case () {
  case $1 in
    a) cluster plain 0 none; name=plain img=a label="(a) plain, none"
       TROMCHO_CONFIG=$CONF tromcho create a -s 1G >/dev/null
       serve a "$CONF" a ;;
    c) cluster sealed 1 gcm; name=sealed img=c label="(c) xts, gcm"
       TROMCHO_CONFIG=$CONF tromcho create c -s 1G --enc_key auto >/dev/null
       serve c "$CONF" c proto_checksums=gcm ;;
    *) echo "$me: unknown case $1 (a or c)" >&2; exit 2 ;;
  esac
}

# case_cpu_ticks NAME IMG: CPU ticks (user + system, all threads) of the
# OSDs of cluster NAME (by data folder) and of nbdkit serving IMG
case_cpu_ticks () {
  local t=0 p
  for p in $(pgrep -f "osd_data $work/$1/osd[0-9]\$") $(cat "$work/$2.pid"); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$t"
}
