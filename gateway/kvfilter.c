/* The use_perms access filter on the KV API (see kvfilter.h). The rules
 * are tc_perm_kv's (common/cluster/perms.c); this file resolves the
 * records they ask about and walks requests. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "kvfilter.h"
#include "image_meta.h"
#include "inode_key.h"
#include "pools.h"
#include "error.h"
#include "log.h"

/* Records read while checking one request (freed by kvfilter_end). */
struct memo_img {
  struct memo_img *next;
  uint64_t pool, id;
  bool found;
  struct tc_image_meta m;
  struct tc_image_acl acl;
};
struct memo {
  struct memo_img *imgs;
  struct memo_img *pending_imgs;   /* parsed from puts of the txn being checked */
  const struct kv_op *branch;      /* the ops of the txn branch being checked */
  size_t nbranch;
  bool pools_read;
  struct tc_pools pools;
};

int
kvfilter_init(struct kvfilter *f, const char *prefix, bool use_perms)
{
  memset(f, 0, sizeof *f);
  if (strlen(prefix) >= sizeof f->prefix)
    return tc_error(EINVAL, "etcd_prefix '%s' is too long", prefix);
  snprintf(f->prefix, sizeof f->prefix, "%s", prefix);
  f->plen = strlen(f->prefix);
  f->use_perms = use_perms;
  return 0;
}

static struct memo *
memo_of(struct kvfilter_req *rq)
{
  if (!rq->memo)
    rq->memo = calloc(1, sizeof(struct memo));
  return rq->memo;
}

/* Read prefix + rel; 1 found, 0 absent, -1 error. */
static int
get_rel(struct kvfilter_req *rq, const char *rel, char **val, size_t *len)
{
  char key[512];
  int n = snprintf(key, sizeof key, "%s%s", rq->f->prefix, rel);
  if (n < 0 || (size_t) n >= sizeof key)
    return 0;
  return rq->src.get(rq->src.ctx, (const uint8_t *) key, (size_t) n, val, len);
}

static const struct tc_image_acl *
lk_by_inode(void *ctx, uint64_t pool, uint64_t id)
{
  struct kvfilter_req *rq = ctx;
  struct memo *mm = memo_of(rq);
  if (!mm)
    return NULL;
  for (struct memo_img *e = mm->imgs; e; e = e->next)
    if (e->pool == pool && e->id == id)
      return e->found ? &e->acl : NULL;
  struct memo_img *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->pool = pool;
  e->id = id;
  e->next = mm->imgs;
  mm->imgs = e;
  char rel[96], *val = NULL;
  size_t len = 0;
  snprintf(rel, sizeof rel, "/config/inode/%" PRIu64 "/%" PRIu64, pool, id);
  if (get_rel(rq, rel, &val, &len) == 1 && tc_image_meta_parse(&e->m, pool, id, val, len) == 0) {
    e->found = true;
    e->acl = (struct tc_image_acl) { e->m.owner, e->m.owner_group, e->m.reader_group };
  }
  free(val);
  return e->found ? &e->acl : NULL;
}

static const struct tc_image_acl *
lk_by_name(void *ctx, const char *name)
{
  struct kvfilter_req *rq = ctx;
  char rel[400], *val = NULL;
  size_t len = 0;
  uint64_t pool, id;
  if ((size_t) snprintf(rel, sizeof rel, "/index/image/%s", name) >= sizeof rel)
    return NULL;
  if (get_rel(rq, rel, &val, &len) != 1)
    return NULL;
  int r = tc_image_index_parse(val, len, &pool, &id);
  free(val);
  if (r < 0 || pool == 0 || pool > TC_POOL_MAX || id == 0 || id > TC_INODE_ID_MAX)
    return NULL;
  return lk_by_inode(ctx, pool, id);
}

static const char *
lk_pool_creator_group(void *ctx, uint64_t pool, bool *exists)
{
  struct kvfilter_req *rq = ctx;
  struct memo *mm = memo_of(rq);
  *exists = false;
  if (!mm)
    return NULL;
  if (!mm->pools_read) {
    char *val = NULL;
    size_t len = 0;
    mm->pools_read = true;
    if (get_rel(rq, "/config/pools", &val, &len) == 1 && tc_pools_parse(val, &mm->pools) < 0)
      memset(&mm->pools, 0, sizeof mm->pools);
    free(val);
  }
  if (pool == 0 || pool > TC_POOL_MAX)
    return NULL;
  const struct tc_pool *p = tc_pools_find_id(&mm->pools, (uint32_t) pool);
  if (!p)
    return NULL;
  *exists = true;
  return p->creator_group;
}

