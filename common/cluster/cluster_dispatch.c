/* The cluster client's operations: split into messages, routed to the PG's
 * primary, parked and retried until the deadline, completed; SYNC. */
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
#include "tune.h"
#include "vector.h"

/* Writes of this many bytes or more go with a key of their own (gcm). */
#define OWN_KEY_MIN (16 * 1024)

/* --- operations --- */

static void
retry_timer_cb(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct tc_cluster *cl = arg;
  cl->retry_timer = NULL;
  cluster_dispatch_waiting(cl);
}

/* Park sr until the next map or the retry timer. */
void
cluster_sreq_wait(struct sreq *sr, int err)
{
  struct tc_cluster *cl = sr->cop->cl;
  sr->last_err = err;
  STAILQ_INSERT_TAIL(&cl->waiting, sr, wnext);
  if (!cl->retry_timer)
    cl->retry_timer = tc_evloop_timer_add(cl->loop, cl->retry_ms, retry_timer_cb, cl);
}

/* Remember that osd was written since the last SYNC. -1 when out of memory. */
static int
dirty_add(struct tc_cluster *cl, uint64_t osd)
{
  for (size_t i = 0; i < cl->ndirty; i++)
    if (cl->dirty[i] == osd)
      return 0;
  if (tc_grow(&cl->dirty, &cl->dirty_cap, cl->ndirty + 1, sizeof *cl->dirty, 16) < 0)
    return -1;
  cl->dirty[cl->ndirty++] = osd;
  return 0;
}

/* After a replay round synced every OSD of the map: an OSD written since
 * the last SYNC that is no longer in the map holds nothing any flush
 * needs (its writes were written again and synced elsewhere), so the next
 * syncs stop asking for it (each would replay the whole log again). */
static void
dirty_prune(struct tc_cluster *cl)
{
  size_t k = 0;
  for (size_t i = 0; i < cl->ndirty; i++)
    if (tc_map_osd(cl->map, cl->dirty[i]))
      cl->dirty[k++] = cl->dirty[i];
  cl->ndirty = k;
}

void
cluster_dispatch_waiting(struct tc_cluster *cl)
{
  /* Dispatching may park a request again: take the list first. */
  STAILQ_HEAD(, sreq) q = STAILQ_HEAD_INITIALIZER(q);
  STAILQ_CONCAT(&q, &cl->waiting);
  while (!STAILQ_EMPTY(&q)) {
    struct sreq *sr = STAILQ_FIRST(&q);
    STAILQ_REMOVE_HEAD(&q, wnext);
    cluster_sreq_dispatch(sr);
  }
}

void
cluster_cop_free(struct cop *cop)
{
  for (int i = 0; cop->parts && i < cop->nparts; i++) {
    if (cop->op && cop->op->code == TC_OBJ_BITMAP)
      free(cop->parts[i].rbuf);
    tc_ulog_release(cop->parts[i].rec);
  }
  free(cop->parts);
  free(cop->ents);
  if (cop->poll_held)   /* set on the loop by cluster_cop_start; a started SYNC is freed there too */
    tc_evloop_poll_hold(cop->cl->loop, -1);
  if (cop->win_bytes)
    cluster_window_undo(cop->cl, cop->win_bytes);
  free(cop);
}

static void
fua_sync_done(struct tc_objop *sop)
{
  struct tc_objop *op = sop->opaque;
  op->result = sop->result;
  free(sop);
  op->done(op);
}

/* A FUA write an OSD from before FUA took as a plain write (osd_proto.h,
 * "Old peers"): complete op once a SYNC of every OSD written since the
 * last flush made it durable (what NBD's emulated FUA did). The set of
 * written OSDs stays for the next flush. -1: out of memory. */
static int
fua_sync_start(struct tc_cluster *cl, struct tc_objop *op)
{
  struct tc_objop *sop = calloc(1, sizeof *sop);
  struct cop *c = calloc(1, sizeof *c);
  if (!sop || !c) {
    free(sop);
    free(c);
    return -1;
  }
  *sop = (struct tc_objop) { .code = TC_OBJ_SYNC, .done = fua_sync_done, .opaque = op };
  c->cl = cl;
  c->op = sop;
  c->internal = true;
  c->deadline = tc_now_ms() + cl->op_timeout_ms;
  STAT_INC(cl, ops);
  cluster_cop_start_sync(c, false);
  return 0;
}

