#!/usr/bin/env bash
# In a fuzzing build (./configure --enable-fuzzing CC=clang), replay every
# fuzz target's seed corpus once: a regression test for inputs that once
# crashed (add a crash reproducer to the corpus when you fix it).
# Skipped in ordinary builds. Targets live in tests/fuzz/ or, for the older
# ones, in tests/; every corpus is tests/fuzz/corpus-NAME.
. "${top_srcdir:-..}/tests/functions.sh"
shopt -s nullglob
bins=()
for t in "${top_builddir:-..}"/tests/fuzz/fuzz-*; do
  case ${t##*/} in (*.*) continue;; esac
  [ -x "$t" ] && [ -f "$t" ] && bins+=("$t")
done
[ ${#bins[@]} -gt 0 ] || skip no-fuzzing "no fuzz targets built (./configure --enable-fuzzing CC=clang)"
# A fuzzing build: the older targets in tests/ are libFuzzer binaries too
# (elsewhere they are unit tests of their own).
for t in "${top_builddir:-..}"/tests/fuzz-*; do
  case ${t##*/} in (*.*) continue;; esac
  [ -x "$t" ] && [ -f "$t" ] && bins+=("$t")
done
for b in "${bins[@]}"; do
  name=${b##*/fuzz-}
  corpus=
  d="$top_srcdir/tests/fuzz/corpus-$name"
  [ -d "$d" ] && corpus=$d
  [ -n "$corpus" ] || fail "fuzz-$name has no seed corpus (tests/fuzz/corpus-$name)"
  "$b" -runs=0 "$corpus" >"$TESTDIR/$name.log" 2>&1 || { tail -n 30 "$TESTDIR/$name.log"; fail "fuzz-$name fails on its own corpus"; }
  echo "fuzz-$name: $(ls "$corpus" | wc -l) corpus inputs replayed"
done
