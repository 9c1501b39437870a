/* Client operations on the PG's primary: per-object versions, the local
 * write, the fan-out to the secondaries (SEC_WRITE / SEC_DELETE), the
 * acknowledgement once pg_minsize replicas hold the write, reads with a
 * fall-back to a replica when the local copy fails its checksum (and the
 * local repair), and SYNC across the secondaries written since the last.
 *
 * Ordering: everything runs on the loop thread and the secondaries get
 * their SEC_WRITEs over one connection each, in version order, so no
 * per-object lock is needed. An object whose copy on some replica is stale
 * is not written there until recovery replaced it whole. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "image_meta.h"
#include "log.h"
#include "osd.h"

struct osd_pg *
osd_pg_find(struct osd *o, uint64_t pool, uint32_t pg)
{
  for (size_t i = 0; i < o->n_pgs; i++)
    if (o->pgs[i].pool == pool && o->pgs[i].pg == pg)
      return &o->pgs[i];
  return NULL;
}

static struct osd_pg *
pg_instance(struct osd *o, uint64_t pool, uint32_t pgn, uint64_t instance)
{
  struct osd_pg *pg = osd_pg_find(o, pool, pgn);
  return pg && pg->instance == instance ? pg : NULL;
}

struct osd_pg *
osd_pg_for(struct osd *o, uint64_t inode, uint64_t offset, int *err)
{
  *err = -EAGAIN;
  if (!o->ks || !o->ks->map)
    return NULL;
  const struct tc_pool_info *p = tc_map_pool(o->ks->map, TC_INODE_POOL(inode));
  if (!p) {
    *err = -ENOENT;
    return NULL;
  }
  struct osd_pg *pg = osd_pg_find(o, p->id, tc_map_pg_of(p, inode, offset));
  if (!pg || pg->state != PG_ACTIVE) {
    o->eagain++;
    return NULL;
  }
  return pg;
}

/* An op of the PG finished: peering may have waited for it. */
static void
op_end(struct osd *o, uint64_t pool, uint32_t pgn, uint64_t instance)
{
  struct osd_pg *pg = pg_instance(o, pool, pgn, instance);
  if (pg) {
    pg->inflight--;
    osd_pg_op_done(o, pg);
  }
}

/* ---- WRITE / DELETE ---- */

struct wop {
  struct osd *o;
  struct osd_client *cl;
  struct tc_frame_hdr hdr;
  uint64_t pool, instance;
  uint32_t pgn;
  uint64_t inode, offset, obj_off, version;
  void *payload;
  int pending, acks, need, replied;
  struct iovec iov;            /* what the SEC_ requests send: lives as long as the op */
  struct tc_msgr_req reqs[TC_MAX_PG_SIZE];
  int slots[TC_MAX_PG_SIZE];
};

static void
wop_finish(struct wop *w)
{
  struct osd *o = w->o;
  if (!w->replied) {
    tc_warn("osd %" PRIu64 ": %s inode %#" PRIx64 " offset %" PRIu64 ": only %d of %d replicas took it",
            o->osd_num, tc_osd_op_name(w->hdr.opcode), w->inode, w->offset, w->acks, w->need);
    osd_client_reply(w->cl, &w->hdr, -EIO, 0, 0, NULL, 0);
  }
  op_end(o, w->pool, w->pgn, w->instance);
  osd_client_put(w->cl);
  free(w->payload);
  free(w);
}

/* Mark one slot's copy of an object stale (it missed a write). */
static void
mark_stale(struct osd *o, uint64_t pool, uint32_t pgn, uint64_t instance, uint64_t inode, uint64_t off, int slot)
{
  struct osd_pg *pg = pg_instance(o, pool, pgn, instance);
  struct osd_obj *ob = pg ? osd_objmap_get(&pg->objs, inode, off) : NULL;
  if (!ob || (ob->stale >> slot & 1))
    return;
  if (!ob->stale)
    pg->n_stale++;
  ob->stale |= (uint8_t) (1u << slot);
}

