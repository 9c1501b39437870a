#!/usr/bin/env bash
# Every C file of the daemons, tools, libraries, tests and benchmarks
# compiles under clang (the compiler of the fuzzing build, ./configure
# --enable-fuzzing CC=clang) with this build's warnings as errors. The
# build itself uses gcc, so without this a clang-only error lands unseen:
# __builtin_cpu_supports("vaes"), which clang 14 does not know, stopped
# the fuzzing build for a day. Syntax only (clang -fsyntax-only): about
# fifteen seconds for the whole tree.
. "${top_srcdir:-..}/tests/functions.sh"
set -e
requires clang
src=$top_srcdir bld=$top_builddir
mk=$bld/common/crypto/Makefile
[ -f "$mk" ] || skip not-built "$mk missing (configure first)"
# The flags configure found, as the Makefiles hold them.
var () { sed -n "s/^$1 = //p" "$mk" | head -1; }
warn="$(var WARN_CFLAGS)"
case " $warn " in (*" -Werror "*) ;; (*) warn="$warn -Werror" ;; esac
pkgs="$(var GNUTLS_CFLAGS) $(var NETTLE_CFLAGS) $(var XXHASH_CFLAGS) $(var JSONC_CFLAGS)"
for m in fuse/Makefile gateway/Makefile nbdkit-plugin/Makefile common/kv/Makefile; do
  for v in FUSE3_CFLAGS MHD_CFLAGS NBDKIT_CFLAGS CURL_CFLAGS LMDB_CFLAGS LIBNBD_CFLAGS URING_CFLAGS; do
    [ -f "$bld/$m" ] && pkgs="$pkgs $(sed -n "s/^$v = //p" "$bld/$m" | head -1)"
  done
done
inc="-I$bld"
for d in common/util common/crypto common/msgr common/kv common/cluster common/image store osd gateway cli fuse \
         nbdkit-plugin tests; do
  inc="$inc -I$src/$d"
done
n=0 bad=0
# shellcheck disable=SC2086
for c in "$src"/common/*/*.c "$src"/store/*.c "$src"/osd/*.c "$src"/gateway/*.c "$src"/cli/*.c "$src"/fuse/*.c \
         "$src"/nbdkit-plugin/*.c "$src"/tests/*.c "$src"/tests/fuzz/*.c "$src"/bench/*.c; do
  extra=
  case $c in
    (*_vaes.c) extra="-mavx2 -maes -mpclmul -mvaes -mvpclmulqdq" ;;
    (*/xxh3_impl.c) extra="-DTC_XXH_SUFFIX=avx2 -DXXH_VECTOR=XXH_AVX2 -mavx2" ;;
    (*/common/crypto/*) extra="-DTC_HAVE_VAES" ;;
    (*/tests/fuzz/*) extra="-DTC_FUZZ_NAME=\"x\"" ;;
  esac
  n=$((n + 1))
  # shellcheck disable=SC2086
  if ! clang -fsyntax-only -std=gnu11 -pthread $warn $inc $pkgs $extra "$c" 2>"$TESTDIR/err"; then
    bad=$((bad + 1))
    echo "FAIL: clang: ${c#"$src"/}:"
    head -8 "$TESTDIR/err"
  fi
done
[ "$n" -gt 100 ] || fail "only $n C files found under $src"
[ "$bad" = 0 ] || fail "$bad of $n files do not compile under clang"
echo "test-clang: $n files compile under clang ($(clang --version | head -1))"
