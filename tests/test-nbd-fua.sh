#!/usr/bin/env bash
# FUA through nbdkit tromcho: the plugin advertises FUA (native); writes
# made with NBD's FUA flag only, never flushed, survive kill -9 of every
# OSD (an unsynced write dies with its OSD: the store's batch lives in an
# uncommitted LMDB transaction, store/store.md), on a plain image (aligned
# writes and WRITE_PARTIAL), an XTS image (WRITE_IF for partial sectors)
# and an authenticated one (data and tag sectors). Then the same with OSDs
# that behave as built before FUA (they ignore the flag:
# TROMCHO_OSD_IGNORE_FUA): every OSD (the client's SYNC fall-back must make
# the writes durable), and the secondaries only (the primary's SEC_SYNC
# fall-back must; checked by reading back from those two alone).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit nbdinfo nbdsh curl python3
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"

IMAGES="plain enc integ"
start_kv
write_conf
start_rep3
tromcho create plain -s 16M || fail "create plain"
tromcho create enc -s 16M --enc_key auto || fail "create enc"
tromcho create integ -s 16M --enc_key auto --integrity || fail "create integ"

start_nbdkit srv -- config="$CONF"
nbdkit "$PLUGIN" --dump-plugin | grep -qx 'tromcho_fua=native' || fail "--dump-plugin does not say tromcho_fua=native"
for img in $IMAGES; do
  nbdinfo --json "$(uri srv $img)" | python3 -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
assert e["can_fua"] and e["can_flush"] and not e["is_read_only"], e
' || fail "export $img does not advertise FUA"
done

# fua_round SEED: on every image, FUA writes only (aligned 4 KiB ones over
# every PG, a 1 MiB one across objects, sub-sector ones), no flush; each
# image's expected content goes to $TESTDIR/model-IMG. Then, with the
# connections still open (nbdkit's close must not get to flush anything),
# kill -9 every OSD and nbdkit.
fua_round () {
  nbdsh -c "
import os, random, signal
rng = random.Random($1)
for img in '$IMAGES'.split():
    h = nbd.NBD()
    h.connect_uri('nbd+unix:///%s?socket=$TESTDIR/srv.sock' % img)
    size = h.get_size()
    model = bytearray(h.pread(size, 0))
    writes = [(rng.randrange(size // 4096) * 4096, 4096) for i in range(48)]
    writes += [(rng.randrange(16) * 131072 + 65536, 1 << 20)]
    writes += [(rng.randrange(size - 8192) + 1, rng.choice([1, 2, 100, 4095, 5000])) for i in range(12)]
    for off, n in writes:
        data = rng.randbytes(n)
        h.pwrite(data, off, nbd.CMD_FLAG_FUA)
        model[off:off + n] = data
    open('$TESTDIR/model-' + img, 'wb').write(model)
    hs = globals().setdefault('hs', [])
    hs.append(h)
for n in (1, 2, 3):
    try:
        os.kill(int(open('$TESTDIR/osd%d/pid' % n).read()), signal.SIGKILL)
    except FileNotFoundError:
        pass
os.kill(int(open('$TESTDIR/srv.pid').read()), signal.SIGKILL)
os._exit(0)
" || fail "FUA writes (round $1)"
  for n in 1 2 3; do stop_osd $n -9; done
  rm -f "$TESTDIR/srv.pid"
}

# check_models WHAT: every image reads as its model.
check_models () {
  start_nbdkit srv -- config="$CONF"
  local img
  for img in $IMAGES; do
    nbdsh -u "$(uri srv $img)" -c "
want = open('$TESTDIR/model-$img', 'rb').read()
got = h.pread(len(want), 0)
bad = [i for i in range(0, len(want), 4096) if got[i:i + 4096] != want[i:i + 4096]]
assert not bad, 'sectors %s of %d differ' % ([b // 4096 for b in bad[:10]], len(bad))
" || fail "$1: image $img lost FUA writes"
  done
  echo "$1: every FUA write of every image is there"
  stop_nbdkit srv
}

# pgs_led_by "OSD...": every PG keeps its set of phase 1 (osds 1 2 3
# rotated), led by the first member that is in the list (as the monitor
# would move primaries away from a lost OSD).
pgs_led_by () {
  local items
  items=$(python3 -c '
import sys
lead = [int(x) for x in sys.argv[1].split()]
sets = [[(i + j) % 3 + 1 for j in range(3)] for i in range(8)]
print(", ".join("\"%d\": {\"osd_set\": %s, \"primary\": %d}" % (i, s, [o for o in s if o in lead][0])
                for i, s in enumerate(sets)))' "$1")
  kv_put /pg/config "{\"items\": {\"1\": {$items}}}" || fail "placement led by $1"
}

# 1. Every OSD serves FUA. Only 2 and 3 come back first: the PGs osd 1
#    led keep only what their secondaries synced before answering.
fua_round 1
pgs_led_by "2 3"
start_osd 2
start_osd 3
check_models "kill -9 of every OSD, osds 2 and 3 back"
start_osd 1
set_pgs 1 8 "1 2 3"
check_models "osd 1 back"

# 2. Every OSD as one built before FUA: they answer FUA writes as plain
#    ones, and nothing but the client's SYNC after each makes them durable.
for n in 1 2 3; do stop_osd $n; done
for n in 1 2 3; do TROMCHO_OSD_IGNORE_FUA=1 start_osd $n; done
grep -q TROMCHO_OSD_IGNORE_FUA "$TESTDIR/osd2/log" || fail "osd 2 does not say it ignores FUA"
start_nbdkit srv -- config="$CONF"
fua_round 2
for n in 1 2 3; do start_osd $n; done
check_models "every OSD from before FUA"

# 3. Osd 1 leads every PG and serves FUA; its secondaries 2 and 3 are from
#    before FUA: the client gets durable answers from 1 and never syncs,
#    so only the primary's SEC_SYNC after their plain answers makes the
#    writes durable on 2 and 3. Then only 2 and 3 come back, leading.
for n in 1 2 3; do stop_osd $n; done
pgs_led_by "1"
start_osd 1
TROMCHO_OSD_IGNORE_FUA=1 start_osd 2
TROMCHO_OSD_IGNORE_FUA=1 start_osd 3
start_nbdkit srv -- config="$CONF"
fua_round 3
pgs_led_by "2 3"
start_osd 2
start_osd 3
check_models "secondaries from before FUA, then only those two back"
