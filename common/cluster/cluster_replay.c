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

/* --- the barrier: no write in flight while a replay's writes are --- */

static bool
is_write(const struct tc_objop *op)
{
  return op && (op->code == TC_OBJ_WRITE || op->code == TC_OBJ_DELETE || op->code == TC_OBJ_WRITE_PARTIAL ||
                op->code == TC_OBJ_WRITE_IF);
}

/* At the start of cop: a write (not a replay's own) waits while a replay
 * drains or runs (true: held, started again at its end); otherwise it is
 * counted in flight until it completes. */
bool
cluster_replay_holds(struct cop *cop)
{
  struct tc_cluster *cl = cop->cl;
  if (cop->internal || !is_write(cop->op))
    return false;
  if (cl->replaying && !cl->stopping) {
    STAILQ_INSERT_TAIL(&cl->held, cop, hnext);
    return true;
  }
  cop->counted = true;
  cl->writes_inflight++;
  return false;
}

static void replay_send(struct cop *sync);

/* A counted write completed: the replays waiting for the writes in flight
 * go once there are none. */
void
cluster_replay_write_done(struct tc_cluster *cl)
{
  if (--cl->writes_inflight)
    return;
  while (!STAILQ_EMPTY(&cl->drain) && !cl->writes_inflight) {
    struct cop *sync = STAILQ_FIRST(&cl->drain);
    STAILQ_REMOVE_HEAD(&cl->drain, hnext);
    replay_send(sync);
  }
}

/* A replay is over (its writes acknowledged or failed): when it was the
 * last, the writes held meanwhile start, in the order they came. */
static void
replay_end(struct tc_cluster *cl)
{
  if (--cl->replaying)
    return;
  STAILQ_HEAD(, cop) q = STAILQ_HEAD_INITIALIZER(q);
  STAILQ_CONCAT(&q, &cl->held);
  while (!STAILQ_EMPTY(&q)) {
    struct cop *c = STAILQ_FIRST(&q);
    STAILQ_REMOVE_HEAD(&q, hnext);
    cluster_cop_start(cl->loop, c);
  }
}

static void
replay_fail(struct cop *sync, int err)
{
  struct tc_cluster *cl = sync->cl;
  struct tc_objop *sop = sync->op;
  sop->result = err;
  cluster_cop_free(sync);
  sop->done(sop);
  replay_end(cl);
}

/* The client stops: replays waiting to drain fail, held writes start (and
 * are cancelled as every other request). Loop thread, cl->stopping set. */
void
cluster_replay_cancel(struct tc_cluster *cl)
{
  while (!STAILQ_EMPTY(&cl->drain)) {
    struct cop *sync = STAILQ_FIRST(&cl->drain);
    STAILQ_REMOVE_HEAD(&cl->drain, hnext);
    replay_fail(sync, -ECANCELED);
  }
}

/* --- the replay --- */

static void
replay_put(struct cop *sync, int result)
{
  if (result < 0 && !sync->error) {
    tc_warn("cluster: replaying an unsynced write failed: %s", strerror(-result));
    sync->error = result;
  }
  if (--sync->replay_pending == 0) {
    if (sync->replay_fenced)
      tc_info("cluster: replay: %" PRIu32 " unsynced writes not written again: their inodes became read-only "
              "since (a snapshot or a re-key took them over)", sync->replay_fenced);
    if (sync->error) {
      replay_fail(sync, sync->error);
      return;
    }
    struct tc_cluster *cl = sync->cl;
    cluster_cop_start_sync(sync, true);
    replay_end(cl);
  }
}

static void
replay_done(struct tc_objop *op)
{
  struct cop *sync = op->opaque;
  int r = op->result;
  if (r == -EROFS) {
    /* The inode was fenced after the write was acknowledged (a snapshot
     * or a re-key made it read-only: osd_dispatch.c). Its new owner took
     * the layer's content from the surviving copies, which the sync of
     * every OSD after the replay makes durable; the write can neither
     * nor need be written there again. */
    tc_debug("cluster: replay: inode 0x%" PRIx64 " offset %" PRIu64 " is read-only since; not written again",
             op->inode, op->offset);
    sync->replay_fenced++;
    r = 0;
  }
  free(op->buf);
  free(op);
  replay_put(sync, r);
}

/* An OSD was lost before the SYNC: once no write is in flight (a write in
 * flight is newer than every entry of the log, and may reach the OSD
 * first), write again every acknowledged unsynced write (routed to the
 * PGs' current primaries), then sync all. Writes that come meanwhile wait
 * (cluster_replay_holds). */
void
cluster_replay_then_sync(struct cop *sync)
{
  struct tc_cluster *cl = sync->cl;
  cl->replaying++;
  if (cl->writes_inflight) {
    tc_debug("cluster: a replay waits for %u writes in flight", cl->writes_inflight);
    STAILQ_INSERT_TAIL(&cl->drain, sync, hnext);
    return;
  }
  replay_send(sync);
}

static void
replay_send(struct cop *sync)
{
  struct tc_cluster *cl = sync->cl;
  if (tc_now_ms() > sync->deadline) {
    tc_warn("cluster: giving up on a sync: the writes in flight before its replay did not finish in time");
    replay_fail(sync, -ETIMEDOUT);
    return;
  }
  /* Everything the log holds: entries acknowledged since the SYNC began
   * may also have gone to the lost OSD, and the round after the replay
   * covers (and forgets) all of them. */
  sync->sync_seq = cl->log.seq;
  sync->replay_pending = 1;   /* ours, dropped at the end */
  sync->replay_fenced = 0;
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
    c->replay_version = u->version;
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
  cluster_window_syncing(cl, false);
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
  cluster_window_syncing(cl, true);
  STAT_INC(cl, ops);
  cluster_cop_start_sync(c, false);
}
