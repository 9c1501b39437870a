/* SCRUB of one object on its primary: check the local sector checksums,
 * read the object from every current member (a member's store checks its
 * own checksums and fails the read with EIO; the bad sectors are then
 * found one by one), compare versions, presence bitmaps and bytes with the
 * newest good copy, and replace every copy that differs with it.
 * Reply: status = sectors found bad, offset = sectors repaired. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "osd.h"

struct scrub_copy {
  int st;                 /* 0 = read fine, else -errno */
  uint64_t version, bitmap;
  uint8_t *data;          /* block_size bytes (8-byte prefix room before it) */
  uint64_t bad;           /* sectors found bad */
  bool asked;
};

struct scrub_op {
  struct osd_op_base b;
  int phase, pending;
  uint64_t set[TC_MAX_PG_SIZE];
  int my_slot;
  struct scrub_copy copy[TC_MAX_PG_SIZE];
  struct tc_msgr_req *reqs;
  int *req_slot, *req_sector;
  int nreqs;
  int nbad, nrepaired;
  struct iovec iov;
  uint8_t *good;          /* 8 + block_size: the good copy for SEC_WRITE_STABLE */
};

static void scrub_step(struct scrub_op *p);

/* The end of a scrub: the counters, then the client's answer or, for a
 * scheduled scrub, its findings in the PG's record. */
static void
scrub_done(struct scrub_op *p, int status, int repaired)
{
  struct osd *o = p->b.o;
  o->scrubbed++;
  if (status > 0)
    o->scrub_bad += (uint64_t) status;
  if (o->m) {
    tc_counter_inc(o->m->scrubbed);
    tc_counter_add(o->m->scrub_bad, status > 0 ? (uint64_t) status : 0);
    tc_counter_add(o->m->scrub_repaired, (uint64_t) repaired);
  }
  struct osd_pg *pg = osd_op_pg(&p->b);
  /* What DESCRIBE lists as inconsistent: a bad sector left unrepaired, or
   * no good copy at all (a failure to read or send is no finding). */
  struct osd_obj *ob = pg ? osd_objmap_get(&pg->objs, p->b.inode, p->b.offset) : NULL;
  if (ob && (status >= 0 || status == -EIO)) {
    uint8_t now_bad = status == -EIO || (status > 0 && repaired < status);
    if (now_bad != ob->inconsistent) {
      if (now_bad)
        pg->n_inconsistent++;
      else if (pg->n_inconsistent)
        pg->n_inconsistent--;
    }
    ob->inconsistent = now_bad;
  }
  if (p->b.background) {
    o->scrub_inflight--;
    if (pg) {
      uint64_t bad = status > 0 ? (uint64_t) status : (uint64_t) (status < 0);
      pg->scrub_objects++;
      if (pg->scrub_pass_inflight > 0)
        pg->scrub_pass_inflight--;
      /* a copy with no good version anywhere counts as one bad sector */
      pg->scrub_bad += bad;
      pg->scrub_repaired += (uint64_t) repaired;
      pg->scrub_pass_bad += bad;
      pg->scrub_pass_repaired += (uint64_t) repaired;
    }
  } else
    osd_client_reply_scrub(p->b.cl, &p->b.hdr, status, (uint64_t) repaired);
}

static void
scrub_free(struct scrub_op *p)
{
  for (int s = 0; s < TC_MAX_PG_SIZE; s++)
    free(p->copy[s].data);
  free(p->reqs);
  free(p->req_slot);
  free(p->req_sector);
  free(p->good);
  osd_op_free(p);
}

static void
req_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct scrub_op *p = arg;
  int i = (int) (req - p->reqs), s = p->req_slot[i], sec = p->req_sector[i];
  int st = err ? err : req->reply.status;
  struct scrub_copy *c = &p->copy[s];
  if (p->phase == 1) {
    c->st = st < 0 ? st : 0;
    if (st >= 0) {
      const union tc_osd_hdr rh = tc_osd_hdr_of(&req->reply);
      c->version = rh.reply.version;
      c->bitmap = rh.reply.bitmap;
      if (req->reply_payload && req->reply_payload != c->data)
        memcpy(c->data, req->reply_payload, p->b.o->info.block_size);
    }
  }
  else if (p->phase == 2) {
    if (st == -EIO)
      c->bad |= 1ull << sec;
  }
  else if (p->phase == 3) {
    if (st >= 0)
      p->nrepaired += __builtin_popcountll(c->bad);
    else
      tc_warn("osd %" PRIu64 ": scrub: repairing inode %#" PRIx64 " offset %" PRIu64 " on osd %" PRIu64 ": %s",
              p->b.o->osd_num, p->b.inode, p->b.offset, p->set[s], strerror(-st));
  }
  if (req->reply_payload != c->data)
    free(req->reply_payload);
  if (--p->pending == 0)
    scrub_step(p);
}

