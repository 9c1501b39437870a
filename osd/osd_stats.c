/* What this OSD tells the cluster about itself, in the KV (DESIGN.md 3):
 *   /osd/stats/<n>           counters, rates over the last interval, the
 *                            store's capacity, scrub totals, and "inodes":
 *                            per inode the bytes this store holds of it
 *                            (every copy, written every interval from a
 *                            walk of the store) and the client operations
 *                            served as primary (counted when allowed),
 *                            which the monitor sums into /inode/stats,
 *                            /pool/stats and /stats
 *   /pg/state/<pool>/<pg>    of each PG it leads: {"state": [...],
 *                            "primary", "epoch", "objects",
 *                            "degraded_objects", "scrub": {...}}
 *   /pgstats/<pool>/<pg>     the same, for the monitor (the seed's table
 *                            lets monitors read /pgstats/, not /pg/state/):
 *                            it evens out a pool's primaries once every
 *                            PG says clean (gateway/monitor.c)
 * One txn attached to the registration lease (so the keys vanish with the
 * OSD), holding /osd/stats and only the PG values that changed:
 * every osd_stats_interval seconds, and within a second of a PG's report
 * changing (peering, degraded, recovery progress), so the KV traffic is at
 * most one small request a second per OSD, one an interval when idle. The access filter lets an OSD write these keys only
 * with the lease of its own /osd/state/<n> and only for PGs /pg/config
 * makes it primary of (gateway/kvfilter.c). The loop-owned gauges of
 * /metrics are sampled here too, once a second. */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "log.h"
#include "osd.h"

#define OSD_SECTOR 4096   /* the store's sector */

/* Slots of pg whose member is reachable now (this OSD included). */
static uint8_t
reachable(struct osd *o, const struct osd_pg *pg)
{
  uint8_t m = 0;
  for (uint32_t s = 0; s < pg->size && s < TC_MAX_PG_SIZE; s++) {
    uint64_t id = pg->osd_set[s];
    if (id && (id == o->osd_num || osd_peer_usable(o, id)))
      m |= (uint8_t) (1u << s);
  }
  return m;
}

/* Objects recovery can do now (a stale copy on a reachable member). */
static size_t
recoverable(struct osd *o, const struct osd_pg *pg)
{
  if (!pg->n_stale)
    return 0;
  uint8_t r = reachable(o, pg);
  size_t n = 0;
  for (size_t i = 0; i < pg->objs.cap; i++)
    if (pg->objs.v[i].used && (pg->objs.v[i].stale & r))
      n++;
  return n;
}

static bool
pg_degraded(struct osd *o, const struct osd_pg *pg)
{
  uint32_t members = 0;
  for (uint32_t s = 0; s < pg->size && s < TC_MAX_PG_SIZE; s++)
    members += pg->osd_set[s] != 0;
  return pg->n_stale || __builtin_popcount(reachable(o, pg)) < (int) pg->size || members < pg->size;
}

json_object *
osd_pg_state_json(struct osd *o, const struct osd_pg *pg)
{
  json_object *j = json_object_new_object(), *st = json_object_new_array(), *sc = json_object_new_object();
  if (pg->state == PG_PEERING)
    json_object_array_add(st, json_object_new_string("peering"));
  else if (pg->state == PG_INCOMPLETE)
    json_object_array_add(st, json_object_new_string("incomplete"));
  else {
    json_object_array_add(st, json_object_new_string("active"));
    size_t rec = recoverable(o, pg);
    if (pg_degraded(o, pg))
      json_object_array_add(st, json_object_new_string("degraded"));
    else
      json_object_array_add(st, json_object_new_string("clean"));
    if (rec)
      json_object_array_add(st, json_object_new_string("recovering"));
    if (pg->scrub_running)
      json_object_array_add(st, json_object_new_string("scrubbing"));
    if (pg->scrub_bad > pg->scrub_repaired || pg->n_inconsistent)
      json_object_array_add(st, json_object_new_string("inconsistent"));
  }
  json_object_object_add(j, "state", st);
  json_object_object_add(j, "primary", json_object_new_int64((int64_t) o->osd_num));
  json_object_object_add(j, "epoch", json_object_new_int64((int64_t) pg->epoch));
  json_object_object_add(j, "objects", json_object_new_int64((int64_t) pg->objs.n));
  json_object_object_add(j, "degraded_objects", json_object_new_int64((int64_t) pg->n_stale));
  json_object_object_add(sc, "last", json_object_new_int64(pg->scrub_last));
  json_object_object_add(sc, "bad_sectors", json_object_new_int64((int64_t) pg->scrub_bad));
  json_object_object_add(sc, "repaired_sectors", json_object_new_int64((int64_t) pg->scrub_repaired));
  /* the last full pass on its own, and the request (next_scrub) it served */
  json_object_object_add(sc, "last_bad_sectors", json_object_new_int64((int64_t) pg->scrub_last_bad));
  json_object_object_add(sc, "last_repaired_sectors", json_object_new_int64((int64_t) pg->scrub_last_repaired));
  json_object_object_add(sc, "request", json_object_new_int64(pg->scrub_req_done));
  json_object_object_add(sc, "inconsistent_objects", json_object_new_int64((int64_t) pg->n_inconsistent));
  if (pg->scrub_running && pg->objs.cap)
    json_object_object_add(sc, "progress", json_object_new_double((double) pg->scrub_pos / (double) pg->objs.cap));
  json_object_object_add(j, "scrub", sc);
  return j;
}

