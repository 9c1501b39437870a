/* Incoming operations: decode, check the caller's rights (the seed's OSD
 * data access rights, with the identity the handshake proved), dispatch.
 * The operations a secondary serves from its own store are here; the
 * primary's client operations are in osd_primary.c. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "error.h"
#include "image_meta.h"
#include "log.h"
#include "osd.h"

/* Send reply header h to request req; the messenger frees payload. */
static void
send_reply(struct tc_msgr_conn *c, const struct tc_frame_hdr *req, struct tc_frame_hdr h, void *payload,
           uint32_t len)
{
  h.opcode = req->opcode;
  h.req_id = req->req_id;
  struct iovec iov = { payload, len };
  tc_msgr_reply(c, &h, &iov, payload && len ? 1 : 0, TC_MSGR_INPLACE, free, payload);
}

void
osd_reply(struct tc_msgr_conn *c, const struct tc_frame_hdr *req, int status, uint64_t bitmap,
          uint64_t version, void *payload, uint32_t len)
{
  send_reply(c, req, tc_osd_reply_hdr(status, bitmap, version), payload, len);
}

struct osd_client *
osd_client_get(struct tc_msgr_conn *c)
{
  struct osd_client *cl = tc_msgr_conn_get_data(c);
  if (!cl) {
    cl = calloc(1, sizeof *cl);
    if (!cl)
      return NULL;
    cl->c = c;
    cl->refs = 1;   /* the connection's own */
    tc_msgr_conn_set_data(c, cl);
  }
  cl->refs++;
  return cl;
}

void
osd_client_put(struct osd_client *cl)
{
  if (cl && --cl->refs == 0)
    free(cl);
}

void
osd_client_reply(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t bitmap,
                 uint64_t version, void *payload, uint32_t len)
{
  if (!cl->c) {
    free(payload);
    return;
  }
  osd_reply(cl->c, req, status, bitmap, version, payload, len);
}

void
osd_client_reply_scrub(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t repaired)
{
  if (cl->c)
    send_reply(cl->c, req, tc_osd_scrub_reply_hdr(status, repaired), NULL, 0);
}

/* Accepted connections: forget the connection when it closes. */
void
osd_on_conn(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  if (event != TC_MSGR_DOWN)
    return;
  struct osd_client *cl = tc_msgr_conn_get_data(c);
  if (cl) {
    cl->c = NULL;
    tc_msgr_conn_set_data(c, NULL);
    osd_client_put(cl);
  }
}

static uint64_t
bits_to_u64(const uint8_t *b, uint32_t n)
{
  uint64_t v = 0;
  for (uint32_t i = 0; i < n && i < 64; i++)
    if (b[i / 8] >> (i % 8) & 1)
      v |= 1ull << i;
  return v;
}

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
  uint64_t bm = bits_to_u64(present, r->len / 4096);
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
  o->n_locks = 0;
}

/* SEC_LOCK: the caller's connection becomes the only one that may write
 * the PG here. */
static int
sec_lock(struct osd *o, struct tc_msgr_conn *c, const struct osd_req *r)
{
  uint64_t pool = r->pool;
  struct osd_client *cl = osd_client_get(c);
  if (!cl)
    return tc_error(ENOMEM, "out of memory");
  for (size_t i = 0; i < o->n_locks; i++)
    if (o->locks[i].pool == pool && o->locks[i].pg == r->pg) {
      osd_client_put(o->locks[i].holder);
      o->locks[i].holder = cl;
      o->locks[i].epoch = r->epoch;
      return 0;
    }
  struct osd_lock *nv = realloc(o->locks, (o->n_locks + 1) * sizeof *nv);
  if (!nv) {
    osd_client_put(cl);
    return tc_error(ENOMEM, "out of memory");
  }
  o->locks = nv;
  o->locks[o->n_locks++] = (struct osd_lock) { .pool = pool, .pg = r->pg, .epoch = r->epoch, .holder = cl };
  return 0;
}