static void
memo_free(struct memo *mm)
{
  if (!mm)
    return;
  while (mm->imgs) {
    struct memo_img *e = mm->imgs;
    mm->imgs = e->next;
    tc_image_meta_clear(&e->m);
    free(e);
  }
  while (mm->pending_imgs) {
    struct memo_img *e = mm->pending_imgs;
    mm->pending_imgs = e->next;
    tc_image_meta_clear(&e->m);
    free(e);
  }
  tc_pools_free(&mm->pools);
  free(mm);
}

int
kvfilter_begin(struct kvfilter_req *rq, const struct kvfilter *f, struct gw_identity *who,
               const struct kvfilter_src *src, struct kv_err *err)
{
  memset(rq, 0, sizeof *rq);
  rq->f = f;
  rq->who = who;
  rq->src = *src;
  who->id.user = NULL;
  if (!f->use_perms || who->id.role != TC_ROLE_USER)
    return 0;
  char rel[300], *val = NULL;
  size_t len = 0;
  if ((size_t) snprintf(rel, sizeof rel, "/config/user/%s", who->cn) >= sizeof rel)
    return kv_err_set(err, KV_PERMISSION_DENIED, "user name '%.64s...' is too long", who->cn);
  int r = get_rel(rq, rel, &val, &len);
  if (r < 0)
    return kv_err_set(err, KV_INTERNAL, "reading the record of %s failed", who->desc);
  rq->user.name = who->cn;
  if (r == 1) {
    json_object *o = json_tokener_parse(val), *x;
    free(val);
    if (o && json_object_is_type(o, json_type_object)) {
      if (json_object_object_get_ex(o, "type", &x) && json_object_is_type(x, json_type_string))
        rq->user.admin = strcmp(json_object_get_string(x), "admin") == 0;
      if (json_object_object_get_ex(o, "groups", &x) && json_object_is_type(x, json_type_array)) {
        size_t n = json_object_array_length(x), k = 0;
        if (!(rq->groups = calloc(n + 1, sizeof *rq->groups))) {
          json_object_put(o);
          return kv_err_set(err, KV_INTERNAL, "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
          json_object *g = json_object_array_get_idx(x, i);
          if (json_object_is_type(g, json_type_string) && (rq->groups[k] = strdup(json_object_get_string(g))))
            k++;
        }
        rq->user.groups = (const char *const *) rq->groups;
      }
    } else
      tc_warn("user record %s/config/user/%s is not a JSON object: %s is a client in no group",
              f->prefix, who->cn, who->desc);
    json_object_put(o);
  }
  who->id.user = &rq->user;
  return 0;
}

void
kvfilter_end(struct kvfilter_req *rq)
{
  if (rq->who)
    rq->who->id.user = NULL;
  if (rq->groups)
    for (char **g = rq->groups; *g; g++)
      free(*g);
  free(rq->groups);
  free(rq->user_buf);
  memo_free(rq->memo);
  memset(rq, 0, sizeof *rq);
}

/* The key without the prefix, NUL-terminated in buf; false if the key is
 * outside the prefix or holds a NUL byte (no rights there). */
static bool
rel_key(const struct kvfilter *f, const uint8_t *key, size_t klen, char *buf, size_t buflen)
{
  if (klen < f->plen || memcmp(key, f->prefix, f->plen) != 0 || klen - f->plen >= buflen)
    return false;
  if (memchr(key + f->plen, 0, klen - f->plen))
    return false;
  memcpy(buf, key + f->plen, klen - f->plen);
  buf[klen - f->plen] = 0;
  return true;
}

static struct tc_kv_lookup
lookup_of(struct kvfilter_req *rq)
{
  return (struct tc_kv_lookup) { rq, lk_by_inode, lk_by_name, lk_pool_creator_group };
}

/* The ACL of /config/inode/<pool>/<id> as a put of the txn branch being
 * checked writes it (a create puts the record and its index together). */
static const struct tc_image_acl *
pending_inode(struct kvfilter_req *rq, uint64_t pool, uint64_t id)
{
  struct memo *mm = memo_of(rq);
  char key[160];
  if (!mm || !mm->branch)
    return NULL;
  int n = snprintf(key, sizeof key, "%s/config/inode/%" PRIu64 "/%" PRIu64, rq->f->prefix, pool, id);
  if (n < 0 || (size_t) n >= sizeof key)
    return NULL;
  for (size_t i = 0; i < mm->nbranch; i++) {
    const struct kv_op *op = &mm->branch[i];
    if (op->type != KV_OP_PUT || op->put.ignore_value || op->put.key.n != (size_t) n ||
        memcmp(op->put.key.p, key, (size_t) n) != 0)
      continue;
    struct memo_img *e = calloc(1, sizeof *e);
    if (!e)
      return NULL;
    e->next = mm->pending_imgs;
    mm->pending_imgs = e;
    if (tc_image_meta_parse(&e->m, pool, id, (const char *) op->put.value.p, op->put.value.n) < 0)
      return NULL;
    e->acl = (struct tc_image_acl) { e->m.owner, e->m.owner_group, e->m.reader_group };
    return &e->acl;
  }
  return NULL;
}

/* The ACL an image record's value gives (for /config/inode/ keys), or that
 * of the inode an index record points to (/index/image/ keys). */
static bool
acl_of_value(struct kvfilter_req *rq, const char *rel, const uint8_t *val, size_t vlen,
             struct tc_image_meta *m, struct tc_image_acl *acl, const struct tc_image_acl **out)
{
  uint64_t pool, id;
  *out = NULL;
  if (strncmp(rel, "/config/inode/", 14) == 0) {
    if (tc_inode_key_parse(rel + 14, strlen(rel + 14), &pool, &id) < 0)
      return false;
    if (!val || tc_image_meta_parse(m, pool, id, (const char *) val, vlen) < 0)
      return true;      /* no valid record: no ACL */
    *acl = (struct tc_image_acl) { m->owner, m->owner_group, m->reader_group };
    *out = acl;
    return true;
  }
  if (strncmp(rel, "/index/image/", 13) == 0) {
    if (val && tc_image_index_parse((const char *) val, vlen, &pool, &id) == 0 && pool && pool <= TC_POOL_MAX &&
        id && id <= TC_INODE_ID_MAX) {
      *out = lk_by_inode(rq, pool, id);
      if (!*out)   /* an image created by the same txn */
        *out = pending_inode(rq, pool, id);
    }
    return true;
  }
  return false;
}

bool
kvfilter_may_read(struct kvfilter_req *rq, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen)
{
  if (!rq->f->use_perms)
    return true;
  char rel[512];
  if (!rel_key(rq->f, key, klen, rel, sizeof rel))
    return false;
  const struct tc_identity *id = &rq->who->id;
  /* A client reads an image record if the record itself (or the inode an
   * index entry points to) lets it: for past revisions and watch events
   * the value at hand decides, not whatever replaced it since. */
  if (id->role == TC_ROLE_USER && !tc_perm_is_admin(id)) {
    struct tc_image_meta m;
    struct tc_image_acl acl;
    const struct tc_image_acl *a;
    memset(&m, 0, sizeof m);
    if (acl_of_value(rq, rel, val, vlen, &m, &acl, &a)) {
      bool ok = a && tc_perm_image_read(id, a);
      tc_image_meta_clear(&m);
      return ok;
    }
  }
  struct tc_kv_lookup lk = lookup_of(rq);
  return tc_perm_kv(id, rel, TC_KV_READ, &lk, NULL);
}

/* Print a key for an error message. */
static void
key_text(const uint8_t *key, size_t klen, char *buf, size_t len)
{
  size_t o = 0;
  for (size_t i = 0; i < klen && o + 5 < len; i++) {
    if (key[i] >= 0x20 && key[i] < 0x7f && key[i] != '"' && key[i] != '\\')
      buf[o++] = (char) key[i];
    else
      o += (size_t) snprintf(buf + o, len - o, "\\x%02x", key[i]);
  }
  buf[o] = 0;
}

static int
denied(struct kvfilter_req *rq, const char *what, const uint8_t *key, size_t klen, struct kv_err *err)
{
  char k[200];
  key_text(key, klen, k, sizeof k);
  kv_err_set(err, KV_PERMISSION_DENIED, "etcdserver: permission denied: %s may not %s key %s", rq->who->desc,
             what, k);
  tc_warn("access filter: %s", err->msg);
  return -1;
}

/* The "lease" field of a JSON record (0 if absent or not a record). */
static int64_t
lease_field(const char *val, size_t vlen)
{
  json_tokener *tok = json_tokener_new();
  json_object *o = tok ? json_tokener_parse_ex(tok, val, (int) vlen) : NULL, *l;
  int64_t v = 0;
  if (o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "lease", &l) &&
      json_object_is_type(l, json_type_int))
    v = json_object_get_int64(l);
  json_object_put(o);
  if (tok)
    json_tokener_free(tok);
  return v;
}

