/* XXH3-64 built for one instruction set. This file is compiled three times
 * (SSE2, AVX2, AVX-512) with TC_XXH_SUFFIX and the matching -m flags;
 * xxh3.c picks one at run time. */
#include <config.h>
#include <stddef.h>
#include <stdint.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#define TC_CAT_(a, b) a##b
#define TC_CAT(a, b) TC_CAT_(a, b)

uint64_t TC_CAT(tc_xxh3_64_seed_, TC_XXH_SUFFIX)(const void *data, size_t len, uint64_t seed);

uint64_t
TC_CAT(tc_xxh3_64_seed_, TC_XXH_SUFFIX)(const void *data, size_t len, uint64_t seed)
{
  return XXH3_64bits_withSeed(data, len, seed);
}
