/* Recovery: copy the newest version of each object whose copy is stale on
 * some member (after peering, or after a missed write) to those members,
 * whole (SEC_READ of the object from a current copy, SEC_WRITE_STABLE to
 * each stale member, or the local store), a few objects at a time in the
 * background while I/O goes on; first for an object a client touches.
 * A copy is only declared current if the object's version did not move
 * while it was being copied; otherwise the walk comes back to it. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "osd.h"

#define RECOVERY_PARALLEL 8

struct rec_op {
  struct osd_op_base b;       /* no client: recovery does not hold peering back */
  uint64_t version;
  uint8_t targets;
  int pending;
  uint64_t bitmap;
  uint8_t *data;              /* 8-byte bitmap + block */
  struct iovec iov;
  struct tc_msgr_req read_req;
  struct tc_msgr_req reqs[TC_MAX_PG_SIZE];
  int slots[TC_MAX_PG_SIZE];
};

/* The object being recovered, if its PG did not re-peer meanwhile. */
static struct osd_obj *
rec_obj(struct rec_op *r, struct osd_pg **pgp)
{
  struct osd_pg *pg = osd_op_pg(&r->b);
  if (!pg || pg->epoch != r->b.epoch)
    return NULL;
  *pgp = pg;
  return osd_objmap_get(&pg->objs, r->b.inode, r->b.offset);
}

static void
kick_deferred(struct tc_evloop *loop, void *arg)
{
  struct osd *o = arg;
  o->recovery_kick_pending = 0;
  if (!o->stopping)
    osd_recovery_kick(o);
}

static void
rec_finish(struct rec_op *r)
{
  struct osd *o = r->b.o;
  struct osd_pg *pg;
  struct osd_obj *ob = rec_obj(r, &pg);
  if (ob)
    ob->recovering = 0;
  tc_debug("osd %" PRIu64 ": recovery of inode %#" PRIx64 " offset %" PRIu64 " ends%s", o->osd_num, r->b.inode,
           r->b.offset, ob ? "" : " (peering moved on)");
  o->recovery_inflight--;
  free(r->data);
  osd_op_free(r);
  /* Not from here: that could recurse through every object. */
  if (!o->stopping && !o->recovery_kick_pending && tc_evloop_defer(o->loop, kick_deferred, o) == 0)
    o->recovery_kick_pending = 1;
}

/* One target holds the version now. */
static void
rec_target_ok(struct rec_op *r, int slot)
{
  struct osd_pg *pg;
  struct osd_obj *ob = rec_obj(r, &pg);
  if (!ob || ob->version != r->version || !(ob->stale >> slot & 1))
    return;
  ob->stale &= (uint8_t) ~(1u << slot);
  if (!ob->stale) {
    pg->n_stale--;
    if (!pg->n_stale)
      tc_info("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 " recovered: every object on every member",
              r->b.o->osd_num, pg->pool, pg->pg);
  }
  r->b.o->recovered++;
  tc_counter_inc(r->b.o->m ? r->b.o->m->recovered : NULL);
}

static void
push_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct rec_op *r = arg;
  int i = (int) (req - r->reqs);
  int st = err ? err : req->reply.status;
  free(req->reply_payload);
  if (st >= 0)
    rec_target_ok(r, r->slots[i]);
  else if (st == -EBUSY && !err)
    osd_pg_lock_lost(&r->b, r->slots[i]);
  else
    tc_warn("osd %" PRIu64 ": recovery of inode %#" PRIx64 " offset %" PRIu64 " to a member failed: %s",
            r->b.o->osd_num, r->b.inode, r->b.offset, strerror(-st));
  if (--r->pending == 0)
    rec_finish(r);
}

/* We have the object's data (r->data) at r->version: send it out. */
static void
rec_push(struct rec_op *r)
{
  struct osd *o = r->b.o;
  struct osd_pg *pg;
  struct osd_obj *ob = rec_obj(r, &pg);
  if (!ob || ob->version != r->version) {
    rec_finish(r);
    return;
  }
  memcpy(r->data, &r->bitmap, 8);
  r->iov = (struct iovec) { r->data, 8 + o->info.block_size };
  r->pending = 1;
  int n = 0;
  uint64_t set[TC_MAX_PG_SIZE];
  memcpy(set, pg->osd_set, sizeof set);
  int my_slot = pg->my_slot;
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    if (!(r->targets >> s & 1))
      continue;
    if (s == my_slot) {
      if (osd_store_replace(o, r->b.inode, r->b.offset, r->bitmap, r->data + 8, r->version) == 0)
        rec_target_ok(r, s);
      else
        tc_err("osd %" PRIu64 ": recovering inode %#" PRIx64 " locally: %s", o->osd_num, r->b.inode, tc_last_error());
      continue;
    }
    struct tc_msgr_conn *c = osd_peer_conn(o, set[s]);
    if (!c)
      continue;
    struct tc_msgr_req *q = &r->reqs[n];
    r->slots[n++] = s;
    q->hdr = tc_osd_rw_hdr(TC_OP_SEC_WRITE_STABLE, r->b.inode, r->b.offset, o->info.block_size, r->version);
    q->iov = &r->iov;
    q->iovcnt = 1;
    q->done = push_done;
    q->arg = r;
    r->pending++;
    struct osd_peer *p = osd_peer_get(o, set[s]);
    if (p)
      p->dirty = true;
    if (tc_msgr_call(c, q) < 0)
      r->pending--;
  }
  if (--r->pending == 0)
    rec_finish(r);
}

