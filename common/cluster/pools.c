/* /config/pools and /pg/config (see pools.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "pools.h"

int
tc_pool_validate(const struct tc_pool *p)
{
  if (p->id < 1 || p->id > TC_POOL_MAX_ID)
    return tc_error(EINVAL, "pool id %u is not in 1..%d", p->id, TC_POOL_MAX_ID);
  if (!p->name || !*p->name)
    return tc_error(EINVAL, "pool %u: name is empty", p->id);
  for (const char *c = p->name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("_.-", *c)))
      return tc_error(EINVAL, "pool name '%s': only letters, digits, '_', '.' and '-' are allowed", p->name);
  if (strlen(p->name) > 128)
    return tc_error(EINVAL, "pool name '%s' is longer than 128 characters", p->name);
  if (p->pg_size < 1 || p->pg_size > TC_POOL_MAX_PG_SIZE)
    return tc_error(EINVAL, "pool %s: pg_size %u is not in 1..%d", p->name, p->pg_size, TC_POOL_MAX_PG_SIZE);
  if (p->pg_minsize < 1 || p->pg_minsize > p->pg_size)
    return tc_error(EINVAL, "pool %s: pg_minsize %u is not in 1..pg_size (%u)", p->name, p->pg_minsize, p->pg_size);
  if (p->pg_count < 1 || p->pg_count > TC_POOL_MAX_PG_COUNT)
    return tc_error(EINVAL, "pool %s: pg_count %u is not in 1..%d", p->name, p->pg_count, TC_POOL_MAX_PG_COUNT);
  if (p->block_size < 4096 || p->block_size > TC_POOL_MAX_BLOCK_SIZE || (p->block_size & (p->block_size - 1)))
    return tc_error(EINVAL, "pool %s: block_size %" PRIu64 " is not a power of two from 4k to 256k (the largest "
                    "object an OSD operation carries)", p->name, p->block_size);
  if (p->failure_domain != TC_FD_HOST && p->failure_domain != TC_FD_OSD)
    return tc_error(EINVAL, "pool %s: failure_domain must be host or osd", p->name);
  return 0;
}

static int
get_u32(json_object *o, const char *key, uint32_t *v, bool required, uint32_t id)
{
  json_object *x;
  if (!json_object_object_get_ex(o, key, &x)) {
    if (required)
      return tc_error(EINVAL, "pool %u: %s is missing", id, key);
    return 0;
  }
  if (!json_object_is_type(x, json_type_int))
    return tc_error(EINVAL, "pool %u: %s is not an integer", id, key);
  int64_t n = json_object_get_int64(x);
  if (n < 0 || n > UINT32_MAX)
    return tc_error(EINVAL, "pool %u: %s %" PRId64 " is out of range", id, key, n);
  *v = (uint32_t) n;
  return 0;
}

static int
cmp_pool(const void *a, const void *b)
{
  uint32_t x = ((const struct tc_pool *) a)->id, y = ((const struct tc_pool *) b)->id;
  return x < y ? -1 : x > y;
}

static void
pool_free(struct tc_pool *p)
{
  free(p->name);
  free(p->creator_group);
}

/* Parse one pool; -1 with a message. */
static int
parse_pool(const char *key, json_object *o, struct tc_pool *p)
{
  memset(p, 0, sizeof *p);
  char *end;
  unsigned long id = strtoul(key, &end, 10);
  if (*end || !*key || id > TC_POOL_MAX_ID)
    return tc_error(EINVAL, "pool id '%s' is not a number in 1..%d", key, TC_POOL_MAX_ID);
  p->id = (uint32_t) id;
  if (!json_object_is_type(o, json_type_object))
    return tc_error(EINVAL, "pool %u is not a JSON object", p->id);
  json_object *x;
  if (!json_object_object_get_ex(o, "name", &x) || !json_object_is_type(x, json_type_string))
    return tc_error(EINVAL, "pool %u: name is missing", p->id);
  if (!(p->name = strdup(json_object_get_string(x))))
    return tc_error(ENOMEM, "out of memory");
  uint32_t bs = 128 << 10;
  if (get_u32(o, "pg_size", &p->pg_size, true, p->id) < 0 || get_u32(o, "pg_count", &p->pg_count, true, p->id) < 0)
    return -1;
  p->pg_minsize = p->pg_size > 1 ? p->pg_size - 1 : 1;
  if (get_u32(o, "pg_minsize", &p->pg_minsize, false, p->id) < 0 || get_u32(o, "block_size", &bs, false, p->id) < 0)
    return -1;
  p->block_size = bs;
  p->failure_domain = TC_FD_HOST;
  if (json_object_object_get_ex(o, "failure_domain", &x)) {
    const char *fd = json_object_get_string(x);
    if (!strcmp(fd, "host"))
      p->failure_domain = TC_FD_HOST;
    else if (!strcmp(fd, "osd"))
      p->failure_domain = TC_FD_OSD;
    else
      return tc_error(EINVAL, "pool %u: failure_domain '%s' is neither host nor osd", p->id, fd);
  }
  if (json_object_object_get_ex(o, "creator_group", &x) && !json_object_is_type(x, json_type_null) &&
      !(p->creator_group = strdup(json_object_get_string(x))))
    return tc_error(ENOMEM, "out of memory");
  return tc_pool_validate(p);
}

