#!/usr/bin/env bash
# tromcho scrub and tromcho describe on demand (issue 15), in the secure
# setup (perms-functions.sh), with the scheduled scrub off
# (scrub_interval 0): a byte flipped behind the cluster's back in one
# OSD's data file is found and repaired by `scrub --wait` (bad 1,
# repaired 1; a second pass finds nothing; the image reads right); the
# same sector spoiled on both replicas is found, cannot be repaired, and
# `describe` lists the object as inconsistent, as status counts its PG; a
# user certificate gets "permission denied" for both: from the KV's rights
# table (/pg/history is admin-only) and from the OSDs (DESCRIBE is
# admin-only), each refusal logged where it was made.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/perms-functions.sh"
. "$top_srcdir/tests/osd-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"   # kv_put, kv_get with the admin's certificate
requires tromcho tromcho-osd curl python3
start_secure_gateway alice

for c in osd admin alice; do
  python3 - "$P/$c.conf" "$TESTDIR/$c.conf" "$KV_URL" <<'PY' || fail "config $c"
import json, sys
c = json.load(open(sys.argv[1]))
c.update({"etcd_address": [sys.argv[3]], "use_perms": True, "proto_checksums": "gcm", "log_level": "warn",
          "etcd_quick_timeout": 3000})
json.dump(c, open(sys.argv[2], "w"))
PY
done
as () { local id=$1; shift; tromcho --config "$TESTDIR/$id.conf" "$@"; }
kv_put /config/user/alice '{"groups": []}' || fail "admin writes users"
as admin pool-create p1 --pg-size 2 --pg-minsize 1 --pg-count 2 --failure-domain osd >/dev/null || fail "pool-create"
for n in 1 2; do
  as admin osd-create --data "$TESTDIR/osd$n.data" --osd_num $n --size 256M >/dev/null || fail "osd-create $n"
  tromcho-osd --config "$TESTDIR/osd.conf" --osd_num $n --osd_data "$TESTDIR/osd$n.data" --scrub_interval 0 \
    --osd_stats_interval 1 --log_level info >>"$TESTDIR/osd$n.log" 2>&1 &
  echo $! > "$TESTDIR/osd$n.pid"
  cleanup_fn "stop_pid $!"
