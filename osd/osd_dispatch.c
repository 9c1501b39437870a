/* Incoming requests: decode (osd_decode.c), check the caller's rights
 * (the seed's OSD data access rights, with the identity the handshake
 * proved), dispatch to the primary (osd_primary_*.c, osd_scrub.c), the
 * secondary (osd_secondary.c) or DESCRIBE/SHOW_CONFIG (osd_describe.c).
 * The request's payload is owned here and freed once, after the dispatch,
 * unless a WRITE took it over (osd_primary_write). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include "image_meta.h"
#include "log.h"
#include "osd.h"

/* The image a rights check is about: the inode's image, or for SEC_LIST
 * the image the listing is limited to. */
static const struct tc_image_acl *
op_image(struct osd *o, const struct osd_req *r)
{
  if (r->op == TC_OP_SEC_LIST)
    return r->inode == r->inode_last ? osd_image_acl(o, r->inode) : NULL;
  return osd_image_acl(o, r->inode);
}

static bool
allowed(struct osd *o, struct tc_msgr_conn *c, const struct osd_req *r)
{
  if (!o->use_perms)
    return true;
  const struct tc_msgr_identity *pi = tc_msgr_conn_peer(c);
  struct tc_identity id = { .role = pi->role, .name = pi->name };
  if (pi->role == TC_ROLE_USER)
    id.user = osd_user_find(o, pi->name);
  bool ok = tc_perm_osd_op(&id, r->op, op_image(o, r));
  /* A user's first request for an image (or as a user) created a moment
   * ago may arrive before the watch's reload: read the KV again, at most
   * every 100 ms whatever callers do, then decide. */
  /* (A listing of a whole range is refused to users whatever the KV says:
   * no reload for it; one limited to an unknown image gets one.) */
  bool unknown_image = !op_image(o, r) && (r->op != TC_OP_SEC_LIST || r->inode == r->inode_last);
  if (!ok && pi->role == TC_ROLE_USER && (!id.user || unknown_image)) {
    uint64_t now = tc_now_ms();
    if (now - o->unknown_reload_ms >= 100) {
      o->unknown_reload_ms = now;
      if (osd_kv_reload(o) == 0) {
        id.user = osd_user_find(o, pi->name);
        ok = tc_perm_osd_op(&id, r->op, op_image(o, r));
      }
    }
  }
  if (ok && r->op == TC_OP_SHOW_CONFIG && r->claim_osd && pi->role != TC_ROLE_OSD)
    ok = false;
  if (!ok) {
    char who[128];
    o->eperm++;
    tc_counter_inc(o->m ? o->m->eperm : NULL);
    tc_warn("osd %" PRIu64 ": EPERM: %s from %s (%s) on inode %#" PRIx64 " offset %" PRIu64,
            o->osd_num, tc_osd_op_name(r->op), tc_identity_str(&id, who, sizeof who),
            tc_msgr_conn_peername(c), r->inode, r->offset);
  }
  return ok;
}

/* The fence of a read-only inode (a snapshot, the old layer of a re-key):
 * client writes and deletes (a trim is one) to it are refused with -EROFS,
 * so a handle that has not yet moved to the image's new top layer learns it
 * must (client.c), and nothing lands under a layer that already shadows it.
 * A retired inode's data may be deleted: that is how a snapshot's or a
 * re-keyed layer's data is removed (image_admin.c retires it first). */
static bool
fenced(struct osd *o, struct tc_msgr_conn *c, const struct osd_req *r)
{
  if ((r->op != TC_OP_WRITE && r->op != TC_OP_WRITE_PARTIAL && r->op != TC_OP_WRITE_IF && r->op != TC_OP_DELETE) ||
      !osd_image_readonly(o, r->inode) || (r->op == TC_OP_DELETE && osd_image_retired(o, r->inode)))
    return false;
  if (o->erofs++ % 1000 == 0)   /* a handle retries on the new layer at once: do not flood the log */
    tc_warn("osd %" PRIu64 ": EROFS: %s from %s on read-only inode %" PRIu64 "/%" PRIu64 " offset %" PRIu64
            " (%" PRIu64 " so far)", o->osd_num, tc_osd_op_name(r->op), tc_msgr_conn_peername(c),
            (uint64_t) TC_INODE_POOL(r->inode), (uint64_t) TC_INODE_ID(r->inode), r->offset, o->erofs);
  return true;
}

/* A READ that carries a fence revision is served only once this OSD's image
 * records are at least that recent: then every write it still takes for a
 * fenced inode came before, and the reader sees it (image_rekey.c). Returns
 * 0, or -EAGAIN when the KV could not be read again (at most every 100 ms
 * whatever callers ask). */
static int
fence_wait(struct osd *o, const struct osd_req *r)
{
  if (r->op != TC_OP_READ || !r->version || (o->ks && (uint64_t) o->ks->inode_rev >= r->version))
    return 0;
  uint64_t now = tc_now_ms();
  if (now - o->fence_reload_ms >= 100) {
    o->fence_reload_ms = now;
    if (osd_kv_reload(o) == 0 && o->ks && (uint64_t) o->ks->inode_rev >= r->version)
      return 0;
  }
  o->eagain++;
  return -EAGAIN;
}

