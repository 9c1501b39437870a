/* WRITE_PARTIAL and WRITE_IF on the primary (osd_proto.h): the
 * serialisation point for partial sectors across clients.
 *
 * Both read the stored sectors the write touches, then either patch the
 * client's bytes in (WRITE_PARTIAL) or check that the sector is still what
 * the client read (WRITE_IF), and hand a WRITE of whole sectors to
 * osd_primary_write. The read, the check and the local write happen in one
 * turn of the loop thread, which orders every write of the object, so no
 * other write comes between them (the read first runs the local writes
 * still queued, osd_local.c); the secondaries get whole sectors
 * (SEC_WRITE) like for any WRITE. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "crypto.h"
#include "error.h"
#include "log.h"
#include "osd.h"

void
osd_primary_write_partial(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                          const struct osd_req *r)
{
  int err;
  struct osd_pg *pg = osd_pg_for(o, r->inode, r->offset, &err);
  if (!pg) {
    osd_client_reply(cl, hdr, err, 0, 0, NULL, 0);
    return;
  }
  uint64_t a0 = r->offset - r->offset % TC_STORE_SECTOR;
  uint64_t a1 = (r->offset + r->len + TC_STORE_SECTOR - 1) / TC_STORE_SECTOR * TC_STORE_SECTOR;
  struct osd_obj *ob = osd_objmap_get(&pg->objs, r->inode, osd_obj_start(o, a0));
  if (ob && (ob->stale >> pg->my_slot & 1)) {
    /* Our copy is old: bring it up to date first; the client retries. */
    osd_recovery_now(o, pg, ob);
    o->eagain++;
    osd_client_reply(cl, hdr, -EAGAIN, 0, 0, NULL, 0);
    return;
  }
  uint8_t *buf = malloc(a1 - a0);
  if (!buf) {
    osd_client_reply(cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  uint8_t present[8] = { 0 };
  uint64_t ver = 0;
  osd_local_drain(o);   /* patch what every earlier write of the object left (osd_local.c) */
  if (tc_store_read(o->store, r->inode, a0, (uint32_t) (a1 - a0), buf, present, &ver) < 0) {
    /* A bad local sector: a read repairs it from a replica; until then the
     * client gets the error rather than a patch of bad data. */
    int e = errno ? errno : EIO;
    tc_err("osd %" PRIu64 ": %s inode %#" PRIx64 " offset %" PRIu64 ": reading the sectors to patch: %s",
           o->osd_num, tc_osd_op_name(r->op), r->inode, r->offset, tc_last_error());
    free(buf);
    osd_client_reply(cl, hdr, -e, 0, 0, NULL, 0);
    return;
  }
  if (r->op == TC_OP_WRITE_IF) {
    bool is_present = present[0] & 1;
    if (is_present != (r->cond.present == 1) || (is_present && tc_xxh3_64(buf, TC_STORE_SECTOR) != r->cond.hash)) {
      free(buf);
      osd_client_reply(cl, hdr, -ESTALE, 0, 0, NULL, 0);
      return;
    }
    memcpy(buf, r->data, TC_STORE_SECTOR);
  }
  else
    memcpy(buf + (r->offset - a0), r->data, r->len);
  struct osd_req w = *r;
  w.op = TC_OP_WRITE;
  w.offset = a0;
  w.len = (uint32_t) (a1 - a0);
  w.data = buf;
  void *keep = buf;
  osd_primary_write(o, cl, hdr, &w, &keep, NULL);   /* takes keep over when it uses it */
  free(keep);
}
