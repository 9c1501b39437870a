/* PG placement on synthetic clusters of 3 to 100 OSDs over even and uneven
 * hosts: failure domains, balance, minimal movement on leave and join, and
 * stability (recomputing changes nothing). */
#include <config.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "placement.h"
#include "tap.h"

#define MAX_OSDS 128

struct cluster {
  struct tc_placement_osd osd[MAX_OSDS];
  char host[MAX_OSDS][16];
  size_t n;
  int n_hosts;
};

static void
add_osd(struct cluster *c, int host)
{
  snprintf(c->host[c->n], sizeof c->host[0], "h%d", host);
  c->osd[c->n] = (struct tc_placement_osd) { .id = c->n + 1, .host = c->host[c->n], .weight = 1, .up = true };
  c->n++;
  if (host + 1 > c->n_hosts)
    c->n_hosts = host + 1;
}

static void
make_cluster(struct cluster *c, const int *per_host, int hosts)
{
  memset(c, 0, sizeof *c);
  for (int h = 0; h < hosts; h++)
    for (int i = 0; i < per_host[h]; i++)
      add_osd(c, h);
}

static int
host_of(const struct cluster *c, uint64_t id)
{
  return atoi(c->osd[id - 1].host + 1);
}

static int
live_hosts(const struct cluster *c)
{
  int seen[MAX_OSDS] = { 0 }, n = 0;
  for (size_t i = 0; i < c->n; i++)
    if (c->osd[i].up && !seen[host_of(c, c->osd[i].id)]++)
      n++;
  return n;
}

/* Every live host has as many live OSDs as every other. */
static bool
evenly_spread(const struct cluster *c)
{
  int per[MAX_OSDS] = { 0 }, want = -1;
  for (size_t i = 0; i < c->n; i++)
    if (c->osd[i].up)
      per[host_of(c, c->osd[i].id)]++;
  for (int h = 0; h < MAX_OSDS; h++)
    if (per[h]) {
      if (want >= 0 && per[h] != want)
        return false;
      want = per[h];
    }
  return true;
}

/* Check validity and balance; returns max-min spread in percent of max. */
static double
check_placement(const char *what, const struct cluster *c, const struct tc_placement_pool *pool,
                const struct tc_placement *p, bool even)
{
  long load[MAX_OSDS + 1] = { 0 };
  size_t up = 0;
  for (size_t i = 0; i < c->n; i++)
    up += c->osd[i].up;
  uint32_t want = up < pool->pg_size ? (uint32_t) up : pool->pg_size;
  int hosts = live_hosts(c);
  bool strict = pool->failure_domain == TC_FD_OSD || hosts >= (int) pool->pg_size;
  int bad_fill = 0, bad_dup = 0, bad_host = 0, bad_down = 0, bad_primary = 0, bad_spread = 0;
  for (uint32_t pg = 0; pg < p->pg_count; pg++) {
    const uint64_t *s = &p->osd_set[(size_t) pg * p->pg_size];
    uint32_t members = 0;
    int hosts_in_pg = 0, seen_host[MAX_OSDS] = { 0 };
    for (uint32_t j = 0; j < p->pg_size; j++) {
      if (!s[j])
        continue;
      members++;
      if (!c->osd[s[j] - 1].up)
        bad_down++;
      load[s[j]]++;
      for (uint32_t k = 0; k < j; k++)
        if (s[k] == s[j])
          bad_dup++;
      if (!seen_host[host_of(c, s[j])]++)
        hosts_in_pg++;
      else if (strict && pool->failure_domain == TC_FD_HOST)
        bad_host++;
    }
    if (members != want)
      bad_fill++;
    /* With fewer hosts than replicas, a PG still spans every host. */
    if (!strict && hosts_in_pg < (hosts < (int) members ? hosts : (int) members))
      bad_spread++;
    bool prim_ok = p->primary[pg] == 0 ? members < pool->pg_minsize : false;
    for (uint32_t j = 0; j < p->pg_size; j++)
      if (s[j] && s[j] == p->primary[pg])
        prim_ok = true;
    if (!prim_ok)
      bad_primary++;
  }
  CHECK(!bad_fill, "%s: %d PGs without %u replicas", what, bad_fill, want);
  CHECK(!bad_dup, "%s: %d PGs with an OSD twice", what, bad_dup);
  CHECK(!bad_host, "%s: %d PGs with two replicas on one host", what, bad_host);
  CHECK(!bad_down, "%s: %d replicas on down OSDs", what, bad_down);
  CHECK(!bad_primary, "%s: %d PGs whose primary is not a member", what, bad_primary);
  CHECK(!bad_spread, "%s: %d PGs not spread over all hosts", what, bad_spread);

  /* Balance against the targets, and across OSDs when hosts are even. */
  double targets[MAX_OSDS];
  tc_placement_targets(c->osd, c->n, pool, targets);
  long mx = 0, mn = -1;
  int off_target = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (!c->osd[i].up)
      continue;
    long l = load[c->osd[i].id];
    if (l > mx) mx = l;
    if (mn < 0 || l < mn) mn = l;
    /* Uneven hosts: an OSD leaving may leave 15% behind rather than move
     * PGs that did not have it (placement.c, BAND_FRAC). */
    double tol = fmax(2.0, (even ? 0.1 : 0.15) * targets[i]);
    if (fabs((double) l - targets[i]) > tol) {
      if (!off_target)
        fprintf(stderr, "%s: osd %zu load %ld target %.1f\n", what, i + 1, l, targets[i]);
      off_target++;
    }
  }
  CHECK(!off_target, "%s: %d OSDs more than %d%% off their target", what, off_target, even ? 10 : 15);
  double spread = mx ? 100.0 * (double) (mx - mn) / (double) mx : 0;
  if (even)
    CHECK(spread <= 10.0, "%s: most and least loaded OSD differ by %.1f%% (%ld vs %ld)", what, spread, mx, mn);
  return spread;
}

