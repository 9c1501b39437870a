/* WRITE and DELETE on the PG's primary: the object's next version, the
 * local write, the fan-out to the secondaries (SEC_WRITE / SEC_DELETE), and
 * the acknowledgement once pg_minsize replicas hold it. A secondary that
 * misses the write is marked stale for the object and gets no more writes
 * of it until recovery replaced it whole.
 *
 * Ordering: everything runs on the loop thread and the secondaries get
 * their SEC_WRITEs over one connection each, in version order, so no
 * per-object lock is needed. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "osd.h"

struct wop {
  struct osd_op_base b;
  uint64_t obj_off, version;
  void *payload;               /* the request's: the data the SEC_WRITEs send */
  int nreqs, pending, acks, need, replied;
  struct iovec iov;            /* what the SEC_ requests send: lives as long as the op */
  struct tc_msgr_req reqs[TC_MAX_PG_SIZE];
  int slots[TC_MAX_PG_SIZE];
};

static void
wop_finish(struct wop *w)
{
  struct osd *o = w->b.o;
  if (!w->replied) {
    tc_warn("osd %" PRIu64 ": %s inode %#" PRIx64 " offset %" PRIu64 ": only %d of %d replicas took it",
            o->osd_num, tc_osd_op_name(w->b.hdr.opcode), w->b.inode, w->b.offset, w->acks, w->need);
    osd_client_reply(w->b.cl, &w->b.hdr, -EIO, 0, 0, NULL, 0);
  }
  free(w->payload);
  osd_op_free(w);
}

/* Slot's copy of the object missed the write. */
static void
wop_stale(struct wop *w, int slot)
{
  struct osd_pg *pg = osd_op_pg(&w->b);
  if (pg)
    osd_pg_mark_stale(pg, w->b.inode, w->obj_off, slot);
}

static void
wop_reply_if_enough(struct wop *w)
{
  if (!w->replied && w->acks >= w->need) {
    w->replied = 1;
    osd_client_reply(w->b.cl, &w->b.hdr, 0, 0, w->version, NULL, 0);
  }
}

static void
wop_sub_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct wop *w = arg;
  struct osd *o = w->b.o;
  int i = (int) (req - w->reqs);
  int st = err ? err : req->reply.status;
  free(req->reply_payload);
  if (st < 0) {
    wop_stale(w, w->slots[i]);
    if (!err)
      tc_warn("osd %" PRIu64 ": %s of inode %#" PRIx64 " offset %" PRIu64 " on a secondary failed: %s",
              o->osd_num, tc_osd_op_name(req->hdr.opcode), w->b.inode, w->b.offset, strerror(-st));
  }
  else
    w->acks++;
  wop_reply_if_enough(w);
  if (--w->pending == 0)
    wop_finish(w);
}

/* Send the write to the secondary in slot s. */
static void
wop_send(struct wop *w, struct osd_pg *pg, int s, const struct osd_req *r)
{
  struct osd *o = w->b.o;
  struct tc_msgr_conn *pc = osd_peer_conn(o, pg->osd_set[s]);
  if (!pc) {
    wop_stale(w, s);
    return;
  }
  struct osd_peer *peer = osd_peer_get(o, pg->osd_set[s]);
  if (peer)
    peer->dirty = true;
  int n = w->nreqs++;
  struct tc_msgr_req *q = &w->reqs[n];
  w->slots[n] = s;
  q->hdr = tc_osd_rw_hdr(r->op == TC_OP_WRITE ? TC_OP_SEC_WRITE : TC_OP_SEC_DELETE, r->inode, r->offset,
                         r->len, w->version);
  q->iov = &w->iov;
  q->iovcnt = r->op == TC_OP_WRITE ? 1 : 0;
  q->done = wop_sub_done;
  q->arg = w;
  w->pending++;
  if (tc_msgr_call(pc, q) < 0) {
    w->pending--;
    wop_stale(w, s);
  }
}

void
osd_primary_write(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                  const struct osd_req *r, void **payload)
{
  int err;
  struct osd_pg *pg = osd_pg_for(o, r->inode, r->offset, &err);
  if (!pg) {
    osd_client_reply(cl, hdr, err, 0, 0, NULL, 0);
    return;
  }
  uint64_t start = osd_obj_start(o, r->offset);
  struct osd_obj *ob = osd_objmap_add(&pg->objs, r->inode, start);
  if (!ob) {
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  if (ob->stale >> pg->my_slot & 1) {
    /* Our copy is old: bring it up to date first; the client retries. */
    osd_recovery_now(o, pg, ob);
    o->eagain++;
    osd_client_reply(cl, hdr, -EAGAIN, 0, 0, NULL, 0);
    return;
  }
  uint8_t good = osd_pg_good_slots(o, pg, ob);
  if ((uint32_t) __builtin_popcount(good) < pg->minsize) {
    o->eagain++;
    osd_client_reply(cl, hdr, -EAGAIN, 0, 0, NULL, 0);
    return;
  }
  struct wop *w = osd_op_new(sizeof *w, o, cl, hdr, pg, r->inode, r->offset);
  if (!w) {
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  uint64_t version = ++ob->version;
  int rc = r->op == TC_OP_WRITE
           ? tc_store_write(o->store, r->inode, r->offset, r->len, r->data, version)
           : tc_store_delete_version(o->store, r->inode, r->offset, r->len, version);
  if (rc < 0) {
    int e = errno ? errno : EIO;
    tc_err("osd %" PRIu64 ": %s: %s", o->osd_num, tc_osd_op_name(r->op), tc_last_error());
    w->replied = 1;
    osd_client_reply(cl, hdr, -e, 0, 0, NULL, 0);
    osd_op_free(w);
    return;
  }
  w->obj_off = start;
  w->version = version;
  w->payload = *payload;       /* r->data points into it: the op owns it now */
  *payload = NULL;
  w->acks = 1;
  w->need = (int) pg->minsize;
  w->pending = 1;   /* ours, dropped below: no early finish while sending */
  if (r->op == TC_OP_WRITE)
    w->iov = (struct iovec) { (void *) r->data, r->len };
  for (uint32_t s = 0; s < pg->size; s++)
    if ((good >> s & 1) && (int) s != pg->my_slot)
      wop_send(w, pg, (int) s, r);
  wop_reply_if_enough(w);
  if (--w->pending == 0)
    wop_finish(w);
}
