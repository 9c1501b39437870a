/* The monitor (see monitor.h): election through a lease on /mon/master,
 * placement into /pg/config, counts into /stats; every USAGE_S seconds the
 * OSDs' /osd/stats/<n> summed into /inode/stats/<pool>/<inode>,
 * /pool/stats/<pool> and the "usage" of /stats. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include "cleanup.h"
#include "error.h"
#include "kv_client.h"
#include "log.h"
#include "monitor.h"
#include "placement.h"
#include "pools.h"
#include "vector.h"

#define POLL_MS 250
#define RECOMPUTE_S 10.0
#define USAGE_S 5.0             /* the OSDs write /osd/stats every osd_stats_interval (5 s) */
#define USAGE_TXN_OPS 64        /* writes a txn carries (etcd allows 128) */

/* One inode's figures summed over the OSDs' reports. */
struct inode_usage {
  uint64_t inode;
  int64_t used, read_ops, read_bytes, write_ops, write_bytes, delete_ops, delete_bytes;
};

struct tc_monitor {
  struct tc_config *cfg;
  struct tc_kv *kv;
  char *prefix;
  char id[128];
  int64_t ttl;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop, dirty, master;
  int64_t lease;
  struct tc_kv_watch *w_osd, *w_pools;
  char *last_stats;            /* /stats as last written (skip equal writes) */
  struct inode_usage *prev;    /* the last usage pass's sums (rates) */
  size_t n_prev;
  double prev_t;
};

static double
now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* prefix + suffix in a buffer of the caller's. */
static const char *
key(struct tc_monitor *m, char *buf, size_t size, const char *suffix)
{
  snprintf(buf, size, "%s%s", m->prefix, suffix);
  return buf;
}

static void
on_change(void *arg, const struct tc_kv_watch_update *u)
{
  struct tc_monitor *m = arg;
  SCOPED_LOCK(&m->lock);
  m->dirty = true;
  pthread_cond_broadcast(&m->cond);
}

/* Wait until woken (if wake_on_dirty, a change also wakes), stopped, or
 * `seconds` pass; returns true if stopping. */
static bool
wait_for(struct tc_monitor *m, double seconds, bool wake_on_dirty)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double t = ts.tv_sec + ts.tv_nsec / 1e9 + seconds;
  ts.tv_sec = (time_t) t;
  ts.tv_nsec = (long) ((t - (double) ts.tv_sec) * 1e9);
  SCOPED_LOCK(&m->lock);
  if (!m->stop && !(wake_on_dirty && m->dirty))
    pthread_cond_timedwait(&m->cond, &m->lock, &ts);
  return m->stop;
}

/* Try to take /mon/master; true if this monitor is now the master. */
static bool
campaign(struct tc_monitor *m)
{
  char k[512];
  struct tc_kv_result r;
  key(m, k, sizeof k, "/mon/master");
  if (tc_kv_get(m->kv, k, 0, &r) < 0) {
    tc_debug("monitor: reading %s: %s", k, tc_last_error());
    return false;
  }
  bool taken = r.n_kvs > 0;
  tc_kv_result_free(&r);
  if (taken)
    return false;
  int64_t lease;
  if (tc_kv_lease_grant(m->kv, m->ttl, &lease) < 0) {
    tc_warn("monitor: lease grant: %s", tc_last_error());
    return false;
  }
  char host[256] = "localhost", val[512];
  gethostname(host, sizeof host - 1);
  snprintf(val, sizeof val, "{\"id\": \"%s\", \"host\": \"%s\", \"pid\": %d}", m->id, host, (int) getpid());
  struct tc_kv_cmp c = { .key = k, .target = TC_KV_CMP_CREATE, .result = TC_KV_EQUAL, .number = 0 };
  struct tc_kv_op put = { .type = TC_KV_PUT, .key = k, .value = val, .lease = lease };
  struct tc_kv_txn txn = { &c, 1, &put, 1, NULL, 0 };
  if (tc_kv_txn(m->kv, &txn, &r) < 0 || !r.succeeded) {
    tc_kv_result_free(&r);
    tc_kv_lease_revoke(m->kv, lease);
    return false;
  }
  tc_kv_result_free(&r);
  m->lease = lease;
  return true;
}

static void
stop_watches(struct tc_monitor *m)
{
  tc_kv_watch_cancel(m->w_osd);
  tc_kv_watch_cancel(m->w_pools);
  m->w_osd = m->w_pools = NULL;
}

static int
start_watches(struct tc_monitor *m)
{
  char k[512];
  m->w_osd = tc_kv_watch(m->kv, key(m, k, sizeof k, "/osd/state/"), 0, true, 0, on_change, m);
  m->w_pools = tc_kv_watch(m->kv, key(m, k, sizeof k, "/config/pools"), 0, false, 0, on_change, m);
  if (!m->w_osd || !m->w_pools) {
    stop_watches(m);
    return -1;
  }
  return 0;
}

/* The live OSDs from /osd/state/. */
struct osds {
  struct tc_placement_osd *v;
  char **hosts;
  uint32_t *block_size;   /* each OSD's store object size (0: not said) */
  size_t n;
};

static void
osds_free(struct osds *o)
{
  for (size_t i = 0; i < o->n; i++)
    free(o->hosts[i]);
  free(o->hosts);
  free(o->block_size);
  free(o->v);
  memset(o, 0, sizeof *o);
}

