/* WRITE and DELETE on the PG's primary: the object's next version, the
 * fan-out to the secondaries (SEC_WRITE / SEC_DELETE), the local write, and
 * the acknowledgement once pg_minsize replicas hold it. A secondary that
 * misses the write is marked stale for the object and gets no more writes
 * of it until recovery replaced it whole.
 *
 * Fan-out first: the SEC_WRITEs are handed to the messenger before the
 * local write, which osd_local.c runs once the messenger wrote them to the
 * sockets (the end of this loop round), so the secondaries' network and
 * store work overlaps ours. The reply still waits for the local write: the
 * primary serves reads from its own store, so it never acknowledges a
 * write its store does not hold yet.
 *
 * Ordering: everything runs on the loop thread; the version is taken
 * before anything is sent, the secondaries get their SEC_WRITEs over one
 * connection each in version order, and the local writes run in the same
 * order (one FIFO), so no per-object lock is needed.
 *
 * A local store failure after the SEC_WRITEs went out: the secondaries
 * that take it hold version v, our store does not. The op is answered with
 * the store's error at once and never acknowledged (replied is set, so
 * the secondaries' answers cannot ack it), our slot is marked stale for
 * the object, so the next write of it gets -EAGAIN and recovery copies
 * version v back from a secondary that holds it: the versions stay
 * consistent (the newest wins, ours is known old), and the client's retry
 * writes the same bytes again at v + 1. If no SEC_WRITE went out nobody
 * holds v: nothing is stale (v is simply never used, as before).
 *
 * FUA (osd_proto.h): the local write is followed by a store sync
 * (osd_sync_async) and the SEC_WRITEs carry the flag, so each secondary
 * answers once synced; only durable copies count towards pg_minsize, and
 * the reply carries the flag. A secondary that answers without the flag
 * (built before FUA) gets a SEC_SYNC on the same request before it
 * counts. */
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
  struct osd_local_write lw;   /* first member after the base: see wop_of */
  uint64_t obj_off, version;
  void *payload;               /* the request's: the data the SEC_WRITEs and the local write use */
  bool fua;                    /* count only durable copies, reply with TC_OSD_FLAG_FUA */
  bool local_written;          /* our store holds it: the reply may go */
  int nreqs, pending, acks, need, replied;
  struct iovec iov;            /* what the SEC_ requests send: lives as long as the op */
  struct tc_msgr_req reqs[TC_MAX_PG_SIZE];
  int slots[TC_MAX_PG_SIZE];
  uint64_t osds[TC_MAX_PG_SIZE];   /* the secondary each request went to */
  bool syncing[TC_MAX_PG_SIZE];    /* the request is now a SEC_SYNC after a plain answer */
};

static struct wop *
wop_of(struct osd_local_write *lw)
{
  return (struct wop *) ((char *) lw - offsetof(struct wop, lw));
}

static void
wop_finish(struct wop *w)
{
  struct osd *o = w->b.o;
  if (!w->replied) {
    tc_warn("osd %" PRIu64 ": %s inode %#" PRIx64 " offset %" PRIu64 ": only %d of %d replicas took it%s",
            o->osd_num, tc_osd_op_name(w->b.hdr.opcode), w->b.inode, w->b.offset, w->acks, w->need,
            w->fua ? " durably" : "");
    osd_client_reply(w->b.cl, &w->b.hdr, -EIO, 0, 0, NULL, 0);
  }
  free(w->payload);
  osd_op_free(w);
}

static void
wop_put(struct wop *w)
{
  if (--w->pending == 0)
    wop_finish(w);
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
  if (!w->replied && w->local_written && w->acks >= w->need) {
    w->replied = 1;
    osd_client_reply_flags(w->b.cl, &w->b.hdr, 0, w->version, w->fua ? TC_OSD_FLAG_FUA : 0);
  }
}

/* Versions carry the primary's term in their high bits: the next version
 * of an object is above every version it has and at least the /pg/config
 * revision this primary locked the PG at, shifted. A write a deposed
 * primary made to its own store alone (its members refused it: it left
 * the set, nobody lists it) then never ties with, nor beats, a write of
 * the primaries that followed, should the PG come back to it; with plain
 * counters the two could hold the same version and peering would take
 * either (tests/test-osd-left-set.sh). A term of more than 2^24 writes
 * of one object runs into the next term's base: still ordered, merely
 * without the margin. */