/* The lease /osd/state/<n> says it was registered with: 0 when there is
 * no such record, -1 on a read error. */
static int64_t
state_lease(struct kvfilter_req *rq, uint64_t osd)
{
  char rel[64], *val = NULL;
  size_t len = 0;
  snprintf(rel, sizeof rel, "/osd/state/%" PRIu64, osd);
  int r = get_rel(rq, rel, &val, &len);
  int64_t l = r == 1 ? lease_field(val, len) : r < 0 ? -1 : 0;
  free(val);
  return l;
}

/* The primary /pg/config gives the PG (0: none). */
static uint64_t
pg_primary(struct kvfilter_req *rq, uint64_t pool, uint32_t pg)
{
  char *val = NULL;
  size_t len = 0;
  struct tc_pg_config pc;
  uint64_t p = 0;
  if (get_rel(rq, "/pg/config", &val, &len) != 1 || tc_pg_config_parse(val, &pc) < 0) {
    free(val);
    return 0;
  }
  free(val);
  const struct tc_placement *pl = tc_pg_config_find(&pc, (uint32_t) pool);
  if (pl && pg < pl->pg_count)
    p = pl->primary[pg];
  tc_pg_config_free(&pc);
  return p;
}

/* OSDs share one identity (osd_ca), so which OSD writes is proven by the
 * lease it registered /osd/state/<n> with: that record carries its lease
 * ("lease", checked here when it is written), and every write of
 * /osd/stats/<n> or of the /pg/state or /pgstats of a PG whose primary is n must be
 * attached to that same lease. NULL if allowed, else why not. */
