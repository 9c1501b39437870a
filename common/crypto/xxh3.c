/* Run-time choice of the fastest XXH3 build for this CPU. Debian's
 * libxxhash is built for SSE2 only (~13 GB/s here); the AVX-512 build of the
 * same header reaches 30+ GB/s. The choice is made once (pthread_once) and
 * only read afterwards. */
#include <config.h>
#include <pthread.h>
#include "crypto.h"

uint64_t tc_xxh3_64_seed_sse2(const void *data, size_t len, uint64_t seed);
uint64_t tc_xxh3_64_seed_avx2(const void *data, size_t len, uint64_t seed);
uint64_t tc_xxh3_64_seed_avx512(const void *data, size_t len, uint64_t seed);

typedef uint64_t (*xxh3_fn)(const void *, size_t, uint64_t);
static xxh3_fn xxh3_best = tc_xxh3_64_seed_sse2;
static const char *xxh3_name = "sse2";
static pthread_once_t xxh3_once = PTHREAD_ONCE_INIT;

static void
xxh3_choose(void)
{
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    xxh3_best = tc_xxh3_64_seed_avx512;
    xxh3_name = "avx512";
  }
  else if (__builtin_cpu_supports("avx2")) {
    xxh3_best = tc_xxh3_64_seed_avx2;
    xxh3_name = "avx2";
  }
}

uint64_t
tc_xxh3_64_seed(const void *data, size_t len, uint64_t seed)
{
  pthread_once(&xxh3_once, xxh3_choose);
  return xxh3_best(data, len, seed);
}

uint64_t
tc_xxh3_64(const void *data, size_t len)
{
  /* XXH3 with seed 0 is defined to equal the unseeded XXH3. */
  return tc_xxh3_64_seed(data, len, 0);
}

const char *
tc_xxh3_impl(void)
{
  pthread_once(&xxh3_once, xxh3_choose);
  return xxh3_name;
}
