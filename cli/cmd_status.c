/* tromcho status: like `ceph -s`, health (OK/WARN/ERR and why), OSDs up
 * and down, PGs by state, recovery progress and rate, client I/O rates,
 * capacity, scrub findings; human or --json. From the KV: /osd/state/<n>
 * (live OSDs, with a lease), /pg/config (placement), /stats (the monitor's
 * list of OSDs it saw), /pg/state/<pool>/<pg> (what each primary reports:
 * {"state": ["active", "degraded", "recovering", ...], "primary": N, ...},
 * or a string), /osd/stats/<n> (each OSD's rates, capacity, scrub totals;
 * administrators only: without it the rates and capacity are left out),
 * /pool/stats/<pool> (the monitor's sums: usage and I/O of each pool;
 * administrators only).
 * A /pg/state report from an OSD that is no longer the PG's primary is
 * stale and ignored. */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "cli_util.h"
#include "cluster.h"
#include "commands.h"
#include "error.h"
#include "kv_client.h"
#include "vector.h"

static bool
has_id(const uint64_t *v, size_t n, uint64_t id)
{
  for (size_t i = 0; i < n; i++)
    if (v[i] == id)
      return true;
  return false;
}

/* What the PG's primary reports beyond its state words. */
struct pg_report {
  int64_t degraded_objects, scrub_bad, scrub_repaired, scrub_last;
};

/* The reported state words of one PG ("" if none, or if the report is not
 * from the current primary). */
static void
pg_reported(struct tc_kv_result *st, const char *prefix, uint64_t pool, uint32_t pg, uint64_t primary, char *out,
            size_t len, struct pg_report *rep)
{
  char key[512];
  snprintf(key, sizeof key, "%.256s%" PRIu64 "/%u", prefix, pool, pg);
  *out = 0;
  for (size_t i = 0; i < st->n_kvs; i++) {
    if (strcmp((const char *) st->kvs[i].key, key))
      continue;
    json_object *o = json_tokener_parse((const char *) st->kvs[i].value), *f, *sc;
    if (o && json_object_object_get_ex(o, "primary", &f) && (uint64_t) json_object_get_int64(f) != primary) {
      json_object_put(o);
      return;   /* written by a former primary */
    }
    if (o && json_object_object_get_ex(o, "degraded_objects", &f))
      rep->degraded_objects = json_object_get_int64(f);
    if (o && json_object_object_get_ex(o, "scrub", &sc)) {
      if (json_object_object_get_ex(sc, "bad_sectors", &f))
        rep->scrub_bad = json_object_get_int64(f);
      if (json_object_object_get_ex(sc, "repaired_sectors", &f))
        rep->scrub_repaired = json_object_get_int64(f);
      if (json_object_object_get_ex(sc, "last", &f))
        rep->scrub_last = json_object_get_int64(f);
    }
    if (o && json_object_object_get_ex(o, "state", &f)) {
      if (json_object_is_type(f, json_type_array))
        for (size_t k = 0; k < json_object_array_length(f); k++) {
          size_t l = strlen(out);
          snprintf(out + l, len - l, "%s%s", l ? " " : "", json_object_get_string(json_object_array_get_idx(f, k)));
        }
      else if (json_object_is_type(f, json_type_string))
        snprintf(out, len, "%s", json_object_get_string(f));
    }
    json_object_put(o);
    return;
  }
}