static int
read_osds(struct tc_monitor *m, struct osds *out)
{
  char k[512];
  struct tc_kv_result r;
  memset(out, 0, sizeof *out);
  size_t plen = strlen(key(m, k, sizeof k, "/osd/state/"));
  if (tc_kv_get_prefix(m->kv, k, 0, &r) < 0)
    return -1;
  out->v = calloc(r.n_kvs ? r.n_kvs : 1, sizeof *out->v);
  out->hosts = calloc(r.n_kvs ? r.n_kvs : 1, sizeof *out->hosts);
  out->block_size = calloc(r.n_kvs ? r.n_kvs : 1, sizeof *out->block_size);
  if (!out->v || !out->hosts || !out->block_size) {
    tc_kv_result_free(&r);
    osds_free(out);
    return tc_error(ENOMEM, "monitor: out of memory");
  }
  for (size_t i = 0; i < r.n_kvs; i++) {
    const char *name = (const char *) r.kvs[i].key + plen;
    char *end;
    unsigned long long id = strtoull(name, &end, 10);
    if (!*name || *end || id == 0) {
      tc_warn("monitor: ignoring %s: not an OSD number", r.kvs[i].key);
      continue;
    }
    json_object *v = json_tokener_parse((const char *) r.kvs[i].value), *x;
    const char *host = NULL;
    double weight = 1;
    if (v && (json_object_object_get_ex(v, "host", &x) || json_object_object_get_ex(v, "addr", &x)))
      host = json_object_get_string(x);
    if (v && json_object_object_get_ex(v, "weight", &x))
      weight = json_object_get_double(x);
    int64_t bs = v && json_object_object_get_ex(v, "block_size", &x) ? json_object_get_int64(x) : 0;
    out->block_size[out->n] = bs > 0 && bs <= UINT32_MAX ? (uint32_t) bs : 0;
    char fallback[32];
    if (!host || !*host) {
      snprintf(fallback, sizeof fallback, "osd%llu", id);
      host = fallback;
    }
    out->hosts[out->n] = strdup(host);
    json_object_put(v);
    if (!out->hosts[out->n]) {
      tc_kv_result_free(&r);
      osds_free(out);
      return tc_error(ENOMEM, "monitor: out of memory");
    }
    out->v[out->n] = (struct tc_placement_osd) { .id = id, .host = out->hosts[out->n], .weight = weight, .up = true };
    out->n++;
  }
  tc_kv_result_free(&r);
  return 0;
}

/* Put key = value if /mon/master still has our lease (and, if
 * mod_rev >= 0, key is still at mod_rev). 1 written, 0 lost, -1 error. */
static int
guarded_put(struct tc_monitor *m, const char *k, const char *value, int64_t mod_rev)
{
  char mk[512];
  struct tc_kv_cmp c[2] = {
    { .key = key(m, mk, sizeof mk, "/mon/master"), .target = TC_KV_CMP_LEASE, .result = TC_KV_EQUAL,
      .number = m->lease },
    { .key = k, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = mod_rev },
  };
  struct tc_kv_op put = { .type = TC_KV_PUT, .key = k, .value = value };
  struct tc_kv_txn txn = { c, mod_rev >= 0 ? 2 : 1, &put, 1, NULL, 0 };
  struct tc_kv_result r;
  if (tc_kv_txn(m->kv, &txn, &r) < 0)
    return -1;
  int ok = r.succeeded;
  tc_kv_result_free(&r);
  return ok;
}

/* Whether the state a PG's primary reports (/pgstats/<pool>/<pg>, a copy
 * of its /pg/state that the seed's rights let monitors read) says clean,
 * from the primary the placement names (a former primary's report says
 * nothing). */
static bool
report_clean(const char *value, uint64_t primary)
{
  json_object *o = json_tokener_parse(value), *f;
  bool clean = false;
  if (o && json_object_object_get_ex(o, "primary", &f) && (uint64_t) json_object_get_int64(f) == primary &&
      json_object_object_get_ex(o, "state", &f) && json_object_is_type(f, json_type_array))
    for (size_t i = 0; i < json_object_array_length(f); i++) {
      const char *w = json_object_get_string(json_object_array_get_idx(f, i));
      if (w && !strcmp(w, "clean"))
        clean = true;
    }
  json_object_put(o);
  return clean;
}

/* A calm pool (every PG reports clean from its primary, its placement
 * unchanged): even out its primaries (tc_placement_balance_primaries).
 * Returns the primaries moved, 0 if the pool is not calm, -1 on error. */
static long
balance_primaries(struct tc_monitor *m, uint32_t pool_id, struct tc_placement *pl)
{
  /* First as if every PG were clean, on a copy: a pool already even (the
   * usual case) costs no read of its PGs' reports every pass. */
  if (!pl->pg_count)
    return 0;
  uint64_t *saved = malloc(pl->pg_count * sizeof *saved);
  bool *all = malloc(pl->pg_count * sizeof *all);
  if (!saved || !all) {
    free(saved);
    free(all);
    return tc_error(ENOMEM, "monitor: out of memory");
  }
  memcpy(saved, pl->primary, pl->pg_count * sizeof *saved);
  for (uint32_t pg = 0; pg < pl->pg_count; pg++)
    all[pg] = true;
  long could = tc_placement_balance_primaries(pl, all);
  memcpy(pl->primary, saved, pl->pg_count * sizeof *saved);
  free(saved);
  free(all);
  if (could <= 0)
    return could;
  char k[512], sfx[64];
  snprintf(sfx, sizeof sfx, "/pgstats/%u/", pool_id);
  key(m, k, sizeof k, sfx);
  size_t klen = strlen(k);
  struct tc_kv_result r;
  if (tc_kv_get_prefix(m->kv, k, 0, &r) < 0)
    return -1;
  bool *clean = calloc(pl->pg_count ? pl->pg_count : 1, sizeof *clean);
  long moved = -1;
  if (!clean) {
    tc_error(ENOMEM, "monitor: out of memory");
    goto out;
  }
  for (size_t i = 0; i < r.n_kvs; i++) {
    char *end;
    const char *tail = (const char *) r.kvs[i].key + klen;
    unsigned long pg = strtoul(tail, &end, 10);
    if (r.kvs[i].key_len > klen && end != tail && !*end && pg < pl->pg_count && pl->primary[pg])
      clean[pg] = report_clean((const char *) r.kvs[i].value, pl->primary[pg]);
  }
  moved = 0;
  for (uint32_t pg = 0; pg < pl->pg_count; pg++)
    if (!clean[pg])
      goto out;
  moved = tc_placement_balance_primaries(pl, clean);
out:
  free(clean);
  tc_kv_result_free(&r);
  return moved;
}

