#!/usr/bin/env bash
# The tromcho command line: help, self-test, cpubench output shape, config errors.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires tromcho

tromcho --help | grep -q cpubench || fail "--help does not list cpubench"
tromcho selftest | grep -q "self-test passed" || fail "selftest"

out=$(tromcho cpubench --seconds 0.05)
echo "$out"
n=$(echo "$out" | grep -cE '^.+ (1 M|4 K) block\.\.\. [0-9]+ iterations in [0-9]+ ms = [0-9]+\.[0-9]{2} MB/s$')
[ "$n" = 14 ] || fail "cpubench printed $n result lines, expected 14"
tromcho cpubench --seconds 0.02 --json | python3 -c '
import json, sys
rows = json.load(sys.stdin)
assert len(rows) == 14, len(rows)
assert all(r["iterations"] > 0 and r["mb_per_s"] > 0 for r in rows)
' || fail "cpubench --json"
expect_fail "seconds" tromcho cpubench --seconds nope

echo '{"etcd_adress": "http://127.0.0.1:2379"}' > "$TESTDIR/typo.conf"
expect_fail "unknown option 'etcd_adress'" tromcho --config "$TESTDIR/typo.conf" selftest
expect_fail "use_perms" tromcho --use_perms maybe selftest
expect_fail "unknown command" tromcho frobnicate
echo "test-cli: ok"