/* A SEC_WRITE/SEC_DELETE/SEC_WRITE_STABLE from a connection other than the
 * PG's lock holder is refused (-EBUSY): it comes from a deposed primary. */
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
  if (L->n == L->cap) {
    size_t nc = L->cap ? L->cap * 2 : 256;
    struct tc_osd_list_entry *nv = realloc(L->v, nc * sizeof *nv);
    if (!nv) {
      L->err = ENOMEM;
      return 1;
    }
    L->v = nv;
    L->cap = nc;
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

static void
reply_json(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, json_object *j)
{
  const char *s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
  size_t len = strlen(s);
  char *copy = malloc(len ? len : 1);
  if (!copy) {
    json_object_put(j);
    osd_reply(c, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  memcpy(copy, s, len);
  json_object_put(j);
  osd_reply(c, hdr, 0, 0, 0, copy, (uint32_t) len);
}

static const char *
pg_state_name(int s)
{
  return s == PG_ACTIVE ? "active" : s == PG_PEERING ? "peering" : "incomplete";
}

static void
describe(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr)
{
  struct tc_store_stats st;
  json_object *j = json_object_new_object(), *pgs = json_object_new_array();
  json_object_object_add(j, "osd_num", json_object_new_int64((int64_t) o->osd_num));
  if (tc_store_stats(o->store, &st) == 0) {
    json_object_object_add(j, "objects", json_object_new_int64((int64_t) st.objects));
    json_object_object_add(j, "used_bytes", json_object_new_int64((int64_t) st.used_bytes));
    json_object_object_add(j, "checksum_errors", json_object_new_int64((int64_t) st.checksum_errors));
  }
  json_object_object_add(j, "ops", json_object_new_int64((int64_t) o->ops));
  json_object_object_add(j, "eperm", json_object_new_int64((int64_t) o->eperm));
  json_object_object_add(j, "recovered", json_object_new_int64((int64_t) o->recovered));
  json_object_object_add(j, "repaired", json_object_new_int64((int64_t) o->repaired));
  json_object_object_add(j, "recovery_inflight", json_object_new_int(o->recovery_inflight));
  for (size_t i = 0; i < o->n_pgs; i++) {
    struct osd_pg *pg = &o->pgs[i];
    json_object *p = json_object_new_object();
    json_object_object_add(p, "pool", json_object_new_int64((int64_t) pg->pool));
    json_object_object_add(p, "pg", json_object_new_int64(pg->pg));
    json_object_object_add(p, "state", json_object_new_string(pg_state_name(pg->state)));
    json_object_object_add(p, "objects", json_object_new_int64((int64_t) pg->objs.n));
    json_object_object_add(p, "degraded", json_object_new_int64((int64_t) pg->n_stale));
    json_object_object_add(p, "clean", json_object_new_boolean(pg->state == PG_ACTIVE && !pg->n_stale &&
                                                               __builtin_popcount(pg->up) == (int) pg->size));
    json_object_array_add(pgs, p);
  }
  json_object_object_add(j, "pgs", pgs);
  json_object *peers = json_object_new_array();
  for (size_t i = 0; i < o->n_peers; i++) {
    json_object *p = json_object_new_object();
    json_object_object_add(p, "osd", json_object_new_int64((int64_t) o->peers[i].osd_num));
    json_object_object_add(p, "down", json_object_new_boolean(o->peers[i].down));
    if (o->peers[i].conn) {
      struct tc_msgr_stats ms;
      tc_msgr_conn_stats(o->peers[i].conn, &ms);
      json_object_object_add(p, "inflight_ops", json_object_new_int64((int64_t) ms.inflight_ops));
      json_object_object_add(p, "waiting", json_object_new_int64((int64_t) ms.waiting));
      json_object_object_add(p, "frames_out", json_object_new_int64((int64_t) ms.frames_out));
      json_object_object_add(p, "frames_in", json_object_new_int64((int64_t) ms.frames_in));
    }
    json_object_array_add(peers, p);
  }
  json_object_object_add(j, "peers", peers);
  reply_json(c, hdr, j);
}

static void
show_config(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr)
{
  json_object *j = json_object_new_object(), *pools = json_object_new_array(), *prim = json_object_new_array();
  json_object_object_add(j, "osd_num", json_object_new_int64((int64_t) o->osd_num));
  json_object_object_add(j, "block_size", json_object_new_int64(o->info.block_size));
  if (o->ks && o->ks->map)
    for (size_t i = 0; i < o->ks->map->n_pools; i++)
      json_object_array_add(pools, json_object_new_int64((int64_t) o->ks->map->pools[i].id));
  for (size_t i = 0; i < o->n_pgs; i++) {
    json_object *p = json_object_new_array();
    json_object_array_add(p, json_object_new_int64((int64_t) o->pgs[i].pool));
    json_object_array_add(p, json_object_new_int64(o->pgs[i].pg));
    json_object_array_add(prim, p);
  }
  json_object_object_add(j, "pools", pools);
  json_object_object_add(j, "primary_pgs", prim);
  reply_json(c, hdr, j);
}

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
  if (ok && r->op == TC_OP_SHOW_CONFIG && r->claim_osd && pi->role != TC_ROLE_OSD)
    ok = false;
  if (!ok) {
    char who[128];
    o->eperm++;
    tc_warn("osd %" PRIu64 ": EPERM: %s from %s (%s) on inode %#" PRIx64 " offset %" PRIu64,
            o->osd_num, tc_osd_op_name(r->op), tc_identity_str(&id, who, sizeof who),
            tc_msgr_conn_peername(c), r->inode, r->offset);
  }
  return ok;
}

void
osd_on_request(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, void *payload, void *arg)
{
  struct osd *o = arg;
  struct osd_req r;
  char err[256];
  o->ops++;
  int rc = osd_req_decode(hdr, payload, o->info.block_size, &r, err, sizeof err);
  if (rc < 0) {
    tc_warn("osd %" PRIu64 ": refused a request from %s: %s", o->osd_num, tc_msgr_conn_peername(c), err);
    free(payload);
    osd_reply(c, hdr, rc, 0, 0, NULL, 0);
    return;
  }
  if (!allowed(o, c, &r)) {
    free(payload);
    osd_reply(c, hdr, -EPERM, 0, 0, NULL, 0);
    return;
  }
  if (r.op == TC_OP_READ || r.op == TC_OP_WRITE || r.op == TC_OP_DELETE || r.op == TC_OP_SYNC ||
      r.op == TC_OP_SCRUB) {
    struct osd_client *cl = osd_client_get(c);
    if (!cl) {
      free(payload);
      osd_reply(c, hdr, -ENOMEM, 0, 0, NULL, 0);
      return;
    }
    if (r.op == TC_OP_WRITE || r.op == TC_OP_DELETE)
      osd_primary_write(o, cl, hdr, &r, payload);
    else {
      free(payload);
      if (r.op == TC_OP_READ)
        osd_primary_read(o, cl, hdr, &r);
      else if (r.op == TC_OP_SYNC)
        osd_primary_sync(o, cl, hdr);
      else
        osd_scrub_object(o, cl, hdr, &r);
    }
    osd_client_put(cl);
    return;
  }
  /* Operations answered at once from the local store. */
  rc = 0;
  uint64_t ver = 0;
  if ((r.op == TC_OP_SEC_WRITE || r.op == TC_OP_SEC_DELETE || r.op == TC_OP_SEC_WRITE_STABLE) && fenced(o, c, &r)) {
    free(payload);
    osd_reply(c, hdr, -EBUSY, 0, 0, NULL, 0);
    return;
  }
  switch (r.op) {
  case TC_OP_PING:
    break;
  case TC_OP_SEC_LOCK:
    rc = sec_lock(o, c, &r);
    break;
  case TC_OP_DESCRIBE:
    free(payload);
    describe(o, c, hdr);
    return;
  case TC_OP_SHOW_CONFIG:
    free(payload);
    show_config(o, c, hdr);
    return;
  case TC_OP_SEC_LIST:
    free(payload);
    sec_list(o, c, hdr, &r);
    return;
  case TC_OP_SEC_READ:
  case TC_OP_SEC_READ_BMP:
    free(payload);
    sec_read(o, c, hdr, &r);
    return;
  case TC_OP_SEC_WRITE:
    rc = tc_store_write(o->store, r.inode, r.offset, r.len, r.data, r.version);
    ver = r.version;
    break;
  case TC_OP_SEC_WRITE_STABLE:
    rc = osd_store_replace(o, r.inode, r.offset, r.bitmap, r.data, r.version);
    ver = r.version;
    break;
  case TC_OP_SEC_DELETE:
    rc = tc_store_delete_version(o->store, r.inode, r.offset, r.len, r.version);
    ver = r.version;
    break;
  case TC_OP_SEC_SYNC:
    rc = tc_store_sync(o->store);
    break;
  case TC_OP_SEC_STABILIZE:
  case TC_OP_SEC_ROLLBACK:
    rc = -1;
    errno = ENOTSUP;
    break;
  }
  int e = rc < 0 ? (errno ? errno : EIO) : 0;
  if (rc < 0 && e != ENOTSUP)
    tc_err("osd %" PRIu64 ": %s inode %#" PRIx64 " offset %" PRIu64 ": %s", o->osd_num,
           tc_osd_op_name(r.op), r.inode, r.offset, tc_last_error());
  free(payload);
  osd_reply(c, hdr, -e, 0, ver, NULL, 0);
}
