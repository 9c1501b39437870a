/* The scrub schedule: every PG this OSD leads is scrubbed once every
 * scrub_interval seconds, object by object, at most scrub_rate objects a
 * second for the whole OSD (client I/O keeps the rest of the disk). First
 * passes start at a point of the interval fixed by the PG's number, so the
 * PGs of a cluster do not all scrub at once. What a pass finds is in the
 * PG's record (scrub_bad, scrub_repaired, scrub_last, and the last full
 * pass's own findings), written to /pg/state by osd_stats.c.
 *
 * A scrub asked for (tromcho scrub writes /pg/history/<pool>/<pg> =
 * {"next_scrub": T}, osd_kv.c) starts a pass at wall time T or at once if
 * T passed, even with scrub_interval 0, unless a full pass already served
 * T; /pg/state's scrub.request then says T was served. */
#include <config.h>
#include <inttypes.h>
#include <time.h>
#include "log.h"
#include "osd.h"

/* Where in the interval a PG's first pass starts, in [0, 1). */
static double
spread(const struct osd_pg *pg)
{
  uint64_t h = (pg->pool * 0x9e3779b97f4a7c15ull) ^ ((uint64_t) pg->pg * 0xc2b2ae3d27d4eb4full);
  h ^= h >> 29;
  return (double) (h % 1000) / 1000.0;
}

void
osd_scrub_tick(struct osd *o)
{
  int64_t interval = tc_config_int(o->cfg, "scrub_interval");
  int64_t rate = tc_config_int(o->cfg, "scrub_rate");
  if (o->stopping)
    return;
  if (rate < 1)
    rate = 1;
  double now = tc_metrics_now();
  int64_t budget = rate - o->scrub_inflight;   /* scrubs still running count against this second */
  for (size_t i = 0; i < o->n_pgs && budget > 0; i++) {
    struct osd_pg *pg = &o->pgs[i];
    if (pg->state != PG_ACTIVE)
      continue;
    if (!pg->scrub_running) {
      int64_t req = osd_scrub_requested(o, pg->pool, pg->pg), wall = (int64_t) time(NULL);
      bool asked = req > pg->scrub_req_done && req <= wall;
      if (interval > 0 && pg->scrub_next == 0)
        pg->scrub_next = now + spread(pg) * (double) interval;
      if (!asked && (interval <= 0 || now < pg->scrub_next))
        continue;
      pg->scrub_running = true;
      pg->scrub_pos = 0;
      pg->scrub_objects = 0;
      pg->scrub_pass_bad = pg->scrub_pass_repaired = 0;
      pg->scrub_req_running = asked ? req : 0;
      if (asked)
        tc_info("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 ": scrub asked for (next_scrub %" PRId64 ")", o->osd_num,
                pg->pool, pg->pg, req);
    }
    while (budget > 0 && pg->scrub_pos < pg->objs.cap) {
      struct osd_obj *ob = &pg->objs.v[pg->scrub_pos];
      if (!ob->used) {
        pg->scrub_pos++;
        continue;
      }
      /* A stale or recovering object waits: recovery rewrites it whole. */
      if (osd_scrub_background(o, pg, ob) == 0)
        budget--;
      pg->scrub_pos++;
    }
    /* The pass ends when its last object's scrub answered. */
    if (pg->scrub_pos >= pg->objs.cap && pg->scrub_pass_inflight == 0) {
      pg->scrub_running = false;
      pg->scrub_last = (int64_t) time(NULL);
      pg->scrub_next = now + (double) interval;
      pg->scrub_last_bad = pg->scrub_pass_bad;
      pg->scrub_last_repaired = pg->scrub_pass_repaired;
      if (pg->scrub_req_running > pg->scrub_req_done)
        pg->scrub_req_done = pg->scrub_req_running;
      tc_info("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 " scrubbed: %" PRIu64 " objects; since peering %" PRIu64
              " bad sectors, %" PRIu64 " repaired", o->osd_num, pg->pool, pg->pg, pg->scrub_objects, pg->scrub_bad,
              pg->scrub_repaired);
    }
  }
}
