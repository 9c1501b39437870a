/* range, put, deleterange, txn and compaction with etcd's semantics. */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvexec.h"

json_object *
kvx_int64(int64_t v)
{
  char b[24];
  snprintf(b, sizeof b, "%" PRId64, v);
  return json_object_new_string(b);
}

static json_object *
kvx_uint64(uint64_t v)
{
  char b[24];
  snprintf(b, sizeof b, "%" PRIu64, v);
  return json_object_new_string(b);
}

static void
add_nonzero(json_object *o, const char *name, int64_t v)
{
  if (v)
    json_object_object_add(o, name, kvx_int64(v));
}

static json_object *
b64_string(const uint8_t *p, size_t n)
{
  size_t len;
  char *s = kv_b64_encode(p, n, &len);
  if (!s)
    return NULL;
  json_object *o = json_object_new_string_len(s, (int) len);
  free(s);
  return o;
}

json_object *
kvx_header(struct kvs *s, int64_t rev)
{
  uint64_t cid, mid;
  int64_t term;
  kvs_ids(s, &cid, &mid, &term);
  json_object *h = json_object_new_object();
  json_object_object_add(h, "cluster_id", kvx_uint64(cid));
  json_object_object_add(h, "member_id", kvx_uint64(mid));
  add_nonzero(h, "revision", rev);
  json_object_object_add(h, "raft_term", kvx_int64(term));
  return h;
}

json_object *
kvx_kv(const struct kv_rec *r, bool keys_only)
{
  json_object *o = json_object_new_object();
  json_object_object_add(o, "key", b64_string(r->key, r->klen));
  add_nonzero(o, "create_revision", r->create_rev);
  add_nonzero(o, "mod_revision", r->mod_rev);
  add_nonzero(o, "version", r->version);
  if (!keys_only && r->vlen)
    json_object_object_add(o, "value", b64_string(r->val, r->vlen));
  add_nonzero(o, "lease", r->lease);
  return o;
}

/* Inner headers of a txn carry only the final revision: set at the end. */
struct exec_ctx {
  json_object *headers;   /* array of header objects to fill */
};

static json_object *
inner_header(struct exec_ctx *cx)
{
  json_object *h = json_object_new_object();
  json_object_array_add(cx->headers, json_object_get(h));
  return h;
}

static int exec_op(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_op *op, json_object *resp,
                   struct kv_err *err);

struct range_acc {
  json_object *kvs;
  int64_t count, limit;
  bool keys_only, count_only, more;
};

static int
range_cb(void *opaque, const struct kv_rec *r)
{
  struct range_acc *a = opaque;
  a->count++;
  if (a->count_only)
    return 0;
  if (a->limit > 0 && a->count > a->limit) {
    a->more = true;
    return 0;   /* keep counting */
  }
  json_object_array_add(a->kvs, kvx_kv(r, a->keys_only));
  return 0;
}

