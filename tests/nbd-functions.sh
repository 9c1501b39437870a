# nbdkit tromcho in the tests: start the plugin on a Unix socket, stop it by
# PID. Source after functions.sh (and a cluster: cluster-functions.sh).

PLUGIN=$top_builddir/nbdkit-plugin/.libs/nbdkit-tromcho-plugin.so

# nbdkit is not built with the sanitizers, and an ASan-instrumented plugin
# does not run inside it (the runtime must come first; preloaded, nbdkit
# hangs before it daemonizes). The plugin's code paths (client, image layer)
# run under the sanitizers in the client tests; the NBD tests skip there.
requires_plain_plugin () {
  if ldd "$PLUGIN" 2>/dev/null | grep -q libasan; then
    skip sanitizers-nbdkit "nbdkit cannot load a sanitizer-built plugin"
  fi
}

# start_nbdkit NAME [NBDKIT OPTIONS...] -- [PLUGIN PARAMETERS...]: serve on
# $TESTDIR/NAME.sock; sets URI to its nbd+unix URI (no export name).
start_nbdkit () {
  local name=$1; shift
  local opts=() params=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  params=("$@")
  local sock=$TESTDIR/$name.sock pid=$TESTDIR/$name.pid
  rm -f "$sock" "$pid"
  # In the foreground (-f), put in the background here: nbdkit that forks
  # by itself sends its stderr, and the plugin's errors with it, to
  # /dev/null, and a failed test could not tell why a request failed.
  nbdkit -f -U "$sock" -P "$pid" "${opts[@]}" "$PLUGIN" "${params[@]}" 2>>"$TESTDIR/$name.log" &
  local bg=$!
  cleanup_fn "stop_nbdkit $name; stop_pid $bg"
  local i
  for i in $(seq $(( ${WAIT_SECS:-20} * 10 ))); do
    [ -S "$sock" ] && [ -s "$pid" ] && break
    kill -0 $bg 2>/dev/null || { cat "$TESTDIR/$name.log" >&2; fail "nbdkit $name did not start"; }
    sleep 0.1
  done
  [ -S "$sock" ] && [ -s "$pid" ] || fail "nbdkit $name: no socket or no PID file"
  URI="nbd+unix:///?socket=$sock"
}

stop_nbdkit () {
  local pid=$TESTDIR/$1.pid
  [ -f "$pid" ] && stop_pid "$(cat "$pid")"
  rm -f "$pid"
}

# uri NAME EXPORT: the URI of one export of server NAME
uri () { echo "nbd+unix:///$2?socket=$TESTDIR/$1.sock"; }

# nbdsh is `python3 -m nbd` and needs the python3 that has Debian's nbd
# module (python3-libnbd), which may not be the first python3 on PATH.
nbdsh () {
  if /usr/bin/python3 -c 'import nbd' 2>/dev/null; then /usr/bin/python3 -m nbd "$@"; else command nbdsh "$@"; fi
}

# nbd_script_bg NAME SCRIPT: run the python SCRIPT under nbdsh in the
# background (stderr to $TESTDIR/NAME.err, PID in NBD_SCRIPT_PID), stopped
# on every exit path; SCRIPT may call wait(F): until $TESTDIR/F exists,
# failing after 120 s (a script waiting for a step never stays behind).
nbd_script_bg () {
  local name=$1
  nbdsh -c "
import os, time
def wait(f):
    t0 = time.monotonic()
    while not os.path.exists('$TESTDIR/' + f):
        assert time.monotonic() - t0 < 120, 'no %s after 120 s' % f
        time.sleep(0.05)
$2" 2>"$TESTDIR/$name.err" &
  NBD_SCRIPT_PID=$!
  # the python under the nbdsh wrapper is the subshell's child
  cleanup_fn "pkill -P $NBD_SCRIPT_PID 2>/dev/null; kill $NBD_SCRIPT_PID 2>/dev/null || true"
}