int
cmd_status(int argc, char **argv, struct tc_config *cfg)
{
  bool json = false;
  const char *pos[1];
  int npos;
  const struct cli_opt opts[] = { { "--json", NULL, NULL, &json }, { 0 } };
  if (cli_parse("status", argc, argv, opts, pos, 0, &npos) < 0)
    return 1;
  struct tc_client *cl = cli_client("status", cfg);
  if (!cl)
    return 1;
  if (tc_cluster_refresh(tc_client_cluster(cl)) < 0) {
    int r = cli_fail("status");
    tc_client_free(cl);
    return r;
  }
  struct tc_map *m = tc_cluster_map(tc_client_cluster(cl));
  char key[256];
  struct tc_kv_result st = { 0 };
  tc_client_key(cl, key, sizeof key, "/pg/state/");
  if (tc_kv_get_prefix(tc_client_kv(cl), key, 0, &st) < 0) {
    tc_kv_result_free(&st);   /* not fatal: a user may not read /pg/state */
    memset(&st, 0, sizeof st);
  }
  /* OSDs: up = with a state key; down = named by the placement but without one. */
  size_t nknown = 0, cap = m->n_osds + 16;
  uint64_t *known = malloc(cap * sizeof *known);
  json_object *root = json_object_new_object(), *jo = json_object_new_array(), *jp = json_object_new_array();
  if (!known || !root || !jo || !jp) {
    fprintf(stderr, "tromcho status: out of memory\n");
    free(known);
    json_object_put(root);
    json_object_put(jo);
    json_object_put(jp);
    tc_kv_result_free(&st);
    tc_map_unref(m);
    tc_client_free(cl);
    return 1;
  }
  for (size_t i = 0; i < m->n_osds; i++)
    known[nknown++] = m->osds[i].id;
  size_t up = nknown;
  /* The monitor's /stats remembers every OSD it saw: the ones gone are down. */
  struct tc_kv_result stats = { 0 };
  char skey[256];
  if (tc_kv_get(tc_client_kv(cl), tc_client_key(cl, skey, sizeof skey, "/stats"), 0, &stats) == 0 && stats.n_kvs) {
    json_object *so = json_tokener_parse((const char *) stats.kvs[0].value), *osds;
    if (so && json_object_object_get_ex(so, "osds", &osds) && json_object_is_type(osds, json_type_object)) {
      json_object_object_foreach(osds, k, v) {
        uint64_t id = strtoull(k, NULL, 10);
        if (id && !has_id(known, nknown, id) && !strcmp(json_object_get_string(v), "down")) {
          if (tc_grow(&known, &cap, nknown + 1, sizeof *known, 0) < 0)
            break;
          known[nknown++] = id;
        }
      }
    }
    json_object_put(so);
  }
  tc_kv_result_free(&stats);
  uint64_t clean = 0, degraded = 0, recovering = 0, inactive = 0, peering = 0, total = 0;
  uint64_t inconsistent = 0, scrubbing = 0;
  int64_t degraded_objects = 0, scrub_bad = 0, scrub_repaired = 0, scrub_oldest = 0;
  for (size_t p = 0; p < m->n_pools; p++) {
    const struct tc_pool_info *pool = &m->pools[p];
    json_object *pj = json_object_new_object();
    uint64_t pc = 0, pd = 0, pr = 0, pi = 0, pp = 0;
    for (uint32_t g = 0; g < pool->pg_count; g++) {
      const struct tc_pg_info *pg = tc_map_pg(m, pool->id, g);
      uint32_t live = 0;
      for (uint32_t s = 0; pg && s < pool->pg_size && s < TC_MAX_PG_SIZE; s++) {
        uint64_t o = pg->osd_set[s];
        if (!o)
          continue;
        if (tc_map_osd(m, o))
          live++;
        else if (!has_id(known, nknown, o)) {
          if (tc_grow(&known, &cap, nknown + 1, sizeof *known, 0) < 0)
            continue;
          known[nknown++] = o;
        }
      }
      char rep[256];
      struct pg_report pr_ = { 0 };
      pg_reported(&st, key, pool->id, g, pg ? pg->primary : 0, rep, sizeof rep, &pr_);
      degraded_objects += pr_.degraded_objects;
      scrub_bad += pr_.scrub_bad;
      scrub_repaired += pr_.scrub_repaired;
      if (*rep && (!scrub_oldest || pr_.scrub_last < scrub_oldest))
        scrub_oldest = pr_.scrub_last;
      inconsistent += strstr(rep, "inconsistent") != NULL;
      scrubbing += strstr(rep, "scrubbing") != NULL;
      if (!pg || !pg->primary || !tc_map_osd(m, pg->primary) || live < pool->pg_minsize || strstr(rep, "incomplete"))
        pi++;
      else if (!*rep || strstr(rep, "peering"))
        pp++;   /* the primary has not reported this PG yet: it peers */
      else if (strstr(rep, "recover"))
        pr++;
      else if (live < pool->pg_size || strstr(rep, "degraded"))
        pd++;
      else
        pc++;
    }
    json_object_object_add(pj, "pool_id", json_object_new_int64((int64_t) pool->id));
    json_object_object_add(pj, "name", json_object_new_string(pool->name ? pool->name : ""));
    json_object_object_add(pj, "pg_count", json_object_new_int64(pool->pg_count));
    json_object_object_add(pj, "pg_size", json_object_new_int64(pool->pg_size));
    json_object_object_add(pj, "clean", json_object_new_int64((int64_t) pc));
    json_object_object_add(pj, "degraded", json_object_new_int64((int64_t) pd));
    json_object_object_add(pj, "recovering", json_object_new_int64((int64_t) pr));
    json_object_object_add(pj, "peering", json_object_new_int64((int64_t) pp));
    json_object_object_add(pj, "inactive", json_object_new_int64((int64_t) pi));
    json_object_array_add(jp, pj);
    clean += pc;
    degraded += pd;
    recovering += pr;
    inactive += pi;
    peering += pp;
    total += pool->pg_count;
  }
  /* Each OSD's own figures (administrators may read them). */
  struct tc_kv_result os = { 0 };
  char okey[256];
  double rd_iops = 0, wr_iops = 0, rd_bps = 0, wr_bps = 0, rec_rate = 0;
  int64_t used = 0, data = 0, free_b = 0, n_stats = 0;
  tc_client_key(cl, okey, sizeof okey, "/osd/stats/");
  if (tc_kv_get_prefix(tc_client_kv(cl), okey, 0, &os) == 0)
    for (size_t i = 0; i < os.n_kvs; i++) {
      uint64_t id = strtoull((const char *) os.kvs[i].key + strlen(okey), NULL, 10);
      if (!tc_map_osd(m, id))
        continue;   /* gone: its lease should have taken the key */
      json_object *o = json_tokener_parse((const char *) os.kvs[i].value), *r, *f;
      if (!o)
        continue;
      n_stats++;
      if (json_object_object_get_ex(o, "rates", &r)) {
        if (json_object_object_get_ex(r, "read_iops", &f)) rd_iops += json_object_get_double(f);
        if (json_object_object_get_ex(r, "write_iops", &f)) wr_iops += json_object_get_double(f);
        if (json_object_object_get_ex(r, "read_bps", &f)) rd_bps += json_object_get_double(f);
        if (json_object_object_get_ex(r, "write_bps", &f)) wr_bps += json_object_get_double(f);
        if (json_object_object_get_ex(r, "recovery_objects_per_sec", &f)) rec_rate += json_object_get_double(f);
      }
      if (json_object_object_get_ex(o, "store", &r)) {
        if (json_object_object_get_ex(r, "used_bytes", &f)) used += json_object_get_int64(f);
        if (json_object_object_get_ex(r, "data_bytes", &f)) data += json_object_get_int64(f);
        if (json_object_object_get_ex(r, "free_bytes", &f)) free_b += json_object_get_int64(f);
      }
      json_object_put(o);
    }
  tc_kv_result_free(&os);
  /* Health: ERR when data is unavailable or a scrub found what it could not
   * repair; WARN for anything short of every PG clean on every OSD. */
  const char *health = "HEALTH_OK";
  json_object *why = json_object_new_array();
  char line[160];
#define REASON(lvl, ...) do { snprintf(line, sizeof line, __VA_ARGS__); \
    json_object_array_add(why, json_object_new_string(line)); \
    if (!strcmp(lvl, "HEALTH_ERR") || strcmp(health, "HEALTH_ERR")) health = lvl; } while (0)
  if (inactive)
    REASON("HEALTH_ERR", "%" PRIu64 " pgs inactive (no primary or fewer than pg_minsize copies up)", inactive);
  if (inconsistent)
    REASON("HEALTH_ERR", "%" PRIu64 " pgs inconsistent (scrub found sectors it could not repair)", inconsistent);
  if (nknown > up)
    REASON("HEALTH_WARN", "%zu osds down", nknown - up);
  if (peering)
    REASON("HEALTH_WARN", "%" PRIu64 " pgs peering", peering);
  if (degraded || recovering)
    REASON("HEALTH_WARN", "%" PRIu64 " pgs degraded, %" PRIu64 " recovering (%" PRId64 " objects with stale copies)",
           degraded + recovering, recovering, degraded_objects);