int
tc_pools_parse(const char *json, struct tc_pools *out)
{
  memset(out, 0, sizeof *out);
  if (!json || !*json)
    return 0;
  json_object *o = json_tokener_parse(json);
  if (!o || !json_object_is_type(o, json_type_object)) {
    json_object_put(o);
    return tc_error(EINVAL, "/config/pools is not a JSON object");
  }
  size_t n = (size_t) json_object_object_length(o);
  out->v = calloc(n ? n : 1, sizeof *out->v);
  if (!out->v) {
    json_object_put(o);
    return tc_error(ENOMEM, "out of memory");
  }
  json_object_object_foreach(o, key, val) {
    struct tc_pool p;
    if (parse_pool(key, val, &p) < 0) {
      tc_warn("/config/pools: %s: pool left out", tc_last_error());
      pool_free(&p);
      continue;
    }
    out->v[out->n++] = p;
  }
  json_object_put(o);
  qsort(out->v, out->n, sizeof *out->v, cmp_pool);
  return 0;
}

const struct tc_pool *
tc_pools_find_name(const struct tc_pools *pools, const char *name)
{
  for (size_t i = 0; i < pools->n; i++)
    if (!strcmp(pools->v[i].name, name))
      return &pools->v[i];
  return NULL;
}

const struct tc_pool *
tc_pools_find_id(const struct tc_pools *pools, uint32_t id)
{
  for (size_t i = 0; i < pools->n; i++)
    if (pools->v[i].id == id)
      return &pools->v[i];
  return NULL;
}

json_object *
tc_pool_to_json(const struct tc_pool *p)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  json_object_object_add(o, "name", json_object_new_string(p->name));
  json_object_object_add(o, "pg_size", json_object_new_int64(p->pg_size));
  json_object_object_add(o, "pg_minsize", json_object_new_int64(p->pg_minsize));
  json_object_object_add(o, "pg_count", json_object_new_int64(p->pg_count));
  json_object_object_add(o, "block_size", json_object_new_int64((int64_t) p->block_size));
  json_object_object_add(o, "failure_domain", json_object_new_string(p->failure_domain == TC_FD_OSD ? "osd" : "host"));
  if (p->creator_group)
    json_object_object_add(o, "creator_group", json_object_new_string(p->creator_group));
  return o;
}

char *
tc_pools_encode(const struct tc_pools *pools)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  for (size_t i = 0; i < pools->n; i++) {
    char id[16];
    snprintf(id, sizeof id, "%u", pools->v[i].id);
    json_object_object_add(o, id, tc_pool_to_json(&pools->v[i]));
  }
  char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  json_object_put(o);
  return s;
}

void
tc_pools_free(struct tc_pools *pools)
{
  for (size_t i = 0; i < pools->n; i++)
    pool_free(&pools->v[i]);
  free(pools->v);
  memset(pools, 0, sizeof *pools);
}

/* ---- /pg/config ---- */

static int
cmp_pgpool(const void *a, const void *b)
{
  uint32_t x = ((const struct tc_pg_config_pool *) a)->pool_id, y = ((const struct tc_pg_config_pool *) b)->pool_id;
  return x < y ? -1 : x > y;
}

