/* SYNC: make durable every write and delete this OSD acknowledged: the
 * local store, then SEC_SYNC to every peer written since its last one. A
 * secondary that fails its SEC_SYNC is marked down (its PGs re-peer without
 * it) and the SYNC answers -EAGAIN: the client retries, and the next SYNC
 * covers the members that remain. A peer lost while it held unsynced
 * writes (marked down while dirty: a kill -9 took them) makes the next
 * SYNC of every client answer -EAGAIN too, once: those writes may now be
 * on fewer than pg_minsize copies, here alone or nowhere, and the client
 * writes its unsynced writes again (its replay) before it syncs; before,
 * the SYNC skipped the lost peer and said durable what one copy held.
 * A client that replayed since counts as having seen the losses before
 * its replay began (struct osd_client), so one loss costs one replay.
 * The local sync runs on the sync thread
 * (osd_sync.c) at the same time as the secondaries' (the flushes overlap):
 * the SYNC costs one replicated commit, not two in a row. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "osd.h"

struct sop {
  struct osd_op_base b;
  int pending, failed, local_err;
  size_t n;
  struct tc_msgr_req *reqs;
  uint64_t *osds;
};

static void
sop_finish(struct sop *p)
{
  osd_client_reply(p->b.cl, &p->b.hdr, p->local_err ? -EIO : p->failed ? -EAGAIN : 0, 0, 0, NULL, 0);
  free(p->reqs);
  free(p->osds);
  osd_op_free(p);
}

static void
sop_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct sop *p = arg;
  int st = err ? err : req->reply.status;
  free(req->reply_payload);
  if (st < 0) {
    size_t i = (size_t) (req - p->reqs);
    tc_warn("osd %" PRIu64 ": SEC_SYNC on osd %" PRIu64 " failed: %s", p->b.o->osd_num, p->osds[i], strerror(-st));
    p->failed++;
    /* Other clients' unsynced writes there may be gone too. */
    p->b.o->unsynced_lost++;
    p->b.cl->lost_seen = p->b.o->unsynced_lost;
    osd_peer_mark_down(p->b.o, p->osds[i], -st);
  }
  if (--p->pending == 0)
    sop_finish(p);
}

static void
local_done(struct osd *o, void *arg, int err)
{
  struct sop *p = arg;
  if (err) {
    tc_err("osd %" PRIu64 ": SYNC: %s", o->osd_num, strerror(err));
    p->local_err = err;
  }
  if (--p->pending == 0)
    sop_finish(p);
}

void
osd_primary_sync(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr)
{
  struct sop *p = osd_op_new(sizeof *p, o, cl, hdr, NULL, 0, 0);
  if (p) {
    p->reqs = calloc(o->n_peers + 1, sizeof *p->reqs);
    p->osds = calloc(o->n_peers + 1, sizeof *p->osds);
  }
  if (!p || !p->reqs || !p->osds) {
    if (p) {
      free(p->reqs);
      free(p->osds);
    }
    osd_op_free(p);
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  p->pending = 1;
  if (cl->replayed) {   /* its replay covers the losses before it began */
    if (cl->replay_floor > cl->lost_seen)
      cl->lost_seen = cl->replay_floor;
    cl->replayed = false;
  }
  if (cl->lost_seen != o->unsynced_lost) {
    tc_warn("osd %" PRIu64 ": SYNC: a peer was lost with unsynced writes; the client writes its own again",
            o->osd_num);
    cl->lost_seen = o->unsynced_lost;
    p->failed++;
  }
  size_t npeers = o->n_peers;
  for (size_t i = 0; i < npeers; i++) {
    if (o->peers[i].dirty && (o->peers[i].down || !o->peers[i].conn)) {
      /* No connection to sync it on: as lost (osd_peer_mark_down). */
      o->peers[i].dirty = false;
      o->unsynced_lost++;
      cl->lost_seen = o->unsynced_lost;
      p->failed++;
      continue;
    }
    if (!o->peers[i].dirty || o->peers[i].down || !o->peers[i].conn)
      continue;
    o->peers[i].dirty = false;
    struct tc_msgr_req *q = &p->reqs[p->n];
    p->osds[p->n] = o->peers[i].osd_num;
    p->n++;
    q->hdr.opcode = TC_OP_SEC_SYNC;
    q->done = sop_done;
    q->arg = p;
    p->pending++;
    if (tc_msgr_call(o->peers[i].conn, q) < 0) {
      p->pending--;
      p->failed++;
    }
  }
  p->pending++;
  if (osd_sync_async(o, local_done, p) < 0) {
    tc_err("osd %" PRIu64 ": SYNC: %s", o->osd_num, tc_last_error());
    p->local_err = ENOMEM;
    p->pending--;
  }
  if (--p->pending == 0)
    sop_finish(p);
}