/* The loop-owned gauges of /metrics. */
static void
sample_gauges(struct osd *o)
{
  struct osd_metrics *m = o->m;
  if (!m)
    return;
  int64_t n[4] = { 0 }, degraded_objects = 0, conns = 0, down = 0;
  for (size_t i = 0; i < o->n_pgs; i++) {
    const struct osd_pg *pg = &o->pgs[i];
    if (pg->state == PG_PEERING)
      n[0]++;
    else if (pg->state == PG_INCOMPLETE)
      n[2]++;
    else {
      n[1]++;
      n[3] += pg_degraded(o, pg);
    }
    degraded_objects += (int64_t) pg->n_stale;
  }
  for (int i = 0; i < 4; i++)
    tc_gauge_set(m->pgs[i], n[i]);
  for (size_t i = 0; i < o->n_peers; i++) {
    conns += o->peers[i].conn != NULL;
    down += o->peers[i].down;
  }
  tc_gauge_set(m->degraded_objects, degraded_objects);
  tc_gauge_set(m->recovery_inflight, o->recovery_inflight);
  tc_gauge_set(m->connections, conns);
  tc_gauge_set(m->peers_down, down);
  struct tc_store_stats st;
  if (tc_store_stats(o->store, &st) == 0) {
    tc_gauge_set(m->store_used, (int64_t) st.used_bytes);
    tc_gauge_set(m->store_objects, (int64_t) st.objects);
    tc_gauge_set(m->store_checksum_errors, (int64_t) st.checksum_errors);
  }
}

static uint64_t
count(struct osd *o, int op)
{
  return o->m ? tc_counter_get(o->m->ops[op]) : 0;
}

/* ---- client I/O and space by inode ---- */

