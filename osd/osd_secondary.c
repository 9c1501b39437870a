/* The operations a secondary serves from its own store, for the primary
 * of a PG (SEC_READ, SEC_READ_BMP, SEC_WRITE, SEC_WRITE_STABLE, SEC_DELETE,
 * SEC_SYNC, SEC_LIST), and the fencing that keeps a deposed primary out:
 * SEC_LOCK makes the caller's connection the only one that may write a PG
 * here. All of them answer at once (the store's writes and reads are
 * synchronous) but SEC_SYNC and a SEC_WRITE or SEC_DELETE with FUA,
 * answered when the sync thread's commit covers them (osd_sync.c). Those
 * that read or replace local objects first run the local writes this OSD
 * queued as a primary (osd_local.c). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "image_meta.h"
#include "log.h"
#include "osd.h"
#include "vector.h"

/* SEC_READ / SEC_READ_BMP from the local store. */
static void
sec_read(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, const struct osd_req *r)
{
  uint8_t *buf = malloc(r->len);
  uint8_t present[8];
  uint64_t ver = 0;
  if (!buf) {
    osd_reply(c, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  int n = tc_store_read(o->store, r->inode, r->offset, r->len, buf, present, &ver);
  if (n < 0) {
    int e = errno ? errno : EIO;
    free(buf);
    osd_reply(c, hdr, -e, 0, 0, NULL, 0);
    return;
  }
  uint64_t bm = osd_present_bits(present, r->len / 4096);
  if (r->op == TC_OP_SEC_READ_BMP) {
    free(buf);
    osd_reply(c, hdr, n, bm, ver, NULL, 0);
  }
  else
    osd_reply(c, hdr, n, bm, ver, buf, r->len);
}

void
osd_locks_free(struct osd *o)
{
  for (size_t i = 0; i < o->n_locks; i++)
    osd_client_put(o->locks[i].holder);
  free(o->locks);
  o->locks = NULL;
  o->n_locks = o->locks_cap = 0;
}

/* SEC_LOCK: the caller's connection becomes the only one that may write
 * the PG here. */
/* SEC_SYNC, and a FUA SEC_WRITE / SEC_DELETE once written: answered from
 * the sync thread's commit (osd_sync.c), the FUA ones with their version
 * and TC_OSD_FLAG_FUA (durable here). */
struct sec_sync_op {
  struct osd_client *cl;
  struct tc_frame_hdr hdr;
  uint64_t version;
  uint16_t flags;
  double t0;                     /* tc_metrics_now at the request */
};

static void
sec_sync_done(struct osd *o, void *arg, int err)
{
  struct sec_sync_op *p = arg;
  if (err)
    tc_err("osd %" PRIu64 ": %s: sync: %s", o->osd_num, tc_osd_op_name(p->hdr.opcode), strerror(err));
  osd_client_reply_flags(p->cl, &p->hdr, -err, err ? 0 : p->version, err ? 0 : p->flags);
  if (!err)   /* errors are counted at the reply */
    osd_metrics_reply(o, p->hdr.opcode, 0, p->t0);
  osd_client_put(p->cl);
  free(p);
}

static void
sec_sync(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, uint64_t version, uint16_t flags)
{
  struct sec_sync_op *p = calloc(1, sizeof *p);
  if (!p || !(p->cl = osd_client_get(c))) {
    free(p);
    osd_reply(c, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  p->hdr = *hdr;
  p->version = version;
  p->flags = flags;
  p->t0 = tc_metrics_now();
  if (osd_sync_async(o, sec_sync_done, p) < 0) {
    tc_err("osd %" PRIu64 ": %s: %s", o->osd_num, tc_osd_op_name(hdr->opcode), tc_last_error());
    osd_client_reply(p->cl, hdr, -ENOMEM, 0, 0, NULL, 0);
    osd_client_put(p->cl);
    free(p);
  }
}

/* The primary of pool/pg in this OSD's map if the map is newer than rev
 * and names someone other than primary (0: not said, or not deposed). */
static uint64_t
deposed_by(struct osd *o, uint64_t pool, uint32_t pg, uint64_t rev, uint64_t primary)
{
  if (!primary || !o->ks || !o->ks->map || (uint64_t) o->ks->pgcfg_rev <= rev)
    return 0;
  const struct tc_pg_info *pi = tc_map_pg(o->ks->map, pool, pg);
  return pi && pi->primary != primary ? pi->primary : 0;
}

static int
sec_lock(struct osd *o, struct tc_msgr_conn *c, const struct osd_req *r)
{
  uint64_t pool = r->pool;
  /* A lock from beyond the KV's revision would shut the rightful primary
   * out for good: only revisions the KV has reached (read it once more).
   * And only PGs the map has: the lock table stays as small as the map.
   * At most one such read every 100 ms, whatever peers send. */
  uint64_t now = tc_now_ms();
  bool behind = !o->ks || (uint64_t) o->ks->pgcfg_rev < r->epoch || !o->ks->map || !tc_map_pg(o->ks->map, pool, r->pg);
  if (behind && now - o->lock_reload_ms >= 100) {
    o->lock_reload_ms = now;
    if (osd_kv_reload(o) < 0)
      tc_debug("osd %" PRIu64 ": SEC_LOCK: the KV could not be read again", o->osd_num);   /* the reload warned */
  }
  if (!o->ks || (uint64_t) o->ks->pgcfg_rev < r->epoch)
    return tc_error(EAGAIN, "SEC_LOCK of pg %" PRIu64 "/%" PRIu32 " from %s at KV revision %" PRIu64
                    ", which /pg/config has not reached here", pool, r->pg, tc_msgr_conn_peername(c), r->epoch);
  if (!o->ks->map || !tc_map_pg(o->ks->map, pool, r->pg))
    return tc_error(ENOENT, "SEC_LOCK of pg %" PRIu64 "/%" PRIu32 " from %s: no such PG in the map", pool, r->pg,
                    tc_msgr_conn_peername(c));
  uint64_t successor = deposed_by(o, pool, r->pg, r->epoch, r->claim_osd);
  if (successor)
    return tc_error(ESTALE, "SEC_LOCK of pg %" PRIu64 "/%" PRIu32 " refused: osd %" PRIu64 " (%s) peered at KV revision %"
                    PRIu64 ", the PG's primary at %" PRId64 " is osd %" PRIu64, pool, r->pg, r->claim_osd,
                    tc_msgr_conn_peername(c), r->epoch, o->ks->pgcfg_rev, successor);
  struct osd_client *cl = osd_client_get(c);
  if (!cl)
    return tc_error(ENOMEM, "out of memory");
  for (size_t i = 0; i < o->n_locks; i++)
    if (o->locks[i].pool == pool && o->locks[i].pg == r->pg) {
      if (r->epoch < o->locks[i].epoch) {
        osd_client_put(cl);
        return tc_error(ESTALE, "pg %" PRIu64 "/%" PRIu32 " stays locked: %s peered at KV revision %" PRIu64
                        ", the lock holder at %" PRIu64, pool, r->pg, tc_msgr_conn_peername(c), r->epoch,
                        o->locks[i].epoch);
      }
      osd_client_put(o->locks[i].holder);
      o->locks[i].holder = cl;
      o->locks[i].epoch = r->epoch;
      o->locks[i].primary = r->claim_osd;
      return 0;
    }
  if (tc_grow(&o->locks, &o->locks_cap, o->n_locks + 1, sizeof *o->locks, 16) < 0) {
    osd_client_put(cl);
    return tc_error(ENOMEM, "out of memory");
  }
  o->locks[o->n_locks++] = (struct osd_lock) { .pool = pool, .pg = r->pg, .epoch = r->epoch,
                                               .primary = r->claim_osd, .holder = cl };
  return 0;
}

/* A SEC_WRITE/SEC_DELETE/SEC_WRITE_STABLE from a connection other than the
 * PG's lock holder is refused (-EBUSY): it comes from a deposed primary; so
 * is one from the holder once this OSD's map names another primary. */
static bool
fenced(struct osd *o, struct tc_msgr_conn *c, const struct osd_req *r)
{
  const struct tc_pool_info *p = o->ks && o->ks->map ? tc_map_pool(o->ks->map, TC_INODE_POOL(r->inode)) : NULL;
  if (!p || !p->pg_count)
    return false;
  uint32_t pg = tc_map_pg_of(p, r->inode, r->offset);
  for (size_t i = 0; i < o->n_locks; i++)
    if (o->locks[i].pool == p->id && o->locks[i].pg == pg) {
      struct osd_client *cl = tc_msgr_conn_get_data(c);
      if (o->locks[i].holder != cl) {
        tc_warn("osd %" PRIu64 ": %s from %s refused: pg %" PRIu64 "/%" PRIu32 " is locked by another primary",
                o->osd_num, tc_osd_op_name(r->op), tc_msgr_conn_peername(c), p->id, pg);
        return true;
      }
      uint64_t successor = deposed_by(o, p->id, pg, o->locks[i].epoch, o->locks[i].primary);
      if (successor) {
        tc_warn("osd %" PRIu64 ": %s from osd %" PRIu64 " (%s) refused: pg %" PRIu64 "/%" PRIu32
                "'s primary is osd %" PRIu64 " now", o->osd_num, tc_osd_op_name(r->op), o->locks[i].primary,
                tc_msgr_conn_peername(c), p->id, pg, successor);
        return true;
      }
      return false;
    }
  return false;
}

/* Replace a whole object: the sectors in bitmap from data, none other,
 * at version (recovery and repair). */
int
osd_store_replace(struct osd *o, uint64_t inode, uint64_t start, uint64_t bitmap,
                  const uint8_t *data, uint64_t version)
{
  uint32_t spb = osd_spb(o);
  osd_local_drain(o);   /* after the writes the loop ordered before */
  if (!bitmap)
    return tc_store_delete_version(o->store, inode, start, o->info.block_size, version);
  for (uint32_t i = 0; i < spb;) {
    int present = bitmap >> i & 1;
    uint32_t j = i + 1;
    while (j < spb && (int) (bitmap >> j & 1) == present)
      j++;
    uint64_t off = start + (uint64_t) i * 4096;
    uint32_t len = (j - i) * 4096;
    int rc = present ? tc_store_write(o->store, inode, off, len, data + (size_t) i * 4096, version)
                     : tc_store_delete_version(o->store, inode, off, len, version);
    if (rc < 0)
      return -1;
    i = j;
  }
  return 0;
}

struct list_ctx {
  struct osd *o;
  const struct osd_req *r;
  struct tc_osd_list_entry *v;
  size_t n, cap;
  int err;
};

static int
list_cb(void *opaque, const struct tc_store_obj *obj)
{
  struct list_ctx *L = opaque;
  if (L->r->pg_count) {
    const struct tc_pool_info *p = L->o->ks ? tc_map_pool(L->o->ks->map, TC_INODE_POOL(obj->inode)) : NULL;
    uint64_t stripe = p && p->pg_stripe_size ? p->pg_stripe_size : TC_DEFAULT_PG_STRIPE;
    if ((obj->inode + obj->offset / stripe) % L->r->pg_count != L->r->pg)
      return 0;
  }
  if (tc_grow(&L->v, &L->cap, L->n + 1, sizeof *L->v, 256) < 0) {
    L->err = ENOMEM;
    return 1;
  }
  struct tc_osd_list_entry *e = &L->v[L->n++];
  e->inode = obj->inode;
  e->offset = obj->offset;
  e->version = obj->version;
  e->bitmap = obj->bitmap[0];
  return 0;
}

/* List the local objects matching r (SEC_LIST); caller frees *out. */
int
osd_list_local(struct osd *o, const struct osd_req *r, struct tc_osd_list_entry **out, size_t *n)
{
  struct list_ctx L = { .o = o, .r = r };
  osd_local_drain(o);
  int rc = tc_store_list(o->store, r->inode, r->inode_last, list_cb, &L);
  if (rc != 0 || L.err) {
    free(L.v);
    if (L.err)
      return tc_error(L.err, "listing objects: out of memory");
    return -1;
  }
  *out = L.v;
  *n = L.n;
  return 0;
}

static void
sec_list(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, const struct osd_req *r)
{
  struct tc_osd_list_entry *v;
  size_t n;
  if (osd_list_local(o, r, &v, &n) < 0) {
    osd_reply(c, hdr, -(errno ? errno : EIO), 0, 0, NULL, 0);
    return;
  }
  osd_reply(c, hdr, (int) n, 0, 0, v, (uint32_t) (n * sizeof *v));
}

/* Serve SEC_* request r on connection c (rights already checked). */
void
osd_secondary_op(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, const struct osd_req *r)
{
  if ((r->op == TC_OP_SEC_WRITE || r->op == TC_OP_SEC_DELETE || r->op == TC_OP_SEC_WRITE_STABLE) && fenced(o, c, r)) {
    osd_reply(c, hdr, -EBUSY, 0, 0, NULL, 0);
    return;
  }
  int rc = 0;
  uint64_t ver = 0;
  switch (r->op) {
  case TC_OP_SEC_LIST:
    sec_list(o, c, hdr, r);
    return;
  case TC_OP_SEC_READ:
  case TC_OP_SEC_READ_BMP:
    osd_local_drain(o);
    sec_read(o, c, hdr, r);
    return;
  case TC_OP_SEC_LOCK:
    osd_local_drain(o);   /* a new primary takes over: our writes as its old primary first */
    rc = sec_lock(o, c, r);
    break;
  case TC_OP_SEC_WRITE:
    rc = tc_store_write(o->store, r->inode, r->offset, r->len, r->data, r->version);
    ver = r->version;
    break;
  case TC_OP_SEC_WRITE_STABLE:
    rc = osd_store_replace(o, r->inode, r->offset, r->bitmap, r->data, r->version);
    ver = r->version;
    break;
  case TC_OP_SEC_DELETE:
    rc = tc_store_delete_version(o->store, r->inode, r->offset, r->len, r->version);
    ver = r->version;
    break;
  case TC_OP_SEC_SYNC:
    sec_sync(o, c, hdr, 0, 0);
    return;
  default:   /* SEC_STABILIZE, SEC_ROLLBACK: two-phase (EC) writes only */
    rc = -1;
    errno = ENOTSUP;
    break;
  }
  if (rc == 0 && r->fua) {   /* SEC_WRITE / SEC_DELETE: answer once durable */
    sec_sync(o, c, hdr, ver, TC_OSD_FLAG_FUA);
    return;
  }
  int e = rc < 0 ? (errno ? errno : EIO) : 0;
  if (rc < 0 && e != ENOTSUP)
    tc_err("osd %" PRIu64 ": %s inode %#" PRIx64 " offset %" PRIu64 ": %s", o->osd_num,
           tc_osd_op_name(r->op), r->inode, r->offset, tc_last_error());
  osd_reply(c, hdr, -e, 0, ver, NULL, 0);
}
