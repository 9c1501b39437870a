/* XXH3-64 built for one instruction set. This file is compiled three times
 * (SSE2, AVX2, AVX-512) with TC_XXH_SUFFIX and the matching -m flags;
 * xxh3.c picks one at run time. */
#include <config.h>
#include <stddef.h>
#include <stdint.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#define TC_CAT_(a, b) a##b
#define TC_CAT(a, b) TC_CAT_(a, b)

uint64_t TC_CAT(tc_xxh3_64_seed_, TC_XXH_SUFFIX)(const void *data, size_t len, uint64_t seed);

uint64_t
TC_CAT(tc_xxh3_64_seed_, TC_XXH_SUFFIX)(const void *data, size_t len, uint64_t seed)
{
  uint64_t h = XXH3_64bits_withSeed(data, len, seed);
#ifdef __AVX__
  /* GCC 12 emits no vzeroupper after xxHash's inlined AVX2/AVX-512 loops,
   * and the dirty upper register state then slows every legacy-SSE
   * instruction that follows: GnuTLS's AES-NI XTS ran at 3.4 GB/s instead
   * of 6.3 GB/s after a hash (Zen 4, `tromcho cpubench`). Clear it on the
   * way out; tests/test-crypto.c checks the state with XGETBV. */
  _mm256_zeroupper();
#endif
  return h;
}