static int
check_revision(struct kvs_txn *tx, int64_t rev, struct kv_err *err)
{
  if (rev > tx->rev)
    return kv_err_set(err, KV_OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision");
  if (rev > 0 && rev < tx->compact_rev)
    return kv_err_set(err, KV_OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted");
  return 0;
}

static int
exec_range(struct kvs_txn *tx, const struct kv_range_req *r, json_object *resp, struct kv_err *err)
{
  if (r->key.n == 0)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is not provided");
  if (check_revision(tx, r->revision, err) < 0)
    return -1;
  struct range_acc a = { .kvs = json_object_new_array(), .limit = r->limit,
                         .keys_only = r->keys_only, .count_only = r->count_only };
  if (kvs_range(tx, r->key.p, r->key.n, r->end.p, r->end.n, r->revision, range_cb, &a, err) < 0) {
    json_object_put(a.kvs);
    return -1;
  }
  if (json_object_array_length(a.kvs))
    json_object_object_add(resp, "kvs", a.kvs);
  else
    json_object_put(a.kvs);
  if (a.more)
    json_object_object_add(resp, "more", json_object_new_boolean(1));
  add_nonzero(resp, "count", a.count);
  return 0;
}

static int
exec_put(struct kvs_txn *tx, const struct kv_put_req *r, json_object *resp, struct kv_err *err)
{
  struct kv_rec prev;
  if (r->key.n == 0)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is not provided");
  if (r->ignore_value && r->value.n)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: value is provided");
  if (r->ignore_lease && r->lease)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: lease is provided");
  int had = kvs_get(tx, r->key.p, r->key.n, &prev, err);
  if (had < 0)
    return -1;
  if ((r->ignore_value || r->ignore_lease) && !had)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key not found");
  int64_t lease = r->ignore_lease ? prev.lease : r->lease;
  if (lease && !r->ignore_lease) {
    int ex = kvs_lease_exists(tx, lease);
    if (ex < 0)
      return kv_err_set(err, KV_INTERNAL, "store: lease lookup failed");
    if (!ex)
      return kv_err_set(err, KV_NOT_FOUND, "etcdserver: requested lease not found");
  }
  if (had && r->prev_kv)
    json_object_object_add(resp, "prev_kv", kvx_kv(&prev, false));
  uint8_t *copy = NULL;
  const uint8_t *val = r->value.p;
  size_t vlen = r->value.n;
  if (r->ignore_value) {
    /* prev points into the store and the put rewrites it: copy first. */
    copy = malloc(prev.vlen ? prev.vlen : 1);
    if (!copy)
      return kv_err_set(err, KV_INTERNAL, "out of memory");
    memcpy(copy, prev.val, prev.vlen);
    val = copy;
    vlen = prev.vlen;
  }
  int rc = kvs_put(tx, r->key.p, r->key.n, val, vlen, lease, err);
  free(copy);
  return rc;
}

struct del_acc {
  json_object *prev;
  uint8_t *keys;
  size_t len, cap;
  int64_t count;
  bool oom;
};

static int
del_cb(void *opaque, const struct kv_rec *r)
{
  struct del_acc *a = opaque;
  if (a->prev)
    json_object_array_add(a->prev, kvx_kv(r, false));
  if (a->len + r->klen + sizeof(size_t) > a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 4096;
    while (cap < a->len + r->klen + sizeof(size_t))
      cap *= 2;
    uint8_t *nb = realloc(a->keys, cap);
    if (!nb) {
      a->oom = true;
      return 1;
    }
    a->keys = nb;
    a->cap = cap;
  }
  memcpy(a->keys + a->len, &r->klen, sizeof(size_t));
  memcpy(a->keys + a->len + sizeof(size_t), r->key, r->klen);
  a->len += sizeof(size_t) + r->klen;
  a->count++;
  return 0;
}

static int
exec_delete(struct kvs_txn *tx, const struct kv_delete_req *r, json_object *resp, struct kv_err *err)
{
  if (r->key.n == 0)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is not provided");
  struct del_acc a = { .prev = r->prev_kv ? json_object_new_array() : NULL };
  int rc = kvs_range(tx, r->key.p, r->key.n, r->end.p, r->end.n, 0, del_cb, &a, err);
  if (rc == 0 && a.oom)
    rc = kv_err_set(err, KV_INTERNAL, "out of memory");
  for (size_t o = 0; rc == 0 && o < a.len;) {
    size_t n;
    memcpy(&n, a.keys + o, sizeof n);
    if (kvs_delete(tx, a.keys + o + sizeof n, n, err) < 0)
      rc = -1;
    o += sizeof n + n;
  }
  free(a.keys);
  if (rc < 0) {
    json_object_put(a.prev);
    return -1;
  }
  add_nonzero(resp, "deleted", a.count);
  if (a.prev && json_object_array_length(a.prev))
    json_object_object_add(resp, "prev_kvs", a.prev);
  else
    json_object_put(a.prev);
  return 0;
}

static int64_t
cmp_bytes(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c)
    return c;
  return an < bn ? -1 : an > bn;
}

static bool
compare_kv(const struct kv_compare *c, const struct kv_rec *r)
{
  int64_t d;
  switch (c->target) {
  case KV_CMP_VALUE: d = cmp_bytes(r->val, r->vlen, c->value.p ? c->value.p : (const uint8_t *) "", c->value.n); break;
  case KV_CMP_VERSION: d = r->version < c->num ? -1 : r->version > c->num; break;
  case KV_CMP_CREATE: d = r->create_rev < c->num ? -1 : r->create_rev > c->num; break;
  case KV_CMP_MOD: d = r->mod_rev < c->num ? -1 : r->mod_rev > c->num; break;
  case KV_CMP_LEASE: d = r->lease < c->num ? -1 : r->lease > c->num; break;
  default: return false;
  }
  switch (c->result) {
  case KV_CMP_EQUAL: return d == 0;
  case KV_CMP_GREATER: return d > 0;
  case KV_CMP_LESS: return d < 0;
  case KV_CMP_NOT_EQUAL: return d != 0;
  }
  return false;
}

struct cmp_acc {
  const struct kv_compare *c;
  bool ok;
  int64_t n;
};

static int
cmp_cb(void *opaque, const struct kv_rec *r)
{
  struct cmp_acc *a = opaque;
  a->n++;
  if (!compare_kv(a->c, r)) {
    a->ok = false;
    return 1;
  }
  return 0;
}

/* etcd's applyCompare: every key in the range must match; a missing key
 * compares as zeros, except that a value compare then fails. */
static int
eval_compare(struct kvs_txn *tx, const struct kv_compare *c, bool *ok, struct kv_err *err)
{
  struct cmp_acc a = { .c = c, .ok = true };
  if (kvs_range(tx, c->key.p, c->key.n, c->end.p, c->end.n, 0, cmp_cb, &a, err) < 0)
    return -1;
  if (a.n == 0) {
    struct kv_rec zero = { .val = (const uint8_t *) "" };
    *ok = c->target == KV_CMP_VALUE ? false : compare_kv(c, &zero);
  } else
    *ok = a.ok;
  return 0;
}

static int
exec_txn(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_txn_req *t, json_object *resp,
         struct kv_err *err)
{
  bool ok = true;
  for (size_t i = 0; i < t->ncmp && ok; i++)
    if (eval_compare(tx, &t->cmp[i], &ok, err) < 0)
      return -1;
  const struct kv_op *ops = ok ? t->succ : t->fail;
  size_t n = ok ? t->nsucc : t->nfail;
  if (ok)
    json_object_object_add(resp, "succeeded", json_object_new_boolean(1));
  json_object *arr = json_object_new_array();
  json_object_object_add(resp, "responses", arr);
  static const char *const names[] = { "response_range", "response_put", "response_delete_range", "response_txn" };
  for (size_t i = 0; i < n; i++) {
    json_object *r = json_object_new_object();
    json_object *w = json_object_new_object();
    json_object_object_add(w, names[ops[i].type], r);
    json_object_array_add(arr, w);
    if (ops[i].type == KV_OP_TXN)
      json_object_object_add(r, "header", json_object_new_object());
    else
      json_object_object_add(r, "header", inner_header(cx));
    if (exec_op(tx, cx, &ops[i], r, err) < 0)
      return -1;
  }
  if (n == 0) {
    json_object_object_del(resp, "responses");
  }
  return 0;
}

static int
exec_op(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_op *op, json_object *resp, struct kv_err *err)
{
  switch (op->type) {
  case KV_OP_RANGE: return exec_range(tx, &op->range, resp, err);
  case KV_OP_PUT: return exec_put(tx, &op->put, resp, err);
  case KV_OP_DELETE: return exec_delete(tx, &op->del, resp, err);
  case KV_OP_TXN: return exec_txn(tx, cx, &op->txn, resp, err);
  }
  return kv_err_set(err, KV_INVALID_ARGUMENT, "unknown operation");
}

/* etcd checks every lease a txn would attach before running it. */
static int
check_leases(struct kvs_txn *tx, const struct kv_op *op, struct kv_err *err)
{
  if (op->type == KV_OP_PUT && op->put.lease) {
    int ex = kvs_lease_exists(tx, op->put.lease);
    if (ex <= 0)
      return kv_err_set(err, KV_NOT_FOUND, "etcdserver: requested lease not found");
  }
  if (op->type == KV_OP_TXN) {
    for (size_t i = 0; i < op->txn.nsucc; i++)
      if (check_leases(tx, &op->txn.succ[i], err) < 0)
        return -1;
    for (size_t i = 0; i < op->txn.nfail; i++)
      if (check_leases(tx, &op->txn.fail[i], err) < 0)
        return -1;
  }
  return 0;
}

struct op_job {
  const struct kv_op *op;
  json_object *resp;
};

static void
finish(struct kvs *s, json_object *resp, struct exec_ctx *cx, int64_t rev)
{
  for (size_t i = 0; i < json_object_array_length(cx->headers); i++)
    json_object_object_add(json_object_array_get_idx(cx->headers, i), "revision", kvx_int64(rev));
  json_object_object_add(resp, "header", kvx_header(s, rev));
  json_object_put(cx->headers);
}

static int
write_fn(struct kvs_txn *tx, void *arg, struct kv_err *err)
{
  struct op_job *j = arg;
  struct exec_ctx cx = { json_object_new_array() };
  j->resp = json_object_new_object();
  json_object_object_add(j->resp, "header", NULL);   /* first, as etcd prints it */
  if (check_leases(tx, j->op, err) < 0 || exec_op(tx, &cx, j->op, j->resp, err) < 0) {
    json_object_put(cx.headers);
    json_object_put(j->resp);
    j->resp = NULL;
    return -1;
  }
  finish(tx->s, j->resp, &cx, tx->rev);
  return 0;
}

json_object *
kvx_op(struct kvs *s, const struct caller *who, const struct kv_op *op, struct kv_err *err)
{
  (void) who;   /* the access filter hooks in here */
  if (kv_op_writes(op)) {
    struct op_job j = { op, NULL };
    if (kvs_write(s, write_fn, NULL, &j, err) < 0) {
      json_object_put(j.resp);
      return NULL;
    }
    return j.resp;
  }
  struct kvs_txn tx;
  if (kvs_read_begin(s, &tx, err) < 0)
    return NULL;
  struct exec_ctx cx = { json_object_new_array() };
  json_object *resp = json_object_new_object();
  json_object_object_add(resp, "header", NULL);
  if (exec_op(&tx, &cx, op, resp, err) < 0) {
    kvs_read_end(&tx);
    json_object_put(cx.headers);
    json_object_put(resp);
    return NULL;
  }
  finish(s, resp, &cx, tx.rev);
  kvs_read_end(&tx);
  return resp;
}

struct compact_job {
  const struct kv_compact_req *r;
  int64_t rev;
};

static int
compact_fn(struct kvs_txn *tx, void *arg, struct kv_err *err)
{
  struct compact_job *j = arg;
  if (kvs_compact(tx, j->r->revision, err) < 0)
    return -1;
  j->rev = tx->rev;
  return 0;
}

json_object *
kvx_compact(struct kvs *s, const struct caller *who, const struct kv_compact_req *r, struct kv_err *err)
{
  (void) who;
  struct compact_job j = { r, 0 };
  if (kvs_write(s, compact_fn, NULL, &j, err) < 0)
    return NULL;
  json_object *resp = json_object_new_object();
  json_object_object_add(resp, "header", kvx_header(s, j.rev));
  return resp;
}