static const char *
osd_write_refusal(struct kvfilter_req *rq, const char *rel, const struct kv_op *op)
{
  uint64_t osd = 0, pool = 0;
  uint32_t pg = 0;
  int kind = tc_perm_osd_key(rel, &osd, &pool, &pg);
  if (!kind)
    return "not a key an OSD writes";
  if (!op || op->type != KV_OP_PUT || op->put.ignore_lease || op->put.ignore_value)
    return "an OSD only puts these keys with its registration lease (no deletes: the lease removes them)";
  int64_t lease = op->put.lease;
  if (lease == 0)
    return "an OSD writes these keys only attached to its registration lease";
  if (kind == TC_OSD_KEY_STATE) {
    if (lease_field((const char *) op->put.value.p, op->put.value.n) != lease)
      return "the record's \"lease\" must be the lease it is put with";
    int64_t held = state_lease(rq, osd);
    if (held < 0)
      return "reading the current record failed";
    return held == 0 || held == lease ? NULL : "another lease holds this OSD number";
  }
  if ((kind == TC_OSD_KEY_PG_STATE || kind == TC_OSD_KEY_PG_STATS) && !(osd = pg_primary(rq, pool, pg)))
    return "/pg/config gives this PG no primary";
  int64_t held = state_lease(rq, osd);
  if (held <= 0 || held != lease)
    return kind == TC_OSD_KEY_STATS ? "the lease is not the one /osd/state/<n> was registered with"
                                    : "the lease is not the registration lease of the PG's primary";
  return NULL;
}

