/* tromcho status: OSDs up and down, PGs clean, degraded, recovering,
 * inactive; human or --json. From the KV: /osd/state/<n> (live OSDs, with a
 * lease), /pg/config (placement), /pg/state/<pool>/<pg> (what primaries
 * report: {"state": ["active", "clean", ...]} or a string). */
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

static bool
has_id(const uint64_t *v, size_t n, uint64_t id)
{
  for (size_t i = 0; i < n; i++)
    if (v[i] == id)
      return true;
  return false;
}

/* The reported state words of one PG ("" if none). */
static void
pg_reported(struct tc_kv_result *st, const char *prefix, uint64_t pool, uint32_t pg, char *out, size_t len)
{
  char key[512];
  snprintf(key, sizeof key, "%.256s%" PRIu64 "/%u", prefix, pool, pg);
  *out = 0;
  for (size_t i = 0; i < st->n_kvs; i++) {
    if (strcmp((const char *) st->kvs[i].key, key))
      continue;
    json_object *o = json_tokener_parse((const char *) st->kvs[i].value), *f;
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
  const struct cli_opt opts[] = { { "--json", NULL, NULL, &json }, { NULL } };
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
  uint64_t clean = 0, degraded = 0, recovering = 0, inactive = 0, total = 0;
  for (size_t p = 0; p < m->n_pools; p++) {
    const struct tc_pool_info *pool = &m->pools[p];
    json_object *pj = json_object_new_object();
    uint64_t pc = 0, pd = 0, pr = 0, pi = 0;
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
          if (nknown == cap) {
            uint64_t *nk = realloc(known, (cap *= 2) * sizeof *nk);
            if (!nk)
              continue;
            known = nk;
          }
          known[nknown++] = o;
        }
      }
      char rep[256];
      pg_reported(&st, key, pool->id, g, rep, sizeof rep);
      if (!pg || !pg->primary || !tc_map_osd(m, pg->primary) || live < pool->pg_minsize)
        pi++;
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
    json_object_object_add(pj, "inactive", json_object_new_int64((int64_t) pi));
    json_object_array_add(jp, pj);
    clean += pc;
    degraded += pd;
    recovering += pr;
    inactive += pi;
    total += pool->pg_count;
  }
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
  json_object_object_add(root, "osds_up", json_object_new_int64((int64_t) up));
  json_object_object_add(root, "osds_down", json_object_new_int64((int64_t) (nknown - up)));
  json_object_object_add(root, "pgs", json_object_new_int64((int64_t) total));
  json_object_object_add(root, "pgs_clean", json_object_new_int64((int64_t) clean));
  json_object_object_add(root, "pgs_degraded", json_object_new_int64((int64_t) degraded));
  json_object_object_add(root, "pgs_recovering", json_object_new_int64((int64_t) recovering));
  json_object_object_add(root, "pgs_inactive", json_object_new_int64((int64_t) inactive));
  json_object_object_add(root, "osds", jo);
  json_object_object_add(root, "pools", jp);
  if (json)
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
  else {
    printf("osds:  %zu up, %zu down\n", up, nknown - up);
    for (size_t i = up; i < nknown; i++)
      printf("       osd.%" PRIu64 " down\n", known[i]);
    printf("pgs:   %" PRIu64 " total: %" PRIu64 " clean, %" PRIu64 " degraded, %" PRIu64 " recovering, %" PRIu64
           " inactive\n", total, clean, degraded, recovering, inactive);
    printf("pools: %zu\n", m->n_pools);
  }
  json_object_put(root);
  free(known);
  tc_kv_result_free(&st);
  tc_map_unref(m);
  tc_client_free(cl);
  return 0;
}