static void
read_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct rec_op *r = arg;
  int st = err ? err : req->reply.status;
  const union tc_osd_hdr rh = tc_osd_hdr_of(&req->reply);
  if (st < 0 || rh.reply.version != r->version) {
    if (st >= 0)
      tc_debug("osd %" PRIu64 ": recovery: inode %#" PRIx64 " offset %" PRIu64 " is at version %" PRIu64
               " on the source, not %" PRIu64, r->b.o->osd_num, r->b.inode, r->b.offset, rh.reply.version, r->version);
    if (st < 0)
      tc_warn("osd %" PRIu64 ": recovery: reading inode %#" PRIx64 " offset %" PRIu64 " from a member failed: %s",
              r->b.o->osd_num, r->b.inode, r->b.offset, strerror(-st));
    if (req->reply_payload != r->data + 8)
      free(req->reply_payload);
    rec_finish(r);
    return;
  }
  if (req->reply_payload && req->reply_payload != r->data + 8) {
    memcpy(r->data + 8, req->reply_payload, r->b.o->info.block_size);
    free(req->reply_payload);
  }
  r->bitmap = rh.reply.bitmap;
  rec_push(r);
}

/* Start recovering one object; 0 if started. */
static int
rec_start(struct osd *o, struct osd_pg *pg, struct osd_obj *ob)
{
  if (ob->recovering || !ob->stale || pg->state != PG_ACTIVE)
    return -1;
  uint8_t usable = 0;
  for (uint32_t s = 0; s < pg->size; s++)
    if ((pg->up >> s & 1) && pg->osd_set[s] && osd_peer_usable(o, pg->osd_set[s]))
      usable |= (uint8_t) (1u << s);
  uint8_t sources = usable & (uint8_t) ~ob->stale, targets = usable & ob->stale;
  if (!sources || !targets) {
    tc_debug("osd %" PRIu64 ": recovery of inode %#" PRIx64 " offset %" PRIu64 " waits: stale %#x, usable %#x",
             o->osd_num, ob->inode, ob->offset, ob->stale, usable);
    return -1;
  }
  struct rec_op *r = osd_op_new(sizeof *r, o, NULL, NULL, pg, ob->inode, ob->offset);
  if (!r || !(r->data = calloc(1, 8 + o->info.block_size))) {
    osd_op_free(r);
    return -1;
  }
  r->version = ob->version;
  r->targets = targets;
  tc_debug("osd %" PRIu64 ": recovering inode %#" PRIx64 " offset %" PRIu64 " version %" PRIu64 " stale %#x sources %#x",
           o->osd_num, ob->inode, ob->offset, ob->version, ob->stale, sources);
  ob->recovering = 1;
  o->recovery_inflight++;
  if (sources >> pg->my_slot & 1) {
    uint8_t present[8];
    uint64_t ver;
    osd_local_drain(o);   /* a queued local write of it would look like a version mismatch */
    if (tc_store_read(o->store, ob->inode, ob->offset, o->info.block_size, r->data + 8, present, &ver) < 0 ||
        ver != r->version) {
      tc_debug("osd %" PRIu64 ": recovery: local copy of inode %#" PRIx64 " offset %" PRIu64 " unusable (version %"
               PRIu64 ", want %" PRIu64 ")", o->osd_num, ob->inode, ob->offset, ver, r->version);
      /* Our copy is bad (checksum) or not what we thought: fetch it too. */
      if (!(ob->stale >> pg->my_slot & 1))
        pg->n_stale += ob->stale ? 0 : 1;
      ob->stale |= (uint8_t) (1u << pg->my_slot);
      ob->recovering = 0;
      o->recovery_inflight--;
      free(r->data);
      osd_op_free(r);
      return rec_start(o, pg, ob);
    }
    r->bitmap = osd_present_bits(present, osd_spb(o));
    rec_push(r);
    return 0;
  }
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    if (!(sources >> s & 1))
      continue;
    uint64_t src = pg->osd_set[s];
    struct tc_msgr_conn *c = osd_peer_conn(o, src);
    if (!c)
      continue;
    r->read_req.hdr = tc_osd_rw_hdr(TC_OP_SEC_READ, r->b.inode, r->b.offset, o->info.block_size, 0);
    r->read_req.rbuf = r->data + 8;
    r->read_req.rbuf_len = o->info.block_size;
    r->read_req.done = read_done;
    r->read_req.arg = r;
    if (tc_msgr_call(c, &r->read_req) == 0)
      return 0;
  }
  /* no source reachable now */
  struct osd_obj *again = osd_objmap_get(&pg->objs, r->b.inode, r->b.offset);
  if (again)
    again->recovering = 0;
  o->recovery_inflight--;
  free(r->data);
  osd_op_free(r);
  return -1;
}

void
osd_recovery_now(struct osd *o, struct osd_pg *pg, struct osd_obj *ob)
{
  rec_start(o, pg, ob);
}

void
osd_recovery_kick(struct osd *o)
{
  for (size_t i = 0; i < o->n_pgs && o->recovery_inflight < RECOVERY_PARALLEL; i++) {
    struct osd_pg *pg = &o->pgs[i];
    if (pg->state != PG_ACTIVE || !pg->n_stale || !pg->objs.cap)
      continue;
    size_t scanned = 0;
    uint64_t pool = pg->pool;
    uint32_t pgn = pg->pg;
    while (scanned < pg->objs.cap && o->recovery_inflight < RECOVERY_PARALLEL) {
      size_t k = pg->recovery_pos++ % pg->objs.cap;
      scanned++;
      struct osd_obj *ob = &pg->objs.v[k];
      if (ob->used && ob->stale && !ob->recovering)
        rec_start(o, pg, ob);
      pg = osd_pg_find(o, pool, pgn);   /* a peer may have gone down meanwhile */
      if (!pg || pg->state != PG_ACTIVE || !pg->n_stale)
        break;
    }
  }
}