/* One full pass: read everything, place, write what changed. 0 done, 1 a
 * guarded write lost (look again), -1 error. */
static int
recompute(struct tc_monitor *m)
{
  char k[512];
  struct tc_kv_result pr, gr, sr;
  struct tc_pools pools;
  struct tc_pg_config prev, next = { 0 };
  struct osds osds;
  struct tc_placement_osd *osd_fit = NULL;   /* osds, up only where a pool's block size fits */
  char *text = NULL;
  int rv = -1;
  if (tc_kv_get(m->kv, key(m, k, sizeof k, "/config/pools"), 0, &pr) < 0)
    return -1;
  if (tc_pools_parse(pr.n_kvs ? (char *) pr.kvs[0].value : NULL, &pools) < 0) {
    /* A broken /config/pools must not wipe the placement: change nothing. */
    tc_warn("monitor: %s; placement left as it is", tc_last_error());
    tc_kv_result_free(&pr);
    return 0;
  }
  tc_kv_result_free(&pr);
  if (read_osds(m, &osds) < 0) {
    tc_pools_free(&pools);
    return -1;
  }
  if (tc_kv_get(m->kv, key(m, k, sizeof k, "/pg/config"), 0, &gr) < 0) {
    tc_pools_free(&pools);
    osds_free(&osds);
    return -1;
  }
  int64_t pg_mod = gr.n_kvs ? gr.kvs[0].mod_revision : 0;
  if (tc_pg_config_parse(gr.n_kvs ? (char *) gr.kvs[0].value : NULL, &prev) < 0) {
    tc_warn("monitor: previous %s ignored: %s", k, tc_last_error());
    memset(&prev, 0, sizeof prev);
  }
  next.v = calloc(pools.n ? pools.n : 1, sizeof *next.v);
  osd_fit = calloc(osds.n ? osds.n : 1, sizeof *osd_fit);
  if (!next.v || !osd_fit)
    goto out;
  long changed = 0;
  uint64_t pg_total = 0, active = 0, degraded = 0;
  for (size_t i = 0; i < pools.n; i++) {
    const struct tc_pool *p = &pools.v[i];
    struct tc_placement_pool pp = { p->pg_count, p->pg_size, p->pg_minsize, p->failure_domain };
    struct tc_pg_config_pool *np = &next.v[next.n];
    np->pool_id = p->id;
    /* An OSD serves only pools of its own object size (it refuses the
     * others): place each pool on those alone. */
    size_t fit = 0;
    for (size_t j = 0; j < osds.n; j++) {
      osd_fit[j] = osds.v[j];
      osd_fit[j].up = !osds.block_size[j] || osds.block_size[j] == p->block_size;
      fit += osd_fit[j].up;
    }
    if (fit < osds.n)
      tc_warn("monitor: pool %s (%u): block_size %" PRIu64 "; %zu of the %zu OSDs up have another and take none "
              "of it", p->name, p->id, p->block_size, osds.n - fit, osds.n);
    long c = tc_placement_compute(osd_fit, osds.n, &pp, tc_pg_config_find(&prev, p->id), &np->pl);
    if (c < 0) {
      tc_warn("monitor: pool %s: %s", p->name, tc_last_error());
      continue;
    }
    next.n++;
    changed += c;
    if (c)
      tc_info("monitor: pool %s (%u): %ld replicas placed or moved over %zu OSDs", p->name, p->id, c, osds.n);
    else if (tc_pg_config_find(&prev, p->id)) {
      long b = balance_primaries(m, p->id, &np->pl);
      if (b < 0)
        tc_warn("monitor: pool %s: primaries not balanced: %s", p->name, tc_last_error());
      else if (b > 0)
        tc_info("monitor: pool %s (%u): %ld primaries moved to even out the PGs each OSD leads", p->name, p->id, b);
    }
    for (uint32_t pg = 0; pg < p->pg_count; pg++) {
      uint32_t members = 0;
      for (uint32_t j = 0; j < p->pg_size; j++)
        members += np->pl.osd_set[(size_t) pg * p->pg_size + j] != 0;
      pg_total++;
      active += np->pl.primary[pg] != 0;
      degraded += members < p->pg_size;
    }
  }
  text = tc_pg_config_encode(&next);
  if (!text) {
    tc_error(ENOMEM, "monitor: out of memory");
    goto out;
  }
  /* With no OSD up at all (a cluster-wide outage, a KV restored from an
   * old backup), keep the last placement: forgetting it would scatter every
   * PG anew once the OSDs are back. */
  if (osds.n == 0 && prev.n > 0)
    tc_warn("monitor: no OSD is up; %s left as it is", k);
  else if (!gr.n_kvs || strcmp((char *) gr.kvs[0].value, text)) {
    int w = guarded_put(m, k, text, pg_mod);
    if (w < 0)
      goto out;
    if (w == 0) {
      /* Someone else wrote it, or we are no longer master: look again. */
      tc_info("monitor: %s changed under us or mastership lost; recomputing", k);
      rv = 1;
      goto out;
    }
    tc_info("monitor: wrote %s (%zu pools, %ld slots changed)", k, next.n, changed);
  }

  /* /stats: remember every OSD seen, up or down. */
  char sk[512];
  key(m, sk, sizeof sk, "/stats");
  if (tc_kv_get(m->kv, sk, 0, &sr) < 0)
    goto out;
  json_object *old = sr.n_kvs ? json_tokener_parse((char *) sr.kvs[0].value) : NULL, *oldosds = NULL;
  json_object *st = json_object_new_object(), *so = json_object_new_object();
  if (old)
    json_object_object_get_ex(old, "osds", &oldosds);
  /* Merge ids: the known ones (down unless up now) and the up ones, sorted. */
  size_t cap = osds.n + (oldosds ? (size_t) json_object_object_length(oldosds) : 0);
  uint64_t *ids = calloc(cap ? cap : 1, sizeof *ids);
  size_t nids = 0;
  if (oldosds) {
    json_object_object_foreach(oldosds, okey, oval) {
      (void) oval;
      ids[nids++] = strtoull(okey, NULL, 10);
    }
  }
  for (size_t i = 0; i < osds.n; i++) {
    bool seen = false;
    for (size_t j = 0; j < nids; j++)
      seen |= ids[j] == osds.v[i].id;
    if (!seen)
      ids[nids++] = osds.v[i].id;
  }
  for (size_t i = 1; i < nids; i++)
    for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
      uint64_t t = ids[j];
      ids[j] = ids[j - 1];
      ids[j - 1] = t;
    }
  int up = 0, down = 0;
  for (size_t i = 0; i < nids; i++) {
    bool is_up = false;
    for (size_t j = 0; j < osds.n; j++)
      is_up |= osds.v[j].id == ids[i];
    char idk[32];
    snprintf(idk, sizeof idk, "%" PRIu64, ids[i]);
    json_object_object_add(so, idk, json_object_new_string(is_up ? "up" : "down"));
    up += is_up;
    down += !is_up;
  }
  free(ids);
  json_object_object_add(st, "osd_up", json_object_new_int(up));
  json_object_object_add(st, "osd_down", json_object_new_int(down));
  json_object_object_add(st, "osds", so);
  json_object_object_add(st, "pools", json_object_new_int64((int64_t) next.n));
  json_object_object_add(st, "pg_count", json_object_new_int64((int64_t) pg_total));
  json_object_object_add(st, "pgs_active", json_object_new_int64((int64_t) active));
  json_object_object_add(st, "pgs_degraded", json_object_new_int64((int64_t) degraded));
  json_object_object_add(st, "pgs_inactive", json_object_new_int64((int64_t) (pg_total - active)));
  json_object *usage;
  if (old && json_object_object_get_ex(old, "usage", &usage))   /* the usage pass's, kept */
    json_object_object_add(st, "usage", json_object_get(usage));
  const char *stext = json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN);
  if (!sr.n_kvs || strcmp((char *) sr.kvs[0].value, stext)) {
    if (guarded_put(m, sk, stext, -1) < 0) {
      json_object_put(st);
      json_object_put(old);
      tc_kv_result_free(&sr);
      goto out;
    }
  }
  json_object_put(st);
  json_object_put(old);
  tc_kv_result_free(&sr);
  rv = 0;
