#!/usr/bin/env bash
# Usage and I/O figures (issue 15): the OSDs report per inode the bytes
# they hold and the client operations they served in /osd/stats/<n>; the
# gateway's monitor sums them into /inode/stats/<pool>/<inode>,
# /pool/stats/<pool> and the "usage" of /stats; `tromcho status` and
# `tromcho info` show them. Checked against what was written: 3 MiB into
# an image of a pool of 2 copies is 6 MiB raw (to the 4 KiB sector) and
# 3 MiB usable; write counts and bytes equal the requests the OSDs were
# sent (tromcho dd bs=256K writes 128 KiB objects: 2 requests a block);
# the figures rise with more writes and reads; a removed image's stats go.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
TROMCHO_KV=gateway
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
requires tromcho tromcho-gateway tromcho-osd curl python3

KV_MONITOR=true
start_kv
sed -i "s|\$| --etcd_address $KV_URL --etcd_mon_ttl 2|" "$TESTDIR/kv/cmd"
kv_restart kv
T () { tromcho --etcd_address "$KV_URL" "$@"; }
T pool-create p1 --pg-size 2 --pg-minsize 1 --pg-count 4 --failure-domain osd >/dev/null || fail "pool-create"
OSD_OPTS="--osd_stats_interval 1"
for n in 1 2; do create_osd $n; start_osd $n; done
pools_active () { T pool-ls --json | python3 -c '
import json, sys
p = json.load(sys.stdin)
p = p.get("pools", p) if isinstance(p, dict) else p
assert len(p) == 1 and all(x.get("pgs_active") == x.get("pg_count") for x in p), p'; }
WAIT_SECS=60 wait_for pools_active || { T pool-ls; fail "PGs not active"; }

T create img -s 16M --pool p1 --enc_key none >/dev/null || fail "create img"
ID=$(T info img --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["inode"])')
head -c 3M /dev/urandom > "$TESTDIR/data"
T dd if="$TESTDIR/data" oimg=img bs=256K >/dev/null || fail "dd 3M"

# stat_is KEY PY: the value of KEY as s satisfies PY
stat_is () { kv_get "$1" | python3 -c "import json,sys; s=json.load(sys.stdin); $2" 2>/dev/null; }
MiB=1048576
WAIT_SECS=30 wait_for stat_is /inode/stats/1/$ID "assert s['raw_used'] == 6*$MiB and s['write']['count'] == 24, s" ||
  { kv_get /inode/stats/1/$ID; kv_get /osd/stats/1; fail "/inode/stats/1/$ID is not 6 MiB raw and 24 writes"; }
kv_get /inode/stats/1/$ID | tee "$TESTDIR/is1"
stat_is /inode/stats/1/$ID "assert s['used'] == 3*$MiB and s['write']['bytes'] == 3*$MiB and s['read']['count'] == 0, s" ||
  fail "usable bytes or write bytes are not what was written"
WAIT_SECS=20 wait_for stat_is /pool/stats/1 "assert s['raw_used'] == 6*$MiB and s['used'] == 3*$MiB and s['images'] == 1 and s['raw_total'] > s['raw_free'] > 0, s" ||
  { kv_get /pool/stats/1; fail "/pool/stats/1 does not sum the image"; }
kv_get /pool/stats/1
WAIT_SECS=20 wait_for stat_is /stats "u = s['usage']; assert u['write_bytes'] == 3*$MiB and u['raw_used'] >= 6*$MiB and s['osd_up'] == 2, s" ||
  { kv_get /stats; fail "/stats has no usage summed from the OSDs"; }

# More writes (1 MiB more data, 2 MiB overwritten) and reads: the figures rise.
head -c 6M /dev/urandom > "$TESTDIR/data2"
T dd if="$TESTDIR/data2" oimg=img bs=256K count=12 >/dev/null || fail "dd 3M more"   # 4 MiB of the image now
T dd iimg=img of=/dev/null bs=256K count=8 >/dev/null || fail "dd read 2M"
WAIT_SECS=30 wait_for stat_is /inode/stats/1/$ID "assert s['raw_used'] == 6*$MiB and s['write']['count'] == 48 and s['read']['bytes'] == 2*$MiB, s" ||
  { kv_get /inode/stats/1/$ID; fail "the figures did not follow 3 MiB overwritten and 2 MiB read"; }
T dd if="$TESTDIR/data2" oimg=img bs=256K count=4 seek=12 >/dev/null || fail "dd 1M at 3M"
WAIT_SECS=30 wait_for stat_is /inode/stats/1/$ID "assert s['raw_used'] == 8*$MiB and s['write']['count'] == 56, s" ||
  { kv_get /inode/stats/1/$ID; fail "raw_used did not rise by 2 MiB with 1 MiB more data"; }

T status | tee "$TESTDIR/status"
grep -Eq "^pool +p1: 4.0 MiB used \(8.0 MiB raw\).*1 images" "$TESTDIR/status" || fail "status does not show the pool's usage"
T status --json | python3 -c 'import json,sys; p=json.load(sys.stdin)["pools"][0]; assert p["stats"]["used"] == 4 << 20, p' ||
  fail "status --json has no pool stats"
T info img | tee "$TESTDIR/info"
grep -Eq "^io: +16 reads, 2 MiB" "$TESTDIR/info" && grep -Eq "^ +56 writes, 7 MiB" "$TESTDIR/info" &&
  grep -q "^raw used: *8 MiB" "$TESTDIR/info" ||
  fail "info does not show the image's I/O"

# The image removed: its stats go.
T rm img >/dev/null || fail "rm img"
gone () { [ -z "$(kv_get /inode/stats/1/$ID)" ]; }
WAIT_SECS=30 wait_for gone || { kv_get /inode/stats/1/$ID; fail "the removed image's /inode/stats stayed"; }
WAIT_SECS=20 wait_for stat_is /pool/stats/1 "assert s['raw_used'] == 0 and s['images'] == 0, s" ||
  { kv_get /pool/stats/1; fail "/pool/stats/1 still counts the removed image"; }
osd_finish
kv_stop kv   # the monitor's leaks show at its exit
grep -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$TESTDIR/kv/log" && fail "a sanitizer report in the gateway log"
echo "test-usage-stats: ok"
