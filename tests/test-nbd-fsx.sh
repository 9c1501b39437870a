#!/usr/bin/env bash
# fsx-style check of unaligned I/O through several NBD connections at once
# (issue 18): random unaligned writes, zeroes and reads, sent concurrently
# over four connections (two nbdkit processes, two connections each) to
# bytes that share sectors, checked against a model in memory after every
# batch; plain and encrypted images.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/nbd-functions.sh"
requires_plain_plugin
requires tromcho tromcho-osd nbdkit curl python3
[ -f "$PLUGIN" ] || fail "plugin not built: $PLUGIN"
PY=/usr/bin/python3
$PY -c 'import nbd' || fail "python3-libnbd is not installed"

start_kv
write_conf
start_rep3
tromcho create plain -s 16M || fail "create plain"
tromcho create enc -s 16M --enc_key auto || fail "create enc"
start_nbdkit one -- config="$CONF"
start_nbdkit two -- config="$CONF"

OPS=${FSX_OPS:-1500}
for img in plain enc; do
  echo "== $img"
  $PY "$top_srcdir/tests/partial-writes.py" fsx $RANDOM "$OPS" \
    "$(uri one $img)" "$(uri one $img)" "$(uri two $img)" "$(uri two $img)" || fail "fsx on $img"
done