static struct osd_inode_stat *
istat_slot(struct osd_inode_stat *v, size_t cap, uint64_t inode)
{
  size_t i = (size_t) ((inode * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
  while (v[i].inode && v[i].inode != inode)
    i = (i + 1) & (cap - 1);
  return &v[i];
}

void
osd_inode_stats_count(struct osd *o, const struct osd_req *r)
{
  if (r->op != TC_OP_READ && r->op != TC_OP_WRITE && r->op != TC_OP_WRITE_PARTIAL && r->op != TC_OP_WRITE_IF &&
      r->op != TC_OP_DELETE)
    return;
  if (!r->inode)
    return;
  if ((o->n_istats + 1) * 4 > o->istats_cap * 3) {
    size_t nc = o->istats_cap ? o->istats_cap * 2 : 64;
    struct osd_inode_stat *nv = calloc(nc, sizeof *nv);
    if (!nv)
      return;   /* not counted: the stats are no reason to fail an operation */
    for (size_t i = 0; i < o->istats_cap; i++)
      if (o->istats[i].inode)
        *istat_slot(nv, nc, o->istats[i].inode) = o->istats[i];
    free(o->istats);
    o->istats = nv;
    o->istats_cap = nc;
  }
  struct osd_inode_stat *e = istat_slot(o->istats, o->istats_cap, r->inode);
  if (!e->inode) {
    e->inode = r->inode;
    o->n_istats++;
  }
  if (r->op == TC_OP_READ) {
    e->read_ops++;
    e->read_bytes += r->len;
  } else if (r->op == TC_OP_DELETE) {
    e->delete_ops++;
    e->delete_bytes += r->len;
  } else {
    e->write_ops++;
    e->write_bytes += r->op == TC_OP_WRITE_IF ? OSD_SECTOR : r->len;
  }
}

struct space_walk {
  uint64_t inode, sectors;
  json_object *inodes;
};

static json_object *
inode_entry(json_object *inodes, uint64_t inode)
{
  char k[24];
  json_object *e;
  snprintf(k, sizeof k, "%" PRIu64, inode);
  if (json_object_object_get_ex(inodes, k, &e))
    return e;
  e = json_object_new_object();
  json_object_object_add(inodes, k, e);
  return e;
}

static void
space_flush(struct space_walk *w)
{
  if (w->inode && w->sectors)
    json_object_object_add(inode_entry(w->inodes, w->inode), "used_bytes",
                           json_object_new_int64((int64_t) (w->sectors * OSD_SECTOR)));
  w->sectors = 0;
}

static int
space_cb(void *opaque, const struct tc_store_obj *obj)
{
  struct space_walk *w = opaque;
  if (obj->inode != w->inode) {
    space_flush(w);
    w->inode = obj->inode;
  }
  w->sectors += obj->sectors;
  return 0;
}

/* {"<inode>": {"used_bytes", "read_ops", "read_bytes", "write_ops",
 * "write_bytes", "delete_ops", "delete_bytes"}}: the space from a walk of
 * the store (objects come in inode order), the I/O from the counters. */
static json_object *
inodes_json(struct osd *o)
{
  struct space_walk w = { 0, 0, json_object_new_object() };
  if (tc_store_list(o->store, 0, UINT64_MAX, space_cb, &w) < 0)
    tc_warn("osd %" PRIu64 ": stats: walking the store: %s", o->osd_num, tc_last_error());
  space_flush(&w);
  for (size_t i = 0; i < o->istats_cap; i++) {
    const struct osd_inode_stat *s = &o->istats[i];
    if (!s->inode)
      continue;
    json_object *e = inode_entry(w.inodes, s->inode);
    json_object_object_add(e, "read_ops", json_object_new_int64((int64_t) s->read_ops));
    json_object_object_add(e, "read_bytes", json_object_new_int64((int64_t) s->read_bytes));
    json_object_object_add(e, "write_ops", json_object_new_int64((int64_t) s->write_ops));
    json_object_object_add(e, "write_bytes", json_object_new_int64((int64_t) s->write_bytes));
    json_object_object_add(e, "delete_ops", json_object_new_int64((int64_t) s->delete_ops));
    json_object_object_add(e, "delete_bytes", json_object_new_int64((int64_t) s->delete_bytes));
  }
  return w.inodes;
}

/* walk: rebuild the per-inode part (else the last one, which a write of
 * /osd/stats between two intervals repeats). */
static json_object *
osd_stats_json(struct osd *o, double now, bool walk)
{
  json_object *j = json_object_new_object(), *ops = json_object_new_object(), *sj = json_object_new_object();
  uint64_t rd = count(o, TC_OP_READ), wr = count(o, TC_OP_WRITE) + count(o, TC_OP_WRITE_PARTIAL) + count(o, TC_OP_WRITE_IF);
  uint64_t rb = o->m ? tc_counter_get(o->m->read_bytes) : 0, wb = o->m ? tc_counter_get(o->m->write_bytes) : 0;
  double dt = o->stats_t0 > 0 ? now - o->stats_t0 : 0;
  json_object_object_add(j, "time", json_object_new_int64((int64_t) time(NULL)));
  json_object_object_add(j, "read_ops", json_object_new_int64((int64_t) rd));
  json_object_object_add(j, "write_ops", json_object_new_int64((int64_t) wr));
  json_object_object_add(j, "read_bytes", json_object_new_int64((int64_t) rb));
  json_object_object_add(j, "write_bytes", json_object_new_int64((int64_t) wb));
  json_object_object_add(j, "recovered_objects", json_object_new_int64((int64_t) o->recovered));
  /* Rates over the interval since the last write (0 on the first). */
  if (dt > 0.5) {
    json_object_object_add(ops, "read_iops", json_object_new_double((double) (rd - o->last_rd_ops) / dt));
    json_object_object_add(ops, "write_iops", json_object_new_double((double) (wr - o->last_wr_ops) / dt));
    json_object_object_add(ops, "read_bps", json_object_new_double((double) (rb - o->last_rd_bytes) / dt));
    json_object_object_add(ops, "write_bps", json_object_new_double((double) (wb - o->last_wr_bytes) / dt));
    json_object_object_add(ops, "recovery_objects_per_sec",
                           json_object_new_double((double) (o->recovered - o->last_recovered) / dt));
  }
  json_object_object_add(j, "rates", ops);
  o->last_rd_ops = rd;
  o->last_wr_ops = wr;
  o->last_rd_bytes = rb;
  o->last_wr_bytes = wb;
  o->last_recovered = o->recovered;
  o->stats_t0 = now;
  struct tc_store_stats st;
  if (tc_store_stats(o->store, &st) == 0) {
    json_object_object_add(sj, "objects", json_object_new_int64((int64_t) st.objects));
    json_object_object_add(sj, "used_bytes", json_object_new_int64((int64_t) st.used_bytes));
    json_object_object_add(sj, "free_bytes", json_object_new_int64((int64_t) st.free_bytes));
    json_object_object_add(sj, "data_bytes", json_object_new_int64((int64_t) st.data_bytes));
    json_object_object_add(sj, "checksum_errors", json_object_new_int64((int64_t) st.checksum_errors));
  }
  json_object_object_add(j, "store", sj);
  size_t degraded = 0;
  for (size_t i = 0; i < o->n_pgs; i++)
    degraded += o->pgs[i].n_stale;
  json_object_object_add(j, "degraded_objects", json_object_new_int64((int64_t) degraded));
  json_object_object_add(j, "recovery_inflight", json_object_new_int(o->recovery_inflight));
  json_object_object_add(j, "scrubbed_objects", json_object_new_int64((int64_t) o->scrubbed));
  json_object_object_add(j, "scrub_bad_sectors", json_object_new_int64((int64_t) o->scrub_bad));
  json_object_object_add(j, "eperm", json_object_new_int64((int64_t) o->eperm));
  if (walk || !o->inodes_last) {
    json_object_put(o->inodes_last);
    o->inodes_last = inodes_json(o);
  }
  json_object_object_add(j, "inodes", json_object_get(o->inodes_last));
  return j;
}

/* The values a txn carries, kept until it answers (on the loop thread). */
struct stats_put {
  struct osd *o;
  int64_t lease;
  size_t n;
  char **keys, **vals;     /* /pg/state and /pgstats entries only (what the cache learns) */
  int err;
  char msg[200];
};

static void
put_free(struct stats_put *p)
{
  for (size_t i = 0; i < p->n; i++) {
    free(p->keys[i]);
    free(p->vals[i]);
  }
  free(p->keys);
  free(p->vals);
  free(p);
}

/* The cache of what the KV holds: key -> value last written. */
static const char *
sent_get(struct osd *o, const char *key)
{
  for (size_t i = 0; i < o->n_pg_state_sent; i++)
    if (!strcmp(o->pg_state_keys[i], key))
      return o->pg_state_sent[i];
  return NULL;
}

static void
sent_set(struct osd *o, char *key, char *val)
{
  for (size_t i = 0; i < o->n_pg_state_sent; i++)
    if (!strcmp(o->pg_state_keys[i], key)) {
      free(o->pg_state_sent[i]);
      o->pg_state_sent[i] = val;
      free(key);
      return;
    }
  char **k = realloc(o->pg_state_keys, (o->n_pg_state_sent + 1) * sizeof *k);
  if (k)
    o->pg_state_keys = k;
  char **v = k ? realloc(o->pg_state_sent, (o->n_pg_state_sent + 1) * sizeof *v) : NULL;
  if (!v) {   /* not cached: sent again next time */
    free(key);
    free(val);
    return;
  }
  o->pg_state_sent = v;
  o->pg_state_keys[o->n_pg_state_sent] = key;
  o->pg_state_sent[o->n_pg_state_sent++] = val;
}

void
osd_stats_stop(struct osd *o)
{
  if (o->stats_put)
    put_free(o->stats_put);
  o->stats_put = NULL;
  o->stats_inflight = 0;
  osd_stats_free(o);
  free(o->istats);
  o->istats = NULL;
  json_object_put(o->inodes_last);
  o->inodes_last = NULL;
  o->istats_cap = o->n_istats = 0;
}

void
osd_stats_free(struct osd *o)
{
  for (size_t i = 0; i < o->n_pg_state_sent; i++) {
    free(o->pg_state_keys[i]);
    free(o->pg_state_sent[i]);
  }
  free(o->pg_state_keys);
  free(o->pg_state_sent);
  o->pg_state_keys = o->pg_state_sent = NULL;
  o->n_pg_state_sent = 0;
}

static void
put_done_on_loop(struct tc_evloop *loop, void *arg)
{
  struct stats_put *p = arg;
  struct osd *o = p->o;
  (void) loop;
  o->stats_inflight = 0;
  o->stats_put = NULL;
  if (p->err) {
    tc_warn("osd %" PRIu64 ": writing /osd/stats, /pg/state and /pgstats: %s", o->osd_num, p->msg);
    osd_stats_free(o);   /* write everything again next time */
  } else if (p->lease == o->lease) {
    for (size_t i = 0; i < p->n; i++) {
      sent_set(o, p->keys[i], p->vals[i]);
      p->keys[i] = p->vals[i] = NULL;
    }
  }
  put_free(p);
}

static void
put_done(void *arg, int err, const char *msg, struct tc_kv_result *res)
{
  struct stats_put *p = arg;
  (void) res;
  p->err = err;
  if (err)
    snprintf(p->msg, sizeof p->msg, "%s", msg ? msg : strerror(err));
  /* Stopping, the loop may never run what we hand it: the OSD frees the
   * put (o->stats_put) once this thread has ended (osd_stats_stop). */
  if (__atomic_load_n(&p->o->stopping, __ATOMIC_ACQUIRE))
    return;
  if (tc_evloop_submit(p->o->loop, put_done_on_loop, p) < 0)
    tc_err("osd %" PRIu64 ": a stats answer could not reach the loop: %s", p->o->osd_num, tc_last_error());
}

static char *
json_dup(json_object *j)
{
  char *s = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(j);
  return s;
}

/* force: write /osd/stats even when no PG state changed. */
static void
write_stats(struct osd *o, double now, bool force)
{
  if (!o->kv || !o->lease || o->stats_inflight)
    return;
  if (o->stats_lease != o->lease) {   /* registered again: the old keys went with the old lease */
    osd_stats_free(o);
    o->stats_lease = o->lease;
  }
  struct stats_put *p = calloc(1, sizeof *p);
  size_t cap = 2 * o->n_pgs;   /* /pg/state and /pgstats of each */
  char *skey = NULL, *sval = NULL;
  struct tc_kv_op *ops = NULL;
  if (!p || !(p->keys = calloc(cap + 1, sizeof *p->keys)) || !(p->vals = calloc(cap + 1, sizeof *p->vals)) ||
      !(ops = calloc(cap + 1, sizeof *ops)) || asprintf(&skey, "%s/osd/stats/%" PRIu64, o->prefix, o->osd_num) < 0 ||
      !(sval = json_dup(osd_stats_json(o, now, force)))) {
    if (skey)
      free(skey);
    free(sval);
    free(ops);
    if (p)
      put_free(p);
    tc_warn("osd %" PRIu64 ": stats: out of memory", o->osd_num);
    return;
  }
  p->o = o;
  p->lease = o->lease;
  size_t nops = 0;
  ops[nops++] = (struct tc_kv_op) { .type = TC_KV_PUT, .key = skey, .key_len = strlen(skey), .value = sval,
                                    .value_len = strlen(sval), .lease = o->lease };
  for (size_t i = 0; i < o->n_pgs; i++) {
    char *report = json_dup(osd_pg_state_json(o, &o->pgs[i]));
    for (int j = 0; report && j < 2; j++) {
      char *k = NULL, *v = strdup(report);
      if (!v || asprintf(&k, "%s%s%" PRIu64 "/%" PRIu32, o->prefix, j ? "/pgstats/" : "/pg/state/", o->pgs[i].pool,
                         o->pgs[i].pg) < 0) {
        free(v);
        continue;
      }
      const char *old = sent_get(o, k);
      if (old && !strcmp(old, v)) {
        free(k);
        free(v);
        continue;
      }
      p->keys[p->n] = k;
      p->vals[p->n++] = v;
      ops[nops++] = (struct tc_kv_op) { .type = TC_KV_PUT, .key = k, .key_len = strlen(k), .value = v,
                                        .value_len = strlen(v), .lease = o->lease };
    }
    free(report);
  }
  if (!force && p->n == 0) {   /* nothing new to say before the interval is up */
    put_free(p);
    free(ops);
    free(skey);
    free(sval);
    return;
  }
  struct tc_kv_request req = { .type = TC_KV_REQ_TXN, .txn = { .success = ops, .n_success = nops } };
  /* tc_kv_submit copies the request: the buffers are ours to keep or free. */
  if (tc_kv_submit(o->kv, &req, put_done, p) < 0) {
    tc_warn("osd %" PRIu64 ": stats: %s", o->osd_num, tc_last_error());
    put_free(p);
  } else {
    o->stats_inflight = 1;
    o->stats_put = p;
  }
  free(ops);
  free(skey);
  free(sval);
}

void
osd_stats_tick(struct osd *o)
{
  sample_gauges(o);
  int64_t every = tc_config_int(o->cfg, "osd_stats_interval");
  if (every < 1)
    every = 1;
  /* PG states as soon as they change (at most once a second), the stats
   * every interval. */
  write_stats(o, tc_metrics_now(), o->ticks % (unsigned) every == 0);
}
