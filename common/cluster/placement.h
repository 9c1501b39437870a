/* PG placement: which OSDs hold each PG of a pool. A pure function, no I/O:
 * the monitor feeds it the live OSDs and the previous placement and writes
 * the answer to /pg/config.
 *
 * Properties (tests/test-placement.c checks them):
 *  - failure domain: no two replicas of a PG share a host (or, with
 *    failure_domain osd, an OSD) as long as there are at least pg_size
 *    hosts; with fewer, replicas still go to distinct OSDs, spread over as
 *    many hosts as there are;
 *  - balance: each OSD's replica count tracks its target (a weight-
 *    proportional share, capped so no host holds more than one replica of
 *    a PG); with at least pg_size even hosts the most and least loaded OSD
 *    differ by at most about 10%; kept replicas move only towards an OSD
 *    more than 15% (a new OSD: 1.5 replicas) below its target, so on uneven
 *    hosts a leave may leave an OSD up to 15% short rather than move more;
 *  - minimal movement: a replica stays where it is while its OSD is up and
 *    the constraints hold; when an OSD leaves only the PGs that had it
 *    change; when one joins, only about its share of replicas move to it.
 *
 * Slots keep their position: a surviving replica stays in its slot of
 * osd_set, a new one fills the hole. The primary stays the same while it is
 * in the set; otherwise it is the member holding the fewest primaries.
 * tc_placement_balance_primaries then evens the primaries out over the PGs
 * the caller knows to be clean (the monitor: a pool whose every PG is). */
#ifndef TROMCHO_PLACEMENT_H
#define TROMCHO_PLACEMENT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tc_placement_osd {
  uint64_t id;            /* > 0 */
  const char *host;       /* failure domain name (NULL: its own) */
  double weight;          /* share of data; <= 0 takes none */
  bool up;                /* down OSDs take none */
};

enum tc_failure_domain { TC_FD_HOST, TC_FD_OSD };

struct tc_placement_pool {
  uint32_t pg_count;
  uint32_t pg_size;
  uint32_t pg_minsize;    /* fewer live replicas: primary = 0 (PG inactive) */
  enum tc_failure_domain failure_domain;
};

/* A placement: osd_set[pg * pg_size + slot] (0 = no OSD for that slot),
 * primary[pg] (0 = none). */
struct tc_placement {
  uint32_t pg_count;
  uint32_t pg_size;
  uint64_t *osd_set;
  uint64_t *primary;
};

/* Compute the placement of pool over osds, starting from prev (NULL or
 * pg_count 0: none; a different pg_count or pg_size is used as far as it
 * fits). Fills *out (free with tc_placement_free). Returns the number of
 * replicas (slots) that changed from prev, or -1 on error (EINVAL, ENOMEM
 * with tc_last_error). Deterministic: the same input gives the same output,
 * and feeding the output back in changes nothing. */
long tc_placement_compute(const struct tc_placement_osd *osds, size_t n_osds,
                          const struct tc_placement_pool *pool,
                          const struct tc_placement *prev, struct tc_placement *out);
/* The target replica count of each OSD of osds[] (0 for down ones), as the
 * balance step aims at it; targets must hold n_osds doubles. */
int tc_placement_targets(const struct tc_placement_osd *osds, size_t n_osds,
                         const struct tc_placement_pool *pool, double *targets);
/* Move primaries of the PGs with clean[pg] (every member holds the PG's
 * data) to the member leading the fewest PGs, while that one leads at least
 * two fewer than the primary's OSD, until no such move is left: then the
 * OSDs' counts differ by at most one wherever the sets allow. Sets do not
 * change. Deterministic. Returns the primaries moved, or -1 (ENOMEM). */
long tc_placement_balance_primaries(struct tc_placement *pl, const bool *clean);
void tc_placement_free(struct tc_placement *p);

#endif
