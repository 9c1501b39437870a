/* The cluster map (see cluster_map.h). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "cluster_map.h"
#include "error.h"
#include "image_meta.h"

static json_object *
parse(const char *json, size_t len, const char *what)
{
  if (!json || !len)
    return NULL;
  json_tokener *tok = json_tokener_new();
  if (!tok)
    return NULL;
  json_object *o = json_tokener_parse_ex(tok, json, (int) len);
  if (json_tokener_get_error(tok) != json_tokener_success || !json_object_is_type(o, json_type_object)) {
    json_object_put(o);
    o = NULL;
    tc_error(EINVAL, "%s: not a JSON object", what);
  }
  json_tokener_free(tok);
  return o;
}

static int64_t
get_int(json_object *o, const char *k, int64_t def)
{
  json_object *f;
  if (!json_object_object_get_ex(o, k, &f) || !json_object_is_type(f, json_type_int))
    return def;
  return json_object_get_int64(f);
}

static char *
get_strdup(json_object *o, const char *k)
{
  json_object *f;
  if (!json_object_object_get_ex(o, k, &f) || !json_object_is_type(f, json_type_string))
    return NULL;
  return strdup(json_object_get_string(f));
}

static bool
parse_u64(const char *s, uint64_t *v)
{
  char *end;
  if (!*s || *s < '0' || *s > '9')
    return false;
  errno = 0;
  *v = strtoull(s, &end, 10);
  return !*end && !errno;
}

static void
map_free(struct tc_map *m)
{
  for (size_t i = 0; i < m->n_pools; i++) {
    free(m->pools[i].name);
    free(m->pools[i].creator_group);
    if (m->pgs)
      free(m->pgs[i]);
  }
  free(m->pools);
  free(m->pgs);
  for (size_t i = 0; i < m->n_osds; i++) {
    free(m->osds[i].addr);
    free(m->osds[i].host);
  }
  free(m->osds);
  free(m);
}

/* Pools whose parameters are unusable are left out (and logged by the
 * monitor that validates them); they cannot be addressed. */
static int
load_pools(struct tc_map *m, json_object *pools)
{
  size_t n = pools ? (size_t) json_object_object_length(pools) : 0;
  m->pools = calloc(n ? n : 1, sizeof *m->pools);
  m->pgs = calloc(n ? n : 1, sizeof *m->pgs);
  if (!m->pools || !m->pgs)
    return tc_error(ENOMEM, "cluster map: out of memory");
  if (!pools)
    return 0;
  json_object_object_foreach(pools, key, val) {
    uint64_t id;
    if (!parse_u64(key, &id) || !id || id >= 1 << 16 || !json_object_is_type(val, json_type_object))
      continue;
    struct tc_pool_info *p = &m->pools[m->n_pools];
    p->id = id;
    p->pg_size = (uint32_t) get_int(val, "pg_size", 0);
    p->pg_minsize = (uint32_t) get_int(val, "pg_minsize", p->pg_size);
    p->pg_count = (uint32_t) get_int(val, "pg_count", 0);
    p->block_size = (uint32_t) get_int(val, "block_size", TC_DEFAULT_BLOCK_SIZE);
    p->pg_stripe_size = (uint32_t) get_int(val, "pg_stripe_size", TC_DEFAULT_PG_STRIPE);
    if (!p->pg_size || p->pg_size > TC_MAX_PG_SIZE || !p->pg_count || !p->pg_minsize ||
        p->pg_minsize > p->pg_size || p->block_size < 4096 || (p->block_size & (p->block_size - 1)) ||
        p->pg_stripe_size < p->block_size)
      continue;
    p->name = get_strdup(val, "name");
    p->creator_group = get_strdup(val, "creator_group");
    m->n_pools++;
  }
  return 0;
}

