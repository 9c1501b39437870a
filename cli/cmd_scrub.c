/* tromcho scrub: ask for a scrub now, the way Vitastor does it: write
 * "next_scrub" (a wall time, seconds) into /pg/history/<pool>/<pg> of each
 * PG chosen (all, or one pool, one PG, the PGs one OSD leads), keeping the
 * record's other fields (compare-and-swap on its mod_revision). The PG's
 * primary watches /pg/history and scrubs the PG once at or after that time
 * (osd/osd_scrub_sched.c). Only administrators (and monitors) may write
 * /pg/history: the KV's rights table refuses anyone else, so a user's
 * certificate gets "permission denied" from the KV, not from here.
 *
 * --wait: read /pg/state/<pool>/<pg> until the current primary reports
 * scrub.request >= what was asked (a full pass served it), then print what
 * the pass found: bad sectors, repaired sectors, objects left inconsistent. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include "cli_util.h"
#include "cluster.h"
#include "commands.h"
#include "error.h"
#include "evloop.h"
#include "kv_client.h"

struct scrub_pg {
  uint64_t pool;
  uint32_t pg;
  int64_t asked;              /* next_scrub written */
  bool done;
  int64_t bad, repaired, inconsistent_objects, primary;
  bool inconsistent;
};

/* Merge next_scrub into /pg/history/<pool>/<pg>. 0, or -1 with the KV's
 * message (a refusal of rights among them). */
static int
ask(struct tc_client *cl, struct scrub_pg *p, int64_t now)
{
  char key[256];
  tc_client_key(cl, key, sizeof key, "/pg/history/%" PRIu64 "/%" PRIu32, p->pool, p->pg);
  for (int attempt = 0; attempt < 10; attempt++) {
    struct tc_kv_result cur = { 0 }, res = { 0 };
    if (tc_kv_get(tc_client_kv(cl), key, 0, &cur) < 0)
      return tc_error(errno ? errno : EIO, "reading %s: %s", key, tc_last_error());
    json_object *j = cur.n_kvs ? json_tokener_parse((const char *) cur.kvs[0].value) : NULL, *f;
    int64_t rev = cur.n_kvs ? cur.kvs[0].mod_revision : 0;
    tc_kv_result_free(&cur);
    if (!j || !json_object_is_type(j, json_type_object)) {
      json_object_put(j);
      j = json_object_new_object();
    }
    /* A value above the last one asked, so the OSD sees a new request
     * even within the same second. */
    int64_t old = json_object_object_get_ex(j, "next_scrub", &f) ? json_object_get_int64(f) : 0;
    p->asked = old >= now && old <= now + 60 ? old + 1 : now;
    json_object_object_add(j, "next_scrub", json_object_new_int64(p->asked));
    const char *v = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
    struct tc_kv_cmp cmp = { .key = key, .key_len = strlen(key), .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL,
                             .number = rev };
    struct tc_kv_op put = { .type = TC_KV_PUT, .key = key, .key_len = strlen(key), .value = v,
                            .value_len = strlen(v) };
    struct tc_kv_txn txn = { .cmp = &cmp, .n_cmp = 1, .success = &put, .n_success = 1 };
    int r = tc_kv_txn(tc_client_kv(cl), &txn, &res);
    json_object_put(j);
    bool ok = r == 0 && res.succeeded;
    tc_kv_result_free(&res);
    if (r < 0)
      return tc_error(errno ? errno : EIO, "writing %s: %s", key, tc_last_error());
    if (ok)
      return 0;   /* else someone wrote it meanwhile: again */
  }
  return tc_error(EAGAIN, "writing %s: changed under every attempt", key);
}

/* Whether the current primary's report says the request was served. */
static void
check(struct tc_client *cl, struct tc_map *m, struct scrub_pg *p)
{
  char key[256];
  const struct tc_pg_info *pi = tc_map_pg(m, p->pool, p->pg);
  struct tc_kv_result st = { 0 };
  tc_client_key(cl, key, sizeof key, "/pg/state/%" PRIu64 "/%" PRIu32, p->pool, p->pg);
  if (!pi || tc_kv_get(tc_client_kv(cl), key, 0, &st) < 0 || !st.n_kvs) {
    tc_kv_result_free(&st);
    return;
  }
  json_object *j = json_tokener_parse((const char *) st.kvs[0].value), *f, *sc;
  tc_kv_result_free(&st);
  if (j && json_object_object_get_ex(j, "primary", &f) && (uint64_t) json_object_get_int64(f) == pi->primary &&
      json_object_object_get_ex(j, "scrub", &sc) && json_object_object_get_ex(sc, "request", &f) &&
      json_object_get_int64(f) >= p->asked) {
    p->done = true;
    p->primary = (int64_t) pi->primary;
    if (json_object_object_get_ex(sc, "last_bad_sectors", &f))
      p->bad = json_object_get_int64(f);
    if (json_object_object_get_ex(sc, "last_repaired_sectors", &f))
      p->repaired = json_object_get_int64(f);
    if (json_object_object_get_ex(sc, "inconsistent_objects", &f))
      p->inconsistent_objects = json_object_get_int64(f);
    if (json_object_object_get_ex(j, "state", &f) && json_object_is_type(f, json_type_array))
      for (size_t k = 0; k < json_object_array_length(f); k++)
        p->inconsistent |= !strcmp(json_object_get_string(json_object_array_get_idx(f, k)), "inconsistent");
  }
  json_object_put(j);
}

