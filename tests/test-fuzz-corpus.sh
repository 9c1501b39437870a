#!/usr/bin/env bash
# In a fuzzing build (./configure --enable-fuzzing CC=clang), replay every
# fuzz target's seed corpus once: a regression test for inputs that once
# crashed (add a crash reproducer to the corpus when you fix it).
# Skipped in ordinary builds.
. "${top_srcdir:-..}/tests/functions.sh"
fuzzdir="${top_builddir:-..}/tests/fuzz"
shopt -s nullglob
targets=("$fuzzdir"/fuzz-*)
bins=()
for t in "${targets[@]}"; do [ -x "$t" ] && [ -f "$t" ] && bins+=("$t"); done
[ ${#bins[@]} -gt 0 ] || skip no-fuzzing "no fuzz targets built (./configure --enable-fuzzing CC=clang)"
for b in "${bins[@]}"; do
  name=${b##*/fuzz-}
  corpus="$top_srcdir/tests/fuzz/corpus-$name"
  [ -d "$corpus" ] || fail "fuzz-$name has no seed corpus at $corpus"
  "$b" -runs=0 "$corpus" >"$TESTDIR/$name.log" 2>&1 || { tail -n 30 "$TESTDIR/$name.log"; fail "fuzz-$name fails on its own corpus"; }
  echo "fuzz-$name: $(ls "$corpus" | wc -l) corpus inputs replayed"
done
