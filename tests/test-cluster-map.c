/* The cluster map: parsing pools, PG placement and OSD states; PG rule. */
#include <config.h>
#include <string.h>
#include "cluster_map.h"
#include "error.h"
#include "tap.h"

int
main(void)
{
  const char *pools = "{\"1\": {\"name\": \"rep3\", \"pg_size\": 3, \"pg_minsize\": 2, \"pg_count\": 4,"
                      " \"creator_group\": \"ops\"},"
                      " \"2\": {\"name\": \"bad\", \"pg_size\": 0, \"pg_count\": 4},"
                      " \"x\": {\"name\": \"junk\"}}";
  const char *pgcfg = "{\"items\": {\"1\": {\"0\": {\"osd_set\": [1, 2, 3], \"primary\": 1},"
                      " \"3\": {\"osd_set\": [3, 0, 2], \"primary\": 3}, \"9\": {\"osd_set\": [1]}}}}";
  uint64_t ids[3] = { 1, 2, 3 };
  const char *st[3] = { "{\"addr\": \"127.0.0.1\", \"port\": 7001, \"host\": \"h1\"}",
                        "{\"addr\": \"127.0.0.1\", \"port\": 99999}", "not json" };
  size_t lens[3] = { strlen(st[0]), strlen(st[1]), strlen(st[2]) };
  struct tc_map *m = tc_map_build(pools, strlen(pools), pgcfg, strlen(pgcfg), ids, st, lens, 3);
  CHECK(m != NULL, "build: %s", tc_last_error());
  if (!m)
    return DONE();
  CHECK(m->n_pools == 1, "only the valid pool is kept (%zu)", m->n_pools);
  const struct tc_pool_info *p = tc_map_pool(m, 1);
  CHECK(p && p->pg_size == 3 && p->pg_minsize == 2 && p->pg_count == 4 && p->block_size == 128 * 1024 &&
        p->pg_stripe_size == 4 << 20 && !strcmp(p->creator_group, "ops"), "pool fields and defaults");
  CHECK(tc_map_pool_by_name(m, "rep3") == p && !tc_map_pool(m, 2), "lookups");
  const struct tc_pg_info *g = tc_map_pg(m, 1, 3);
  CHECK(g && g->primary == 3 && g->osd_set[0] == 3 && g->osd_set[1] == 0 && g->osd_set[2] == 2, "pg 3");
  CHECK(tc_map_pg(m, 1, 1) && tc_map_pg(m, 1, 1)->primary == 0, "pg without placement is inactive");
  CHECK(!tc_map_pg(m, 1, 9), "pg beyond pg_count");
  CHECK(tc_map_osd(m, 1) && tc_map_osd(m, 1)->port == 7001 && !strcmp(tc_map_osd(m, 1)->host, "h1"), "osd 1");
  CHECK(!tc_map_osd(m, 2) && !tc_map_osd(m, 3), "bad osd states skipped");
  /* (inode + offset / stripe) % pg_count */
  CHECK(tc_map_pg_of(p, 5, 0) == 1 && tc_map_pg_of(p, 5, 4 << 20) == 2 && tc_map_pg_of(p, 5, (4 << 20) - 1) == 1,
        "pg rule");
  struct tc_map *r = tc_map_ref(m);
  tc_map_unref(m);
  CHECK(r->n_pools == 1, "ref keeps the map");
  tc_map_unref(r);
  struct tc_map *empty = tc_map_build(NULL, 0, NULL, 0, NULL, NULL, NULL, 0);
  CHECK(empty && empty->n_pools == 0 && !tc_map_pool(empty, 1), "empty map");
  tc_map_unref(empty);
  return DONE();
}
