#!/usr/bin/env bash
# tromcho osd-create: formats a sparse data file, refuses what it must.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires tromcho

d=$TESTDIR/osd1
out=$(tromcho osd-create --data "$d" --osd_num 4 --size 1G) || fail "osd-create: $out"
echo "$out"
echo "$out" | grep -qE '^osd_num=4 uuid=[0-9a-f-]{36} size=1073741824 block_size=131072 data_offset=1048576 ' ||
  fail "unexpected output: $out"
[ "$(stat -c %s "$d")" = 1073741824 ] || fail "data file is not 1 GiB"
# sparse but for the header and the overflow area: the data area's last
# 64th, 4092 sectors (16368 KiB), written with zeros
[ "$(stat -c %b "$d")" -ge 32736 ] && [ "$(stat -c %b "$d")" -lt $((32736 + 2048)) ] ||
  fail "data file is not sparse but for its overflow area ($(stat -c %b "$d") blocks)"
first=$(python3 -c 'import os, sys; print(os.lseek(os.open(sys.argv[1], os.O_RDONLY), 4096, os.SEEK_DATA))' "$d")
[ "$first" = $((1048576 + (261888 - 4092) * 4096)) ] || fail "the first data after the header is at $first"
cmp -n 16760832 -i "$first" "$d" /dev/zero || fail "the overflow area is not zeros"
[ -f "$d.meta" ] || fail "no metadata file"

expect_fail "already formatted.*--force" tromcho osd-create --data "$d" --osd_num 4
out=$(tromcho osd-create --data "$d" --osd_num 5 --block-size 64k --force) || fail "--force: $out"
echo "$out" | grep -q 'osd_num=5 .* block_size=65536' || fail "--force/--block-size: $out"
# Without --osd_num the number comes from the KV: none answers on this port.
expect_fail "allocating an OSD number in the KV.*--osd_num N" \
  tromcho osd-create --data "$TESTDIR/osd2" --etcd_address "http://127.0.0.1:$(free_port)" --etcd_slow_timeout 500
[ ! -e "$TESTDIR/osd2" ] || fail "a refused osd-create left a file"
expect_fail "osd_num.*not a positive" tromcho osd-create --data "$TESTDIR/osd2" --osd_num 0
expect_fail "too small" tromcho osd-create --data "$TESTDIR/osd2" --osd_num 1 --size 8M
expect_fail "power of two" tromcho osd-create --data "$TESTDIR/osd2" --osd_num 1 --block-size 96k
expect_fail "between 4k and 256k" tromcho osd-create --data "$TESTDIR/osd2" --osd_num 1 --block-size 512k
expect_fail "data PATH is required" tromcho osd-create --osd_num 1
expect_fail "unknown or incomplete argument" tromcho osd-create --data "$TESTDIR/osd2" --osd_num 1 --bogus

truncate -s 4M "$TESTDIR/small"
expect_fail "too small" tromcho osd-create --data "$TESTDIR/small" --osd_num 1
head -c 1M /dev/urandom > "$TESTDIR/foreign"
expect_fail "not a tromcho store" tromcho osd-create --data "$TESTDIR/foreign" --osd_num 1 --size 32M
tromcho osd-create --data "$TESTDIR/foreign" --osd_num 1 --size 32M --force >/dev/null || fail "--force on foreign data"

# The default size of a new file is 8G (sparse).
tromcho osd-create --data "$TESTDIR/osd3" --osd_num 3 | grep -q 'size=8589934592' || fail "default size"
# A metadata path of one's own.
tromcho osd-create --data "$TESTDIR/osd4" --meta "$TESTDIR/m4" --osd_num 6 --size 64M >/dev/null &&
  [ -f "$TESTDIR/m4" ] && [ ! -e "$TESTDIR/osd4.meta" ] || fail "--meta"
tromcho --help | grep -q osd-create || fail "--help does not list osd-create"
echo "test-osd-create: ok"
