/* What every in-flight operation shares (struct osd_op_base): the OSD, the
 * client that asked and its request, the PG it runs in; one constructor
 * and one release, so the PG's count of client operations (which peering
 * waits for) and the client's reference cannot be forgotten on some exit. */
#include <config.h>
#include <stdlib.h>
#include "metrics.h"
#include "osd.h"

void *
osd_op_new(size_t size, struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr, struct osd_pg *pg,
           uint64_t inode, uint64_t offset)
{
  struct osd_op_base *b = calloc(1, size);
  if (!b)
    return NULL;
  b->o = o;
  b->cl = cl;
  if (cl)
    cl->refs++;
  if (hdr)
    b->hdr = *hdr;
  if (pg) {
    b->pool = pg->pool;
    b->pgn = pg->pg;
    b->instance = pg->instance;
    b->epoch = pg->epoch;
    b->counted = cl != NULL;   /* client operations hold peering back; recovery does not */
    if (b->counted)
      pg->inflight++;
  }
  b->inode = inode;
  b->offset = offset;
  b->t0 = tc_metrics_now();
  return b;
}

struct osd_pg *
osd_op_pg(const struct osd_op_base *b)
{
  return b->instance ? osd_pg_instance(b->o, b->pool, b->pgn, b->instance) : NULL;
}

void
osd_op_free(void *op)
{
  struct osd_op_base *b = op;
  if (!b)
    return;
  struct osd_pg *pg = b->counted ? osd_op_pg(b) : NULL;
  if (pg) {
    pg->inflight--;
    if (pg->inflight == 0 && b->o->events.pg_idle)
      b->o->events.pg_idle(b->o, pg);   /* peering may have waited for it */
  }
  if (b->cl)   /* a client's operation: its latency (errors are counted at the reply) */
    osd_metrics_reply(b->o, b->hdr.opcode, 0, b->t0);
  osd_client_put(b->cl);
  free(b);
}