/* One pool's PGs: {"0": {"osd_set": [..], "primary": n}, ...}. */
static int
parse_pg_pool(uint32_t pool_id, json_object *o, struct tc_placement *pl)
{
  memset(pl, 0, sizeof *pl);
  if (!json_object_is_type(o, json_type_object))
    return tc_error(EINVAL, "/pg/config: pool %u is not an object", pool_id);
  /* Sizes first: the highest PG number and the longest set. */
  uint32_t count = 0, size = 0;
  json_object_object_foreach(o, key, val) {
    char *end;
    unsigned long pg = strtoul(key, &end, 10);
    json_object *set;
    if (*end || !*key || pg >= TC_POOL_MAX_PG_COUNT)
      return tc_error(EINVAL, "/pg/config: pool %u: PG '%s' is not a number below %d", pool_id, key,
                      TC_POOL_MAX_PG_COUNT);
    if (!json_object_object_get_ex(val, "osd_set", &set) || !json_object_is_type(set, json_type_array) ||
        json_object_array_length(set) > TC_POOL_MAX_PG_SIZE)
      return tc_error(EINVAL, "/pg/config: pool %u PG %lu: osd_set is not an array of at most %d", pool_id, pg,
                      TC_POOL_MAX_PG_SIZE);
    if (pg + 1 > count)
      count = (uint32_t) pg + 1;
    if (json_object_array_length(set) > size)
      size = (uint32_t) json_object_array_length(set);
  }
  if (!count || !size)
    return 0;
  pl->pg_count = count;
  pl->pg_size = size;
  pl->osd_set = calloc((size_t) count * size, sizeof *pl->osd_set);
  pl->primary = calloc(count, sizeof *pl->primary);
  if (!pl->osd_set || !pl->primary)
    return tc_error(ENOMEM, "out of memory");
  json_object_object_foreach(o, key2, val2) {
    uint32_t pg = (uint32_t) strtoul(key2, NULL, 10);
    json_object *set, *prim;
    json_object_object_get_ex(val2, "osd_set", &set);
    for (size_t j = 0; j < json_object_array_length(set); j++) {
      int64_t id = json_object_get_int64(json_object_array_get_idx(set, j));
      pl->osd_set[(size_t) pg * size + j] = id > 0 ? (uint64_t) id : 0;
    }
    if (json_object_object_get_ex(val2, "primary", &prim) && json_object_get_int64(prim) > 0)
      pl->primary[pg] = (uint64_t) json_object_get_int64(prim);
  }
  return 0;
}

int
tc_pg_config_parse(const char *json, struct tc_pg_config *out)
{
  memset(out, 0, sizeof *out);
  if (!json || !*json)
    return 0;
  json_object *o = json_tokener_parse(json), *items;
  if (!o || !json_object_is_type(o, json_type_object)) {
    json_object_put(o);
    return tc_error(EINVAL, "/pg/config is not a JSON object");
  }
  if (!json_object_object_get_ex(o, "items", &items) || !json_object_is_type(items, json_type_object)) {
    json_object_put(o);
    return 0;
  }
  size_t n = (size_t) json_object_object_length(items);
  out->v = calloc(n ? n : 1, sizeof *out->v);
  if (!out->v) {
    json_object_put(o);
    return tc_error(ENOMEM, "out of memory");
  }
  json_object_object_foreach(items, key, val) {
    char *end;
    unsigned long id = strtoul(key, &end, 10);
    if (*end || !*key || id < 1 || id > TC_POOL_MAX_ID) {
      /* The message first: key lives in o. */
      tc_error(EINVAL, "/pg/config: pool id '%s' is not a number in 1..%d", key, TC_POOL_MAX_ID);
      tc_pg_config_free(out);
      json_object_put(o);
      return -1;
    }
    struct tc_pg_config_pool *p = &out->v[out->n++];
    p->pool_id = (uint32_t) id;
    if (parse_pg_pool(p->pool_id, val, &p->pl) < 0) {
      tc_pg_config_free(out);
      json_object_put(o);
      return -1;
    }
  }
  json_object_put(o);
  qsort(out->v, out->n, sizeof *out->v, cmp_pgpool);
  return 0;
}

char *
tc_pg_config_encode(const struct tc_pg_config *cfg)
{
  json_object *o = json_object_new_object(), *items = json_object_new_object();
  if (!o || !items) {
    json_object_put(o);
    json_object_put(items);
    return NULL;
  }
  json_object_object_add(o, "items", items);
  for (size_t i = 0; i < cfg->n; i++) {
    const struct tc_placement *pl = &cfg->v[i].pl;
    json_object *pool = json_object_new_object();
    char id[16];
    snprintf(id, sizeof id, "%u", cfg->v[i].pool_id);
    json_object_object_add(items, id, pool);
    for (uint32_t pg = 0; pg < pl->pg_count; pg++) {
      json_object *e = json_object_new_object(), *set = json_object_new_array();
      for (uint32_t j = 0; j < pl->pg_size; j++)
        json_object_array_add(set, json_object_new_int64((int64_t) pl->osd_set[(size_t) pg * pl->pg_size + j]));
      json_object_object_add(e, "osd_set", set);
      json_object_object_add(e, "primary", json_object_new_int64((int64_t) pl->primary[pg]));
      snprintf(id, sizeof id, "%u", pg);
      json_object_object_add(pool, id, e);
    }
  }
  char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  json_object_put(o);
  return s;
}

const struct tc_placement *
tc_pg_config_find(const struct tc_pg_config *cfg, uint32_t pool_id)
{
  for (size_t i = 0; i < cfg->n; i++)
    if (cfg->v[i].pool_id == pool_id)
      return &cfg->v[i].pl;
  return NULL;
}

void
tc_pg_config_free(struct tc_pg_config *cfg)
{
  for (size_t i = 0; i < cfg->n; i++)
    tc_placement_free(&cfg->v[i].pl);
  free(cfg->v);
  memset(cfg, 0, sizeof *cfg);
}