static long
compute(const struct cluster *c, const struct tc_placement_pool *pool, const struct tc_placement *prev,
        struct tc_placement *out)
{
  long r = tc_placement_compute(c->osd, c->n, pool, prev, out);
  if (r < 0) {
    fprintf(stderr, "tc_placement_compute: %s\n", tc_last_error());
    exit(1);
  }
  return r;
}

/* PGs whose set differs, and whether only `osd`'s slot changed in them. */
static void
diff(const struct tc_placement *a, const struct tc_placement *b, uint64_t osd, long *changed_pgs,
     long *pgs_with_osd, long *bad, long *moved)
{
  *changed_pgs = *pgs_with_osd = *bad = *moved = 0;
  for (uint32_t pg = 0; pg < a->pg_count; pg++) {
    const uint64_t *x = &a->osd_set[(size_t) pg * a->pg_size], *y = &b->osd_set[(size_t) pg * b->pg_size];
    bool had = false, ch = false;
    for (uint32_t j = 0; j < a->pg_size; j++) {
      had |= x[j] == osd;
      if (x[j] != y[j]) {
        ch = true;
        (*moved)++;
        if (x[j] != osd)
          (*bad)++;
      }
    }
    *pgs_with_osd += had;
    *changed_pgs += ch;
    if (ch && !had)
      (*bad)++;
  }
}

/* Replicas that must move for balance: what under-target OSDs lack. */
static double
needed_moves(const struct cluster *c, const struct tc_placement_pool *pool, const struct tc_placement *prev)
{
  double targets[MAX_OSDS], need = 0;
  long load[MAX_OSDS + 1] = { 0 };
  tc_placement_targets(c->osd, c->n, pool, targets);
  for (size_t i = 0; i < (size_t) prev->pg_count * prev->pg_size; i++)
    if (prev->osd_set[i])
      load[prev->osd_set[i]]++;
  for (size_t i = 0; i < c->n; i++)
    if (c->osd[i].up && targets[i] > (double) load[c->osd[i].id])
      need += targets[i] - (double) load[c->osd[i].id];
  return need;
}

/* The join bound: ~ceil(replicas / N) * 1.1 + slack; where host caps force
 * more (a host that held a replica of every PG gains an OSD), what balance
 * needs * 1.1 + slack. */
static double
join_limit(const struct cluster *c, const struct tc_placement_pool *pool, const struct tc_placement *prev)
{
  size_t up = 0;
  for (size_t i = 0; i < c->n; i++)
    up += c->osd[i].up;
  double even = ceil((double) pool->pg_count * pool->pg_size / (double) up) * 1.1 + pool->pg_size + 2;
  double need = ceil(needed_moves(c, pool, prev)) * 1.1 + pool->pg_size + 2;
  return even > need ? even : need;
}