static void
cop_complete(struct cop *cop)
{
  struct tc_cluster *cl = cop->cl;
  if (cop->counted) {
    cop->counted = false;
    cluster_replay_write_done(cl);
  }
  if (cop->win_bytes) {
    cluster_window_done(cl, cop->win_bytes);
    cop->win_bytes = 0;
  }
  if (cop->op && cop->op->code != TC_OBJ_SYNC && cop->fua_sync && !cop->error && !cl->stopping) {
    struct tc_objop *op = cop->op;
    cluster_cop_free(cop);
    if (fua_sync_start(cl, op) < 0) {
      op->result = -ENOMEM;
      op->done(op);
    }
    return;
  }
  if (cop->op && cop->op->code == TC_OBJ_SYNC && cop->resync && !cop->error && !cl->stopping) {
    if (tc_now_ms() < cop->deadline) {
      cluster_replay_then_sync(cop);
      return;
    }
    /* No time left to write again what a lost OSD took: not durable. */
    tc_warn("cluster: giving up on a sync: an OSD was lost and no time is left to write its unsynced writes again");
    cop->error = -ETIMEDOUT;
  }
  if (cop->op && cop->op->code == TC_OBJ_SYNC && !cop->error && !cop->resync) {
    tc_ulog_trim(&cl->log, cop->sync_seq);
    if (cop->all_round)
      dirty_prune(cl);
    cluster_window_done(cl, 0);
  }
  /* Give back free heap memory a burst of requests (their buffers, the
   * log's after a sync) left behind: at most one look a second. */
  tc_tune_release();
  if (!cop->op) {
    pthread_mutex_lock(cop->wlock);
    *cop->wdone = true;
    pthread_cond_signal(cop->wcond);
    pthread_mutex_unlock(cop->wlock);
    return;   /* the waiter reads the result and frees */
  }
  struct tc_objop *op = cop->op;
  op->result = cop->error;
  cluster_cop_free(cop);
  op->done(op);
}

static void
part_finish(struct sreq *sr, int err)
{
  struct cop *cop = sr->cop;
  if (err < 0 && !cop->error)
    cop->error = err;
  if (--cop->pending == 0)
    cop_complete(cop);
}

static void
set_bits(uint8_t *bm, uint64_t first, uint64_t reply_bits, uint32_t nsec)
{
  for (uint32_t i = 0; i < nsec; i++)
    if (reply_bits >> i & 1)
      bm[(first + i) / 8] |= (uint8_t) (1u << ((first + i) % 8));
}

