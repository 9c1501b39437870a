/* The monitor (see monitor.h): election through a lease on /mon/master,
 * placement into /pg/config, counts into /stats. */
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

#define POLL_MS 250
#define RECOMPUTE_S 10.0

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
  size_t n;
};

static void
osds_free(struct osds *o)
{
  for (size_t i = 0; i < o->n; i++)
    free(o->hosts[i]);
  free(o->hosts);
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
  if (!out->v || !out->hosts) {
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
  if (!next.v)
    goto out;
  long changed = 0;
  uint64_t pg_total = 0, active = 0, degraded = 0;
  for (size_t i = 0; i < pools.n; i++) {
    const struct tc_pool *p = &pools.v[i];
    struct tc_placement_pool pp = { p->pg_count, p->pg_size, p->pg_minsize, p->failure_domain };
    struct tc_pg_config_pool *np = &next.v[next.n];
    np->pool_id = p->id;
    long c = tc_placement_compute(osds.v, osds.n, &pp, tc_pg_config_find(&prev, p->id), &np->pl);
    if (c < 0) {
      tc_warn("monitor: pool %s: %s", p->name, tc_last_error());
      continue;
    }
    next.n++;
    changed += c;
    if (c)
      tc_info("monitor: pool %s (%u): %ld replicas placed or moved over %zu OSDs", p->name, p->id, c, osds.n);
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
  tc_kv_result_free(&gr);
  tc_pg_config_free(&prev);
  tc_pg_config_free(&next);
  tc_pools_free(&pools);
  osds_free(&osds);
  return rv;
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
  double last_keepalive = 0, last_ok = 0, last_recompute = 0, retry_at = 0;
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
    bool pending;
    {
      SCOPED_LOCK(&m->lock);
      pending = m->dirty;
    }
    double until = last_keepalive + m->ttl / 3.0 - now_s();
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
  free(m);
}