#define VERSION_TERM_SHIFT 24

static uint64_t
next_version(const struct osd_pg *pg, uint64_t cur)
{
  uint64_t base = pg->lock_rev < (UINT64_C(1) << (64 - VERSION_TERM_SHIFT)) ? pg->lock_rev << VERSION_TERM_SHIFT : 0;
  return cur + 1 > base ? cur + 1 : base;
}

static void
wop_sub_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct wop *w = arg;
  struct osd *o = w->b.o;
  int i = (int) (req - w->reqs);
  int st = err ? err : req->reply.status;
  free(req->reply_payload);
  if (req->sent_sealed)
    tc_counter_inc(o->m ? o->m->sec_forwarded : NULL);
  if (st < 0 && w->syncing[i]) {
    /* Written there but not durable: as a failed SEC_SYNC of a SYNC. */
    tc_warn("osd %" PRIu64 ": SEC_SYNC on osd %" PRIu64 " for a FUA write failed: %s", o->osd_num, w->osds[i],
            strerror(-st));
    o->unsynced_lost++;   /* what others wrote there unsynced may be gone (osd_primary_sync.c) */
    osd_peer_mark_down(o, w->osds[i], -st);
  }
  else if (st < 0) {
    wop_stale(w, w->slots[i]);
    if (st == -EBUSY && !err)
      osd_pg_lock_lost(&w->b, w->slots[i]);
    if (!err)
      tc_warn("osd %" PRIu64 ": %s of inode %#" PRIx64 " offset %" PRIu64 " on a secondary failed: %s",
              o->osd_num, tc_osd_op_name(req->hdr.opcode), w->b.inode, w->b.offset, strerror(-st));
  }
  else if (w->fua && !w->syncing[i] && !(req->reply.flags & TC_OSD_FLAG_FUA)) {
    /* An OSD from before FUA wrote it without a sync: sync it, then count
     * it (the request is idle again once done runs: reuse it). */
    struct tc_msgr_conn *pc = osd_peer_conn(o, w->osds[i]);
    if (pc) {
      memset(req, 0, sizeof *req);
      req->hdr.opcode = TC_OP_SEC_SYNC;
      req->done = wop_sub_done;
      req->arg = w;
      w->syncing[i] = true;
      if (tc_msgr_call(pc, req) == 0)
        return;   /* still pending */
    }
    tc_warn("osd %" PRIu64 ": osd %" PRIu64 " took a FUA write without syncing and cannot be synced now",
            o->osd_num, w->osds[i]);
    struct osd_peer *peer = osd_peer_get(o, w->osds[i]);
    if (peer)
      peer->dirty = true;   /* not counted; the next SYNC covers it as any plain write */
  }
  else
    w->acks++;
  wop_reply_if_enough(w);
  wop_put(w);
}

/* Send the write to the secondary in slot s; sealed: its payload as the
 * client sealed it, or NULL (the messenger takes its own reference). */
static void
wop_send(struct wop *w, struct osd_pg *pg, int s, const struct osd_req *r, struct tc_msgr_sealed *sealed)
{
  struct osd *o = w->b.o;
  struct tc_msgr_conn *pc = osd_peer_conn(o, pg->osd_set[s]);
  if (!pc) {
    wop_stale(w, s);
    return;
  }
  /* A FUA write is durable there when answered: no SEC_SYNC owed for it. */
  struct osd_peer *peer = osd_peer_get(o, pg->osd_set[s]);
  if (peer && !w->fua)
    peer->dirty = true;
  int n = w->nreqs++;
  struct tc_msgr_req *q = &w->reqs[n];
  w->slots[n] = s;
  w->osds[n] = pg->osd_set[s];
  q->hdr = tc_osd_rw_hdr(r->op == TC_OP_WRITE ? TC_OP_SEC_WRITE : TC_OP_SEC_DELETE, r->inode, r->offset,
                         r->len, w->version);
  if (w->fua)
    q->hdr.flags = TC_OSD_FLAG_FUA;
  q->iov = &w->iov;
  q->iovcnt = r->op == TC_OP_WRITE ? 1 : 0;
  q->sealed = sealed;   /* on a gcm link sent as it came: nothing sealed again */
  q->done = wop_sub_done;
  q->arg = w;
  w->pending++;
  if (tc_msgr_call(pc, q) < 0) {
    w->pending--;
    wop_stale(w, s);
  }
}