static void
sreq_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct sreq *sr = arg;
  struct cop *cop = sr->cop;
  struct tc_cluster *cl = cop->cl;
  void *payload = err == 0 ? req->reply_payload : NULL;
  bool own_payload = payload && payload != req->rbuf;
  tc_debug("cluster: reply to sreq %p: err %d status %d", (void *) sr, err, err ? 0 : req->reply.status);
  if (err == 0 && req->reply.status == -EAGAIN)
    err = -EAGAIN;
  if (err < 0) {
    if (own_payload)
      free(payload);
    if (cl->stopping) {
      part_finish(sr, -ECANCELED);
      return;
    }
    STAT_INC(cl, retries);
    tc_debug("cluster: %s to OSD %" PRIu64 " failed (%s), retrying", tc_osd_op_name(req->hdr.opcode), sr->osd,
             strerror(-err));
    cluster_request_refresh(cl);
    if (sr->kind == SR_SYNC) {
      /* The OSD may have taken our unsynced writes with it: sync every OSD. */
      cop->resync = true;
      part_finish(sr, 0);
      return;
    }
    cluster_sreq_wait(sr, err);
    return;
  }
  int status = req->reply.status;
  /* An OSD that cannot get a write to pg_minsize replicas (a member just
   * died, the PG is not complete yet) answers -EIO: the PG may serve it
   * again soon, so writes and syncs retry until the deadline. */
  if (status == -EIO && sr->kind != SR_LIST && (sr->kind == SR_SYNC || cop->op->code == TC_OBJ_WRITE ||
                                                cop->op->code == TC_OBJ_DELETE ||
                                                cop->op->code == TC_OBJ_WRITE_PARTIAL ||
                                                cop->op->code == TC_OBJ_WRITE_IF) && !cl->stopping) {
    if (own_payload)
      free(payload);
    STAT_INC(cl, retries);
    cluster_request_refresh(cl);
    if (sr->kind == SR_SYNC) {
      cop->resync = true;
      part_finish(sr, 0);
    }
    else
      cluster_sreq_wait(sr, -EIO);
    return;
  }
  if (status < 0) {
    if (own_payload)
      free(payload);
    part_finish(sr, status);
    return;
  }
  int r = 0;
  struct tc_objop *op = cop->op;
  switch (sr->kind) {
  case SR_DATA:
    if (op->code == TC_OBJ_READ || op->code == TC_OBJ_BITMAP) {
      if (req->reply.len != sr->len) {
        tc_warn("cluster: OSD %" PRIu64 " answered a %u-byte read with %u bytes", sr->osd, sr->len, req->reply.len);
        r = -EIO;
      }
      else if (own_payload && op->code == TC_OBJ_READ)
        memcpy(req->rbuf, payload, sr->len);
      if (r == 0 && op->bitmap)
        set_bits(op->bitmap, (sr->off - op->offset) / TC_SECTOR, tc_osd_hdr_of(&req->reply).reply.bitmap,
                 sr->len / TC_SECTOR);
      /* What this client wrote and no SYNC covers yet, and the object
       * does not hold (its version is older: every OSD that took the write
       * died and the replay has not written it again yet), reads as
       * written (tc_ulog_overlay). */
      if (r == 0)
        tc_ulog_overlay(&cl->log, op->inode, sr->off, sr->len, tc_osd_hdr_of(&req->reply).reply.version,
                        op->code == TC_OBJ_READ ? (uint8_t *) op->buf + (sr->off - op->offset) : NULL, op->bitmap,
                        (sr->off - op->offset) / TC_SECTOR);
    }
    else {
      /* FUA answered with the flag: durable on its replicas, so neither a
       * flush nor a replay owes it anything; older log entries it covers
       * are cut all the same (a replay must not undo it). */
      bool durable = (op->flags & TC_OBJ_FUA) && (req->reply.flags & TC_OSD_FLAG_FUA);
      if (!durable && dirty_add(cl, sr->osd) < 0) {
        tc_err("cluster: out of memory recording a written OSD; the next flush syncs them all");
        cl->dirty_lost = true;
      }
      if (!durable && (op->flags & TC_OBJ_FUA))
        cop->fua_sync = true;   /* an OSD from before FUA: sync it ourselves */
      /* The record was reserved before sending: keeping an acknowledged
       * write for replay needs no memory now (tc_ulog_add says when it
       * would have and the write fails instead). */
      const uint8_t *bytes = op->code == TC_OBJ_DELETE ? NULL
                             : sr->saved || sr->from_rec ? sr->rec->data   /* op->buf may be sealed, or plaintext */
                             : (const uint8_t *) op->buf + (sr->off - op->offset);
      if (cop->replay_version && (req->reply.flags & TC_OSD_FLAG_REPLAY)) {
        /* A replay the object held already (or something newer): nothing
         * was written, the SYNC after the replay covers what is there. */
        tc_ulog_release(sr->rec);
        sr->rec = NULL;
        break;
      }
      sr->rec->version = tc_osd_hdr_of(&req->reply).reply.version;
      r = durable ? tc_ulog_add_durable(&cl->log, sr->rec, bytes) : tc_ulog_add(&cl->log, sr->rec, bytes);
      sr->rec = NULL;
      if (r < 0)
        tc_err("cluster: out of memory keeping an unsynced write of inode 0x%" PRIx64 " for replay: the write fails",
               op->inode);
      /* What the log holds, not what it says: cut entries keep buffers.
       * From half the write window on, so the other half takes the
       * writes that come while the sync runs (cluster_window.c). */
      if (cl->log.mem > cl->max_dirty / 2)
        cluster_auto_sync(cl);
    }
    break;
  case SR_LIST: {
    size_t k = req->reply.len / sizeof(struct tc_osd_list_entry);
    if (k && tc_grow(&cop->ents, &cop->cap, cop->nents + k, sizeof *cop->ents, 0) < 0)
      r = -ENOMEM;
    if (r == 0 && k) {
      memcpy(cop->ents + cop->nents, payload, k * sizeof *cop->ents);
      cop->nents += k;
    }
    break;
  }
  case SR_SYNC:
    break;
  }
  if (own_payload)
    free(payload);
  part_finish(sr, r);
}

