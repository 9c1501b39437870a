/* Replaying the unsynced-write log (unsynced_log.h) when an OSD is lost
 * before a SYNC; the background sync that bounds the log
 * (client_max_dirty_bytes). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cluster_int.h"
#include "error.h"
#include "log.h"

static void
replay_put(struct cop *sync, int result)
{
  if (result < 0 && !sync->error) {
    tc_warn("cluster: replaying an unsynced write failed: %s", strerror(-result));
    sync->error = result;
  }
  if (--sync->replay_pending == 0) {
    if (sync->error) {
      struct tc_objop *sop = sync->op;
      sop->result = sync->error;
      cluster_cop_free(sync);
      sop->done(sop);
    }
    else
      cluster_cop_start_sync(sync, true);
  }
}

static void
replay_done(struct tc_objop *op)
{
  struct cop *sync = op->opaque;
  int r = op->result;
  free(op->buf);
  free(op);
  replay_put(sync, r);
}

/* An OSD was lost before the SYNC: write again everything the SYNC was to
 * make durable (routed to the PGs' current primaries), then sync all. */
void
cluster_replay_then_sync(struct cop *sync)
{
  struct tc_cluster *cl = sync->cl;
  sync->replay_pending = 1;   /* ours, dropped at the end */
  uint64_t n = 0;
  for (struct tc_ulog_entry *u = cl->log.head; u && u->seq <= sync->sync_seq; u = u->next) {
    struct tc_objop *op = calloc(1, sizeof *op);
    struct cop *c = calloc(1, sizeof *c);
    struct sreq *part = calloc(1, sizeof *part);
    uint8_t *buf = u->data ? malloc(u->len) : NULL;
    /* A replayed write is logged again when acknowledged, as any write. */
    struct tc_ulog_entry *rec = tc_ulog_reserve(&cl->log, u->inode, u->offset, u->len, u->data != NULL, u->partial);
    if (!op || !c || !part || (u->data && !buf) || !rec) {
      free(op);
      free(c);
      free(part);
      free(buf);
      tc_ulog_release(rec);
      sync->error = -ENOMEM;
      break;
    }
    if (buf)
      memcpy(buf, u->data, u->len);
    *op = (struct tc_objop) { .code = u->partial ? TC_OBJ_WRITE_PARTIAL : buf ? TC_OBJ_WRITE : TC_OBJ_DELETE,
                              .inode = u->inode, .offset = u->offset,
                              .len = u->len, .buf = buf, .done = replay_done, .opaque = sync };
    c->cl = cl;
    c->op = op;
    c->internal = true;
    c->deadline = sync->deadline;
    c->nparts = 1;
    c->parts = part;
    part->cop = c;
    part->kind = SR_DATA;
    part->off = u->offset;
    part->len = u->len;
    part->rec = rec;
    sync->replay_pending++;
    n++;
    cluster_cop_start(cl->loop, c);
  }
  if (n)
    tc_info("cluster: an OSD was lost before a flush: replaying %" PRIu64 " unsynced writes", n);
  replay_put(sync, 0);
}

static void
auto_sync_done(struct tc_objop *op)
{
  struct tc_cluster *cl = op->opaque;
  cl->auto_syncing = false;
  /* Cancelled by the client's own shutdown: not a failure (a caller that
   * needs its writes durable flushes before it closes). */
  if (op->result == -ECANCELED && cl->stopping)
    tc_debug("cluster: background sync cancelled by the shutdown");
  else if (op->result < 0)
    tc_warn("cluster: background sync failed: %s", strerror(-op->result));
  free(op);
}

/* Too many unsynced bytes kept for replay: sync in the background. */
void
cluster_auto_sync(struct tc_cluster *cl)
{
  if (cl->auto_syncing || cl->stopping)
    return;
  struct tc_objop *op = calloc(1, sizeof *op);
  struct cop *c = calloc(1, sizeof *c);
  if (!op || !c) {
    free(op);
    free(c);
    return;
  }
  *op = (struct tc_objop) { .code = TC_OBJ_SYNC, .done = auto_sync_done, .opaque = cl };
  c->cl = cl;
  c->op = op;
  c->internal = true;
  c->deadline = tc_now_ms() + cl->op_timeout_ms;
  cl->auto_syncing = true;
  STAT_INC(cl, ops);
  cluster_cop_start_sync(c, false);
}