static struct tc_msgr_req *
new_req(struct scrub_op *p, int slot, int sector)
{
  int i = p->nreqs++;
  p->req_slot[i] = slot;
  p->req_sector[i] = sector;
  struct tc_msgr_req *q = &p->reqs[i];
  memset(q, 0, sizeof *q);
  q->done = req_done;
  q->arg = p;
  return q;
}

static void
send(struct scrub_op *p, struct tc_msgr_req *q, int slot)
{
  struct tc_msgr_conn *c = osd_peer_conn(p->b.o, p->set[slot]);
  p->pending++;
  if (!c || tc_msgr_call(c, q) < 0) {
    p->pending--;
    if (p->phase == 1)
      p->copy[slot].st = -ENOTCONN;
  }
}

/* Phase 1 done: find bad sectors of members whose read failed. */
static void
phase2(struct scrub_op *p)
{
  uint32_t spb = osd_spb(p->b.o);
  p->phase = 2;
  p->nreqs = 0;
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    if (s == p->my_slot || !p->copy[s].asked || p->copy[s].st != -EIO)
      continue;
    for (uint32_t k = 0; k < spb; k++) {
      struct tc_msgr_req *q = new_req(p, s, (int) k);
      q->hdr = tc_osd_rw_hdr(TC_OP_SEC_READ, p->b.inode, p->b.offset + (uint64_t) k * 4096, 4096, 0);
      send(p, q, s);
    }
  }
}

/* Compare with the good copy and repair. Returns 0 if requests went out or
 * everything is done; -1 if no copy is good. */
static int
phase3(struct scrub_op *p)
{
  struct osd *o = p->b.o;
  uint32_t spb = osd_spb(o), bs = o->info.block_size;
  int g = -1;
  for (int s = 0; s < TC_MAX_PG_SIZE; s++)
    if (p->copy[s].asked && p->copy[s].st == 0 &&
        (g < 0 || p->copy[s].version > p->copy[g].version ||
         (p->copy[s].version == p->copy[g].version && s == p->my_slot)))
      g = s;
  if (g < 0)
    return -1;
  struct scrub_copy *G = &p->copy[g];
  memcpy(p->good, &G->bitmap, 8);
  memcpy(p->good + 8, G->data, bs);
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    struct scrub_copy *c = &p->copy[s];
    if (!c->asked || s == g)
      continue;
    if (c->st == 0)
      for (uint32_t k = 0; k < spb; k++) {
        bool pa = c->bitmap >> k & 1, pb = G->bitmap >> k & 1;
        if (pa != pb || (pa && memcmp(c->data + (size_t) k * 4096, G->data + (size_t) k * 4096, 4096)))
          c->bad |= 1ull << k;
      }
    else if (c->st != -EIO || !c->bad)
      continue;   /* unreachable: recovery's business */
    if (c->st == 0 && c->version != G->version && !c->bad)
      c->bad = G->bitmap ? G->bitmap : 1;   /* same bytes, older version: re-stamp it */
    p->nbad += __builtin_popcountll(c->bad);
  }
  p->phase = 3;
  p->nreqs = 0;
  p->iov = (struct iovec) { p->good, 8 + bs };
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    struct scrub_copy *c = &p->copy[s];
    if (!c->asked || s == g || !c->bad)
      continue;
    if (s == p->my_slot) {
      if (osd_store_replace(o, p->b.inode, p->b.offset, G->bitmap, G->data, G->version) == 0)
        p->nrepaired += __builtin_popcountll(c->bad);
      else
        tc_err("osd %" PRIu64 ": scrub: repairing the local copy: %s", o->osd_num, tc_last_error());
      continue;
    }
    struct tc_msgr_req *q = new_req(p, s, -1);
    q->hdr = tc_osd_rw_hdr(TC_OP_SEC_WRITE_STABLE, p->b.inode, p->b.offset, bs, G->version);
    q->iov = &p->iov;
    q->iovcnt = 1;
    struct osd_peer *peer = osd_peer_get(o, p->set[s]);
    if (peer)
      peer->dirty = true;
    send(p, q, s);
  }
  return 0;
}