static void
wop_sub_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct wop *w = arg;
  struct osd *o = w->o;
  int i = (int) (req - w->reqs);
  int st = err ? err : req->reply.status;
  free(req->reply_payload);
  if (st < 0) {
    mark_stale(o, w->pool, w->pgn, w->instance, w->inode, w->obj_off, w->slots[i]);
    if (!err)
      tc_warn("osd %" PRIu64 ": %s of inode %#" PRIx64 " offset %" PRIu64 " on a secondary failed: %s",
              o->osd_num, tc_osd_op_name(req->hdr.opcode), w->inode, w->offset, strerror(-st));
  }
  else
    w->acks++;
  if (!w->replied && w->acks >= w->need) {
    w->replied = 1;
    osd_client_reply(w->cl, &w->hdr, 0, 0, w->version, NULL, 0);
  }
  if (--w->pending == 0)
    wop_finish(w);
}

uint8_t
osd_pg_good_slots(struct osd *o, struct osd_pg *pg, const struct osd_obj *ob)
{
  uint8_t m = 0;
  for (uint32_t s = 0; s < pg->size; s++)
    if ((pg->up >> s & 1) && pg->osd_set[s] && osd_peer_usable(o, pg->osd_set[s]) &&
        !(ob && (ob->stale >> s & 1)))
      m |= (uint8_t) (1u << s);
  return m;
}

void
osd_primary_write(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                  const struct osd_req *r, void *payload)
{
  int err;
  struct osd_pg *pg = osd_pg_for(o, r->inode, r->offset, &err);
  if (!pg) {
    free(payload);
    osd_client_reply(cl, hdr, err, 0, 0, NULL, 0);
    return;
  }
  uint64_t start = osd_obj_start(o, r->offset);
  struct osd_obj *ob = osd_objmap_add(&pg->objs, r->inode, start);
  if (!ob) {
    free(payload);
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  if (ob->stale >> pg->my_slot & 1) {
    /* Our copy is old: bring it up to date first; the client retries. */
    osd_recovery_now(o, pg, ob);
    free(payload);
    o->eagain++;
    osd_client_reply(cl, hdr, -EAGAIN, 0, 0, NULL, 0);
    return;
  }
  uint8_t good = osd_pg_good_slots(o, pg, ob);
  if ((uint32_t) __builtin_popcount(good) < pg->minsize) {
    free(payload);
    o->eagain++;
    osd_client_reply(cl, hdr, -EAGAIN, 0, 0, NULL, 0);
    return;
  }
  struct wop *w = calloc(1, sizeof *w);
  if (!w) {
    free(payload);
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
    free(w);
    free(payload);
    osd_client_reply(cl, hdr, -e, 0, 0, NULL, 0);
    return;
  }
  w->o = o;
  w->cl = cl;
  cl->refs++;
  w->hdr = *hdr;
  w->pool = pg->pool;
  w->pgn = pg->pg;
  w->instance = pg->instance;
  w->inode = r->inode;
  w->offset = r->offset;
  w->obj_off = start;
  w->version = version;
  w->payload = payload;
  w->acks = 1;
  w->need = (int) pg->minsize;
  pg->inflight++;
  w->pending = 1;   /* ours, dropped below: no early finish while sending */
  if (r->op == TC_OP_WRITE)
    w->iov = (struct iovec) { (void *) r->data, r->len };
  int n = 0;
  for (uint32_t s = 0; s < pg->size; s++) {
    if (!(good >> s & 1) || (int) s == pg->my_slot)
      continue;
    struct tc_msgr_conn *pc = osd_peer_conn(o, pg->osd_set[s]);
    if (!pc) {
      mark_stale(o, w->pool, w->pgn, w->instance, w->inode, start, (int) s);
      continue;
    }
    struct osd_peer *peer = osd_peer_get(o, pg->osd_set[s]);
    if (peer)
      peer->dirty = true;
    struct tc_msgr_req *q = &w->reqs[n];
    w->slots[n] = (int) s;
    n++;
    q->hdr = tc_osd_rw_hdr(r->op == TC_OP_WRITE ? TC_OP_SEC_WRITE : TC_OP_SEC_DELETE, r->inode, r->offset,
                           r->len, version);
    q->iov = &w->iov;
    q->iovcnt = r->op == TC_OP_WRITE ? 1 : 0;
    q->done = wop_sub_done;
    q->arg = w;
    w->pending++;
    if (tc_msgr_call(pc, q) < 0) {
      w->pending--;
      mark_stale(o, w->pool, w->pgn, w->instance, w->inode, start, (int) s);
    }
  }
  if (!w->replied && w->acks >= w->need) {
    w->replied = 1;
    osd_client_reply(cl, hdr, 0, 0, version, NULL, 0);
  }
  if (--w->pending == 0)
    wop_finish(w);
}

/* ---- READ ---- */

struct rop {
  struct osd *o;
  struct osd_client *cl;
  struct tc_frame_hdr hdr;
  uint64_t pool, instance;
  uint32_t pgn;
  uint64_t inode, offset, version;
  uint32_t len;
  uint8_t tried;               /* slots asked */
  struct tc_msgr_req req;
};

static uint64_t
present_bits(const uint8_t *b, uint32_t n)
{
  uint64_t v = 0;
  for (uint32_t i = 0; i < n && i < 64; i++)
    if (b[i / 8] >> (i % 8) & 1)
      v |= 1ull << i;
  return v;
}

static void rop_next(struct rop *p);

static void
rop_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct rop *p = arg;
  struct osd *o = p->o;
  int st = err ? err : req->reply.status;
  if (st < 0) {
    free(req->reply_payload);
    req->reply_payload = NULL;
    rop_next(p);
    return;
  }
  void *data = req->reply_payload;
  if (!data && (data = calloc(1, p->len)) == NULL) {
    osd_client_reply(p->cl, &p->hdr, -ENOMEM, 0, 0, NULL, 0);
    goto out;
  }
  /* Repair our copy of the range from the good one, at its version. */
  const union tc_osd_hdr rh = tc_osd_hdr_of(&req->reply);
  uint64_t bm = rh.reply.bitmap;
  uint32_t n = p->len / 4096;
  int rc = 0;
  for (uint32_t i = 0; i < n && rc == 0;) {
    int present = bm >> i & 1;
    uint32_t j = i + 1;
    while (j < n && (int) (bm >> j & 1) == present)
      j++;
    rc = present ? tc_store_write(o->store, p->inode, p->offset + (uint64_t) i * 4096, (j - i) * 4096,
                                  (uint8_t *) data + (size_t) i * 4096, rh.reply.version)
                 : tc_store_delete_version(o->store, p->inode, p->offset + (uint64_t) i * 4096, (j - i) * 4096,
                                           rh.reply.version);
    i = j;
  }
  if (rc == 0) {
    o->repaired++;
    tc_warn("osd %" PRIu64 ": repaired inode %#" PRIx64 " offset %" PRIu64 " length %" PRIu32
            " from a replica after a checksum error", o->osd_num, p->inode, p->offset, p->len);
  }
  else
    tc_err("osd %" PRIu64 ": repairing inode %#" PRIx64 ": %s", o->osd_num, p->inode, tc_last_error());
  osd_client_reply(p->cl, &p->hdr, rh.reply.status, bm, rh.reply.version, data, p->len);
out:
  op_end(o, p->pool, p->pgn, p->instance);
  osd_client_put(p->cl);
  free(p);
}