done
pools_active () { as admin pool-ls --json | python3 -c '
import json, sys
p = json.load(sys.stdin)
p = p.get("pools", p) if isinstance(p, dict) else p
assert len(p) == 1 and all(x.get("pgs_active") == x.get("pg_count") for x in p), p'; }
WAIT_SECS=60 wait_for pools_active || { as admin pool-ls; cat "$TESTDIR"/osd*.log "$GW_LOG"; fail "PGs not active"; }

# An unencrypted image, so its sectors can be found in the data files:
# 4 KiB sectors each starting with its own marker.
as admin create img -s 4M --pool p1 --enc_key none >/dev/null || fail "create img"
python3 -c '
import sys
sys.stdout.buffer.write(b"".join((b"SCRUBTEST-%06d-" % i).ljust(4096, bytes([65 + i % 26])) for i in range(256)))' \
  > "$TESTDIR/pattern"
as admin dd if="$TESTDIR/pattern" oimg=img bs=256K >/dev/null || fail "dd into img"
# flip FILE SECTOR: flip one byte in the middle of the image's sector SECTOR
# in FILE: in every copy of it there (a repair writes the object anew and
# the sectors it left keep their old bytes)
flip () {
  python3 - "$1" "$2" <<'PY' || fail "sector $2 not found in $1"
import sys
path, i = sys.argv[1], int(sys.argv[2])
data = open(path, "rb").read()
marker, pos, found = b"SCRUBTEST-%06d-" % i, -1, []
while True:
    pos = data.find(marker, pos + 1)
    if pos < 0:
        break
    assert pos % 4096 == 0, pos
    found.append(pos)
assert found
with open(path, "r+b") as f:
    for pos in found:
        f.seek(pos + 2000)
        b = f.read(1)
        f.seek(pos + 2000)
        f.write(bytes([b[0] ^ 0x5A]))
print("flipped byte 2000 of image sector %d at %s in %s" % (i, found, path))
PY
}
# the stores write through the page cache; a flip must see the sectors
# on the file, which it does since both are the same file pages.
flip "$TESTDIR/osd2.data" 3

# scrub --wait: the flip is found and repaired.
as admin scrub --wait --timeout 60 --json > "$TESTDIR/scrub1.json" || { cat "$TESTDIR/scrub1.json"; fail "scrub --wait"; }
python3 - "$TESTDIR/scrub1.json" <<'PY' || fail "the first scrub did not find and repair the flipped byte"
import json, sys
s = json.load(open(sys.argv[1]))
print("scrub 1: %d PGs, %d bad, %d repaired, %d inconsistent PGs" % (s["scrubbed_pgs"], s["bad_sectors"],
      s["repaired_sectors"], s["inconsistent_pgs"]))
assert s["scrubbed_pgs"] == 2 and s["bad_sectors"] == 1 and s["repaired_sectors"] == 1 and s["inconsistent_pgs"] == 0, s
PY
grep -q "scrub asked for" "$TESTDIR/osd1.log" "$TESTDIR/osd2.log" || fail "no OSD logged the scrub it was asked for"
as admin scrub --pool p1 --wait --timeout 60 | tee "$TESTDIR/scrub2.out" || fail "second scrub --wait"
grep -q "scrubbed 2 PGs: 0 bad sectors found, 0 repaired, 0 inconsistent PGs" "$TESTDIR/scrub2.out" ||
  fail "the second scrub still finds something"
as admin dd iimg=img of="$TESTDIR/back" bs=256K count=4 >/dev/null || fail "read img back"
cmp "$TESTDIR/back" "$TESTDIR/pattern" || fail "img reads other data after the repair"
as admin describe | tee "$TESTDIR/describe1.out" || fail "describe"
grep -q "^0 unclean objects" "$TESTDIR/describe1.out" || fail "describe lists objects of a clean cluster"

# The same sector spoiled on both copies: found, not repairable, listed.
flip "$TESTDIR/osd1.data" 5
flip "$TESTDIR/osd2.data" 5
as admin scrub --pool p1 --pg 0 --wait --timeout 60 --json > "$TESTDIR/scrub3.json" || true
as admin scrub --pool p1 --pg 1 --wait --timeout 60 --json > "$TESTDIR/scrub4.json" || true
python3 - "$TESTDIR/scrub3.json" "$TESTDIR/scrub4.json" <<'PY' || fail "the scrub did not report the inconsistent PG"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for s in (a, b):
    assert s["scrubbed_pgs"] == 1, s
bad = a["bad_sectors"] + b["bad_sectors"]
pgs = a["inconsistent_pgs"] + b["inconsistent_pgs"]
print("scrub 3: %d bad sectors, %d repaired, %d inconsistent PGs" % (bad, a["repaired_sectors"] + b["repaired_sectors"], pgs))
assert bad >= 1 and pgs == 1 and a["inconsistent_objects"] + b["inconsistent_objects"] == 1, (a, b)
PY
as admin describe --json > "$TESTDIR/describe2.json" || fail "describe --json"
INODE=$(as admin info img --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["inode"])') || fail "info img"
python3 - "$TESTDIR/describe2.json" "$INODE" <<'PY' || { cat "$TESTDIR/describe2.json"; fail "describe does not list the inconsistent object"; }
import json, sys
d, inode = json.load(open(sys.argv[1])), int(sys.argv[2])
objs = d["objects"]
assert len(objs) == 1 and d["unanswered_osds"] == 0, objs
o = objs[0]
assert o["inode"] & ((1 << 48) - 1) == inode and o["offset"] == 0 and "inconsistent" in o["state"] and o["pool"] == 1, o
assert sorted(o["osd_set"]) == [1, 2], o
assert len(d["osds"]) == 2 and all("pgs" in x for x in d["osds"]), d["osds"]
print("describe: object %#x offset %d: %s" % (o["inode"], o["offset"], ",".join(o["state"])))
PY
as admin describe --object-state degraded | grep -q "^0 unclean objects" || fail "--object-state degraded lists the inconsistent object"
as admin describe --object-state inconsistent | tee "$TESTDIR/describe3.out" | grep -q "^1 unclean objects" ||
  { cat "$TESTDIR/describe3.out"; fail "--object-state inconsistent does not list it"; }
as admin status --json | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["scrub"]["pgs_inconsistent"] == 1, s["scrub"]' ||
  fail "status does not count the inconsistent PG"
as admin describe --object-state lost >/dev/null 2>&1 && fail "describe takes an unknown state"

# A user's certificate: refused by the KV (scrub) and by the OSDs (describe).
expect_refused () {
  local what=$1; shift
  if "$@" >"$TESTDIR/refused.out" 2>&1; then cat "$TESTDIR/refused.out"; fail "alice: $what was allowed"; fi
  cat "$TESTDIR/refused.out"
  grep -qi "permission denied" "$TESTDIR/refused.out" || fail "alice: $what refused, but not with 'permission denied'"
}
expect_refused "scrub" as alice scrub --pool p1
expect_refused "describe" as alice describe
grep -q "EPERM: DESCRIBE from" "$TESTDIR/osd1.log" "$TESTDIR/osd2.log" || fail "no OSD logged the DESCRIBE it refused"
# the KV itself refuses the write, whoever sends it
code=$(curl_as alice -o "$TESTDIR/put.out" -w '%{http_code}' -X POST "$KV_URL/v3/kv/put" \
  -d "{\"key\":\"$(printf /tromcho/pg/history/1/0 | base64 -w0)\",\"value\":\"$(printf '{"next_scrub":1}' | base64 -w0)\"}")
[ "$code" != 200 ] || { cat "$TESTDIR/put.out"; fail "alice wrote /pg/history through the KV API"; }
kv_get /pg/history/1/0 | grep -q '"next_scrub": *1}' && fail "alice's /pg/history write landed"
echo "alice: /pg/history put refused with HTTP $code"
osd_finish
stop_pid "$(cat "$TESTDIR/gw/pid")"; wait "$(cat "$TESTDIR/gw/pid")" 2>/dev/null || true
grep -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$GW_LOG" && fail "a sanitizer report in the gateway log"
echo "test-scrub-describe: ok"
