/* The cluster map: pools, PG placement and OSD addresses, as read from the
 * KV (/config/pools, /pg/config, /osd/state/<n>), and the placement rule of
 * DESIGN.md section 4. The OSDs and the client keep one each, rebuilt
 * whenever a watch reports a change; it is immutable once built, so
 * readers share it by reference (tc_map_ref/tc_map_unref).
 *
 * Key shapes (values JSON):
 *   /config/pools   {"<pool>": {"name": N, "pg_size": 3, "pg_minsize": 2, "pg_count": 64,
 *                               "block_size": 131072, "pg_stripe_size": 4194304, ...}}
 *   /pg/config      {"items": {"<pool>": {"<pg>": {"osd_set": [1, 2, 3], "primary": 1}}}}
 *                   (pg numbered from 0; 0 in osd_set = an empty slot)
 *   /osd/state/<n>  {"addr": "127.0.0.1", "port": 12345, "host": "h1"}
 */
#ifndef TROMCHO_CLUSTER_MAP_H
#define TROMCHO_CLUSTER_MAP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_DEFAULT_BLOCK_SIZE (128u * 1024)
#define TC_DEFAULT_PG_STRIPE (4u << 20)
#define TC_MAX_PG_SIZE 8

struct tc_pool_info {
  uint64_t id;
  char *name;
  uint32_t pg_size, pg_minsize, pg_count;
  uint32_t block_size, pg_stripe_size;
  char *creator_group;
};

struct tc_pg_info {
  uint64_t primary;                  /* 0: inactive */
  uint64_t osd_set[TC_MAX_PG_SIZE];  /* pg_size slots, 0 = empty */
};

struct tc_osd_addr {
  uint64_t id;
  char *addr;
  int port;
  char *host;
};

struct tc_map {
  int refs;                   /* see tc_map_ref */
  struct tc_pool_info *pools;
  size_t n_pools;
  struct tc_pg_info **pgs;    /* per pool (same order as pools), pg_count entries or NULL */
  struct tc_osd_addr *osds;
  size_t n_osds;
};

/* Build a map from the three JSON texts (any may be NULL = empty; osd
 * states are given as parallel arrays of id and value). */
struct tc_map *tc_map_build(const char *pools_json, size_t pools_len,
                            const char *pgcfg_json, size_t pgcfg_len,
                            const uint64_t *osd_ids, const char *const *osd_jsons,
                            const size_t *osd_lens, size_t n_osds);
struct tc_map *tc_map_ref(struct tc_map *m);      /* thread-safe */
void tc_map_unref(struct tc_map *m);              /* thread-safe; frees at 0 */

const struct tc_pool_info *tc_map_pool(const struct tc_map *m, uint64_t pool);
const struct tc_pool_info *tc_map_pool_by_name(const struct tc_map *m, const char *name);
/* The PG of (inode, offset): (inode + offset / pg_stripe_size) % pg_count. */
uint32_t tc_map_pg_of(const struct tc_pool_info *p, uint64_t inode, uint64_t offset);
/* The PG's placement, or NULL if the pool has none yet. */
const struct tc_pg_info *tc_map_pg(const struct tc_map *m, uint64_t pool, uint32_t pg);
const struct tc_osd_addr *tc_map_osd(const struct tc_map *m, uint64_t osd);

#endif
