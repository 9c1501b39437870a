#!/usr/bin/env bash
# No write lost when two connections write parts of one sector (issue 18):
# two writes in flight at once to different bytes of one 4 KiB sector, one
# on each of two connections, hundreds of trials, none may be lost; through
# two connections of one nbdkit and through two nbdkit processes on one
# image; on a plain and on an encrypted image; halves, 512-byte pieces and
# random byte ranges. Also checks what the plugin advertises.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit nbdinfo curl python3
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
PY=/usr/bin/python3
$PY -c 'import nbd' || fail "python3-libnbd is not installed"

start_kv
write_conf
start_rep3
tromcho create plain -s 64M || fail "create plain"
tromcho create enc -s 64M --enc_key auto || fail "create enc"

start_nbdkit one -- config="$CONF"
start_nbdkit two -- config="$CONF"

# What the plugin advertises must hold for clients that rely on it.
nbdinfo --json "$(uri one plain)" | $PY -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
assert e["can_multi_conn"] and e["block_size_minimum"] == 1 and e["block_size_preferred"] == 4096, e
' || fail "export flags"

TRIALS=${PARTIAL_TRIALS:-300}
lost=0
for img in plain enc; do
  for piece in 2048 512 0; do
    for pair in "one one" "one two"; do
      set -- $pair
      echo "== $img, piece $piece, connections to nbdkit $1 and $2"
      $PY "$top_srcdir/tests/partial-writes.py" race "$(uri $1 $img)" "$(uri $2 $img)" "$TRIALS" $piece ||
        { echo "LOST: $img piece $piece via $1+$2"; lost=$((lost + 1)); }
    done
  done
done
[ $lost = 0 ] || fail "$lost of 12 runs lost writes"