out:
  if (rv < 0)
    tc_warn("monitor: %s", tc_last_error());
  free(text);
  free(osd_fit);
  tc_kv_result_free(&gr);
  tc_pg_config_free(&prev);
  tc_pg_config_free(&next);
  tc_pools_free(&pools);
  osds_free(&osds);
  return rv;
}

/* ---- usage: /inode/stats, /pool/stats, /stats "usage" ---- */

static int
cmp_usage(const void *a, const void *b)
{
  const struct inode_usage *x = a, *y = b;
  return x->inode < y->inode ? -1 : x->inode > y->inode;
}

static int64_t
jint(json_object *o, const char *k)
{
  json_object *f;
  return o && json_object_object_get_ex(o, k, &f) ? json_object_get_int64(f) : 0;
}

/* Writes and deletes of one pass, sent in txns guarded by /mon/master. */
struct batch {
  struct tc_kv_op ops[USAGE_TXN_OPS];
  char *bufs[2 * USAGE_TXN_OPS];
  size_t n, nbufs;
  int err;
};

static void
batch_flush(struct tc_monitor *m, struct batch *b)
{
  char mk[512];
  if (b->n && !b->err) {
    struct tc_kv_cmp c = { .key = key(m, mk, sizeof mk, "/mon/master"), .target = TC_KV_CMP_LEASE,
                           .result = TC_KV_EQUAL, .number = m->lease };
    struct tc_kv_txn txn = { &c, 1, b->ops, b->n, NULL, 0 };
    struct tc_kv_result r;
    if (tc_kv_txn(m->kv, &txn, &r) < 0) {
      tc_warn("monitor: writing usage stats: %s", tc_last_error());
      b->err = 1;
    }
    else
      tc_kv_result_free(&r);
  }
  for (size_t i = 0; i < b->nbufs; i++)
    free(b->bufs[i]);
  b->n = b->nbufs = 0;
}

/* Queue key = value (value NULL: delete key); both are copied. */
static void
batch_add(struct tc_monitor *m, struct batch *b, const char *k, const char *value)
{
  if (b->n == USAGE_TXN_OPS)
    batch_flush(m, b);
  char *kc = strdup(k), *vc = value ? strdup(value) : NULL;
  if (!kc || (value && !vc)) {
    free(kc);
    free(vc);
    b->err = 1;
    return;
  }
  b->bufs[b->nbufs++] = kc;
  if (vc)
    b->bufs[b->nbufs++] = vc;
  b->ops[b->n++] = value ? (struct tc_kv_op) { .type = TC_KV_PUT, .key = kc, .value = vc }
                         : (struct tc_kv_op) { .type = TC_KV_DELETE, .key = kc };
}