/* Ask the next replica with a current copy for the range. */
static void
rop_next(struct rop *p)
{
  struct osd *o = p->o;
  struct osd_pg *pg = pg_instance(o, p->pool, p->pgn, p->instance);
  struct osd_obj *ob = pg ? osd_objmap_get(&pg->objs, p->inode, osd_obj_start(o, p->offset)) : NULL;
  uint8_t good = pg ? osd_pg_good_slots(o, pg, ob) : 0;
  for (uint32_t s = 0; pg && s < pg->size; s++) {
    if (!(good >> s & 1) || (int) s == pg->my_slot || (p->tried >> s & 1))
      continue;
    p->tried |= (uint8_t) (1u << s);
    struct tc_msgr_conn *c = osd_peer_conn(o, pg->osd_set[s]);
    if (!c)
      continue;
    memset(&p->req, 0, sizeof p->req);
    p->req.hdr = tc_osd_rw_hdr(TC_OP_SEC_READ, p->inode, p->offset, p->len, 0);
    p->req.done = rop_done;
    p->req.arg = p;
    if (tc_msgr_call(c, &p->req) == 0)
      return;
  }
  tc_err("osd %" PRIu64 ": inode %#" PRIx64 " offset %" PRIu64 ": no replica has a good copy",
         o->osd_num, p->inode, p->offset);
  osd_client_reply(p->cl, &p->hdr, -EIO, 0, 0, NULL, 0);
  op_end(o, p->pool, p->pgn, p->instance);
  osd_client_put(p->cl);
  free(p);
}

