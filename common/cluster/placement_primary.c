/* Evening out a pool's primaries (placement.h). tc_placement_compute keeps
 * a PG's primary while it is in the set, so an OSD that joins leads no PG
 * until another loses its; a pool created while one OSD was still starting
 * never gives it any. Every read and every write's fan-out runs on the
 * primary, so that OSD would sit out a third of the work of three. Moving
 * a primary makes the PG peer again (a short pause for its clients), and a
 * member still being filled would answer with its data stale: hence only
 * PGs the caller knows to be clean move, and only while that evens things
 * out by a full step. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include "error.h"
#include "placement.h"

/* The index of id in ids[0..n), or -1. */
static long
find(const uint64_t *ids, size_t n, uint64_t id)
{
  for (size_t i = 0; i < n; i++)
    if (ids[i] == id)
      return (long) i;
  return -1;
}

long
tc_placement_balance_primaries(struct tc_placement *pl, const bool *clean)
{
  size_t slots = (size_t) pl->pg_count * pl->pg_size;
  if (!clean || !slots)
    return 0;
  /* The members of any PG and how many PGs each leads. */
  uint64_t *ids = calloc(slots, sizeof *ids);
  long *led = calloc(slots, sizeof *led);
  if (!ids || !led) {
    free(ids);
    free(led);
    return tc_error(ENOMEM, "placement: out of memory balancing primaries");
  }
  size_t n = 0;
  for (size_t s = 0; s < slots; s++)
    if (pl->osd_set[s] && find(ids, n, pl->osd_set[s]) < 0)
      ids[n++] = pl->osd_set[s];
  for (uint32_t pg = 0; pg < pl->pg_count; pg++) {
    long i = pl->primary[pg] ? find(ids, n, pl->primary[pg]) : -1;
    if (i >= 0)
      led[i]++;
  }
  /* Each move lowers the sum of the squares of led[]: it ends. */
  long moved = 0;
  for (bool again = true; again;) {
    again = false;
    for (uint32_t pg = 0; pg < pl->pg_count; pg++) {
      long cur = pl->primary[pg] && clean[pg] ? find(ids, n, pl->primary[pg]) : -1;
      if (cur < 0)
        continue;
      long best = -1;
      for (uint32_t j = 0; j < pl->pg_size; j++) {
        long i = find(ids, n, pl->osd_set[(size_t) pg * pl->pg_size + j]);
        if (i >= 0 && (best < 0 || led[i] < led[best]))
          best = i;
      }
      if (best < 0 || led[cur] < led[best] + 2)
        continue;
      pl->primary[pg] = ids[best];
      led[cur]--;
      led[best]++;
      moved++;
      again = true;
    }
  }
  free(ids);
  free(led);
  return moved;
}
