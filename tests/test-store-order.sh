#!/usr/bin/env bash
# The OSD store's write ordering, which is what makes a power loss safe
# (it cannot be tested by killing a process: the page cache survives that).
# Traced with strace around the crash driver, every sync must commit either
# through the journal (a batch written into the data file's header area,
# then the data file flushed: data and batch in one fdatasync, a torn one
# found by checksums at replay) or through a checkpoint, which must:
#   - flush the data file (fdatasync) before the metadata commit point
#     (LMDB's meta page write), so metadata never points at unflushed data;
#   - flush LMDB's tree pages before its meta page;
#   - have the meta page durable (O_DSYNC fd, or flushed) before "S" (the
#     acknowledgement) is printed.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires tromcho strace python3
torture=${top_builddir}/tests/store-torture
[ -x "$torture" ] || { echo "$0: skipped: store-torture not built"; exit 77; }

data=$TESTDIR/osd.data
tromcho osd-create --data "$data" --osd_num 1 --size 16M >/dev/null || fail "osd-create"
# LeakSanitizer cannot run under ptrace (sanitizer builds).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
for every in 1 3 8; do
  strace -qq -o "$TESTDIR/trace" -e trace=openat,pwrite64,pwritev,write,writev,lseek,fdatasync,fsync \
    "$torture" run "$data" "$every" $(( every * 1000000 )) 400 "$every" > "$TESTDIR/log" || fail "driver"
  python3 - "$TESTDIR/trace" "$data" <<'PY' || fail "ordering violated (sync every $every)"
import re, sys
trace, data = sys.argv[1], sys.argv[2]
meta = data + ".meta"
kind, dsync, pos = {}, set(), {}
dirty_data = dirty_pages = False
meta_durable = True
wrote_since_ack = False
commits = acks = journal = 0
errors = []
for n, line in enumerate(open(trace), 1):
    m = re.match(r'^(\w+)\((.*)\)\s+=\s+(-?\d+)', line)
    if not m:
        continue
    call, args, ret = m.group(1), m.group(2), int(m.group(3))
    if call == 'openat':
        o = re.match(r'AT_FDCWD, "([^"]*)", ([A-Z_|]+)', args)
        if o and ret >= 0:
            path = o.group(1)
            if path in (data, meta) or data.endswith('/' + path) or meta.endswith('/' + path):
                kind[ret] = 'meta' if path.endswith('.meta') else 'data'
                if 'O_DSYNC' in o.group(2) or 'O_SYNC' in o.group(2):
                    dsync.add(ret)
        continue
    fd = int(args.split(',')[0].rstrip(')')) if args[:1].isdigit() else -1
    if call == 'write' and fd == 1:
        if args.startswith('1, "S'):
            acks += 1
            if dirty_data or not meta_durable:
                errors.append(f'line {n}: sync acknowledged before data and metadata were durable')
            if wrote_since_ack and commits == 0:
                errors.append(f'line {n}: sync acknowledged without a metadata commit')
            wrote_since_ack = False
            commits = 0
        elif args.startswith('1, "W'):
            wrote_since_ack = True
        continue
    k = kind.get(fd)
    if k is None:
        continue
    if call == 'lseek':
        pos[fd] = ret
    elif call in ('pwrite64', 'pwritev', 'write', 'writev'):
        if call.startswith('p'):
            off = int(re.search(r', (\d+)$', args).group(1))
        else:
            off = pos.get(fd, 0)
            pos[fd] = off + max(ret, 0)
        if k == 'data':
            dirty_data = True
            if 4096 <= off < (1 << 20):   # the journal area: a journal commit
                commits += 1
                journal += 1
        elif off < 8192:          # LMDB meta pages are pages 0 and 1
            commits += 1
            if dirty_data:
                errors.append(f'line {n}: metadata committed while data writes were not flushed')
            if dirty_pages:
                errors.append(f'line {n}: LMDB meta page written before its tree pages were flushed')
            meta_durable = fd in dsync
        else:
            dirty_pages = True
    elif call in ('fdatasync', 'fsync'):
        if k == 'data':
            dirty_data = False
        else:
            dirty_pages = False
            meta_durable = True
for e in errors[:10]:
    print(e, file=sys.stderr)
print(f'{acks} syncs acknowledged, {journal} journal batches, {len(errors)} ordering errors')
sys.exit(1 if errors or acks == 0 or journal == 0 else 0)
PY
done
echo "test-store-order: ok"
