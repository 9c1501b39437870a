#!/usr/bin/env bash
# The man pages: each renders without warnings, and tromcho.conf(5) lists
# exactly the options `tromcho --help` knows (from the one option table),
# with the same type and default.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires man python3 tromcho
D=$top_builddir/doc
for page in nbdkit-tromcho-plugin.1 tromcho-fuse.1 tromcho.conf.5 tromcho.8 tromcho-osd.8 tromcho-gateway.8; do
  [ -s "$D/$page" ] || fail "$page was not built"
  out=$(MANWIDTH=80 man --warnings -l "$D/$page" 2>&1 >/dev/null) || fail "man $page failed: $out"
  [ -z "$out" ] || fail "man $page warns: $out"
  MANWIDTH=80 man -l "$D/$page" 2>/dev/null | grep -q "^NAME" || fail "$page has no NAME section"
done

tromcho --help > "$TESTDIR/help"
MANWIDTH=200 man -l "$D/tromcho.conf.5" 2>/dev/null > "$TESTDIR/page"
python3 - "$TESTDIR/help" "$TESTDIR/page" <<'PY' || fail "tromcho.conf(5) and the option table disagree"
import re, sys
help_opts = {}
for m in re.finditer(r'^  --(\w+) \((.+?), default (.*)\)$', open(sys.argv[1]).read(), re.M):
    d = m.group(3)
    help_opts[m.group(1)] = (m.group(2), "" if d == '""' else d)
page_opts = {}
for m in re.finditer(r'^\s+(\w+) \((.+?), default (.*)\)$', open(sys.argv[2]).read(), re.M):
    d = m.group(3)
    d = d[1:-1] if d.startswith('"') and d.endswith('"') else d   # C<> renders as "..."
    page_opts[m.group(1)] = (m.group(2), d)
if len(help_opts) < 20:
    sys.exit("too few options in tromcho --help: %d" % len(help_opts))
bad = 0
for k in sorted(set(help_opts) | set(page_opts)):
    if help_opts.get(k) != page_opts.get(k):
        print("option %s: --help says %s, the page says %s" % (k, help_opts.get(k), page_opts.get(k)))
        bad = 1
sys.exit(bad)
PY
echo "test-man: ok"
