#!/usr/bin/env bash
# run-fuzz.sh TARGET SECONDS [libFuzzer options...]
#
# Runs the libFuzzer target tests/fuzz/fuzz-TARGET for SECONDS seconds
# starting from its seed corpus, and fails (exit 1) on a crash, a leak, a
# sanitizer report or a timeout, printing the reproducer's path. New
# interesting inputs are kept in a work corpus (FUZZ_WORKDIR, default a
# temporary folder) so that the seed corpus in the tree is never written to.
#
# Build first, with clang:
#   mkdir /tmp/fuzz && cd /tmp/fuzz && $SRCDIR/configure --enable-fuzzing CC=clang && make -j2
#   $SRCDIR/tests/fuzz/run-fuzz.sh config 180
# (--enable-fuzzing implies ASan+UBSan and builds all code with coverage.)
# Reproduce a crash: tests/fuzz/fuzz-TARGET CRASH-FILE
#
# Adding a fuzz target (fuzz-frame, fuzz-handshake, fuzz-kv-request, ...):
#   1. tests/fuzz/fuzz-NAME.c defines LLVMFuzzerTestOneInput(data, size) and
#      feeds the bytes to the parser through its public entry point (no
#      sockets, no files; add a *_buffer() entry like tc_config_load_buffer
#      when a parser only reads files). It frees everything and aborts on an
#      inconsistency the parser should never produce.
#   2. A seed corpus tests/fuzz/corpus-NAME/ with a few small valid and
#      invalid inputs (one file each), and optionally tests/fuzz/NAME.dict
#      (libFuzzer dictionary: the format's keywords and magic numbers).
#   3. In tests/Makefile.am, inside `if FUZZING`, add lines:
#        FUZZ_TARGETS += fuzz/fuzz-NAME
#        fuzz_fuzz_NAME_SOURCES = fuzz/fuzz-NAME.c
#        fuzz_fuzz_NAME_LDADD = $(LIBTROMCHO)
#        fuzz_fuzz_NAME_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_LDFLAGS)
#      and add the corpus folder and dictionary to EXTRA_DIST.
#   4. That is all: `run-fuzz.sh NAME SECONDS` finds it, and in a fuzzing
#      build `make check` replays every corpus once (test-fuzz-corpus.sh).
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET SECONDS [libFuzzer options...]" >&2
  exit 2
fi
target=$1 secs=$2
shift 2
case $secs in (''|*[!0-9]*) echo "$0: SECONDS must be a whole number, not '$secs'" >&2; exit 2;; esac
srcdir=$(cd "$(dirname "$0")" && pwd)
: "${top_builddir:=$PWD}"
bin=
for b in "$top_builddir/tests/fuzz/fuzz-$target" "$top_builddir/fuzz/fuzz-$target" "$srcdir/fuzz-$target"; do
  [ -x "$b" ] && { bin=$b; break; }
done
if [ -z "$bin" ]; then
  echo "$0: fuzz-$target not found under $top_builddir/tests/fuzz: build with ./configure --enable-fuzzing CC=clang && make (or set top_builddir)" >&2
  exit 2
fi
seeds="$srcdir/corpus-$target"
[ -d "$seeds" ] || { echo "$0: no seed corpus $seeds" >&2; exit 2; }
dict=()
[ -f "$srcdir/$target.dict" ] && dict=(-dict="$srcdir/$target.dict")

work=${FUZZ_WORKDIR:-}
if [ -z "$work" ]; then
  work=$(mktemp -d "/tmp/tromcho-fuzz-$target.XXXXXX")
  trap 'rm -rf "$work/corpus"' EXIT   # keep crash artifacts, drop the work corpus
fi
mkdir -p "$work/corpus" "$work/artifacts"

echo "fuzzing $bin for $secs s (seeds $seeds, artifacts in $work/artifacts)"
# Leak checks on, one process, 10 s per input at most, 2 GB memory.
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "${dict[@]}" "$@" "$work/corpus" "$seeds" 2>"$work/fuzz.log"
rc=$?
tail -n 25 "$work/fuzz.log"
if [ $rc -ne 0 ] || ls "$work/artifacts"/* >/dev/null 2>&1; then
  echo "FAIL: fuzz-$target exit status $rc; reproducers:" >&2
  ls -l "$work/artifacts" >&2
  echo "full log: $work/fuzz.log" >&2
  exit 1
fi
echo "fuzz-$target: no crash in $secs s ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$') runs)"