#undef REASON
  json_object *jh = json_object_new_object(), *jr = json_object_new_object(), *ji = json_object_new_object(),
              *jc = json_object_new_object(), *js = json_object_new_object();
  json_object_object_add(jh, "status", json_object_new_string(health));
  json_object_object_add(jh, "reasons", why);
  json_object_object_add(jr, "degraded_objects", json_object_new_int64(degraded_objects));
  json_object_object_add(jr, "objects_per_sec", json_object_new_double(rec_rate));
  json_object_object_add(ji, "read_iops", json_object_new_double(rd_iops));
  json_object_object_add(ji, "write_iops", json_object_new_double(wr_iops));
  json_object_object_add(ji, "read_bps", json_object_new_double(rd_bps));
  json_object_object_add(ji, "write_bps", json_object_new_double(wr_bps));
  json_object_object_add(jc, "used_bytes", json_object_new_int64(used));
  json_object_object_add(jc, "free_bytes", json_object_new_int64(free_b));
  json_object_object_add(jc, "total_bytes", json_object_new_int64(data));
  json_object_object_add(jc, "osds_reporting", json_object_new_int64(n_stats));
  json_object_object_add(js, "bad_sectors", json_object_new_int64(scrub_bad));
  json_object_object_add(js, "repaired_sectors", json_object_new_int64(scrub_repaired));
  json_object_object_add(js, "pgs_scrubbing", json_object_new_int64((int64_t) scrubbing));
  json_object_object_add(js, "pgs_inconsistent", json_object_new_int64((int64_t) inconsistent));
  json_object_object_add(js, "oldest_scrub", json_object_new_int64(scrub_oldest));
  for (size_t i = 0; i < nknown; i++) {
    json_object *o = json_object_new_object();
    const struct tc_osd_addr *a = tc_map_osd(m, known[i]);
    json_object_object_add(o, "osd", json_object_new_int64((int64_t) known[i]));
    json_object_object_add(o, "up", json_object_new_boolean(i < up));
    if (a) {
      json_object_object_add(o, "addr", json_object_new_string(a->addr));
      json_object_object_add(o, "port", json_object_new_int(a->port));
      json_object_object_add(o, "host", a->host ? json_object_new_string(a->host) : NULL);
    }
    json_object_array_add(jo, o);
  }
  json_object_object_add(root, "health", jh);
  json_object_object_add(root, "osds_up", json_object_new_int64((int64_t) up));
  json_object_object_add(root, "osds_down", json_object_new_int64((int64_t) (nknown - up)));
  json_object_object_add(root, "pgs", json_object_new_int64((int64_t) total));
  json_object_object_add(root, "pgs_clean", json_object_new_int64((int64_t) clean));
  json_object_object_add(root, "pgs_degraded", json_object_new_int64((int64_t) degraded));
  json_object_object_add(root, "pgs_recovering", json_object_new_int64((int64_t) recovering));
  json_object_object_add(root, "pgs_peering", json_object_new_int64((int64_t) peering));
  json_object_object_add(root, "pgs_inactive", json_object_new_int64((int64_t) inactive));
  json_object_object_add(root, "recovery", jr);
  json_object_object_add(root, "io", ji);
  json_object_object_add(root, "capacity", jc);
  json_object_object_add(root, "scrub", js);
  json_object_object_add(root, "osds", jo);
  /* The monitor's sums for each pool (administrators may read them). */
  struct tc_kv_result pst = { 0 };
  char pskey[256];
  tc_client_key(cl, pskey, sizeof pskey, "/pool/stats/");
  if (tc_kv_get_prefix(tc_client_kv(cl), pskey, 0, &pst) < 0) {
    tc_kv_result_free(&pst);
    memset(&pst, 0, sizeof pst);
  }
  for (size_t i = 0; i < json_object_array_length(jp); i++) {
    json_object *pj = json_object_array_get_idx(jp, i), *f;
    json_object_object_get_ex(pj, "pool_id", &f);
    char want[300];
    snprintf(want, sizeof want, "%s%" PRId64, pskey, json_object_get_int64(f));
    for (size_t k = 0; k < pst.n_kvs; k++)
      if (!strcmp((const char *) pst.kvs[k].key, want)) {
        json_object *v = json_tokener_parse((const char *) pst.kvs[k].value);
        if (v)
          json_object_object_add(pj, "stats", v);
      }
  }
  tc_kv_result_free(&pst);
  json_object_object_add(root, "pools", jp);
  if (json)
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
  else {
    printf("health:   %s\n", health);
    for (size_t i = 0; i < json_object_array_length(why); i++)
      printf("          %s\n", json_object_get_string(json_object_array_get_idx(why, i)));
    printf("osds:     %zu up, %zu down\n", up, nknown - up);
    for (size_t i = up; i < nknown; i++)
      printf("          osd.%" PRIu64 " down\n", known[i]);
    printf("pgs:      %" PRIu64 " total: %" PRIu64 " clean, %" PRIu64 " degraded, %" PRIu64 " recovering, %" PRIu64
           " peering, %" PRIu64 " inactive\n", total, clean, degraded, recovering, peering, inactive);
    printf("pools:    %zu\n", m->n_pools);
    if (degraded_objects || recovering)
      printf("recovery: %" PRId64 " objects with stale copies, %.1f objects/s\n", degraded_objects, rec_rate);
    if (n_stats) {
      printf("io:       client %.1f MB/s rd, %.1f MB/s wr, %.0f op/s rd, %.0f op/s wr\n", rd_bps / 1e6, wr_bps / 1e6,
             rd_iops, wr_iops);
      printf("usage:    %.1f MiB used, %.1f MiB / %.1f MiB avail (%" PRId64 " osds reporting)\n", used / 1048576.0,
             free_b / 1048576.0, data / 1048576.0, n_stats);
    }
    printf("scrub:    %" PRId64 " bad sectors found, %" PRId64 " repaired; %" PRIu64 " pgs scrubbing, %" PRIu64
           " inconsistent\n", scrub_bad, scrub_repaired, scrubbing, inconsistent);
    for (size_t i = 0; i < json_object_array_length(jp); i++) {
      json_object *pj = json_object_array_get_idx(jp, i), *ps, *f;
      if (!json_object_object_get_ex(pj, "stats", &ps))
        continue;
      double v[7];
      const char *names[7] = { "used", "raw_used", "usable_free", "read_iops", "write_iops", "read_bps", "write_bps" };
      for (int k = 0; k < 7; k++)
        v[k] = json_object_object_get_ex(ps, names[k], &f) ? json_object_get_double(f) : 0;
      json_object *nm = NULL;
      json_object_object_get_ex(pj, "name", &nm);
      int64_t images = json_object_object_get_ex(ps, "images", &f) ? json_object_get_int64(f) : 0;
      printf("%-9s %s: %.1f MiB used (%.1f MiB raw), %.1f MiB avail; %" PRId64 " images; %.0f op/s rd, %.0f op/s wr, "
             "%.1f MB/s rd, %.1f MB/s wr\n", i ? "" : "pool", nm ? json_object_get_string(nm) : "?", v[0] / 1048576.0,
             v[1] / 1048576.0, v[2] / 1048576.0, images, v[3], v[4], v[5] / 1e6, v[6] / 1e6);
    }
  }
  json_object_put(root);
  free(known);
  tc_kv_result_free(&st);
  tc_map_unref(m);
  tc_client_free(cl);
  return 0;
}
