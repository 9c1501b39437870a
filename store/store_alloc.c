/* The sector allocator of the OSD store: a bitmap over the data area with
 * next-fit allocation, so sequential writes land in contiguous sectors. It
 * lives only in memory and is rebuilt from the object records at open. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store_impl.h"
#include "vector.h"

int
tc_store_alloc_init(struct tc_store_alloc *a, uint32_t nsect)
{
  memset(a, 0, sizeof *a);
  a->bits = calloc((nsect + 63) / 64 + 1, sizeof(uint64_t));
  if (!a->bits)
    return tc_error(ENOMEM, "store allocator: no memory for %u sectors", nsect);
  a->nsect = nsect;
  tc_store_alloc_reset(a);
  return 0;
}

void
tc_store_alloc_destroy(struct tc_store_alloc *a)
{
  free(a->bits);
  a->bits = NULL;
}

void
tc_store_alloc_reset(struct tc_store_alloc *a)
{
  size_t words = (a->nsect + 63) / 64;
  memset(a->bits, 0, (words + 1) * sizeof(uint64_t));
  /* Bits past the end are permanently "used" so searches stop there. */
  for (uint32_t i = a->nsect; i < words * 64 + 64; i++)
    a->bits[i / 64] |= 1ull << (i % 64);
  a->used = 0;
  a->cursor = 0;
}

int
tc_store_alloc_claim(struct tc_store_alloc *a, uint32_t loc)
{
  if (loc >= a->nsect || tc_store_bit(a->bits, loc))
    return -1;
  tc_store_bit_set(a->bits, loc);
  a->used++;
  return 0;
}

/* First free sector at or after from, or nsect if none. */
static uint32_t
find_free(const struct tc_store_alloc *a, uint32_t from)
{
  size_t words = (a->nsect + 63) / 64;
  size_t w = from / 64;
  if (w >= words)
    return a->nsect;
  uint64_t x = ~a->bits[w] & (~0ull << (from % 64));
  while (!x) {
    if (++w >= words)
      return a->nsect;
    x = ~a->bits[w];
  }
  uint32_t s = (uint32_t) (w * 64 + __builtin_ctzll(x));
  return s < a->nsect ? s : a->nsect;
}

/* Free sectors from s on, at most max. */
static uint32_t
run_length(const struct tc_store_alloc *a, uint32_t s, uint32_t max)
{
  uint32_t n = 0;
  while (n < max && s + n < a->nsect && !tc_store_bit(a->bits, s + n))
    n++;
  return n;
}

uint32_t
tc_store_alloc_run(struct tc_store_alloc *a, uint32_t want, uint32_t *start)
{
  if (a->used >= a->nsect || want == 0)
    return 0;
  /* Next-fit, but a multi-sector request skips holes shorter than
   * min(want, TC_STORE_ALLOC_MIN_RUN) for a while, so objects stay contiguous
   * even when single-sector overwrites have left holes behind. */
  uint32_t min_run = want < TC_STORE_ALLOC_MIN_RUN ? want : TC_STORE_ALLOC_MIN_RUN;
  uint32_t s = a->cursor, best = a->nsect, best_n = 0;
  int wrapped = 0;
  for (int holes = 0; holes < TC_STORE_ALLOC_MAX_HOLES; holes++) {
    s = find_free(a, s);
    if (s >= a->nsect) {
      if (wrapped)
        break;
      wrapped = 1;
      s = 0;
      continue;
    }
    if (wrapped && s >= a->cursor)
      break;   /* a full circle */
    uint32_t n = run_length(a, s, want);
    if (n >= min_run) {
      best = s;
      best_n = n;
      break;
    }
    if (best == a->nsect) {
      best = s;
      best_n = n;
    }
    s += n;
  }
  if (best == a->nsect)
    return 0;
  for (uint32_t i = 0; i < best_n; i++)
    tc_store_bit_set(a->bits, best + i);
  a->used += best_n;
  a->cursor = best + best_n < a->nsect ? best + best_n : 0;
  *start = best;
  return best_n;
}

void
tc_store_alloc_release(struct tc_store_alloc *a, uint32_t start, uint32_t n)
{
  for (uint32_t i = start; i < start + n && i < a->nsect; i++)
    if (tc_store_bit(a->bits, i)) {
      tc_store_bit_clear(a->bits, i);
      a->used--;
    }
}

int
tc_store_runs_add(struct tc_store_runs *r, uint32_t start, uint32_t n)
{
  /* Extend the last run when contiguous: sequential frees stay one entry. */
  if (r->n && r->v[r->n - 1][0] + r->v[r->n - 1][1] == start) {
    r->v[r->n - 1][1] += n;
    return 0;
  }
  if (tc_grow(&r->v, &r->cap, r->n + 1, sizeof r->v[0], 64) < 0)
    return tc_error(ENOMEM, "store: no memory for the list of sectors to free");
  r->v[r->n][0] = start;
  r->v[r->n][1] = n;
  r->n++;
  return 0;
}