/* The value a key holds in r (NULL: none). */
static const char *
value_in(const struct tc_kv_result *r, const char *k)
{
  for (size_t i = 0; i < r->n_kvs; i++)
    if (!strcmp((const char *) r->kvs[i].key, k))
      return (const char *) r->kvs[i].value;
  return NULL;
}

static json_object *
io_json(int64_t count, int64_t bytes, int64_t pcount, int64_t pbytes, double dt)
{
  json_object *j = json_object_new_object();
  json_object_object_add(j, "count", json_object_new_int64(count));
  json_object_object_add(j, "bytes", json_object_new_int64(bytes));
  /* an OSD that restarted counts from 0 again: no negative rates */
  double iops = dt > 0 && count >= pcount ? (double) (count - pcount) / dt : 0;
  double bps = dt > 0 && bytes >= pbytes ? (double) (bytes - pbytes) / dt : 0;
  json_object_object_add(j, "iops", json_object_new_double((double) (int64_t) (iops * 10) / 10));
  json_object_object_add(j, "bps", json_object_new_double((double) (int64_t) bps));
  return j;
}

/* One pass: sum /osd/stats/<n> by inode and by pool, write what changed,
 * delete the stats of inodes and pools no OSD reports any more. */
static void
usage_pass(struct tc_monitor *m)
{
  char k[512];
  struct tc_kv_result pr = { 0 }, gr = { 0 }, os = { 0 }, is = { 0 }, ps = { 0 }, sr = { 0 }, ir = { 0 };
  struct tc_pools pools = { 0 };
  struct tc_pg_config pgc = { 0 };
  struct inode_usage *u = NULL;
  size_t nu = 0, cap = 0;
  struct batch *b = calloc(1, sizeof *b);
  double now = now_s(), dt = m->prev_t > 0 ? now - m->prev_t : 0;
  int64_t tot_raw = 0, tot_used = 0, tot_free = 0;
  if (!b)
    return;
  if (tc_kv_get(m->kv, key(m, k, sizeof k, "/config/pools"), 0, &pr) < 0 ||
      tc_pools_parse(pr.n_kvs ? (char *) pr.kvs[0].value : NULL, &pools) < 0 ||
      tc_kv_get(m->kv, key(m, k, sizeof k, "/pg/config"), 0, &gr) < 0 ||
      tc_pg_config_parse(gr.n_kvs ? (char *) gr.kvs[0].value : NULL, &pgc) < 0 ||
      tc_kv_get_prefix(m->kv, key(m, k, sizeof k, "/osd/stats/"), 0, &os) < 0 ||
      tc_kv_get_prefix(m->kv, key(m, k, sizeof k, "/inode/stats/"), 0, &is) < 0 ||
      tc_kv_get_prefix(m->kv, key(m, k, sizeof k, "/pool/stats/"), 0, &ps) < 0 ||
      tc_kv_get(m->kv, key(m, k, sizeof k, "/stats"), 0, &sr) < 0 ||
      tc_kv_get_prefix(m->kv, key(m, k, sizeof k, "/config/inode/"), 0, &ir) < 0) {
    tc_warn("monitor: usage stats: %s", tc_last_error());
    goto out;
  }
  size_t plen = strlen(m->prefix) + strlen("/osd/stats/");
  uint64_t *osd_ids = calloc(os.n_kvs + 1, sizeof *osd_ids);
  int64_t *osd_data = calloc(os.n_kvs + 1, sizeof *osd_data), *osd_free = calloc(os.n_kvs + 1, sizeof *osd_free);
  if (!osd_ids || !osd_data || !osd_free) {
    free(osd_ids);
    free(osd_data);
    free(osd_free);
    goto out;
  }
  for (size_t i = 0; i < os.n_kvs; i++) {
    json_object *j = json_tokener_parse((const char *) os.kvs[i].value), *store = NULL, *inodes;
    osd_ids[i] = strtoull((const char *) os.kvs[i].key + plen, NULL, 10);
    if (j && json_object_object_get_ex(j, "store", &store)) {
      osd_data[i] = jint(store, "data_bytes");
      osd_free[i] = jint(store, "free_bytes");
      tot_raw += osd_data[i];
      tot_used += jint(store, "used_bytes");
      tot_free += osd_free[i];
    }
    if (j && json_object_object_get_ex(j, "inodes", &inodes) && json_object_is_type(inodes, json_type_object)) {
      json_object_object_foreach(inodes, ik, iv) {
        char *end;
        uint64_t inode = strtoull(ik, &end, 10);
        if (*end || !inode)
          continue;
        if (tc_grow(&u, &cap, nu + 1, sizeof *u, 64) < 0)
          break;
        u[nu++] = (struct inode_usage) { inode, jint(iv, "used_bytes"), jint(iv, "read_ops"), jint(iv, "read_bytes"),
                                         jint(iv, "write_ops"), jint(iv, "write_bytes"), jint(iv, "delete_ops"),
                                         jint(iv, "delete_bytes") };
      }
    }
    json_object_put(j);
  }
  /* one entry an inode, of the images that exist (an OSD keeps counting a
   * removed image's operations, and its tombstones) */
  if (nu)
    qsort(u, nu, sizeof *u, cmp_usage);
  struct inode_usage *live = calloc(ir.n_kvs + 1, sizeof *live);
  size_t nlive = 0;
  if (!live) {
    free(osd_ids);
    free(osd_data);
    free(osd_free);
    goto out;
  }
  for (size_t i = 0; i < ir.n_kvs; i++) {
    unsigned long long pool, id;
    char tail;
    const char *ik = (const char *) ir.kvs[i].key + strlen(m->prefix) + strlen("/config/inode/");
    if (sscanf(ik, "%llu/%llu%c", &pool, &id, &tail) == 2)
      live[nlive++].inode = ((uint64_t) pool << 48) | id;
  }
  if (nlive)
    qsort(live, nlive, sizeof *live, cmp_usage);
  size_t w = 0;
  for (size_t i = 0; i < nu; i++) {
    if (!nlive || !bsearch(&u[i], live, nlive, sizeof *live, cmp_usage))
      continue;
    if (w && u[w - 1].inode == u[i].inode) {
      struct inode_usage *d = &u[w - 1];
      d->used += u[i].used;
      d->read_ops += u[i].read_ops;
      d->read_bytes += u[i].read_bytes;
      d->write_ops += u[i].write_ops;
      d->write_bytes += u[i].write_bytes;
      d->delete_ops += u[i].delete_ops;
      d->delete_bytes += u[i].delete_bytes;
    }
    else
      u[w++] = u[i];
  }
  nu = w;
  /* /inode/stats/<pool>/<id> */
  json_object *pool_sums = json_object_new_object(), *tio = json_object_new_object();
  int64_t t_rd = 0, t_wr = 0, t_rb = 0, t_wb = 0;
  double t_riops = 0, t_wiops = 0, t_rbps = 0, t_wbps = 0;
  for (size_t i = 0; i < nu; i++) {
    const struct inode_usage *x = &u[i], *pv = NULL;
    struct inode_usage key_ = { .inode = x->inode };
    if (m->n_prev)
      pv = bsearch(&key_, m->prev, m->n_prev, sizeof *m->prev, cmp_usage);
    struct inode_usage zero = { 0 };
    if (!pv)
      pv = &zero;
    uint32_t pool = (uint32_t) (x->inode >> 48);
    const struct tc_pool *p = NULL;
    for (size_t q = 0; q < pools.n; q++)
      if (pools.v[q].id == pool)
        p = &pools.v[q];
    json_object *j = json_object_new_object();
    json_object *rd = io_json(x->read_ops, x->read_bytes, pv->read_ops, pv->read_bytes, pv == &zero ? 0 : dt);
    json_object *wr = io_json(x->write_ops, x->write_bytes, pv->write_ops, pv->write_bytes, pv == &zero ? 0 : dt);
    json_object *de = io_json(x->delete_ops, x->delete_bytes, pv->delete_ops, pv->delete_bytes, pv == &zero ? 0 : dt);
    json_object_object_add(j, "raw_used", json_object_new_int64(x->used));
    if (p && p->pg_size)
      json_object_object_add(j, "used", json_object_new_int64(x->used / p->pg_size));
    json_object_object_add(j, "read", rd);
    json_object_object_add(j, "write", wr);
    json_object_object_add(j, "delete", de);
    char ik[512];
    snprintf(ik, sizeof ik, "%s/inode/stats/%" PRIu32 "/%" PRIu64, m->prefix, pool, x->inode & (((uint64_t) 1 << 48) - 1));
    const char *text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
    const char *cur = value_in(&is, ik);
    if (!cur || strcmp(cur, text))
      batch_add(m, b, ik, text);
    /* the pool's sums */
    char pk[16];
    snprintf(pk, sizeof pk, "%" PRIu32, pool);
    json_object *ps_ = NULL;
    if (!json_object_object_get_ex(pool_sums, pk, &ps_)) {
      ps_ = json_object_new_object();
      json_object_object_add(pool_sums, pk, ps_);
    }
    json_object *rdi, *wri;
    json_object_object_get_ex(rd, "iops", &rdi);
    json_object_object_get_ex(wr, "iops", &wri);
    double riops = json_object_get_double(rdi), wiops = json_object_get_double(wri);
    json_object_object_get_ex(rd, "bps", &rdi);
    json_object_object_get_ex(wr, "bps", &wri);
    double rbps = json_object_get_double(rdi), wbps = json_object_get_double(wri);
    json_object_object_add(ps_, "raw_used", json_object_new_int64(jint(ps_, "raw_used") + x->used));
    json_object_object_add(ps_, "images", json_object_new_int64(jint(ps_, "images") + 1));
    json_object *f;
    double a[4] = { riops, wiops, rbps, wbps };
    const char *names[4] = { "read_iops", "write_iops", "read_bps", "write_bps" };
    for (int q = 0; q < 4; q++) {
      double prev = json_object_object_get_ex(ps_, names[q], &f) ? json_object_get_double(f) : 0;
      json_object_object_add(ps_, names[q], json_object_new_double(prev + a[q]));
    }
    t_rd += x->read_ops;
    t_wr += x->write_ops;
    t_rb += x->read_bytes;
    t_wb += x->write_bytes;
    t_riops += riops;
    t_wiops += wiops;
    t_rbps += rbps;
    t_wbps += wbps;
    json_object_put(j);
  }
  for (size_t i = 0; i < is.n_kvs; i++) {   /* inodes no OSD holds or counts any more */
    const char *ik = (const char *) is.kvs[i].key + strlen(m->prefix) + strlen("/inode/stats/");
    unsigned long long pool, id;
    char tail;
    if (sscanf(ik, "%llu/%llu%c", &pool, &id, &tail) != 2) {
      continue;
    }
    struct inode_usage key_ = { .inode = ((uint64_t) pool << 48) | id };
    if (!nu || !bsearch(&key_, u, nu, sizeof *u, cmp_usage))
      batch_add(m, b, (const char *) is.kvs[i].key, NULL);
  }
  /* /pool/stats/<pool>: every pool, with the capacity of the OSDs it is placed on */
  for (size_t q = 0; q < pools.n; q++) {
    const struct tc_pool *p = &pools.v[q];
    const struct tc_placement *pl = tc_pg_config_find(&pgc, p->id);
    int64_t raw_total = 0, raw_free = 0;
    for (size_t i = 0; i < os.n_kvs; i++) {
      bool in = false;
      for (size_t s2 = 0; pl && !in && s2 < (size_t) pl->pg_count * pl->pg_size; s2++)
        in = pl->osd_set[s2] == osd_ids[i];
      if (in) {
        raw_total += osd_data[i];
        raw_free += osd_free[i];
      }
    }
    char pk[16], key2[512];
    snprintf(pk, sizeof pk, "%" PRIu32, p->id);
    json_object *sum = NULL, *j = json_object_new_object(), *f;
    json_object_object_get_ex(pool_sums, pk, &sum);
    int64_t raw_used = jint(sum, "raw_used");
    uint32_t size = p->pg_size ? p->pg_size : 1;
    json_object_object_add(j, "name", json_object_new_string(p->name ? p->name : ""));
    json_object_object_add(j, "pg_size", json_object_new_int64(p->pg_size));
    json_object_object_add(j, "raw_to_usable", json_object_new_double(1.0 / size));
    json_object_object_add(j, "raw_used", json_object_new_int64(raw_used));
    json_object_object_add(j, "used", json_object_new_int64(raw_used / size));
    json_object_object_add(j, "raw_total", json_object_new_int64(raw_total));
    json_object_object_add(j, "raw_free", json_object_new_int64(raw_free));
    json_object_object_add(j, "usable_free", json_object_new_int64(raw_free / size));
    json_object_object_add(j, "images", json_object_new_int64(jint(sum, "images")));
    const char *names[4] = { "read_iops", "write_iops", "read_bps", "write_bps" };
    for (int n2 = 0; n2 < 4; n2++)
      json_object_object_add(j, names[n2], json_object_new_double(sum && json_object_object_get_ex(sum, names[n2], &f)
                                                                  ? json_object_get_double(f) : 0));
    snprintf(key2, sizeof key2, "%s/pool/stats/%" PRIu32, m->prefix, p->id);
    const char *text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
    const char *cur = value_in(&ps, key2);
    if (!cur || strcmp(cur, text))
      batch_add(m, b, key2, text);
    json_object_put(j);
  }
  for (size_t i = 0; i < ps.n_kvs; i++) {   /* pools gone */
    uint32_t id = (uint32_t) strtoul((const char *) ps.kvs[i].key + strlen(m->prefix) + strlen("/pool/stats/"),
                                     NULL, 10);
    bool known = false;
    for (size_t q = 0; q < pools.n; q++)
      known |= pools.v[q].id == id;
    if (!known)
      batch_add(m, b, (const char *) ps.kvs[i].key, NULL);
  }
  /* /stats "usage" */
  json_object *st = sr.n_kvs ? json_tokener_parse((const char *) sr.kvs[0].value) : NULL;
  if (!st || !json_object_is_type(st, json_type_object)) {
    json_object_put(st);
    st = json_object_new_object();
  }
  json_object_object_add(tio, "raw_total", json_object_new_int64(tot_raw));
  json_object_object_add(tio, "raw_used", json_object_new_int64(tot_used));
  json_object_object_add(tio, "raw_free", json_object_new_int64(tot_free));
  json_object_object_add(tio, "images", json_object_new_int64((int64_t) nu));
  json_object_object_add(tio, "read_ops", json_object_new_int64(t_rd));
  json_object_object_add(tio, "write_ops", json_object_new_int64(t_wr));
  json_object_object_add(tio, "read_bytes", json_object_new_int64(t_rb));
  json_object_object_add(tio, "write_bytes", json_object_new_int64(t_wb));
  json_object_object_add(tio, "read_iops", json_object_new_double(t_riops));
  json_object_object_add(tio, "write_iops", json_object_new_double(t_wiops));
  json_object_object_add(tio, "read_bps", json_object_new_double(t_rbps));
  json_object_object_add(tio, "write_bps", json_object_new_double(t_wbps));
  json_object_object_add(st, "usage", tio);
  const char *stext = json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN);
  if (!sr.n_kvs || strcmp((const char *) sr.kvs[0].value, stext))
    batch_add(m, b, key(m, k, sizeof k, "/stats"), stext);
  json_object_put(st);
  json_object_put(pool_sums);
  batch_flush(m, b);
  free(osd_ids);
  free(osd_data);
  free(osd_free);
  free(live);
  free(m->prev);
  m->prev = u;   /* sorted: the next pass's rates */
  m->n_prev = nu;
  m->prev_t = now;
  u = NULL;
