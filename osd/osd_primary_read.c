/* READ on the PG's primary: from the local store; when the local copy fails
 * its checksum, from a replica with a current copy instead, and the local
 * copy is repaired from it. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "osd.h"

struct rop {
  struct osd_op_base b;
  uint32_t len;
  uint8_t tried;               /* slots asked */
  struct tc_msgr_req req;
};

static void rop_next(struct rop *p);

/* Write the range read from a replica (data, bitmap bm) over our copy. */
static void
rop_repair(struct rop *p, const uint8_t *data, uint64_t bm, uint64_t version)
{
  struct osd *o = p->b.o;
  uint32_t n = p->len / 4096;
  int rc = 0;
  for (uint32_t i = 0; i < n && rc == 0;) {
    int present = bm >> i & 1;
    uint32_t j = i + 1;
    while (j < n && (int) (bm >> j & 1) == present)
      j++;
    uint64_t off = p->b.offset + (uint64_t) i * 4096;
    rc = present ? tc_store_write(o->store, p->b.inode, off, (j - i) * 4096, data + (size_t) i * 4096, version)
                 : tc_store_delete_version(o->store, p->b.inode, off, (j - i) * 4096, version);
    i = j;
  }
  if (rc == 0) {
    o->repaired++;
    tc_warn("osd %" PRIu64 ": repaired inode %#" PRIx64 " offset %" PRIu64 " length %" PRIu32
            " from a replica after a checksum error", o->osd_num, p->b.inode, p->b.offset, p->len);
  }
  else
    tc_err("osd %" PRIu64 ": repairing inode %#" PRIx64 ": %s", o->osd_num, p->b.inode, tc_last_error());
}

static void
rop_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct rop *p = arg;
  int st = err ? err : req->reply.status;
  if (st < 0) {
    free(req->reply_payload);
    req->reply_payload = NULL;
    rop_next(p);
    return;
  }
  void *data = req->reply_payload;
  if (!data && (data = calloc(1, p->len)) == NULL)
    osd_client_reply(p->b.cl, &p->b.hdr, -ENOMEM, 0, 0, NULL, 0);
  else {
    const union tc_osd_hdr rh = tc_osd_hdr_of(&req->reply);
    rop_repair(p, data, rh.reply.bitmap, rh.reply.version);
    osd_client_reply(p->b.cl, &p->b.hdr, rh.reply.status, rh.reply.bitmap, rh.reply.version, data, p->len);
  }
  osd_op_free(p);
}

/* Ask the next replica with a current copy for the range. */
static void
rop_next(struct rop *p)
{
  struct osd *o = p->b.o;
  struct osd_pg *pg = osd_op_pg(&p->b);
  struct osd_obj *ob = pg ? osd_objmap_get(&pg->objs, p->b.inode, osd_obj_start(o, p->b.offset)) : NULL;
  uint8_t good = pg ? osd_pg_good_slots(o, pg, ob) : 0;
  for (uint32_t s = 0; pg && s < pg->size; s++) {
    if (!(good >> s & 1) || (int) s == pg->my_slot || (p->tried >> s & 1))
      continue;
    p->tried |= (uint8_t) (1u << s);
    struct tc_msgr_conn *c = osd_peer_conn(o, pg->osd_set[s]);
    if (!c)
      continue;
    memset(&p->req, 0, sizeof p->req);
    p->req.hdr = tc_osd_rw_hdr(TC_OP_SEC_READ, p->b.inode, p->b.offset, p->len, 0);
    p->req.done = rop_done;
    p->req.arg = p;
    if (tc_msgr_call(c, &p->req) == 0)
      return;
  }
  tc_err("osd %" PRIu64 ": inode %#" PRIx64 " offset %" PRIu64 ": no replica has a good copy",
         o->osd_num, p->b.inode, p->b.offset);
  osd_client_reply(p->b.cl, &p->b.hdr, -EIO, 0, 0, NULL, 0);
  osd_op_free(p);
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
    osd_client_reply(cl, hdr, n, osd_present_bits(present, r->len / 4096), ver, buf, r->len);
    return;
  }
  free(buf);
  if (errno != EIO) {
    osd_client_reply(cl, hdr, -(errno ? errno : EIO), 0, 0, NULL, 0);
    return;
  }
  /* A bad sector: read the range from a replica instead, then repair. */
  struct rop *p = osd_op_new(sizeof *p, o, cl, hdr, pg, r->inode, r->offset);
  if (!p) {
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  p->len = r->len;
  rop_next(p);
}