void
osd_primary_read(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr, const struct osd_req *r)
{
  int err;
  struct osd_pg *pg = osd_pg_for(o, r->inode, r->offset, &err);
  if (!pg) {
    osd_client_reply(cl, hdr, err, 0, 0, NULL, 0);
    return;
  }
  struct osd_obj *ob = osd_objmap_get(&pg->objs, r->inode, osd_obj_start(o, r->offset));
  if (ob && (ob->stale >> pg->my_slot & 1)) {
    osd_recovery_now(o, pg, ob);
    o->eagain++;
    osd_client_reply(cl, hdr, -EAGAIN, 0, 0, NULL, 0);
    return;
  }
  uint8_t *buf = malloc(r->len);
  if (!buf) {
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  uint8_t present[8];
  uint64_t ver = 0;
  int n = tc_store_read(o->store, r->inode, r->offset, r->len, buf, present, &ver);
  if (n >= 0) {
    osd_client_reply(cl, hdr, n, present_bits(present, r->len / 4096), ver, buf, r->len);
    return;
  }
  free(buf);
  if (errno != EIO) {
    osd_client_reply(cl, hdr, -(errno ? errno : EIO), 0, 0, NULL, 0);
    return;
  }
  /* A bad sector: read the range from a replica instead, then repair. */
  struct rop *p = calloc(1, sizeof *p);
  if (!p) {
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  p->o = o;
  p->cl = cl;
  cl->refs++;
  p->hdr = *hdr;
  p->pool = pg->pool;
  p->pgn = pg->pg;
  p->instance = pg->instance;
  p->inode = r->inode;
  p->offset = r->offset;
  p->len = r->len;
  pg->inflight++;
  rop_next(p);
}

/* ---- SYNC ---- */

struct sop {
  struct osd *o;
  struct osd_client *cl;
  struct tc_frame_hdr hdr;
  int pending, failed;
  size_t n;
  struct tc_msgr_req *reqs;
  uint64_t *osds;
};

static void
sop_finish(struct sop *p)
{
  /* A secondary that failed its SEC_SYNC is marked down and its PGs
   * re-peer without it: the client retries (-EAGAIN) and the next SYNC
   * covers the members that remain. */
  osd_client_reply(p->cl, &p->hdr, p->failed ? -EAGAIN : 0, 0, 0, NULL, 0);
  osd_client_put(p->cl);
  free(p->reqs);
  free(p->osds);
  free(p);
}

static void
sop_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct sop *p = arg;
  int st = err ? err : req->reply.status;
  free(req->reply_payload);
  if (st < 0) {
    size_t i = (size_t) (req - p->reqs);
    tc_warn("osd %" PRIu64 ": SEC_SYNC on osd %" PRIu64 " failed: %s", p->o->osd_num, p->osds[i], strerror(-st));
    p->failed++;
    osd_peer_mark_down(p->o, p->osds[i], -st);
  }
  if (--p->pending == 0)
    sop_finish(p);
}

void
osd_primary_sync(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr)
{
  if (tc_store_sync(o->store) < 0) {
    tc_err("osd %" PRIu64 ": SYNC: %s", o->osd_num, tc_last_error());
    osd_client_reply(cl, hdr, -EIO, 0, 0, NULL, 0);
    return;
  }
  struct sop *p = calloc(1, sizeof *p);
  if (p) {
    p->reqs = calloc(o->n_peers + 1, sizeof *p->reqs);
    p->osds = calloc(o->n_peers + 1, sizeof *p->osds);
  }
  if (!p || !p->reqs || !p->osds) {
    if (p) {
      free(p->reqs);
      free(p->osds);
    }
    free(p);
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  p->o = o;
  p->cl = cl;
  cl->refs++;
  p->hdr = *hdr;
  p->pending = 1;
  size_t npeers = o->n_peers;
  for (size_t i = 0; i < npeers; i++) {
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
  if (--p->pending == 0)
    sop_finish(p);
}