static uint32_t
pg_count_for(size_t n, uint32_t size)
{
  /* Enough PGs for about 40+ replicas per OSD, a power of two. */
  uint32_t pgs = 32;
  while ((double) pgs * size / (double) n < 40)
    pgs *= 2;
  return pgs;
}

static void
scenario(const char *name, const int *per_host, int hosts, uint32_t size, bool even)
{
  struct cluster c;
  make_cluster(&c, per_host, hosts);
  struct tc_placement_pool pool = { pg_count_for(c.n, size), size, size > 1 ? size - 1 : 1, TC_FD_HOST };
  char what[128];
  struct tc_placement p, q, r;

  snprintf(what, sizeof what, "%s initial (%zu OSDs, %u PGs x %u)", name, c.n, pool.pg_count, size);
  long moved = compute(&c, &pool, NULL, &p);
  double spread = check_placement(what, &c, &pool, &p, even);
  printf("# %s: spread %.1f%%\n", what, spread);
  CHECK(compute(&c, &pool, &p, &q) == 0, "%s: recomputing changes nothing", what);
  CHECK(!memcmp(p.osd_set, q.osd_set, sizeof *p.osd_set * pool.pg_count * size) &&
        !memcmp(p.primary, q.primary, sizeof *p.primary * pool.pg_count), "%s: same sets and primaries", what);
  tc_placement_free(&q);

  /* Each of a few OSDs leaves in turn (from the initial state). */
  size_t leavers[3] = { 0, c.n / 2, c.n - 1 };
  for (int l = 0; l < 3 && c.n > size; l++) {
    size_t x = leavers[l];
    c.osd[x].up = false;
    snprintf(what, sizeof what, "%s without osd %zu", name, x + 1);
    moved = compute(&c, &pool, &p, &q);
    long changed, with, bad, mv;
    diff(&p, &q, c.osd[x].id, &changed, &with, &bad, &mv);
    CHECK(bad == 0 && changed == with && mv == with,
          "%s: leave changes exactly the %ld PGs that had it (changed %ld, other slots moved %ld)", what, with,
          changed, bad);
    CHECK(moved == mv, "%s: reported %ld changes, counted %ld", what, moved, mv);
    check_placement(what, &c, &pool, &q, even && evenly_spread(&c));
    /* And joins back: only about its share moves to it. */
    c.osd[x].up = true;
    double limit = join_limit(&c, &pool, &q);
    moved = compute(&c, &pool, &q, &r);
    snprintf(what, sizeof what, "%s with osd %zu back", name, x + 1);
    CHECK(moved <= limit, "%s: join moved %ld replicas, limit %.0f", what, moved, limit);
    if (l == 0)
      printf("# %s: leave moved %ld (PGs with it %ld), join moved %ld (limit %.0f)\n", name, mv, with, moved, limit);
    check_placement(what, &c, &pool, &r, even);
    tc_placement_free(&q);
    tc_placement_free(&r);
  }

  /* A new OSD on a new host, and one on an existing host. */
  if (c.n + 2 <= MAX_OSDS) {
    add_osd(&c, hosts);
    double limit = join_limit(&c, &pool, &p);
    moved = compute(&c, &pool, &p, &q);
    snprintf(what, sizeof what, "%s + osd %zu on a new host", name, c.n);
    CHECK(moved <= limit, "%s: join moved %ld replicas, limit %.0f", what, moved, limit);
    printf("# %s: moved %ld (limit %.0f)\n", what, moved, limit);
    check_placement(what, &c, &pool, &q, false);
    add_osd(&c, 0);
    limit = join_limit(&c, &pool, &q);
    moved = compute(&c, &pool, &q, &r);
    snprintf(what, sizeof what, "%s + osd %zu on host 0", name, c.n);
    CHECK(moved <= limit, "%s: join moved %ld replicas, limit %.0f", what, moved, limit);
    check_placement(what, &c, &pool, &r, false);
    tc_placement_free(&q);
    tc_placement_free(&r);
  }
  tc_placement_free(&p);
}

