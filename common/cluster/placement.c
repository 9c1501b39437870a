/* PG placement (see placement.h): keep what is valid, fill holes on the
 * least loaded allowed OSD, then move replicas from over- to under-loaded
 * OSDs only while that is worth it. */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "placement.h"

/* Kept replicas move only towards an OSD more than BAND replicas below its
 * target, or, for an OSD that already held replicas, more than BAND_FRAC of
 * its target below: a new OSD fills up to its share, while the unevenness
 * an OSD leaving leaves behind (host constraints) never moves other data. */
#define BAND 1.5
#define BAND_FRAC 0.15

struct ctx {
  size_t n;                     /* eligible OSDs, sorted by id */
  uint64_t *id;
  int *dom;                     /* domain index per OSD */
  double *target;
  long *load;
  int n_dom;
  bool strict;                  /* enough domains: one replica per domain per PG */
  uint32_t pg_count, size;
  uint64_t *set;                /* out->osd_set */
  bool *fresh;                  /* slot placed in this computation */
  bool *had;                    /* OSD held replicas in the previous placement */
};

static int
cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

/* Index of OSD id among the eligible ones, or -1. */
static long
osd_index(const struct ctx *c, uint64_t id)
{
  if (!id)
    return -1;
  const uint64_t *p = bsearch(&id, c->id, c->n, sizeof *c->id, cmp_u64);
  return p ? p - c->id : -1;
}

/* Distribute total over items by weight, none above cap (water-filling). */
static void
water_fill(const double *w, size_t n, double cap, double total, double *t)
{
  bool *fixed = calloc(n ? n : 1, sizeof *fixed);
  if (!fixed) {
    for (size_t i = 0; i < n; i++)
      t[i] = 0;
    return;
  }
  for (;;) {
    double rem = total, wsum = 0;
    for (size_t i = 0; i < n; i++)
      if (fixed[i])
        rem -= cap;
      else
        wsum += w[i];
    bool changed = false;
    for (size_t i = 0; i < n; i++)
      if (!fixed[i]) {
        t[i] = wsum > 0 ? rem * w[i] / wsum : 0;
        if (t[i] > cap + 1e-9) {
          fixed[i] = true;
          changed = true;
        }
      }
    if (!changed)
      break;
  }
  for (size_t i = 0; i < n; i++)
    if (fixed[i])
      t[i] = cap;
  free(fixed);
}

