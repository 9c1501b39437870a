#!/usr/bin/env bash
# An image opened while its re-key finishes. The finish retires the old
# layer and relinks the new top in one KV transaction, but a client walks
# the chain record by record: it can read the top from before (its parent:
# the old layer) and the old layer from after (retired). The walk then reads
# the top again instead of failing the open with "retired" (ESTALE, which
# nbdkit sent its clients as EINVAL). The client's test hook
# TROMCHO_CLIENT_CHAIN_WAIT holds the walk between the two reads until the
# re-key finished.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
requires tromcho tromcho-osd python3 openssl cmp

start_kv
write_conf
start_rep3
K1=$(openssl rand -hex 64)
K2=$(openssl rand -hex 64)
tromcho create img -s 16M --enc_key "$K1" >/dev/null || fail "create img"
head -c $((16 << 20)) /dev/urandom > "$TESTDIR/src"
tromcho dd if="$TESTDIR/src" oimg=img bs=1M 2>/dev/null || fail "write img"

# 16 MiB at 4 MiB/s: the copy takes about 4 s.
tromcho modify img --rekey "$K2" --rekey_rate 4 >"$TESTDIR/rekey.log" 2>&1 &
rk=$!
cleanup_fn "kill $rk 2>/dev/null"
wait_for sh -c "tromcho info img | grep -Eq '^rekey: +[0-9]+% \\([0-9]+/[0-9]+, copying'" ||
  fail "the re-key did not start: $(cat "$TESTDIR/rekey.log")"
# The reader reads the top (its parent: the old layer), says so
# (go.waiting), and reads the old layer's record once go exists: after the
# re-key finished.
TROMCHO_CLIENT_CHAIN_WAIT=$TESTDIR/go tromcho dd iimg=img of="$TESTDIR/back" bs=1M 2>"$TESTDIR/dd.err" &
dd=$!
cleanup_fn "kill $dd 2>/dev/null"
wait_for test -e "$TESTDIR/go.waiting" || fail "the reader did not reach the hook: $(cat "$TESTDIR/dd.err")"
tromcho info img | grep -Eq '^rekey: +[0-9]+% \([0-9]+/[0-9]+, copying' ||
  fail "the re-key was over before the reader read the top: the test proves nothing"
wait $rk || fail "the re-key failed: $(cat "$TESTDIR/rekey.log")"
tromcho info img | grep -q '^rekey: *-$' || fail "info still shows a re-key: $(tromcho info img)"
touch "$TESTDIR/go"
wait $dd || { cat "$TESTDIR/dd.err"; fail "opening the image across the re-key's finish failed"; }
cmp "$TESTDIR/back" "$TESTDIR/src" || fail "the image read back differs"
echo "test-image-rekey-reopen: ok"
