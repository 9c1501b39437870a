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
#include "pools.h"

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

/* Pools and placement are parsed by pools.c (shared with the monitor and
 * the CLI); the map keeps the fields the data path needs. Pools that do not
 * validate were already left out there. */
static int
load_pools(struct tc_map *m, const struct tc_pools *pools)
{
  m->pools = calloc(pools->n ? pools->n : 1, sizeof *m->pools);
  m->pgs = calloc(pools->n ? pools->n : 1, sizeof *m->pgs);
  if (!m->pools || !m->pgs)
    return tc_error(ENOMEM, "cluster map: out of memory");
  for (size_t i = 0; i < pools->n; i++) {
    const struct tc_pool *src = &pools->v[i];
    if (src->pg_size > TC_MAX_PG_SIZE || src->block_size > TC_DEFAULT_PG_STRIPE)
      continue;   /* beyond what the data path supports */
    struct tc_pool_info *p = &m->pools[m->n_pools];
    p->id = src->id;
    p->pg_size = src->pg_size;
    p->pg_minsize = src->pg_minsize;
    p->pg_count = src->pg_count;
    p->block_size = (uint32_t) src->block_size;
    p->pg_stripe_size = TC_DEFAULT_PG_STRIPE;
    p->name = src->name ? strdup(src->name) : NULL;
    p->creator_group = src->creator_group ? strdup(src->creator_group) : NULL;
    if ((src->name && !p->name) || (src->creator_group && !p->creator_group))
      return tc_error(ENOMEM, "cluster map: out of memory");
    m->n_pools++;
  }
  return 0;
}

static int
load_pgs(struct tc_map *m, const struct tc_pg_config *pgc)
{
  for (size_t i = 0; i < m->n_pools; i++) {
    struct tc_pool_info *p = &m->pools[i];
    const struct tc_placement *pl = tc_pg_config_find(pgc, (uint32_t) p->id);
    if (!pl)
      continue;
    m->pgs[i] = calloc(p->pg_count, sizeof **m->pgs);
    if (!m->pgs[i])
      return tc_error(ENOMEM, "cluster map: out of memory");
    for (uint32_t pg = 0; pg < p->pg_count && pg < pl->pg_count; pg++) {
      struct tc_pg_info *g = &m->pgs[i][pg];
      for (uint32_t s = 0; s < p->pg_size && s < pl->pg_size; s++)
        g->osd_set[s] = pl->osd_set[(size_t) pg * pl->pg_size + s];
      g->primary = pl->primary[pg];
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
  struct tc_pools pools = { 0 };
  struct tc_pg_config pgc = { 0 };
  /* The parsers take NUL-terminated text. */
  char *ptext = pools_json ? strndup(pools_json, pools_len) : NULL;
  char *gtext = pgcfg_json ? strndup(pgcfg_json, pgcfg_len) : NULL;
  int r = (pools_json && !ptext) || (pgcfg_json && !gtext) ? tc_error(ENOMEM, "cluster map: out of memory") : 0;
  if (r == 0)
    r = tc_pools_parse(ptext, &pools);
  if (r == 0)
    r = tc_pg_config_parse(gtext, &pgc);
  if (r == 0)
    r = load_pools(m, &pools);
  if (r == 0)
    r = load_pgs(m, &pgc);
  tc_pools_free(&pools);
  tc_pg_config_free(&pgc);
  free(ptext);
  free(gtext);
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