out:
  free(u);
  free(b);
  tc_pools_free(&pools);
  tc_pg_config_free(&pgc);
  tc_kv_result_free(&pr);
  tc_kv_result_free(&gr);
  tc_kv_result_free(&os);
  tc_kv_result_free(&is);
  tc_kv_result_free(&ps);
  tc_kv_result_free(&sr);
  tc_kv_result_free(&ir);
}

static void
lose_master(struct tc_monitor *m, const char *why)
{
  tc_warn("monitor %s: no longer the active monitor: %s", m->id, why);
  stop_watches(m);
  SCOPED_LOCK(&m->lock);
  m->master = false;
  m->lease = 0;
}

static void *
monitor_thread(void *arg)
{
  struct tc_monitor *m = arg;
  double last_keepalive = 0, last_ok = 0, last_recompute = 0, retry_at = 0, last_usage = 0;
  for (;;) {
    {
      SCOPED_LOCK(&m->lock);
      if (m->stop)
        break;
    }
    if (!m->master) {
      if (campaign(m)) {
        tc_info("monitor %s: now the active monitor (lease %" PRIx64 ", ttl %" PRId64 " s)", m->id,
                (uint64_t) m->lease, m->ttl);
        last_keepalive = last_ok = now_s();
        if (start_watches(m) < 0)
          tc_warn("monitor: watches: %s (polling every %.0f s)", tc_last_error(), RECOMPUTE_S);
        SCOPED_LOCK(&m->lock);
        m->master = true;
        m->dirty = true;
      }
      else if (wait_for(m, POLL_MS / 1e3, false))
        break;
      continue;
    }
    double now = now_s();
    if (now - last_keepalive >= m->ttl / 3.0) {
      last_keepalive = now;
      if (tc_kv_lease_keepalive(m->kv, m->lease, NULL) == 0)
        last_ok = now;
      else if (errno == ENOENT || now - last_ok > (double) m->ttl) {
        lose_master(m, tc_last_error());
        continue;
      }
      else
        tc_warn("monitor: keepalive: %s", tc_last_error());
    }
    bool dirty;
    {
      SCOPED_LOCK(&m->lock);
      dirty = m->dirty;
      m->dirty = false;
    }
    if ((dirty && now >= retry_at) || now - last_recompute >= RECOMPUTE_S) {
      last_recompute = now;
      int r = recompute(m);
      if (r != 0) {
        /* Error (back off a little) or a write lost to a race (look again). */
        SCOPED_LOCK(&m->lock);
        m->dirty = true;
        retry_at = now_s() + (r < 0 ? 0.5 : 0.05);
      }
    }
    else if (dirty) {
      SCOPED_LOCK(&m->lock);
      m->dirty = true;
    }
    if (now_s() - last_usage >= USAGE_S) {
      last_usage = now_s();
      usage_pass(m);
    }
    bool pending;
    {
      SCOPED_LOCK(&m->lock);
      pending = m->dirty;
    }
    double until = last_keepalive + m->ttl / 3.0 - now_s();
    if (last_usage + USAGE_S - now_s() < until)
      until = last_usage + USAGE_S - now_s();
    if (pending && retry_at - now_s() < until)
      until = retry_at - now_s();
    if (until > 0 && wait_for(m, until, !pending))
      break;
  }
  if (m->master) {
    stop_watches(m);
    /* Resign: a standby takes over at once. */
    if (tc_kv_lease_revoke(m->kv, m->lease) < 0)
      tc_warn("monitor: resigning: %s", tc_last_error());
    m->master = false;
  }
  return NULL;
}