/* Without a lease (osd_kv.c, self-fencing) neither client I/O nor a
 * primary's data for this member's store: -EAGAIN. Reads, listings and
 * locks of a member stay served (they change nothing a new primary
 * relies on, and peering needs them). */
static bool
unleased(struct osd *o, struct tc_msgr_conn *c, const struct osd_req *r)
{
  switch (r->op) {
  case TC_OP_READ: case TC_OP_WRITE: case TC_OP_DELETE: case TC_OP_SYNC: case TC_OP_SCRUB:
  case TC_OP_WRITE_PARTIAL: case TC_OP_WRITE_IF:
  case TC_OP_SEC_WRITE: case TC_OP_SEC_WRITE_STABLE: case TC_OP_SEC_DELETE:
    break;
  default:
    return false;
  }
  if (osd_lease_held(o))
    return false;
  tc_counter_inc(o->m ? o->m->lease_refused : NULL);
  if (o->lease_refused++ % 1000 == 0)
    tc_warn("osd %" PRIu64 ": refused %s from %s: this OSD holds no lease of the KV now (%" PRIu64 " refused)",
            o->osd_num, tc_osd_op_name(r->op), tc_msgr_conn_peername(c), o->lease_refused);
  return true;
}

/* Run decoded request r; may take *payload over (and set it to NULL). */
static void
dispatch(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, const struct osd_req *r,
         void **payload)
{
  switch (r->op) {
  case TC_OP_READ:
  case TC_OP_WRITE:
  case TC_OP_DELETE:
  case TC_OP_SYNC:
  case TC_OP_SCRUB:
  case TC_OP_WRITE_PARTIAL:
  case TC_OP_WRITE_IF: {
    struct osd_client *cl = osd_client_get(c);
    if (!cl) {
      osd_reply(c, hdr, -ENOMEM, 0, 0, NULL, 0);
      return;
    }
    if (!cl->lost_seen_set) {
      cl->lost_seen_set = true;
      cl->lost_seen = o->unsynced_lost;
    }
    if (r->replay_version && !cl->replayed) {
      cl->replayed = true;
      cl->replay_floor = o->unsynced_lost;
    }
    if (r->op == TC_OP_WRITE || r->op == TC_OP_DELETE)
      osd_primary_write(o, cl, hdr, r, payload, tc_msgr_take_sealed(c));
    else if (r->op == TC_OP_WRITE_PARTIAL || r->op == TC_OP_WRITE_IF)
      osd_primary_write_partial(o, cl, hdr, r);
    else if (r->op == TC_OP_READ)
      osd_primary_read(o, cl, hdr, r);
    else if (r->op == TC_OP_SYNC)
      osd_primary_sync(o, cl, hdr);
    else
      osd_scrub_object(o, cl, hdr, r);
    osd_client_put(cl);
    return;
  }
  case TC_OP_PING:
    osd_reply(c, hdr, 0, 0, 0, NULL, 0);
    return;
  case TC_OP_DESCRIBE:
    osd_describe(o, c, hdr);
    return;
  case TC_OP_SHOW_CONFIG:
    osd_show_config(o, c, hdr);
    return;
  default:
    osd_secondary_op(o, c, hdr, r);
    return;
  }
}

void
osd_on_request(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, void *payload, void *arg)
{
  struct osd *o = arg;
  struct osd_req r;
  char err[256];
  o->ops++;
  int rc = osd_req_decode(hdr, payload, o->info.block_size, &r, err, sizeof err);
  if (o->ignore_fua)
    r.fua = false;   /* the test hook: an OSD from before FUA (osd_proto.h, "Old peers") */
  if (rc == 0)
    osd_metrics_request(o, r.op,
                        r.op == TC_OP_WRITE || r.op == TC_OP_WRITE_PARTIAL ? r.len : 0,
                        r.op == TC_OP_READ ? r.len : 0);
  if (rc < 0) {
    tc_counter_inc(o->m ? o->m->decode_errors : NULL);
    tc_warn("osd %" PRIu64 ": refused a request from %s: %s", o->osd_num, tc_msgr_conn_peername(c), err);
    osd_reply(c, hdr, rc, 0, 0, NULL, 0);
  }
  else if (!allowed(o, c, &r))
    osd_reply(c, hdr, -EPERM, 0, 0, NULL, 0);
  else if (unleased(o, c, &r))
    osd_reply(c, hdr, -EAGAIN, 0, 0, NULL, 0);
  else if ((rc = fence_wait(o, &r)) < 0)
    osd_reply(c, hdr, rc, 0, 0, NULL, 0);
  else if (fenced(o, c, &r))
    osd_reply(c, hdr, -EROFS, 0, 0, NULL, 0);
  else if (r.op == TC_OP_READ && osd_image_retired(o, r.inode))
    osd_reply(c, hdr, -ESTALE, 0, 0, NULL, 0);   /* the reader's layer chain is stale */
  else {
    osd_inode_stats_count(o, &r);
    dispatch(o, c, hdr, &r, &payload);
  }
  free(payload);
}
