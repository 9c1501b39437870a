#!/usr/bin/env bash
# An OSD across a restart of its KV that lasts longer than its lease's TTL
# (found by the gateway soak: I/O stalled 20-100 s per gateway kill).
# While the KV is down the OSD stops serving (its lease may have run out),
# but it keeps renewing the same lease: the restarted KV restores every
# lease with a whole TTL, so the first renewal holds it again and I/O goes
# on at once. The OSD used to give the lease up after one TTL and register
# with a new one; with use_perms the gateway refuses that while the old
# lease (restored, renewed by nobody) still holds /osd/state/N ("another
# lease holds this OSD number"): a whole TTL more without I/O.
# A lease the KV says is gone (revoked here) still makes the OSD register
# again with a new one. Run on tromcho-gateway's KV in the secure setup
# (perms-functions.sh), on its plain KV and on etcd.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/perms-functions.sh"
requires tromcho tromcho-osd tromcho-gateway etcd curl python3 cmp
TTL=6

# io TAG: write 1 MiB to the image and read it back through a new client.
io () {
  head -c $((1 << 20)) /dev/urandom > "$TESTDIR/in.$1"
  tromcho dd if="$TESTDIR/in.$1" oimg=img bs=1M 2>"$TESTDIR/dd.err" &&
    tromcho dd iimg=img of="$TESTDIR/out.$1" bs=1M count=1 2>>"$TESTDIR/dd.err" &&
    cmp -s "$TESTDIR/in.$1" "$TESTDIR/out.$1"
}

for kind in gateway etcd secure; do
  echo "== $kind"
  rm -rf "$TESTDIR/kv" "$TESTDIR/gw" "$TESTDIR/pki" "$TESTDIR/osd1"
  unset TROMCHO_CONFIG
  mkdir -p "$TESTDIR/osd1"
  if [ "$kind" = secure ]; then
    start_secure_gateway   # with its monitor: only a monitor writes /pg/config there
    for c in osd admin; do
      python3 - "$P/$c.conf" "$TESTDIR/$c.conf" "$KV_URL" "$TTL" <<'PY' || fail "config $c"
import json, sys
c = json.load(open(sys.argv[1]))
c.update({"etcd_address": [sys.argv[3]], "use_perms": True, "log_level": "info",
          "etcd_keepalive_timeout": int(sys.argv[4]), "client_op_timeout": 60})
json.dump(c, open(sys.argv[2], "w"))
PY
    done
    export TROMCHO_CONFIG=$TESTDIR/admin.conf
    kv_down () { secure_gateway_kill; }
    kv_up () { secure_gateway_spawn; }
    osd_conf=(--config "$TESTDIR/osd.conf")
  else
    export TROMCHO_KV=$kind
    KV_CURL_OPTS=
    start_kv
    OP_TIMEOUT=60 EXTRA_CONF=", \"etcd_keepalive_timeout\": $TTL, \"log_level\": \"info\"" write_conf
    kv_down () { kv_stop kv -9; }
    kv_up () { kv_spawn kv; }
    osd_conf=()
  fi
  tromcho osd-create --data "$TESTDIR/osd1/data" --osd_num 1 --size 256M >/dev/null || fail "$kind: osd-create"
  tromcho-osd "${osd_conf[@]}" --osd_num 1 --osd_data "$TESTDIR/osd1/data" >>"$TESTDIR/osd1/log" 2>&1 &
  echo $! > "$TESTDIR/osd1/pid"
  cleanup_fn "stop_osd 1"
  wait_for osd_registered 1 || { cat "$TESTDIR/osd1/log"; fail "$kind: OSD 1 did not register"; }
  if [ "$kind" = secure ]; then
    tromcho pool-create p1 --pg-size 1 --pg-minsize 1 --pg-count 1 --failure-domain osd >/dev/null || fail "pool-create"
  else
    make_pool 1 1 1 1
    set_pgs 1 1 "1"
  fi
  tromcho create img -s 16M --enc_key auto >/dev/null || fail "$kind: create img"
  WAIT_SECS=30 wait_for io before || fail "$kind: I/O before the restart: $(cat "$TESTDIR/dd.err")"
  lease=$(kv_lease /osd/state/1)
  [ -n "$lease" ] || fail "$kind: /osd/state/1 holds no lease"

  # Down for longer than the TTL: the OSD's hold on its lease runs out.
  kv_down
  sleep $((TTL + 3))
  grep -q "has not renewed the lease" "$TESTDIR/osd1/log" || fail "$kind: the OSD did not fence itself while the KV was down"
  kv_up
  t0=$(date +%s.%N)
  WAIT_SECS=30 wait_for grep -q "holding a lease again" "$TESTDIR/osd1/log" ||
    { tail -20 "$TESTDIR/osd1/log"; fail "$kind: the OSD never served again after the KV came back"; }
  took=$(python3 -c "import time; print('%.1f' % (time.time() - $t0))")
  echo "$kind: the OSD served again $took s after the KV came back (TTL $TTL s)"
  [ "$(kv_lease /osd/state/1)" = "$lease" ] || fail "$kind: the OSD registered with a new lease ($(kv_lease /osd/state/1), was $lease)"
  ! grep -q "registering again" "$TESTDIR/osd1/log" ||
    fail "$kind: the OSD gave its lease up: $(grep -m1 'registering again' "$TESTDIR/osd1/log")"
  python3 -c "import sys; sys.exit(0 if $took < $TTL - 1 else 1)" ||
    fail "$kind: $took s without I/O after the KV came back, a TTL ($TTL s) or more"
  io after || fail "$kind: I/O after the restart: $(cat "$TESTDIR/dd.err")"

  if [ "$kind" != secure ]; then   # (with use_perms only the OSD itself may revoke its lease)
    # A lease the KV says is gone: the OSD registers again with a new one.
    curl -sf -X POST "$KV_URL/v3/lease/revoke" -d "{\"ID\": \"$lease\"}" >/dev/null || fail "$kind: revoking lease $lease"
    wait_for grep -q "lost the lease" "$TESTDIR/osd1/log" || fail "$kind: the OSD did not see its revoked lease go"
    new=
    for _ in $(seq 100); do new=$(kv_lease /osd/state/1); [ -n "$new" ] && [ "$new" != "$lease" ] && break; sleep 0.2; done
    [ -n "$new" ] && [ "$new" != "$lease" ] || fail "$kind: no new registration after the lease was revoked"
    WAIT_SECS=30 wait_for io revoked || fail "$kind: I/O after registering again: $(cat "$TESTDIR/dd.err")"
  fi
  stop_osd 1
  kv_down
done
echo ok