static int
build_ctx(const struct tc_placement_osd *osds, size_t n_osds, const struct tc_placement_pool *pool, struct ctx *c,
          size_t *orig /* eligible index -> osds index */)
{
  memset(c, 0, sizeof *c);
  if (pool->pg_count == 0 || pool->pg_size == 0 || pool->pg_size > 64)
    return tc_error(EINVAL, "placement: pg_count %u, pg_size %u out of range", pool->pg_count, pool->pg_size);
  size_t m = n_osds ? n_osds : 1;
  c->id = calloc(m, sizeof *c->id);
  c->dom = calloc(m, sizeof *c->dom);
  c->target = calloc(m, sizeof *c->target);
  c->load = calloc(m, sizeof *c->load);
  size_t *idx = calloc(m, sizeof *idx);
  if (!c->id || !c->dom || !c->target || !c->load || !idx) {
    free(idx);
    return tc_error(ENOMEM, "placement: out of memory");
  }
  for (size_t i = 0; i < n_osds; i++) {
    if (!osds[i].up || !(osds[i].weight > 0) || !osds[i].id)
      continue;
    c->id[c->n++] = osds[i].id;
  }
  qsort(c->id, c->n, sizeof *c->id, cmp_u64);
  for (size_t i = 1; i < c->n; i++)
    if (c->id[i] == c->id[i - 1]) {
      free(idx);
      return tc_error(EINVAL, "placement: OSD %llu listed twice", (unsigned long long) c->id[i]);
    }
  for (size_t i = 0; i < n_osds; i++) {
    long j = osds[i].up && osds[i].weight > 0 ? osd_index(c, osds[i].id) : -1;
    if (j >= 0)
      idx[j] = i;
  }
  /* Domains: hosts by name (in OSD id order), or one per OSD. */
  const char **names = calloc(m, sizeof *names);
  double *w = calloc(m, sizeof *w), *dt = calloc(m, sizeof *dt), *dw = calloc(m, sizeof *dw);
  if (!names || !w || !dt || !dw) {
    free(names); free(w); free(dt); free(dw); free(idx);
    return tc_error(ENOMEM, "placement: out of memory");
  }
  for (size_t i = 0; i < c->n; i++) {
    const struct tc_placement_osd *o = &osds[idx[i]];
    w[i] = o->weight;
    int d;
    if (pool->failure_domain == TC_FD_OSD || !o->host)
      d = c->n_dom;
    else
      for (d = 0; d < c->n_dom; d++)
        if (names[d] && !strcmp(names[d], o->host))
          break;
    if (d == c->n_dom)
      names[c->n_dom++] = pool->failure_domain == TC_FD_OSD ? NULL : o->host;
    c->dom[i] = d;
    dw[d] += w[i];
  }
  c->pg_count = pool->pg_count;
  c->size = pool->pg_size;
  c->strict = c->n_dom >= (int) pool->pg_size;
  size_t filled = c->n < pool->pg_size ? c->n : pool->pg_size;
  double total = (double) pool->pg_count * (double) filled;
  if (c->strict) {
    /* Domains first (one replica of a PG each at most), then their OSDs. */
    water_fill(dw, (size_t) c->n_dom, pool->pg_count, total, dt);
    for (size_t i = 0; i < c->n; i++)
      c->target[i] = dt[c->dom[i]] * w[i] / dw[c->dom[i]];
  }
  else
    water_fill(w, c->n, pool->pg_count, total, c->target);
  free(names); free(w); free(dt); free(dw);
  if (orig)
    memcpy(orig, idx, c->n * sizeof *idx);
  free(idx);
  return 0;
}

static void
free_ctx(struct ctx *c)
{
  free(c->id);
  free(c->dom);
  free(c->target);
  free(c->load);
}

int
tc_placement_targets(const struct tc_placement_osd *osds, size_t n_osds, const struct tc_placement_pool *pool,
                     double *targets)
{
  struct ctx c;
  size_t *orig = calloc(n_osds ? n_osds : 1, sizeof *orig);
  if (!orig)
    return tc_error(ENOMEM, "placement: out of memory");
  int r = build_ctx(osds, n_osds, pool, &c, orig);
  if (r == 0) {
    for (size_t i = 0; i < n_osds; i++)
      targets[i] = 0;
    for (size_t i = 0; i < c.n; i++)
      targets[orig[i]] = c.target[i];
  }
  free(orig);
  free_ctx(&c);
  return r;
}

/* May OSD i take a slot of PG pg in place of slot `skip` (-1: an empty
 * slot)? Not already there, and (strict) its domain not used by another. */
static bool
allowed(const struct ctx *c, uint32_t pg, long i, int skip, int *domains_used)
{
  const uint64_t *s = &c->set[(size_t) pg * c->size];
  int used = 0;
  for (uint32_t j = 0; j < c->size; j++) {
    if ((int) j == skip || !s[j])
      continue;
    if (s[j] == c->id[i])
      return false;
    long o = osd_index(c, s[j]);
    if (o >= 0 && c->dom[o] == c->dom[i]) {
      if (c->strict)
        return false;
      used = 1;
    }
  }
  if (domains_used)
    *domains_used = used;
  return true;
}

static double
dev(const struct ctx *c, long i)
{
  return (double) c->load[i] - c->target[i];
}

/* Fill the empty slots of pg with the least loaded allowed OSDs (in
 * non-strict mode, preferring a domain the PG does not use yet). */