static void
small_cases(void)
{
  struct cluster c;
  struct tc_placement p;
  /* Two hosts, three replicas: distinct OSDs over both hosts. */
  int two[] = { 3, 3 };
  make_cluster(&c, two, 2);
  struct tc_placement_pool pool = { 64, 3, 2, TC_FD_HOST };
  compute(&c, &pool, NULL, &p);
  check_placement("2 hosts, pg_size 3", &c, &pool, &p, true);
  tc_placement_free(&p);
  /* Fewer OSDs than replicas: what there is, primary when >= minsize. */
  int one[] = { 1, 1 };
  make_cluster(&c, one, 2);
  compute(&c, &pool, NULL, &p);
  check_placement("2 OSDs, pg_size 3", &c, &pool, &p, true);
  CHECK(p.primary[0] != 0, "2 of 3 replicas with pg_minsize 2: a primary");
  tc_placement_free(&p);
  c.osd[1].up = false;
  compute(&c, &pool, NULL, &p);
  CHECK(p.primary[0] == 0 && p.osd_set[0] == 1 && p.osd_set[1] == 0, "1 OSD below pg_minsize: no primary");
  tc_placement_free(&p);
  /* failure_domain osd: one host, 6 OSDs, 3 replicas on distinct OSDs. */
  int six[] = { 6 };
  make_cluster(&c, six, 1);
  struct tc_placement_pool po = { 128, 3, 2, TC_FD_OSD };
  compute(&c, &po, NULL, &p);
  check_placement("failure_domain osd", &c, &po, &p, true);
  tc_placement_free(&p);
  /* Weights: an OSD of weight 2 takes twice the replicas of its peers. */
  int four[] = { 3, 3, 3, 3 };
  make_cluster(&c, four, 4);
  for (size_t i = 0; i < c.n; i++)
    c.osd[i].weight = i % 3 == 1 ? 2 : 1;
  struct tc_placement_pool pw = { 512, 3, 2, TC_FD_HOST };
  compute(&c, &pw, NULL, &p);
  check_placement("weights 1,2,1 per host", &c, &pw, &p, false);
  long l1 = 0, l2 = 0;
  for (size_t i = 0; i < (size_t) pw.pg_count * pw.pg_size; i++) {
    l1 += p.osd_set[i] == 1;
    l2 += p.osd_set[i] == 2;
  }
  CHECK(l2 > l1 * 1.8 && l2 < l1 * 2.2, "weight 2 holds twice the replicas (%ld vs %ld)", l2, l1);
  /* A weight of 0 empties an OSD: only its PGs change. */
  struct tc_placement q0;
  c.osd[1].weight = 0;
  compute(&c, &pw, &p, &q0);
  long ch = 0, bad0 = 0, mv = 0, with = 0;
  diff(&p, &q0, 2, &ch, &with, &bad0, &mv);
  CHECK(bad0 == 0 && ch == with, "weight 0 moves exactly the PGs of that OSD (%ld of %ld)", ch, with);
  tc_placement_free(&q0);
  tc_placement_free(&p);

  /* Bad input. */
  struct tc_placement_pool bad = { 0, 3, 2, TC_FD_HOST };
  CHECK(tc_placement_compute(c.osd, c.n, &bad, NULL, &p) < 0 && errno == EINVAL, "pg_count 0 refused");
  c.osd[1].weight = 1;
  c.osd[1].id = 1;
  CHECK(tc_placement_compute(c.osd, c.n, &pool, NULL, &p) < 0 && errno == EINVAL, "duplicate OSD id refused");
  /* A changed pg_size reuses what fits: growing keeps the old replicas. */
  make_cluster(&c, (int[]) { 2, 2, 2, 2 }, 4);
  struct tc_placement_pool p2 = { 64, 2, 1, TC_FD_HOST }, p3 = { 64, 3, 2, TC_FD_HOST };
  struct tc_placement q;
  compute(&c, &p2, NULL, &p);
  compute(&c, &p3, &p, &q);
  int kept = 0;
  for (uint32_t pg = 0; pg < 64; pg++)
    kept += q.osd_set[pg * 3] == p.osd_set[pg * 2] && q.osd_set[pg * 3 + 1] == p.osd_set[pg * 2 + 1];
  CHECK(kept == 64, "pg_size 2 -> 3 keeps both old replicas of every PG (%d)", kept);
  check_placement("pg_size 2 -> 3", &c, &p3, &q, false);
  tc_placement_free(&p);
  tc_placement_free(&q);
}

/* How many PGs each of OSDs 1..3 leads. */
static void
count_led(const struct tc_placement *p, int led[4])
{
  memset(led, 0, 4 * sizeof *led);
  for (uint32_t pg = 0; pg < p->pg_count; pg++)
    if (p->primary[pg] >= 1 && p->primary[pg] <= 3)
      led[p->primary[pg]]++;
}

