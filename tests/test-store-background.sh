#!/usr/bin/env bash
# The store's background jobs (store/store_background.h): the writer (the
# OSD's event loop) never commits a full batch itself. Traced with strace
# -f around the crash driver writing more operations than a batch holds
# (TC_STORE_BATCH_MAX, 32768) with a sync every 1000: LMDB's meta page (the
# commit point of a checkpoint, written through the O_DSYNC descriptor of
# the .meta file) is written by another thread, never by the writer before
# its last sync (after it, tc_store_close commits on the caller's thread);
# sync_file_range is never called by the writer; and the store then holds
# what the driver wrote (store-torture verify).
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires tromcho strace python3
torture=${top_builddir}/tests/store-torture
[ -x "$torture" ] || { echo "$0: skipped: store-torture not built"; exit 77; }

data=$TESTDIR/osd.data
# 4 GiB (sparse): a 16 MiB journal area, so the batch fills by its count
# of operations, not by the journal's size.
tromcho osd-create --data "$data" --osd_num 1 --size 4G >/dev/null || fail "osd-create"
# LeakSanitizer cannot run under ptrace (sanitizer builds).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
strace -f -qq -o "$TESTDIR/trace" -e trace=openat,pwrite64,pwritev,write,fdatasync,sync_file_range \
  "$torture" run "$data" 11 1000000 40000 1000 > "$TESTDIR/log" || fail "driver"
python3 - "$TESTDIR/trace" <<'PY' || fail "the writer committed or started the writeback itself"
import re, sys
main = None
dsync = set()
last_ack = 0
commits = []          # (line, tid) of meta page writes
sfr = []              # tids of sync_file_range calls
for n, line in enumerate(open(sys.argv[1]), 1):
    m = re.match(r'^(\d+) +(\w+)\((.*)', line)
    if not m:
        continue
    tid, call, rest = int(m.group(1)), m.group(2), m.group(3)
    if main is None:
        main = tid
    if call == 'openat':
        o = re.match(r'AT_FDCWD, "([^"]*\.meta)", ([A-Z_|]+).*= (\d+)$', rest.strip())
        if o and 'O_DSYNC' in o.group(2):
            dsync.add(int(o.group(3)))
    elif call == 'write' and rest.startswith('1, "S'):
        last_ack = n
    elif call in ('pwrite64', 'pwritev'):
        fd = int(rest.split(',')[0])
        if fd in dsync:
            commits.append((n, tid))
    elif call == 'sync_file_range':
        sfr.append(tid)
errors = []
if not dsync:
    errors.append('the LMDB meta descriptor (O_DSYNC) was never opened')
bg = [c for c in commits if c[1] != main]
early = [c for c in commits if c[1] == main and c[0] < last_ack]
if not bg:
    errors.append('no checkpoint by a background thread')
for n, _ in early[:5]:
    errors.append(f'line {n}: the writer wrote the meta page itself (before its last sync, line {last_ack})')
if not sfr:
    errors.append('the writeback was never started')
if main in sfr:
    errors.append(f'the writer called sync_file_range {sfr.count(main)} times')
for e in errors:
    print(e, file=sys.stderr)
print(f'{len(commits)} meta commits ({len(bg)} in the background), {len(sfr)} writeback starts, last sync line {last_ack}')
sys.exit(1 if errors else 0)
PY
"$torture" verify "$data" "$TESTDIR/baseline" < "$TESTDIR/log" || fail "the store does not hold what was written"
echo "test-store-background: ok"