static void
fill_pg(struct ctx *c, uint32_t pg)
{
  uint64_t *s = &c->set[(size_t) pg * c->size];
  for (uint32_t j = 0; j < c->size; j++) {
    if (s[j])
      continue;
    long best = -1;
    int best_used = 0;
    for (size_t i = 0; i < c->n; i++) {
      int used = 0;
      if (!allowed(c, pg, (long) i, -1, &used))
        continue;
      if (best < 0 || used < best_used || (used == best_used && dev(c, (long) i) < dev(c, best) - 1e-9)) {
        best = (long) i;
        best_used = used;
      }
    }
    if (best < 0)
      return;
    s[j] = c->id[best];
    c->fresh[(size_t) pg * c->size + j] = true;
    c->load[best]++;
  }
}

static double
band(const struct ctx *c, long i)
{
  double b = c->had[i] ? BAND_FRAC * c->target[i] : 0;
  return b > BAND ? b : BAND;
}

/* One move from an overloaded OSD to an underloaded one; false if none is
 * worth it. fresh_only: only replicas placed in this computation move (they
 * move anyway, so evening them out costs nothing); else any replica, but
 * only towards an OSD clearly below its target. */
static bool
rebalance_step(struct ctx *c, long *order, bool fresh_only)
{
  for (size_t i = 0; i < c->n; i++)
    order[i] = (long) i;
  /* Donors by deviation, highest first (simple insertion sort keeps ties by id). */
  for (size_t i = 1; i < c->n; i++) {
    long x = order[i];
    size_t j = i;
    while (j > 0 && dev(c, order[j - 1]) < dev(c, x) - 1e-9) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = x;
  }
  for (size_t di = 0; di < c->n; di++) {
    long d = order[di];
    double dd = dev(c, d);
    /* Receivers are scanned from the end of order (lowest deviation). */
    if (dd - dev(c, order[c->n - 1]) <= 1 + 1e-9)
      return false;
    long best_r = -1;
    uint32_t best_pg = 0;
    int best_slot = 0;
    for (uint32_t pg = 0; pg < c->pg_count; pg++) {
      uint64_t *s = &c->set[(size_t) pg * c->size];
      int slot = -1;
      for (uint32_t j = 0; j < c->size; j++)
        if (s[j] == c->id[d] && (!fresh_only || c->fresh[(size_t) pg * c->size + j]))
          slot = (int) j;
      if (slot < 0)
        continue;
      for (size_t ri = c->n; ri-- > 0;) {
        long r = order[ri];
        if (best_r >= 0 && dev(c, r) >= dev(c, best_r) - 1e-9)
          break;
        if (dd - dev(c, r) <= 1 + 1e-9)
          break;
        if (r == d || (!fresh_only && !(dev(c, r) < -band(c, r))) || !allowed(c, pg, r, slot, NULL))
          continue;
        /* In non-strict mode do not crowd a domain to balance. */
        int used = 0;
        allowed(c, pg, r, slot, &used);
        if (!c->strict && used && c->dom[r] != c->dom[d])
          continue;
        best_r = r;
        best_pg = pg;
        best_slot = slot;
        break;
      }
    }
    if (best_r < 0)
      continue;
    double dr = dev(c, best_r);
    /* Only an underloaded receiver justifies moving data: after an OSD
     * leaves everyone is at or above target, so nothing else moves. */
    if (!fresh_only && !(dr < -band(c, best_r)))
      continue;
    c->set[(size_t) best_pg * c->size + (size_t) best_slot] = c->id[best_r];
    c->fresh[(size_t) best_pg * c->size + (size_t) best_slot] = true;
    c->load[d]--;
    c->load[best_r]++;
    return true;
  }
  return false;
}