struct tc_monitor *
tc_monitor_start(struct tc_config *cfg)
{
  static int seq;
  struct tc_monitor *m = calloc(1, sizeof *m);
  if (!m) {
    tc_error(ENOMEM, "monitor: out of memory");
    return NULL;
  }
  m->cfg = cfg;
  m->ttl = tc_config_int(cfg, "etcd_mon_ttl");
  if (m->ttl < 1) {
    tc_error(EINVAL, "option etcd_mon_ttl: %" PRId64 " is not a positive number of seconds", m->ttl);
    free(m);
    return NULL;
  }
  char host[200] = "localhost";
  gethostname(host, sizeof host - 1);
  snprintf(m->id, sizeof m->id, "%s:%d:%d", host, (int) getpid(), __atomic_add_fetch(&seq, 1, __ATOMIC_SEQ_CST));
  /* The monitor's own certificate for the KV when it has one. */
  int n = tc_config_list_len(cfg, "etcd_address");
  const char *urls[16];
  if (n < 1 || n > 16) {
    free(m);
    tc_error(EINVAL, "option etcd_address: %d endpoints (1 to 16 are supported)", n);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    urls[i] = tc_config_list_get(cfg, "etcd_address", i);
  struct tc_kv_options o = {
    .urls = urls, .n_urls = n, .ca = tc_config_str(cfg, "etcd_ca"),
    .cert = tc_config_str(cfg, "mon_etcd_client_cert"), .key = tc_config_str(cfg, "mon_etcd_client_key"),
    .connect_timeout_ms = tc_config_int(cfg, "etcd_quick_timeout"),
    .request_timeout_ms = tc_config_int(cfg, "etcd_slow_timeout"),
    .prefix = tc_config_str(cfg, "etcd_prefix"),
  };
  if (!o.cert) {
    o.cert = tc_config_str(cfg, "etcd_client_cert");
    o.key = tc_config_str(cfg, "etcd_client_key");
  }
  if (!o.cert) {
    o.cert = tc_config_str(cfg, "cert");
    o.key = tc_config_str(cfg, "pkey");
  }
  m->kv = tc_kv_new(&o);
  m->prefix = strdup(tc_config_str(cfg, "etcd_prefix"));
  if (!m->kv || !m->prefix) {
    if (m->kv && !m->prefix)
      tc_error(ENOMEM, "monitor: out of memory");
    tc_kv_free(m->kv);
    free(m->prefix);
    free(m);
    return NULL;
  }
  size_t pl = strlen(m->prefix);
  while (pl > 0 && m->prefix[pl - 1] == '/')
    m->prefix[--pl] = 0;
  pthread_mutex_init(&m->lock, NULL);
  pthread_cond_init(&m->cond, NULL);
  int r = pthread_create(&m->thread, NULL, monitor_thread, m);
  if (r) {
    tc_kv_free(m->kv);
    free(m->prefix);
    free(m);
    tc_error(r, "monitor: cannot start its thread: %s", strerror(r));
    return NULL;
  }
  tc_info("monitor %s started (KV %s, prefix %s)", m->id, urls[0], m->prefix);
  return m;
}

bool
tc_monitor_is_master(struct tc_monitor *m)
{
  SCOPED_LOCK(&m->lock);
  return m->master;
}

void
tc_monitor_stop(struct tc_monitor *m)
{
  if (!m)
    return;
  {
    SCOPED_LOCK(&m->lock);
    m->stop = true;
    pthread_cond_broadcast(&m->cond);
  }
  pthread_join(m->thread, NULL);
  tc_kv_free(m->kv);
  pthread_mutex_destroy(&m->lock);
  pthread_cond_destroy(&m->cond);
  free(m->prefix);
  free(m->last_stats);
  free(m->prev);
  free(m);
}