static void
wop_local_synced(struct osd *o, void *arg, int err)
{
  struct wop *w = arg;
  if (err)
    tc_err("osd %" PRIu64 ": syncing a FUA %s of inode %#" PRIx64 " offset %" PRIu64 ": %s", o->osd_num,
           tc_osd_op_name(w->b.hdr.opcode), w->b.inode, w->b.offset, strerror(err));
  else
    w->acks++;
  wop_reply_if_enough(w);
  wop_put(w);
}

/* The local write ran (osd_local.c). */
static void
wop_local_done(struct osd *o, struct osd_local_write *lw, int err)
{
  struct wop *w = wop_of(lw);
  if (err) {
    tc_err("osd %" PRIu64 ": %s: %s", o->osd_num, tc_osd_op_name(w->b.hdr.opcode), tc_last_error());
    if (w->nreqs > 0) {
      /* Secondaries may hold this version and we do not (see the top). */
      struct osd_pg *pg = osd_op_pg(&w->b);
      if (pg) {
        osd_pg_mark_stale(pg, w->b.inode, w->obj_off, pg->my_slot);
        struct osd_obj *ob = osd_objmap_get(&pg->objs, w->b.inode, w->obj_off);
        if (ob)
          osd_recovery_now(o, pg, ob);
      }
    }
    if (!w->replied) {
      w->replied = 1;
      osd_client_reply(w->b.cl, &w->b.hdr, -err, 0, 0, NULL, 0);
    }
    wop_put(w);
    return;
  }
  w->local_written = true;
  if (!w->fua)
    w->acks++;
  else {
    w->pending++;
    if (osd_sync_async(o, wop_local_synced, w) < 0) {
      tc_err("osd %" PRIu64 ": FUA: %s", o->osd_num, tc_last_error());
      w->pending--;
    }
  }
  wop_reply_if_enough(w);
  wop_put(w);
}

static void primary_write(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                          const struct osd_req *r, void **payload, struct tc_msgr_sealed *sealed);

void
osd_primary_write(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                  const struct osd_req *r, void **payload, struct tc_msgr_sealed *sealed)
{
  primary_write(o, cl, hdr, r, payload, sealed);
  /* The messenger holds its own reference while a SEC_WRITE needs it. */
  tc_msgr_sealed_put(sealed);
}

static void
primary_write(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
              const struct osd_req *r, void **payload, struct tc_msgr_sealed *sealed)
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
  if (r->replay_version && ob->version >= r->replay_version) {
    /* A replay the object holds already, or something newer over it. The
     * client syncs next: the members with a current copy are synced with
     * us (theirs may be as unsynced as the write replayed). */
    for (uint32_t s = 0; s < pg->size; s++)
      if ((good >> s & 1) && (int) s != pg->my_slot) {
        struct osd_peer *peer = osd_peer_get(o, pg->osd_set[s]);
        if (peer)
          peer->dirty = true;
      }
    o->replays_skipped++;
    osd_client_reply_flags(cl, hdr, 0, ob->version, TC_OSD_FLAG_REPLAY);
    return;
  }
  struct wop *w = osd_op_new(sizeof *w, o, cl, hdr, pg, r->inode, r->offset);
  if (!w) {
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  w->obj_off = start;
  w->version = ob->version = next_version(pg, ob->version);
  w->fua = r->fua;
  w->payload = *payload;       /* r->data points into it: the op owns it now */
  *payload = NULL;
  w->need = (int) pg->minsize;
  w->pending = 1;   /* ours, dropped below: no early finish while sending */
  if (r->op == TC_OP_WRITE)
    w->iov = (struct iovec) { (void *) r->data, r->len };
  for (uint32_t s = 0; s < pg->size; s++)
    if ((good >> s & 1) && (int) s != pg->my_slot)
      wop_send(w, pg, (int) s, r, sealed);
  w->lw = (struct osd_local_write) { .is_delete = r->op != TC_OP_WRITE, .inode = r->inode, .offset = r->offset,
                                     .len = r->len, .data = r->data, .version = w->version,
                                     .done = wop_local_done };
  w->pending++;
  osd_local_queue(o, &w->lw);
  wop_put(w);
}