long
tc_placement_compute(const struct tc_placement_osd *osds, size_t n_osds, const struct tc_placement_pool *pool,
                     const struct tc_placement *prev, struct tc_placement *out)
{
  struct ctx c;
  memset(out, 0, sizeof *out);
  if (build_ctx(osds, n_osds, pool, &c, NULL) < 0) {
    free_ctx(&c);
    return -1;
  }
  out->pg_count = pool->pg_count;
  out->pg_size = pool->pg_size;
  out->osd_set = calloc((size_t) pool->pg_count * pool->pg_size, sizeof *out->osd_set);
  out->primary = calloc(pool->pg_count, sizeof *out->primary);
  long *order = calloc(c.n ? c.n : 1, sizeof *order);
  long *prims = calloc(c.n ? c.n : 1, sizeof *prims);
  c.fresh = calloc((size_t) pool->pg_count * pool->pg_size, sizeof *c.fresh);
  c.had = calloc(c.n ? c.n : 1, sizeof *c.had);
  if (!out->osd_set || !out->primary || !order || !prims || !c.fresh || !c.had) {
    free(c.had);
    free(c.fresh);
    free(order);
    free(prims);
    free_ctx(&c);
    tc_placement_free(out);
    return tc_error(ENOMEM, "placement: out of memory");
  }
  c.set = out->osd_set;
  bool have_prev = prev && prev->pg_count && prev->osd_set;

  /* 1. Keep every previous replica that is still valid. */
  if (have_prev)
    for (uint32_t pg = 0; pg < pool->pg_count && pg < prev->pg_count; pg++)
      for (uint32_t j = 0; j < pool->pg_size && j < prev->pg_size; j++) {
        uint64_t id = prev->osd_set[(size_t) pg * prev->pg_size + j];
        long i = osd_index(&c, id);
        if (i < 0 || !allowed(&c, pg, i, -1, NULL))
          continue;
        c.set[(size_t) pg * c.size + j] = id;
        c.load[i]++;
        c.had[i] = true;
      }
  /* 2. Fill the holes. */
  for (uint32_t pg = 0; pg < pool->pg_count; pg++)
    fill_pg(&c, pg);
  /* 3. Even out what the fill could not (a new OSD, a changed weight). */
  for (size_t guard = (size_t) pool->pg_count * pool->pg_size * 2; guard > 0; guard--)
    if (!rebalance_step(&c, order, true) && !rebalance_step(&c, order, false))
      break;
  /* 4. Primaries: keep, else the member with the fewest primaries. */
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t pg = 0; pg < pool->pg_count; pg++) {
      const uint64_t *s = &c.set[(size_t) pg * c.size];
      uint32_t members = 0;
      for (uint32_t j = 0; j < c.size; j++)
        members += s[j] != 0;
      if (members == 0 || members < pool->pg_minsize)
        continue;
      if (pass == 0) {
        uint64_t p = have_prev && pg < prev->pg_count && prev->primary ? prev->primary[pg] : 0;
        for (uint32_t j = 0; p && j < c.size; j++)
          if (s[j] == p) {
            out->primary[pg] = p;
            prims[osd_index(&c, p)]++;
          }
        continue;
      }
      if (out->primary[pg])
        continue;
      long best = -1;
      for (uint32_t j = 0; j < c.size; j++) {
        long i = osd_index(&c, s[j]);
        if (i >= 0 && (best < 0 || prims[i] < prims[best]))
          best = i;
      }
      out->primary[pg] = c.id[best];
      prims[best]++;
    }
  long changed = 0;
  for (uint32_t pg = 0; pg < pool->pg_count; pg++)
    for (uint32_t j = 0; j < pool->pg_size; j++) {
      uint64_t was = have_prev && pg < prev->pg_count && j < prev->pg_size
                       ? prev->osd_set[(size_t) pg * prev->pg_size + j] : 0;
      changed += c.set[(size_t) pg * c.size + j] != was;
    }
  free(order);
  free(prims);
  free(c.fresh);
  free(c.had);
  free_ctx(&c);
  return changed;
}

void
tc_placement_free(struct tc_placement *p)
{
  if (!p)
    return;
  free(p->osd_set);
  free(p->primary);
  memset(p, 0, sizeof *p);
}