/* The request of a WRITE_PARTIAL (the bytes) or a WRITE_IF (its condition,
 * then the sector): osd_proto.h. */
static void
sreq_fill_partial(struct sreq *sr, struct tc_frame_hdr *h)
{
  struct tc_objop *op = sr->cop->op;
  sr->iov.iov_base = op->buf;
  sr->iov.iov_len = op->len;
  sr->req.iov = &sr->iov;
  sr->req.iovcnt = 1;
  *h = tc_osd_rw_hdr(op->code == TC_OBJ_WRITE_IF ? TC_OP_WRITE_IF : TC_OP_WRITE_PARTIAL, op->inode, op->offset,
                     op->len, sr->cop->replay_version);
  if (op->code == TC_OBJ_WRITE_IF) {
    sr->cond = (struct tc_osd_write_if) { .hash = op->if_hash, .present = op->if_present };
    sr->iov_if[0] = (struct iovec) { &sr->cond, sizeof sr->cond };
    sr->iov_if[1] = sr->iov;
    sr->req.iov = sr->iov_if;
    sr->req.iovcnt = 2;
  }
}

/* Whether osd is the primary of some PG of the map. */
static bool
osd_leads_any(const struct tc_map *m, uint64_t osd)
{
  for (size_t i = 0; i < m->n_pools; i++)
    for (uint32_t k = 0; m->pgs[i] && k < m->pools[i].pg_count; k++)
      if (m->pgs[i][k].primary == osd)
        return true;
  return false;
}