/* A pool placed while OSD 3 was down keeps its primaries on 1 and 2 when
 * 3 comes up; balancing the clean PGs gives 3 its share, moves no replica
 * and no PG that is not clean, and is stable. */
static void
primary_balance(void)
{
  struct cluster c;
  struct tc_placement p, q, r;
  make_cluster(&c, (int[]) { 1, 1, 1 }, 3);
  struct tc_placement_pool pool = { 12, 3, 2, TC_FD_OSD };
  c.osd[2].up = false;
  compute(&c, &pool, NULL, &p);
  c.osd[2].up = true;
  compute(&c, &pool, &p, &q);
  int led[4];
  count_led(&q, led);
  CHECK(led[3] == 0 && led[1] + led[2] == 12, "OSD 3 up after the placement leads %d PGs (1: %d, 2: %d)", led[3],
        led[1], led[2]);
  bool clean[12];
  for (int i = 0; i < 12; i++)
    clean[i] = true;
  CHECK(tc_placement_balance_primaries(&q, NULL) == 0, "nothing known clean: nothing moves");
  uint64_t sets[36];
  memcpy(sets, q.osd_set, sizeof sets);
  long moved = tc_placement_balance_primaries(&q, clean);
  count_led(&q, led);
  CHECK(moved == 4 && led[1] == 4 && led[2] == 4 && led[3] == 4, "balanced: %ld moved, led %d %d %d", moved,
        led[1], led[2], led[3]);
  CHECK(!memcmp(sets, q.osd_set, sizeof sets), "balancing moved no replica");
  int outside = 0;
  for (uint32_t pg = 0; pg < 12; pg++)
    outside += q.primary[pg] != q.osd_set[pg * 3] && q.primary[pg] != q.osd_set[pg * 3 + 1] &&
               q.primary[pg] != q.osd_set[pg * 3 + 2];
  CHECK(outside == 0, "%d primaries outside their set", outside);
  CHECK(tc_placement_balance_primaries(&q, clean) == 0, "balanced: a second pass moves nothing");
  CHECK(compute(&c, &pool, &q, &r) == 0 && !memcmp(q.primary, r.primary, 12 * sizeof *q.primary),
        "the placement keeps the balanced primaries");
  tc_placement_free(&r);
  /* Only the clean PGs move. */
  tc_placement_free(&q);
  compute(&c, &pool, &p, &q);
  uint64_t prims[12];
  memcpy(prims, q.primary, sizeof prims);
  for (int i = 0; i < 12; i++)
    clean[i] = i % 2 == 0;
  moved = tc_placement_balance_primaries(&q, clean);
  int wrong = 0;
  for (int i = 0; i < 12; i++)
    wrong += !clean[i] && q.primary[i] != prims[i];
  count_led(&q, led);
  CHECK(moved > 0 && wrong == 0 && led[3] > 0, "half the PGs clean: %ld moved among them, %d others moved, OSD 3 "
        "leads %d", moved, wrong, led[3]);
  tc_placement_free(&q);
  tc_placement_free(&p);
}

int
main(void)
{
  small_cases();
  primary_balance();
  scenario("3 hosts x 1", (int[]) { 1, 1, 1 }, 3, 3, true);
  scenario("3 hosts x 2", (int[]) { 2, 2, 2 }, 3, 3, true);
  scenario("4 hosts x 3", (int[]) { 3, 3, 3, 3 }, 4, 3, true);
  scenario("6 hosts x 4", (int[]) { 4, 4, 4, 4, 4, 4 }, 6, 3, true);
  scenario("6 hosts x 4, pg_size 2", (int[]) { 4, 4, 4, 4, 4, 4 }, 6, 2, true);
  scenario("10 hosts x 10", (int[]) { 10, 10, 10, 10, 10, 10, 10, 10, 10, 10 }, 10, 3, true);
  scenario("uneven 1..5", (int[]) { 1, 2, 3, 4, 5 }, 5, 3, false);
  scenario("uneven 8,2,2", (int[]) { 8, 2, 2 }, 3, 3, false);
  scenario("uneven 4,4,1", (int[]) { 4, 4, 1 }, 3, 3, false);
  scenario("uneven 7,5,3,9,2,6", (int[]) { 7, 5, 3, 9, 2, 6 }, 6, 3, false);
  return DONE();
}