static void
scrub_step(struct scrub_op *p)
{
  struct osd *o = p->b.o;
  p->pending = 1;
  if (p->phase == 1)
    phase2(p);
  else if (p->phase == 2) {
    if (phase3(p) < 0) {
      tc_err("osd %" PRIu64 ": scrub: inode %#" PRIx64 " offset %" PRIu64 ": no good copy on any member",
             o->osd_num, p->b.inode, p->b.offset);
      scrub_done(p, -EIO, 0);
      scrub_free(p);
      return;
    }
  }
  else {
    if (p->nbad)
      tc_warn("osd %" PRIu64 ": scrub: inode %#" PRIx64 " offset %" PRIu64 ": %d bad sectors, %d repaired",
              o->osd_num, p->b.inode, p->b.offset, p->nbad, p->nrepaired);
    o->repaired += (uint64_t) p->nrepaired;
    scrub_done(p, p->nbad, p->nrepaired);
    scrub_free(p);
    return;
  }
  if (--p->pending == 0)
    scrub_step(p);
}

/* Read every current copy of the object and go on in scrub_step; the
 * result goes to cl, or into the PG when background. 0 or -ENOMEM. */
static int
scrub_begin(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr, struct osd_pg *pg,
            const struct osd_obj *ob, uint64_t inode, uint64_t offset, bool background)
{
  uint32_t bs = o->info.block_size, spb = osd_spb(o);
  struct scrub_op *p = osd_op_new(sizeof *p, o, cl, hdr, pg, inode, offset);
  int nmax = TC_MAX_PG_SIZE * (int) spb + TC_MAX_PG_SIZE;
  if (p) {
    p->b.background = background;
    p->reqs = calloc((size_t) nmax, sizeof *p->reqs);
    p->req_slot = calloc((size_t) nmax, sizeof *p->req_slot);
    p->req_sector = calloc((size_t) nmax, sizeof *p->req_sector);
    p->good = malloc(8 + bs);
  }
  if (!p || !p->reqs || !p->req_slot || !p->req_sector || !p->good) {
    if (p)
      scrub_free(p);
    return -ENOMEM;
  }
  if (background) {
    o->scrub_inflight++;
    pg->scrub_pass_inflight++;
  }
  p->my_slot = pg->my_slot;
  memcpy(p->set, pg->osd_set, sizeof p->set);
  uint8_t good = osd_pg_good_slots(o, pg, ob);
  p->phase = 1;
  p->pending = 1;
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    if (!(good >> s & 1))
      continue;
    struct scrub_copy *c = &p->copy[s];
    c->asked = true;
    if (!(c->data = calloc(1, bs))) {
      c->st = -ENOMEM;
      continue;
    }
    if (s == p->my_slot) {
      uint8_t bad[8] = { 0 }, present[8];
      osd_local_drain(o);   /* the local writes the loop ordered before */
      int nb = tc_store_scrub(o->store, p->b.inode, p->b.offset, bad);
      if (nb > 0) {
        c->st = -EIO;
        c->bad = osd_present_bits(bad, spb);
        continue;
      }
      if (nb < 0 || tc_store_read(o->store, p->b.inode, p->b.offset, bs, c->data, present, &c->version) < 0) {
        c->st = -EIO;
        continue;
      }
      c->bitmap = osd_present_bits(present, spb);
      continue;
    }
    struct tc_msgr_req *q = new_req(p, s, -1);
    q->hdr = tc_osd_rw_hdr(TC_OP_SEC_READ, p->b.inode, p->b.offset, bs, 0);
    q->rbuf = c->data;
    q->rbuf_len = bs;
    send(p, q, s);
  }
  if (--p->pending == 0)
    scrub_step(p);
  return 0;
}

void
osd_scrub_object(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr, const struct osd_req *r)
{
  int err;
  struct osd_pg *pg = osd_pg_for(o, r->inode, r->offset, &err);
  if (!pg) {
    osd_client_reply_scrub(cl, hdr, err, 0);
    return;
  }
  struct osd_obj *ob = osd_objmap_get(&pg->objs, r->inode, r->offset);
  if (ob && (ob->recovering || (ob->stale >> pg->my_slot & 1))) {
    if (ob->stale >> pg->my_slot & 1)
      osd_recovery_now(o, pg, ob);
    osd_client_reply_scrub(cl, hdr, -EAGAIN, 0);
    return;
  }
  if (scrub_begin(o, cl, hdr, pg, ob, r->inode, r->offset, false) < 0)
    osd_client_reply_scrub(cl, hdr, -ENOMEM, 0);
}

int
osd_scrub_background(struct osd *o, struct osd_pg *pg, const struct osd_obj *ob)
{
  if (pg->state != PG_ACTIVE || ob->recovering || ob->stale)
    return -1;
  struct tc_frame_hdr hdr = tc_osd_obj_hdr(TC_OP_SCRUB, ob->inode, ob->offset);
  return scrub_begin(o, NULL, &hdr, pg, ob, ob->inode, ob->offset, true) < 0 ? -1 : 0;
}