/* Send sr to where it belongs now, or park it. Loop thread. */
void
cluster_sreq_dispatch(struct sreq *sr)
{
  struct cop *cop = sr->cop;
  struct tc_cluster *cl = cop->cl;
  if (cl->stopping) {
    part_finish(sr, -ECANCELED);
    return;
  }
  if (tc_now_ms() > cop->deadline) {
    int e = sr->last_err ? sr->last_err : -ETIMEDOUT;
    if (!cop->error)
      tc_warn("cluster: giving up on %s of inode 0x%" PRIx64 ": the cluster could not serve it in time (%s)",
              sr->kind == SR_LIST ? "a listing" : sr->kind == SR_SYNC ? "a sync" : tc_osd_op_name(
                cop->op->code == TC_OBJ_WRITE ? TC_OP_WRITE : cop->op->code == TC_OBJ_DELETE ? TC_OP_DELETE :
                cop->op->code == TC_OBJ_WRITE_PARTIAL ? TC_OP_WRITE_PARTIAL :
                cop->op->code == TC_OBJ_WRITE_IF ? TC_OP_WRITE_IF : TC_OP_READ),
              cop->op ? cop->op->inode : cop->first, strerror(-e));
    part_finish(sr, e == -EAGAIN || e == -ECONNRESET || e == -ECONNREFUSED ? -ETIMEDOUT : e);
    return;
  }
  uint64_t inode = cop->op ? cop->op->inode : cop->first;
  uint64_t osd = sr->osd;
  if (sr->kind == SR_SYNC && !tc_map_osd(cl->map, osd)) {
    /* The OSD left the cluster: what it acknowledged is written again to
     * the PGs' primaries and every OSD of the map synced (resync). In
     * that round it owes nothing: resyncing again for it would replay the
     * log for ever (a background sync never forgets the OSDs it syncs). */
    if (!cop->all_round)
      cop->resync = true;
    part_finish(sr, 0);
    return;
  }
  if (sr->kind != SR_SYNC) {
    uint64_t pool = TC_INODE_POOL(inode);
    const struct tc_pool_info *p = tc_map_pool(cl->map, pool);
    if (!p) {
      cluster_sreq_wait(sr, -ENXIO);
      return;
    }
    uint32_t pg = sr->kind == SR_LIST ? sr->pg : tc_map_pg_of(p, inode, sr->off);
    const struct tc_pg_info *pgi = tc_map_pg(cl->map, pool, pg);
    if (!pgi || !pgi->primary) {
      cluster_sreq_wait(sr, -EAGAIN);
      return;
    }
    osd = pgi->primary;
  }
  if (sr->kind == SR_SYNC && cop->all_round && !osd_leads_any(cl->map, osd)) {
    /* The round after a replay: every unsynced write went again to the
     * PGs' current primaries, whose SYNCs reach their members, so an OSD
     * that leads no PG owes it nothing (it may be the silent one the
     * replay went around: waiting for it held the sync until the
     * operation's timeout). */
    part_finish(sr, 0);
    return;
  }
  bool sync_led_none = sr->kind == SR_SYNC && !osd_leads_any(cl->map, osd);
  struct tc_msgr_conn *conn = sync_led_none && cluster_link_timed_out(cl, osd) ? NULL : cluster_link_get(cl, osd);
  if (!conn && sync_led_none) {
    /* Unreachable, or silent (our last connection to it timed out), and
     * primary of no PG any more (its PGs moved): what it acknowledged
     * cannot be synced there, so it is written again to the PGs'
     * primaries (resync: replay, then sync all). Waiting for it to leave
     * the map held the sync for up to a lease's time; connecting to a
     * silent one again, for a handshake timeout. */
    cop->resync = true;
    part_finish(sr, 0);
    return;
  }
  if (!conn) {
    cluster_request_refresh(cl);
    cluster_sreq_wait(sr, -ECONNREFUSED);
    return;
  }
  sr->osd = osd;
  memset(&sr->req, 0, sizeof sr->req);
  struct tc_frame_hdr *h = &sr->req.hdr;
  static struct iovec noiov;
  sr->req.iov = &noiov;
  sr->req.iovcnt = 0;
  sr->req.done = sreq_done;
  sr->req.arg = sr;
  if (sr->kind == SR_SYNC)
    h->opcode = TC_OP_SYNC;
  else if (sr->kind == SR_LIST) {
    const struct tc_pool_info *p = tc_map_pool(cl->map, TC_INODE_POOL(inode));
    *h = tc_osd_list_hdr(cop->first, cop->last, sr->pg, p->pg_count);
  }
  else {
    struct tc_objop *op = cop->op;
    switch (op->code) {
    case TC_OBJ_READ:
    case TC_OBJ_BITMAP:
      *h = tc_osd_rw_hdr(TC_OP_READ, op->inode, sr->off, sr->len, op->min_rev);
      sr->req.rbuf = sr->rbuf;
      sr->req.rbuf_len = sr->len;
      break;
    case TC_OBJ_WRITE:
      *h = tc_osd_rw_hdr(TC_OP_WRITE, op->inode, sr->off, sr->len, cop->replay_version);
      sr->iov.iov_base = (uint8_t *) op->buf + (sr->off - op->offset);
      sr->iov.iov_len = sr->len;
      sr->req.iov = &sr->iov;
      sr->req.iovcnt = 1;
      if (sr->from_rec)
        sr->iov.iov_base = sr->rec->data;   /* sealed out of place: it stays the record */
      else if (op->scratch && sr->rec && sr->rec->data) {
        /* The messenger may seal the buffer in place (gcm): the record
         * takes the bytes first (the copy it takes at the acknowledgement
         * otherwise), and every resend starts from it again, so neither a
         * retry nor a replay ever sends ciphertext as data. */
        if (sr->saved)
          memcpy(sr->iov.iov_base, sr->rec->data, sr->len);
        else
          memcpy(sr->rec->data, sr->iov.iov_base, sr->len);
        sr->saved = true;
        sr->req.flags = TC_MSGR_INPLACE;
      }
      /* In gcm the primary then passes the bytes on to its secondaries
       * as they came, sealing nothing again (msgr.h, "Own keys"); a
       * smaller write costs less sealed again than the key of its own. */
      if (sr->len >= OWN_KEY_MIN)
        sr->req.flags |= TC_MSGR_OWN_KEY;
      break;
    case TC_OBJ_DELETE:
      *h = tc_osd_rw_hdr(TC_OP_DELETE, op->inode, sr->off, sr->len, cop->replay_version);
      break;
    case TC_OBJ_WRITE_PARTIAL:
    case TC_OBJ_WRITE_IF:
      sreq_fill_partial(sr, h);
      break;
    case TC_OBJ_SYNC:
      break;
    }
    if ((op->flags & TC_OBJ_FUA) && op->code != TC_OBJ_READ && op->code != TC_OBJ_BITMAP)
      h->flags |= TC_OSD_FLAG_FUA;
    if (cop->replay_version)
      h->flags |= TC_OSD_FLAG_REPLAY;
  }
  tc_debug("cluster: send %s inode 0x%" PRIx64 " offset %" PRIu64 " len %u to OSD %" PRIu64 " (sreq %p)",
           tc_osd_op_name(h->opcode), inode, sr->off, sr->len, osd, (void *) sr);
  if (tc_msgr_call(conn, &sr->req) < 0) {
    cluster_request_refresh(cl);
    cluster_sreq_wait(sr, -ECONNRESET);
  }
}