static int
check_write(struct kvfilter_req *rq, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
            bool is_put, const struct kv_op *op, struct kv_err *err)
{
  char rel[512];
  if (!rel_key(rq->f, key, klen, rel, sizeof rel))
    return denied(rq, is_put ? "write" : "delete", key, klen, err);
  struct tc_image_meta m;
  struct tc_image_acl acl;
  const struct tc_image_acl *new_img = NULL;
  memset(&m, 0, sizeof m);
  uint64_t pool, id;
  if (strncmp(rel, "/config/inode/", 14) == 0 && tc_inode_key_parse(rel + 14, strlen(rel + 14), &pool, &id) < 0) {
    char k[200];
    key_text(key, klen, k, sizeof k);
    kv_err_set(err, KV_PERMISSION_DENIED, "etcdserver: permission denied: %s may not %s key %s: %s",
               rq->who->desc, is_put ? "write" : "delete", k, tc_last_error());
    tc_warn("access filter: %s", err->msg);
    return -1;
  }
  if (is_put)
    acl_of_value(rq, rel, val, vlen, &m, &acl, &new_img);
  struct tc_kv_lookup lk = lookup_of(rq);
  bool ok = tc_perm_kv(&rq->who->id, rel, TC_KV_WRITE, &lk, new_img);
  tc_image_meta_clear(&m);
  if (!ok)
    return denied(rq, is_put ? "write" : "delete", key, klen, err);
  const char *why = rq->who->id.role == TC_ROLE_OSD ? osd_write_refusal(rq, rel, op) : NULL;
  if (why) {
    char k[200];
    key_text(key, klen, k, sizeof k);
    kv_err_set(err, KV_PERMISSION_DENIED, "etcdserver: permission denied: %s may not %s key %s: %s",
               rq->who->desc, is_put ? "write" : "delete", k, why);
    tc_warn("access filter: %s", err->msg);
    return -1;
  }
  return 0;
}

static int
check_read_key(struct kvfilter_req *rq, const uint8_t *key, size_t klen, struct kv_err *err)
{
  char *val = NULL;
  size_t vlen = 0;
  int r = rq->src.get(rq->src.ctx, key, klen, &val, &vlen);
  if (r < 0)
    return kv_err_set(err, KV_INTERNAL, "access filter: reading a key failed");
  bool ok = kvfilter_may_read(rq, key, klen, r ? (uint8_t *) val : NULL, vlen);
  /* An absent key: may the caller read it were it there? (Otherwise a
   * compare would tell whether a hidden key exists.) */
  if (!ok && r == 0) {
    /* An absent key: may the caller create it (as the client library's
     * create does: compare absent, then put an image it will own)? */
    char rel[512];
    struct tc_kv_lookup lk = lookup_of(rq);
    const struct tc_identity *id = &rq->who->id;
    struct tc_image_acl own = { id->name, NULL, NULL };
    ok = rel_key(rq->f, key, klen, rel, sizeof rel) &&
         (tc_perm_kv(id, rel, TC_KV_READ, &lk, NULL) || tc_perm_kv(id, rel, TC_KV_WRITE, &lk, NULL) ||
          (id->role == TC_ROLE_USER && tc_perm_kv(id, rel, TC_KV_WRITE, &lk, &own)));
  }
  free(val);
  return ok ? 0 : denied(rq, "read (compare)", key, klen, err);
}

struct range_check {
  struct kvfilter_req *rq;
  struct kv_err *err;
  bool failed;
};

static int
delete_range_cb(void *opaque, const uint8_t *key, size_t klen)
{
  struct range_check *c = opaque;
  if (check_write(c->rq, key, klen, NULL, 0, false, NULL, c->err) < 0) {
    c->failed = true;
    return 1;
  }
  return 0;
}

static int
check_delete(struct kvfilter_req *rq, const struct kv_delete_req *d, struct kv_err *err)
{
  if (!d->end.n)
    return check_write(rq, d->key.p, d->key.n, NULL, 0, false, NULL, err);
  if (!rq->src.keys)
    return denied(rq, "delete a range from", d->key.p, d->key.n, err);
  struct range_check c = { rq, err, false };
  if (rq->src.keys(rq->src.ctx, d->key.p, d->key.n, d->end.p, d->end.n, delete_range_cb, &c) < 0)
    return c.failed ? -1 : kv_err_set(err, KV_INTERNAL, "access filter: listing the range failed");
  return c.failed ? -1 : 0;
}

