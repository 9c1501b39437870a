/* The unsynced-write log (acknowledged writes not yet covered by a SYNC) and
 * its replay when an OSD is lost before the SYNC; the background sync that
 * bounds it (client_max_dirty_bytes). */
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

/* --- the unsynced-write log --- */

static void
log_unlink(struct tc_cluster *cl, struct unsynced *u)
{
  if (u->prev)
    u->prev->next = u->next;
  else
    cl->log_head = u->next;
  if (u->next)
    u->next->prev = u->prev;
  else
    cl->log_tail = u->prev;
  cl->log_bytes -= u->len;
  free(u->data);
  free(u);
}

static struct unsynced *
log_piece(struct tc_cluster *cl, const struct unsynced *from, uint64_t off, uint64_t end)
{
  struct unsynced *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->seq = from->seq;
  p->partial = from->partial;
  p->inode = from->inode;
  p->offset = off;
  p->len = (uint32_t) (end - off);
  if (from->data) {
    if (!(p->data = malloc(p->len))) {
      free(p);
      return NULL;
    }
    memcpy(p->data, from->data + (off - from->offset), p->len);
  }
  cl->log_bytes += p->len;
  return p;
}

/* A partial write was acknowledged over the bytes of an older whole-sector
 * entry u: put its bytes into u's data and make u as young as the write
 * (so u is kept until a SYNC covers it). u and the partial entry then
 * overlap with the same bytes, which replay in either order. */
static void
log_patch(struct tc_cluster *cl, struct unsynced *u, uint64_t off, uint64_t end, const uint8_t *data)
{
  uint64_t ue = u->offset + u->len, from = off > u->offset ? off : u->offset, to = end < ue ? end : ue;
  memcpy(u->data + (from - u->offset), data + (from - off), to - from);
  u->seq = cl->log_seq + 1;   /* the partial entry's */
  if (u == cl->log_tail)
    return;
  if (u->prev)
    u->prev->next = u->next;
  else
    cl->log_head = u->next;
  u->next->prev = u->prev;
  u->prev = cl->log_tail;
  u->next = NULL;
  cl->log_tail->next = u;
  cl->log_tail = u;
}

/* Record an acknowledged write; older entries it covers are dropped (or cut
 * to what it does not cover), so a replay never brings back old data.
 * Whole-sector entries stay whole sectors: a partial write patches them. */
void
cluster_log_add(struct tc_cluster *cl, uint64_t inode, uint64_t off, uint32_t len, const void *data, bool partial)
{
  uint64_t end = off + len;
  struct unsynced *stop = cl->log_tail;   /* entries moved to the tail are not seen twice */
  for (struct unsynced *u = cl->log_head, *next; u; u = next) {
    next = u == stop ? NULL : u->next;
    uint64_t ue = u->offset + u->len;
    if (u->inode != inode || ue <= off || end <= u->offset)
      continue;
    if (partial && !u->partial) {
      /* A DELETE becomes a write of zeros (what its sectors read as), so
       * that it can carry the partial write's bytes. */
      if (!u->data && !(u->data = calloc(1, u->len))) {
        tc_err("cluster: out of memory keeping an unsynced write for replay");
        continue;
      }
      log_patch(cl, u, off, end, data);
      continue;
    }
    struct unsynced *head = u->offset < off ? log_piece(cl, u, u->offset, off) : NULL;
    struct unsynced *tail = ue > end ? log_piece(cl, u, end, ue) : NULL;
    /* Put the pieces where u was (same age), then drop u. */
    struct unsynced *pieces[2] = { head, tail };
    for (int i = 0; i < 2; i++) {
      struct unsynced *p = pieces[i];
      if (!p)
        continue;
      p->prev = u->prev;
      p->next = u;
      if (u->prev)
        u->prev->next = p;
      else
        cl->log_head = p;
      u->prev = p;
    }
    log_unlink(cl, u);
  }
  struct unsynced *n = calloc(1, sizeof *n);
  if (!n || (data && !(n->data = malloc(len)))) {
    free(n);
    tc_err("cluster: out of memory keeping an unsynced write for replay");
    return;
  }
  if (data)
    memcpy(n->data, data, len);
  n->seq = ++cl->log_seq;
  n->partial = partial;
  n->inode = inode;
  n->offset = off;
  n->len = len;
  n->prev = cl->log_tail;
  if (cl->log_tail)
    cl->log_tail->next = n;
  else
    cl->log_head = n;
  cl->log_tail = n;
  cl->log_bytes += len;
}

/* A SYNC covering seq <= upto succeeded: forget those. */
void
cluster_log_trim(struct tc_cluster *cl, uint64_t upto)
{
  while (cl->log_head && cl->log_head->seq <= upto)
    log_unlink(cl, cl->log_head);
}

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
  for (struct unsynced *u = cl->log_head; u && u->seq <= sync->sync_seq; u = u->next) {
    struct tc_objop *op = calloc(1, sizeof *op);
    struct cop *c = calloc(1, sizeof *c);
    struct sreq *part = calloc(1, sizeof *part);
    uint8_t *buf = u->data ? malloc(u->len) : NULL;
    if (!op || !c || !part || (u->data && !buf)) {
      free(op);
      free(c);
      free(part);
      free(buf);
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
  if (op->result < 0)
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

void
cluster_log_free(struct tc_cluster *cl)
{
  while (cl->log_head)
    log_unlink(cl, cl->log_head);
}