/* (Re)build a SYNC's parts: one per OSD written since the last SYNC, or
 * every OSD of the map when a target was lost. */
void
cluster_cop_start_sync(struct cop *cop, bool all)
{
  struct tc_cluster *cl = cop->cl;
  bool lost = false;
  if (all || cl->dirty_lost)
    for (size_t i = 0; i < cl->map->n_osds && !lost; i++)
      lost = dirty_add(cl, cl->map->osds[i].id) < 0;
  cop->resync = false;
  if (cl->unsynced_lost && !all) {
    /* A written OSD's connection closed since: replay, then sync all. */
    cl->unsynced_lost = false;
    cop->resync = true;
  }
  cop->all_round = all;
  cop->sync_seq = cl->log.seq;
  size_t n = cl->ndirty;
  if (lost || n > (size_t) cop->nparts) {
    /* Out of memory listing the OSDs to sync: the flush fails (and the
     * next one tries every OSD again). */
    struct sreq *np = lost ? NULL : realloc(cop->parts, n * sizeof *np);
    if (!np) {
      struct tc_objop *op = cop->op;
      op->result = -ENOMEM;
      cluster_cop_free(cop);
      op->done(op);
      return;
    }
    cop->parts = np;
  }
  cop->nparts = (int) n;
  if (n == 0) {
    /* Nothing written since the last SYNC: done. */
    struct tc_objop *op = cop->op;
    op->result = 0;
    cluster_cop_free(cop);
    op->done(op);
    return;
  }
  STAT_INC(cl, syncs);
  memset(cop->parts, 0, n * sizeof *cop->parts);
  cop->pending = (int) n;
  for (size_t i = 0; i < n; i++) {
    cop->parts[i].cop = cop;
    cop->parts[i].kind = SR_SYNC;
    cop->parts[i].osd = cl->dirty[i];
  }
  /* A background sync leaves the set to the next flush: a flush must not
   * return before every OSD it depends on synced. */
  if (!cop->internal) {
    cl->ndirty = 0;
    cl->dirty_lost = false;
  }
  /* A resync waits a little: the lost OSD may still be in the map. */
  for (size_t i = 0; i < n; i++) {
    if (all)
      cluster_sreq_wait(&cop->parts[i], -ECONNRESET);
    else
      cluster_sreq_dispatch(&cop->parts[i]);
  }
}

/* On the loop: start an operation. */
void
cluster_cop_start(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct cop *cop = arg;
  if (cop->op && cop->op->code == TC_OBJ_SYNC) {
    /* The loop keeps polling while the flush runs (evloop.h). */
    cop->poll_held = true;
    tc_evloop_poll_hold(cop->cl->loop, 1);
    cluster_cop_start_sync(cop, false);
    return;
  }
  if (cluster_replay_holds(cop))
    return;
  int n = cop->nparts;
  cop->pending = n;
  for (int i = 0; i < n; i++)
    cluster_sreq_dispatch(&cop->parts[i]);
}

