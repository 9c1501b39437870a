/* Pools (/config/pools) and the PG placement the monitor publishes
 * (/pg/config): parsing, validation and canonical encoding, shared by the
 * monitor, the CLI, OSDs and clients.
 *
 * /config/pools (written by `tromcho pool-create`, like Vitastor's):
 *   {"1": {"name": "rep3", "pg_size": 3, "pg_minsize": 2, "pg_count": 64,
 *          "block_size": 131072, "failure_domain": "host",
 *          "creator_group": "devs"}}
 *   pool ids 1..65535 (they are the top 16 bits of inode numbers);
 *   block_size and creator_group and failure_domain (host or osd) optional.
 *
 * /pg/config (written only by the active monitor):
 *   {"items": {"<pool id>": {"<pg>": {"osd_set": [3, 7, 12], "primary": 7}, ...}}}
 *   - PG numbers run 0 .. pg_count-1 (an object's PG is
 *     (inode + offset / pg_stripe_size) % pg_count, DESIGN.md section 4);
 *   - osd_set has pg_size entries; a replica keeps its slot while its OSD
 *     lives; 0 marks a slot with no OSD (not enough OSDs up);
 *   - primary is a member of osd_set, or 0 when fewer than pg_minsize OSDs
 *     are in the set (the PG is inactive: no I/O);
 *   - pools and PGs appear in increasing numeric order; a pool that is not
 *     in /config/pools is not in /pg/config.
 */
#ifndef TROMCHO_POOLS_H
#define TROMCHO_POOLS_H
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include "placement.h"

#define TC_POOL_MAX_ID 65535
#define TC_POOL_MAX_PG_SIZE 16
#define TC_POOL_MAX_PG_COUNT 65536
/* An object travels whole in one OSD operation, whose bitmaps have 64
 * sectors (osd_proto.h TC_OSD_MAX_OP_BYTES): 256 KiB at most. */
#define TC_POOL_MAX_BLOCK_SIZE (256u * 1024)

struct tc_pool {
  uint32_t id;
  char *name;
  uint32_t pg_size, pg_minsize, pg_count;
  uint64_t block_size;              /* default 128 KiB */
  enum tc_failure_domain failure_domain;
  char *creator_group;              /* NULL: none */
};

struct tc_pools {
  struct tc_pool *v;                /* sorted by id */
  size_t n;
};

/* Check one pool's fields; -1 with a message naming the field. */
int tc_pool_validate(const struct tc_pool *p);
/* Parse /config/pools text (NULL or "" = no pools). A pool that does not
 * validate is left out with a warning in the log; text that is not a JSON
 * object is an error. */
int tc_pools_parse(const char *json, struct tc_pools *out);
const struct tc_pool *tc_pools_find_name(const struct tc_pools *pools, const char *name);
const struct tc_pool *tc_pools_find_id(const struct tc_pools *pools, uint32_t id);
/* The pool as the JSON object stored under its id (new reference). */
json_object *tc_pool_to_json(const struct tc_pool *p);
/* All pools as /config/pools text (malloc'd). */
char *tc_pools_encode(const struct tc_pools *pools);
void tc_pools_free(struct tc_pools *pools);

struct tc_pg_config_pool {
  uint32_t pool_id;
  struct tc_placement pl;
};
struct tc_pg_config {
  struct tc_pg_config_pool *v;      /* sorted by pool id */
  size_t n;
};

/* Parse /pg/config text (NULL or "" = empty). */
int tc_pg_config_parse(const char *json, struct tc_pg_config *out);
/* Canonical text (malloc'd): equal configs give equal text. */
char *tc_pg_config_encode(const struct tc_pg_config *cfg);
const struct tc_placement *tc_pg_config_find(const struct tc_pg_config *cfg, uint32_t pool_id);
void tc_pg_config_free(struct tc_pg_config *cfg);

#endif
