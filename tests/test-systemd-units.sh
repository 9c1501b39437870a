#!/usr/bin/env bash
# The systemd units (systemd/*.service.in): systemd-analyze verify accepts
# them (pointing at this build's programs), each restarts on failure, and
# systemd-analyze security rates their sandboxing: the daemons' units at
# most 2.0 ("OK"), the FUSE unit, which may not use mount namespaces, at most
# 5.0. (systemd is not PID 1 here; test-sandbox.sh runs the daemons under
# the same restrictions with bubblewrap and setpriv.)
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires systemd-analyze
U=$TESTDIR/units
mkdir -p "$U"
for in in "$top_srcdir"/systemd/*.service.in; do
  sed -e "s|@sbindir@/tromcho-osd|$top_builddir/osd/tromcho-osd|" \
      -e "s|@sbindir@/tromcho-gateway|$top_builddir/gateway/tromcho-gateway|" \
      -e "s|@bindir@/tromcho-fuse|$top_builddir/fuse/tromcho-fuse|" \
      -e "s|@NBDKIT@|$(command -v nbdkit)|" -e "s|@FUSERMOUNT3@|$(command -v fusermount3)|g" \
      "$in" > "$U/$(basename "$in" .in)"
done
! grep -l '@[A-Za-z0-9_]*@' "$U"/* || fail "unsubstituted @VAR@ in a unit"
cd "$U"
cp tromcho-osd@.service tromcho-osd@1.service
cp nbdkit-tromcho@.service nbdkit-tromcho@acme.service
cp tromcho-fuse@.service tromcho-fuse@mnt-tromcho.service
INST="tromcho-gateway.service tromcho-osd@1.service nbdkit-tromcho@acme.service tromcho-fuse@mnt-tromcho.service"
# --man=no: the pages are checked by test-man.sh; here they are not installed.
out=$(systemd-analyze verify --man=no $(printf './%s ' $INST) 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
for u in $INST; do
  grep -qx "Restart=on-failure" "$u" || fail "$u does not restart on failure"
  grep -qx "NoNewPrivileges=yes" "$u" || fail "$u lacks NoNewPrivileges"
  score=$(systemd-analyze security --offline=true "./$u" 2>&1 | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
  [ -n "$score" ] || fail "no security rating for $u"
  case $u in tromcho-fuse@*) max=5.0 ;; *) max=2.0 ;; esac
  python3 -c "import sys; sys.exit(not float('$score') <= $max)" || fail "$u: exposure $score > $max"
  echo "$u: exposure $score"
done
for u in tromcho-gateway.service tromcho-osd@1.service nbdkit-tromcho@acme.service; do
  grep -qx "ProtectSystem=strict" "$u" || fail "$u lacks ProtectSystem=strict"
done
echo "test-systemd-units: ok"