static int
cluster_submit(void *ctx, struct tc_objop *op)
{
  struct tc_cluster *cl = ctx;
  if (op->code != TC_OBJ_SYNC && op->code != TC_OBJ_WRITE_PARTIAL &&
      (op->offset % TC_SECTOR || op->len % TC_SECTOR || op->len == 0))
    return -EINVAL;
  if ((op->code == TC_OBJ_WRITE_PARTIAL && (op->len == 0 || op->len > TC_OSD_MAX_OP_BYTES)) ||
      (op->code == TC_OBJ_WRITE_IF && op->len != TC_SECTOR))
    return -EINVAL;
  /* Room in the write window first: what follows allocates its records. */
  uint64_t win = op->code == TC_OBJ_WRITE || op->code == TC_OBJ_WRITE_PARTIAL || op->code == TC_OBJ_WRITE_IF ? op->len : 0;
  win = cluster_window_enter(cl, win);
  struct cop *cop = calloc(1, sizeof *cop);
  if (!cop) {
    cluster_window_undo(cl, win);
    return -ENOMEM;
  }
  cop->cl = cl;
  cop->op = op;
  cop->win_bytes = win;
  cop->deadline = tc_now_ms() + cl->op_timeout_ms;
  if (op->code != TC_OBJ_SYNC) {
    bool split = op->code == TC_OBJ_READ || op->code == TC_OBJ_BITMAP;
    uint32_t step = split ? TC_OSD_MAX_OP_BYTES : op->len;
    int n = (int) ((op->len + step - 1) / step);
    if (!(cop->parts = calloc(n, sizeof *cop->parts))) {
      free(cop);
      return -ENOMEM;
    }
    cop->nparts = n;
    for (int i = 0; i < n; i++) {
      struct sreq *sr = &cop->parts[i];
      sr->cop = cop;
      sr->kind = SR_DATA;
      sr->off = op->offset + (uint64_t) i * step;
      sr->len = op->len - (uint32_t) i * step < step ? op->len - (uint32_t) i * step : step;
      if (op->code == TC_OBJ_READ)
        sr->rbuf = (uint8_t *) op->buf + (sr->off - op->offset);
      else if (op->code == TC_OBJ_BITMAP && !(sr->rbuf = malloc(sr->len))) {
        cluster_cop_free(cop);
        return -ENOMEM;
      }
      /* A write's replay record, reserved now: without memory the write
       * fails here, never acknowledged without a record. */
      else if (!split && !(sr->rec = tc_ulog_reserve(&cl->log, op->inode, sr->off, sr->len, op->code != TC_OBJ_DELETE,
                                                     op->code == TC_OBJ_WRITE_PARTIAL))) {
        cluster_cop_free(cop);
        return -ENOMEM;
      }
      else if (op->code == TC_OBJ_WRITE && op->transform) {
        /* The bytes the OSDs store go straight into the record. */
        if (op->transform(op->transform_ctx, sr->off, (const uint8_t *) op->buf + (sr->off - op->offset),
                          sr->rec->data, sr->len) < 0) {
          tc_err("cluster: write of inode 0x%" PRIx64 ": %s", op->inode, tc_last_error());
          cluster_cop_free(cop);
          return -EIO;
        }
        sr->from_rec = true;
      }
    }
  }
  if (tc_evloop_submit(cl->loop, cluster_cop_start, cop) < 0) {
    cluster_cop_free(cop);
    return -ENOMEM;
  }
  STAT_INC(cl, ops);
  return 0;
}

struct tc_objstore
tc_cluster_objstore(struct tc_cluster *cl)
{
  return (struct tc_objstore) { .submit = cluster_submit, .ctx = cl };
}

int
tc_cluster_run(struct tc_cluster *cl, struct tc_objop *op)
{
  if (op->len == 0 && op->code != TC_OBJ_SYNC)
    return tc_error(EINVAL, "cluster: cannot submit the operation: %s", strerror(EINVAL));
  struct tc_objstore os = tc_cluster_objstore(cl);
  int r = tc_objstore_run(&os, op, 1, 0, NULL, NULL);
  if (r < 0)
    return tc_error(-r, "cluster: inode 0x%" PRIx64 " offset %" PRIu64 ": %s", op->inode, op->offset, strerror(-r));
  return 0;
}