int
cmd_scrub(int argc, char **argv, struct tc_config *cfg)
{
  bool json = false, wait = false;
  const char *pool_s = NULL, *pg_s = NULL, *osd_s = NULL, *timeout_s = NULL, *pos[1];
  int npos;
  const struct cli_opt opts[] = {
    { "--json", NULL, NULL, &json }, { "--wait", NULL, NULL, &wait }, { "--pool", NULL, &pool_s, NULL },
    { "--pg", NULL, &pg_s, NULL }, { "--osd", NULL, &osd_s, NULL }, { "--timeout", NULL, &timeout_s, NULL }, { 0 }
  };
  if (cli_parse("scrub", argc, argv, opts, pos, 0, &npos) < 0)
    return 1;
  if (pg_s && !pool_s) {
    fprintf(stderr, "tromcho scrub: --pg needs --pool (PG numbers are per pool)\n");
    return 1;
  }
  char *end = NULL;
  unsigned long long want_pg = pg_s ? strtoull(pg_s, &end, 10) : 0;
  if (pg_s && (*end || !*pg_s)) {
    fprintf(stderr, "tromcho scrub: --pg: '%s' is no PG number\n", pg_s);
    return 1;
  }
  uint64_t want_osd = osd_s ? strtoull(osd_s, &end, 10) : 0;
  if (osd_s && (*end || !want_osd)) {
    fprintf(stderr, "tromcho scrub: --osd: '%s' is no OSD number\n", osd_s);
    return 1;
  }
  double timeout = timeout_s ? atof(timeout_s) : 600;
  struct tc_client *cl = cli_client("scrub", cfg);
  if (!cl)
    return 1;
  if (tc_cluster_refresh(tc_client_cluster(cl)) < 0) {
    int r = cli_fail("scrub");
    tc_client_free(cl);
    return r;
  }
  struct tc_map *m = tc_cluster_map(tc_client_cluster(cl));
  const struct tc_pool_info *only = NULL;
  if (pool_s && !(only = tc_map_pool_by_name(m, pool_s)) && !(only = tc_map_pool(m, strtoull(pool_s, NULL, 10)))) {
    fprintf(stderr, "tromcho scrub: no pool '%s'\n", pool_s);
    tc_map_unref(m);
    tc_client_free(cl);
    return 1;
  }
  if (only && pg_s && want_pg >= only->pg_count) {
    fprintf(stderr, "tromcho scrub: pool %s has no PG %llu (pg_count %" PRIu32 ")\n", pool_s, want_pg,
            only->pg_count);
    tc_map_unref(m);
    tc_client_free(cl);
    return 1;
  }
  size_t n = 0, cap = 0;
  for (size_t i = 0; i < m->n_pools; i++)
    cap += m->pools[i].pg_count;
  struct scrub_pg *pgs = calloc(cap + 1, sizeof *pgs);
  if (!pgs) {
    fprintf(stderr, "tromcho scrub: out of memory\n");
    tc_map_unref(m);
    tc_client_free(cl);
    return 1;
  }
  for (size_t i = 0; i < m->n_pools; i++) {
    const struct tc_pool_info *p = &m->pools[i];
    if (only && p->id != only->id)
      continue;
    for (uint32_t g = 0; g < p->pg_count; g++) {
      const struct tc_pg_info *pi = tc_map_pg(m, p->id, g);
      if ((pg_s && g != want_pg) || (want_osd && (!pi || pi->primary != want_osd)))
        continue;
      pgs[n++] = (struct scrub_pg) { .pool = p->id, .pg = g };
    }
  }
  int rc = 0;
  if (!n) {
    fprintf(stderr, "tromcho scrub: no PG to scrub%s\n", want_osd ? " (the OSD leads none)" : "");
    rc = 1;
  }
  int64_t now = (int64_t) time(NULL);
  for (size_t i = 0; !rc && i < n; i++)
    if (ask(cl, &pgs[i], now) < 0) {
      const char *e = tc_last_error();
      fprintf(stderr, "tromcho scrub: pg %" PRIu64 "/%" PRIu32 ": %s%s\n", pgs[i].pool, pgs[i].pg, e,
              strstr(e, "ermission") ? " (only administrators may ask for a scrub)" : "");
      rc = 1;
    }
  size_t done = 0;
  if (!rc && wait) {
    uint64_t deadline = tc_now_ms() + (uint64_t) (timeout * 1000);
    while (done < n && tc_now_ms() < deadline) {
      usleep(300 * 1000);
      if (tc_cluster_refresh(tc_client_cluster(cl)) == 0) {
        tc_map_unref(m);
        m = tc_cluster_map(tc_client_cluster(cl));
      }
      done = 0;
      for (size_t i = 0; i < n; i++) {
        if (!pgs[i].done)
          check(cl, m, &pgs[i]);
        done += pgs[i].done;
      }
    }
    if (done < n) {
      fprintf(stderr, "tromcho scrub: %zu of %zu PGs not scrubbed after %.0f s:", n - done, n, timeout);
      for (size_t i = 0, k = 0; i < n && k < 16; i++)
        if (!pgs[i].done) {
          fprintf(stderr, " %" PRIu64 "/%" PRIu32, pgs[i].pool, pgs[i].pg);
          k++;
        }
      fprintf(stderr, "\n");
      rc = 1;
    }
  }
  int64_t bad = 0, repaired = 0, incons = 0, incons_pgs = 0;
  for (size_t i = 0; i < n; i++) {
    bad += pgs[i].bad;
    repaired += pgs[i].repaired;
    incons += pgs[i].inconsistent_objects;
    incons_pgs += pgs[i].inconsistent;
  }
  if (json && (rc == 0 || wait)) {
    json_object *root = json_object_new_object(), *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
      json_object *e = json_object_new_object();
      json_object_object_add(e, "pool", json_object_new_int64((int64_t) pgs[i].pool));
      json_object_object_add(e, "pg", json_object_new_int64(pgs[i].pg));
      json_object_object_add(e, "next_scrub", json_object_new_int64(pgs[i].asked));
      if (wait) {
        json_object_object_add(e, "scrubbed", json_object_new_boolean(pgs[i].done));
        json_object_object_add(e, "primary", json_object_new_int64(pgs[i].primary));
        json_object_object_add(e, "bad_sectors", json_object_new_int64(pgs[i].bad));
        json_object_object_add(e, "repaired_sectors", json_object_new_int64(pgs[i].repaired));
        json_object_object_add(e, "inconsistent_objects", json_object_new_int64(pgs[i].inconsistent_objects));
        json_object_object_add(e, "inconsistent", json_object_new_boolean(pgs[i].inconsistent));
      }
      json_object_array_add(a, e);
    }
    json_object_object_add(root, "pgs", a);
    if (wait) {
      json_object_object_add(root, "scrubbed_pgs", json_object_new_int64((int64_t) done));
      json_object_object_add(root, "bad_sectors", json_object_new_int64(bad));
      json_object_object_add(root, "repaired_sectors", json_object_new_int64(repaired));
      json_object_object_add(root, "inconsistent_objects", json_object_new_int64(incons));
      json_object_object_add(root, "inconsistent_pgs", json_object_new_int64(incons_pgs));
    }
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
    json_object_put(root);
  }
  else if (rc == 0 && !wait)
    printf("scrub asked for %zu PGs (next_scrub %" PRId64 "); tromcho status shows the findings\n", n, now);
  else if (wait && done) {
    for (size_t i = 0; i < n; i++)
      if (pgs[i].done && (pgs[i].bad || pgs[i].inconsistent))
        printf("pg %" PRIu64 "/%" PRIu32 " (osd %" PRId64 "): %" PRId64 " bad sectors, %" PRId64 " repaired%s\n",
               pgs[i].pool, pgs[i].pg, pgs[i].primary, pgs[i].bad, pgs[i].repaired,
               pgs[i].inconsistent ? ", inconsistent" : "");
    printf("scrubbed %zu PGs: %" PRId64 " bad sectors found, %" PRId64 " repaired, %" PRId64
           " inconsistent PGs (%" PRId64 " objects)\n", done, bad, repaired, incons_pgs, incons);
  }
  free(pgs);
  tc_map_unref(m);
  tc_client_free(cl);
  return rc;
}
