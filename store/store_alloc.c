/* The sector allocator of the OSD store: a bitmap over the data area with
 * next-fit allocation, so sequential writes land in contiguous sectors. It
 * lives only in memory and is rebuilt from the object records at open. */
#include <config.h>
#include <errno.h>
#include <stdint.h>
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
  a->top = nsect - tc_store_overflow_sectors(nsect);
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
  a->tcursor = a->nsect;
  a->low_full = 0;
  a->zcursor = 0;
  a->zlow = SIZE_MAX;
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

/* First free sector at or after from below limit, or limit if none. */
static uint32_t
find_free(const struct tc_store_alloc *a, uint32_t from, uint32_t limit)
{
  size_t words = (limit + 63) / 64;
  size_t w = from / 64;
  if (from >= limit)
    return limit;
  uint64_t x = ~a->bits[w] & (~0ull << (from % 64));
  while (!x) {
    if (++w >= words)
      return limit;
    x = ~a->bits[w];
  }
  uint32_t s = (uint32_t) (w * 64 + __builtin_ctzll(x));
  return s < limit ? s : limit;
}

/* The last free sector below before, or UINT32_MAX if none. */
static uint32_t
find_free_down(const struct tc_store_alloc *a, uint32_t before)
{
  if (before == 0)
    return UINT32_MAX;
  size_t w = (before - 1) / 64;
  unsigned b = (before - 1) % 64;
  uint64_t x = ~a->bits[w] & (b == 63 ? ~0ull : (2ull << b) - 1);
  while (!x) {
    if (w == 0)
      return UINT32_MAX;
    x = ~a->bits[--w];
  }
  return (uint32_t) (w * 64 + 63 - __builtin_clzll(x));
}

/* Free sectors from s on below limit, at most max. */
static uint32_t
run_length(const struct tc_store_alloc *a, uint32_t s, uint32_t max, uint32_t limit)
{
  uint32_t n = 0;
  while (n < max && s + n < limit && !tc_store_bit(a->bits, s + n))
    n++;
  return n;
}

/* A large request in one run: at the cursor if the run there is free
 * (a sequential write going on), else at the first k = want/64 (rounded
 * up) wholly free bitmap words from where the last such search ended
 * (next-fit over words: cheap even over a large, full store). UINT32_MAX
 * if there is no such run. */
static uint32_t
find_large(struct tc_store_alloc *a, uint32_t want)
{
  if (a->cursor < a->top && run_length(a, a->cursor, want, a->top) == want)
    return a->cursor;
  size_t words = a->top / 64, k = (want + 63) / 64;   /* whole words below the overflow area only */
  if (words < k || a->zcursor == SIZE_MAX)   /* none since the last full scan */
    return UINT32_MAX;
  size_t w = a->zcursor < words ? a->zcursor : 0, seen = 0, run = 0;
  while (seen < words + k) {
    if (w >= words) {       /* wrap: a run does not span the end */
      w = 0;
      run = 0;
    }
    run = a->bits[w] ? 0 : run + 1;
    w++;
    seen++;
    if (run == k) {
      a->zcursor = w;
      return (uint32_t) ((w - k) * 64);
    }
  }
  /* No wholly free run anywhere: do not scan again on every large write
   * of a full store, only once a durable batch freed sectors (rewind). */
  a->zcursor = SIZE_MAX;
  return UINT32_MAX;
}

/* Next-fit below limit, but a multi-sector request skips holes shorter
 * than min(want, TC_STORE_ALLOC_MIN_RUN) for a while, so objects stay
 * contiguous even when single-sector overwrites have left holes behind. */
static uint32_t
next_fit(struct tc_store_alloc *a, uint32_t want, uint32_t limit, uint32_t *start)
{
  uint32_t min_run = want < TC_STORE_ALLOC_MIN_RUN ? want : TC_STORE_ALLOC_MIN_RUN;
  uint32_t from = a->cursor < limit ? a->cursor : 0;
  uint32_t s = from, best = limit, best_n = 0;
  int wrapped = 0;
  for (int holes = 0; holes < TC_STORE_ALLOC_MAX_HOLES; holes++) {
    s = find_free(a, s, limit);
    if (s >= limit) {
      if (wrapped)
        break;
      wrapped = 1;
      s = 0;
      continue;
    }
    if (wrapped && s >= from)
      break;   /* a full circle */
    uint32_t n = run_length(a, s, want, limit);
    if (n >= min_run) {
      best = s;
      best_n = n;
      break;
    }
    if (best == limit) {
      best = s;
      best_n = n;
    }
    s += n;
  }
  if (best == limit)
    return 0;
  *start = best;
  return best_n;
}

static void
mark_used(struct tc_store_alloc *a, uint32_t start, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++)
    tc_store_bit_set(a->bits, start + i);
  a->used += n;
}

uint32_t
tc_store_alloc_run(struct tc_store_alloc *a, uint32_t want, uint32_t *start)
{
  if (a->used >= a->nsect || want == 0)
    return 0;
  uint32_t at = want >= TC_STORE_ALLOC_LARGE ? find_large(a, want) : UINT32_MAX, n = want;
  /* Out of the overflow area while there is room below it (a full scan
   * below it on every allocation of a nearly full store is avoided). */
  if (at == UINT32_MAX && (a->low_full || !(n = next_fit(a, want, a->top, &at)))) {
    a->low_full = 1;
    if (!(n = next_fit(a, want, a->nsect, &at)))
      return 0;
  }
  mark_used(a, at, n);
  a->cursor = at + n < a->nsect ? at + n : 0;
  *start = at;
  return n;
}

uint32_t
tc_store_alloc_top(struct tc_store_alloc *a, uint32_t want, uint32_t *start)
{
  if (a->used >= a->nsect || want == 0)
    return 0;
  uint32_t s = find_free_down(a, a->tcursor);
  if (s == UINT32_MAX && a->tcursor < a->nsect)
    s = find_free_down(a, a->nsect);   /* wrap: above the cursor, freed since */
  if (s == UINT32_MAX)
    return 0;
  uint32_t n = 1;   /* extend downwards: the run ends at s */
  while (n < want && s >= n && !tc_store_bit(a->bits, s - n))
    n++;
  mark_used(a, s + 1 - n, n);
  a->tcursor = s + 1 - n;
  *start = s + 1 - n;
  return n;
}

int
tc_store_alloc_take(struct tc_store_alloc *a, uint32_t s)
{
  if (s >= a->nsect || tc_store_bit(a->bits, s))
    return 0;
  mark_used(a, s, 1);
  return 1;
}

void
tc_store_alloc_release(struct tc_store_alloc *a, uint32_t start, uint32_t n)
{
  if (n && start / 64 < a->zlow)
    a->zlow = start / 64;
  if (n && start < a->top)
    a->low_full = 0;
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