static int
load_pgs(struct tc_map *m, json_object *pgcfg)
{
  json_object *items;
  if (!pgcfg || !json_object_object_get_ex(pgcfg, "items", &items) ||
      !json_object_is_type(items, json_type_object))
    return 0;
  for (size_t i = 0; i < m->n_pools; i++) {
    struct tc_pool_info *p = &m->pools[i];
    char key[24];
    snprintf(key, sizeof key, "%llu", (unsigned long long) p->id);
    json_object *pool;
    if (!json_object_object_get_ex(items, key, &pool) || !json_object_is_type(pool, json_type_object))
      continue;
    m->pgs[i] = calloc(p->pg_count, sizeof **m->pgs);
    if (!m->pgs[i])
      return tc_error(ENOMEM, "cluster map: out of memory");
    json_object_object_foreach(pool, pgkey, pgval) {
      uint64_t pg;
      json_object *set;
      if (!parse_u64(pgkey, &pg) || pg >= p->pg_count || !json_object_is_type(pgval, json_type_object) ||
          !json_object_object_get_ex(pgval, "osd_set", &set) || !json_object_is_type(set, json_type_array))
        continue;
      struct tc_pg_info *g = &m->pgs[i][pg];
      for (size_t s = 0; s < json_object_array_length(set) && s < p->pg_size; s++)
        g->osd_set[s] = (uint64_t) json_object_get_int64(json_object_array_get_idx(set, s));
      g->primary = (uint64_t) get_int(pgval, "primary", 0);
    }
  }
  return 0;
}

struct tc_map *
tc_map_build(const char *pools_json, size_t pools_len, const char *pgcfg_json, size_t pgcfg_len,
             const uint64_t *osd_ids, const char *const *osd_jsons, const size_t *osd_lens, size_t n_osds)
{
  struct tc_map *m = calloc(1, sizeof *m);
  if (!m) {
    tc_error(ENOMEM, "cluster map: out of memory");
    return NULL;
  }
  m->refs = 1;
  json_object *pools = parse(pools_json, pools_len, "/config/pools");
  json_object *pgcfg = parse(pgcfg_json, pgcfg_len, "/pg/config");
  int r = load_pools(m, pools);
  if (r == 0)
    r = load_pgs(m, pgcfg);
  json_object_put(pools);
  json_object_put(pgcfg);
  if (r == 0 && n_osds && !(m->osds = calloc(n_osds, sizeof *m->osds)))
    r = tc_error(ENOMEM, "cluster map: out of memory");
  for (size_t i = 0; r == 0 && i < n_osds; i++) {
    json_object *o = parse(osd_jsons[i], osd_lens[i], "/osd/state");
    if (!o)
      continue;
    struct tc_osd_addr *a = &m->osds[m->n_osds];
    a->id = osd_ids[i];
    a->addr = get_strdup(o, "addr");
    a->port = (int) get_int(o, "port", 0);
    a->host = get_strdup(o, "host");
    json_object_put(o);
    if (a->addr && a->port > 0 && a->port < 65536)
      m->n_osds++;
    else {
      free(a->addr);
      free(a->host);
      memset(a, 0, sizeof *a);
    }
  }
  if (r < 0) {
    map_free(m);
    return NULL;
  }
  return m;
}

struct tc_map *
tc_map_ref(struct tc_map *m)
{
  if (m)
    __atomic_add_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
  return m;
}

void
tc_map_unref(struct tc_map *m)
{
  if (m && __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0)
    map_free(m);
}

const struct tc_pool_info *
tc_map_pool(const struct tc_map *m, uint64_t pool)
{
  for (size_t i = 0; i < m->n_pools; i++)
    if (m->pools[i].id == pool)
      return &m->pools[i];
  return NULL;
}

const struct tc_pool_info *
tc_map_pool_by_name(const struct tc_map *m, const char *name)
{
  for (size_t i = 0; i < m->n_pools; i++)
    if (m->pools[i].name && strcmp(m->pools[i].name, name) == 0)
      return &m->pools[i];
  return NULL;
}

uint32_t
tc_map_pg_of(const struct tc_pool_info *p, uint64_t inode, uint64_t offset)
{
  return (uint32_t) ((inode + offset / p->pg_stripe_size) % p->pg_count);
}

const struct tc_pg_info *
tc_map_pg(const struct tc_map *m, uint64_t pool, uint32_t pg)
{
  for (size_t i = 0; i < m->n_pools; i++)
    if (m->pools[i].id == pool)
      return m->pgs[i] && pg < m->pools[i].pg_count ? &m->pgs[i][pg] : NULL;
  return NULL;
}

const struct tc_osd_addr *
tc_map_osd(const struct tc_map *m, uint64_t osd)
{
  for (size_t i = 0; i < m->n_osds; i++)
    if (m->osds[i].id == osd)
      return &m->osds[i];
  return NULL;
}