static int
compare_range_cb(void *opaque, const uint8_t *key, size_t klen)
{
  struct range_check *c = opaque;
  if (check_read_key(c->rq, key, klen, c->err) < 0) {
    c->failed = true;
    return 1;
  }
  return 0;
}

static int
check_ops(struct kvfilter_req *rq, const struct kv_op *ops, size_t n, struct kv_err *err);

static int
check_one(struct kvfilter_req *rq, const struct kv_op *op, struct kv_err *err)
{
  switch (op->type) {
  case KV_OP_RANGE:
    return 0;    /* never refused: the results are filtered */
  case KV_OP_PUT:
    if (op->put.ignore_value) {
      /* keeps the current value: judge by it */
      char *val = NULL;
      size_t vlen = 0;
      int r = rq->src.get(rq->src.ctx, op->put.key.p, op->put.key.n, &val, &vlen);
      if (r < 0)
        return kv_err_set(err, KV_INTERNAL, "access filter: reading a key failed");
      int rc = check_write(rq, op->put.key.p, op->put.key.n, (uint8_t *) val, vlen, true, op, err);
      free(val);
      return rc;
    }
    return check_write(rq, op->put.key.p, op->put.key.n, op->put.value.p, op->put.value.n, true, op, err);
  case KV_OP_DELETE:
    return check_delete(rq, &op->del, err);
  case KV_OP_TXN: {
    const struct kv_txn_req *t = &op->txn;
    for (size_t i = 0; i < t->ncmp; i++) {
      const struct kv_compare *c = &t->cmp[i];
      if (!c->end.n) {
        if (check_read_key(rq, c->key.p, c->key.n, err) < 0)
          return -1;
        continue;
      }
      if (!rq->src.keys)
        return denied(rq, "compare a range from", c->key.p, c->key.n, err);
      struct range_check rc = { rq, err, false };
      if (rq->src.keys(rq->src.ctx, c->key.p, c->key.n, c->end.p, c->end.n, compare_range_cb, &rc) < 0 ||
          rc.failed)
        return rc.failed ? -1 : kv_err_set(err, KV_INTERNAL, "access filter: listing the range failed");
    }
    if (check_ops(rq, t->succ, t->nsucc, err) < 0 || check_ops(rq, t->fail, t->nfail, err) < 0)
      return -1;
    return 0;
  }
  }
  return kv_err_set(err, KV_INVALID_ARGUMENT, "unknown operation");
}

static int
check_ops(struct kvfilter_req *rq, const struct kv_op *ops, size_t n, struct kv_err *err)
{
  struct memo *mm = memo_of(rq);
  if (!mm)
    return kv_err_set(err, KV_INTERNAL, "access filter: out of memory");
  const struct kv_op *saved = mm->branch;
  size_t nsaved = mm->nbranch;
  mm->branch = ops;
  mm->nbranch = n;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = check_one(rq, &ops[i], err);
  mm->branch = saved;
  mm->nbranch = nsaved;
  return rc;
}

int
kvfilter_check_op(struct kvfilter_req *rq, const struct kv_op *op, struct kv_err *err)
{
  if (!rq->f->use_perms)
    return 0;
  return check_one(rq, op, err);
}

int
kvfilter_check_watch(struct kvfilter_req *rq, const struct kv_watch_req *w, struct kv_err *err)
{
  if (!rq->f->use_perms)
    return 0;
  if (rq->who->id.role == TC_ROLE_ANON)
    return denied(rq, "watch", w->key.p, w->key.n, err);
  return 0;
}

int
kvfilter_check_compact(struct kvfilter_req *rq, struct kv_err *err)
{
  if (!rq->f->use_perms || tc_perm_is_admin(&rq->who->id))
    return 0;
  kv_err_set(err, KV_PERMISSION_DENIED, "etcdserver: permission denied: %s may not compact the KV "
             "(administrators only)", rq->who->desc);
  tc_warn("access filter: %s", err->msg);
  return -1;
}
