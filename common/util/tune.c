#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include "error.h"
#include "tune.h"

void
tc_tune_malloc(void)
{
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  /* What free memory the heap keeps: enough for a burst of large requests
   * to reuse, not the 256 MiB a long multi-connection run used to leave
   * resident (nbdkit held 470 MB with 53 MB in use). */
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
  /* Few arenas: every nbdkit or FUSE worker thread otherwise gets its own
   * arena, each keeping its own free memory; with 2 to 4 the lock is
   * seldom contended (the machines have few cores). */
  mallopt(M_ARENA_MAX, 4);
}

static uint64_t
now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

void
tc_tune_release(void)
{
  /* At most one look a second, whichever thread calls: the last look's
   * time is the only state, and a lost race only skips a look. */
  static _Atomic uint64_t last;
  uint64_t now = now_ms(), prev = atomic_load(&last);
  if (now - prev < 1000 || !atomic_compare_exchange_strong(&last, &prev, now))
    return;
  struct mallinfo2 mi = mallinfo2();
  if (mi.fordblks > TC_TUNE_KEEP_FREE)
    malloc_trim(TC_TUNE_KEEP_FREE / 4);
}

int
tc_tune_sched_batch(void)
{
  struct sched_param sp = { .sched_priority = 0 };
  int e = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
  if (e)
    return tc_error(e, "option sched_batch: cannot put the thread under SCHED_BATCH: %s", strerror(e));
  return 0;
}
