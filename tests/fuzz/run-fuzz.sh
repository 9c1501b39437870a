#!/usr/bin/env bash
# run-fuzz.sh TARGET|all SECONDS [libFuzzer options...]
#
# Runs the libFuzzer target fuzz-TARGET (or, with `all`, every fuzz target
# built, ONE AT A TIME under `nice -n 10`) for SECONDS seconds each, starting
# from its seed corpus, and fails (exit 1) on a crash, a leak, a sanitizer
# report or a timeout, printing the reproducer's path. New interesting inputs
# are kept in a work corpus (FUZZ_WORKDIR, default a temporary folder) so the
# seed corpus in the tree is never written to, unless FUZZ_MERGE=1: then the
# work corpus is minimised into the seed corpus (-merge=1: only inputs that
# add coverage are copied in), which is how the corpora in the tree grow.
# The last line per target is a summary: runs, execs/s, coverage (edges, cov)
# and features (ft) as libFuzzer counts them.
#
# The documented run (item 5 of issue 12): every target, 10 minutes each,
# under ASan+UBSan, in a separate copy of the tree:
#   mkdir /tmp/fuzz && git archive HEAD | tar -x -C /tmp/fuzz && cd /tmp/fuzz &&
#   ./autogen.sh && ./configure --enable-fuzzing CC=clang && make -j2
#   FUZZ_MERGE=1 SRCDIR/tests/fuzz/run-fuzz.sh all 600
# (--enable-fuzzing implies ASan+UBSan and builds all code with coverage;
# SRCDIR is your worktree when you want its corpora to grow.)
# Reproduce a crash: tests/fuzz/fuzz-TARGET CRASH-FILE, then add CRASH-FILE
# to the target's seed corpus: test-fuzz-corpus.sh replays it every run.
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
#   3. In tests/Makefile.am (outside any `if`), add lines:
#        FUZZ_TARGETS += fuzz/fuzz-NAME
#        fuzz_fuzz_NAME_SOURCES = fuzz/fuzz-NAME.c
#        fuzz_fuzz_NAME_CPPFLAGS = $(AM_CPPFLAGS) -DTC_FUZZ_NAME='"NAME"'
#        fuzz_fuzz_NAME_LDADD = $(LIBTROMCHO)
#        fuzz_fuzz_NAME_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_LDFLAGS)
#        if !FUZZING
#        fuzz_fuzz_NAME_SOURCES += fuzz/replay-main.c
#        endif
#      and add the corpus folder and dictionary to EXTRA_DIST.
#   4. That is all: `run-fuzz.sh NAME SECONDS` and `run-fuzz.sh all` find
#      it; in a fuzzing build `make check` replays every corpus once
#      (test-fuzz-corpus.sh), and in every other build (sanitizers too) the
#      target is a unit test that replays its corpus and mutations of each
#      input (fuzz/replay-main.c).
# Older targets keep their binary in tests/ (their corpus is here too).
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET|all SECONDS [libFuzzer options...]" >&2
  exit 2
fi
target=$1 secs=$2
shift 2
case $secs in (''|*[!0-9]*) echo "$0: SECONDS must be a whole number, not '$secs'" >&2; exit 2;; esac
srcdir=$(cd "$(dirname "$0")" && pwd)
: "${top_builddir:=$PWD}"

# fuzz_bin NAME, fuzz_seeds NAME: where a target's binary and seed corpus are.
fuzz_bin() {
  local b
  for b in "$top_builddir/tests/fuzz/fuzz-$1" "$top_builddir/tests/fuzz-$1" \
           "$top_builddir/fuzz/fuzz-$1" "$top_builddir/fuzz-$1"; do
    [ -x "$b" ] && [ -f "$b" ] && { echo "$b"; return 0; }
  done
  return 1
}
fuzz_seeds() {
  local d
  for d in "$srcdir/corpus-$1"; do
    [ -d "$d" ] && { (cd "$d" && pwd); return 0; }
  done
  return 1
}

if [ "$target" = all ]; then
  shopt -s nullglob
  names=()
  for b in "$top_builddir"/tests/fuzz/fuzz-* "$top_builddir"/tests/fuzz-*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    n=${b##*/fuzz-}
    case $n in (*.*) continue;; esac
    names+=("$n")
  done
  [ ${#names[@]} -gt 0 ] || { echo "$0: no fuzz targets under $top_builddir/tests: build with ./configure --enable-fuzzing CC=clang && make" >&2; exit 2; }
  echo "fuzzing ${#names[@]} targets for $secs s each, one at a time: ${names[*]}"
  failed=0 summary=()
  for n in "${names[@]}"; do
    out=$(nice -n 10 "$0" "$n" "$secs" "$@" 2>&1)
    rc=$?
    echo "$out"
    line=$(echo "$out" | grep "^fuzz-$n:" | tail -n 1)
    [ $rc -eq 0 ] || { failed=1; line="fuzz-$n: FAILED (exit status $rc)"; }
    summary+=("$line")
  done
  echo "=== summary ==="
  printf '%s\n' "${summary[@]}"
  exit $failed
fi

bin=$(fuzz_bin "$target") || {
  echo "$0: fuzz-$target not found under $top_builddir/tests: build with ./configure --enable-fuzzing CC=clang && make (or set top_builddir)" >&2
  exit 2
}
seeds=$(fuzz_seeds "$target") || { echo "$0: no seed corpus for $target (tests/fuzz/corpus-$target)" >&2; exit 2; }
dict=()
[ -f "$srcdir/$target.dict" ] && dict=(-dict="$srcdir/$target.dict")

work=${FUZZ_WORKDIR:-}
if [ -z "$work" ]; then
  work=$(mktemp -d "/tmp/tromcho-fuzz-$target.XXXXXX")
  trap 'rm -rf "$work/corpus"' EXIT   # keep crash artifacts, drop the work corpus
else
  work="$work/$target"
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
if [ "${FUZZ_MERGE:-0}" = 1 ]; then
  before=$(ls "$seeds" | wc -l)
  "$bin" -merge=1 -timeout=10 -rss_limit_mb=2048 "$seeds" "$work/corpus" >"$work/merge.log" 2>&1 ||
    { tail -n 20 "$work/merge.log"; echo "FAIL: fuzz-$target: merging the corpus failed" >&2; exit 1; }
  echo "fuzz-$target corpus: $before -> $(ls "$seeds" | wc -l) inputs ($seeds)"
fi
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$')
eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$')
last=$(grep -E '^#[0-9]+' "$work/fuzz.log" | tail -n 1)
cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*')
echo "fuzz-$target: no crash in $secs s: ${runs:-?} runs, ${eps:-?} execs/s, cov ${cov:-?} edges, ft ${ft:-?}"
