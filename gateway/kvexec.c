/* range, put, deleterange, txn and compaction with etcd's semantics. */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvexec.h"
#include "kvfilter.h"
#include "vector.h"

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
  bool *path;             /* outcome of every compare on the way, in order */
  size_t npath, cap, pos;
  struct kvfilter_req *rq; /* use_perms: the caller's rights, or NULL */
};

/* The filter reads the snapshot (or write transaction) the request runs on. */
static int
src_get(void *ctx, const uint8_t *key, size_t klen, char **val, size_t *len)
{
  struct kvs_txn *tx = ctx;
  struct kv_rec r;
  struct kv_err err;
  int rc = kvs_get(tx, key, klen, &r, &err);
  if (rc <= 0)
    return rc;
  if (!(*val = malloc(r.vlen + 1)))
    return -1;
  memcpy(*val, r.val, r.vlen);
  (*val)[r.vlen] = 0;
  *len = r.vlen;
  return 1;
}

struct src_keys_ctx {
  int (*cb)(void *opaque, const uint8_t *k, size_t kl);
  void *opaque;
};

static int
src_keys_cb(void *opaque, const struct kv_rec *r)
{
  struct src_keys_ctx *c = opaque;
  return c->cb(c->opaque, r->key, r->klen);
}

static int
src_keys(void *ctx, const uint8_t *key, size_t klen, const uint8_t *end, size_t elen,
         int (*cb)(void *opaque, const uint8_t *k, size_t kl), void *opaque)
{
  struct kv_err err;
  struct src_keys_ctx c = { cb, opaque };
  return kvs_range(ctx, key, klen, end, elen, 0, src_keys_cb, &c, &err);
}

int
kvx_filter_begin(struct kvs_txn *tx, const struct caller *who, struct kvfilter_req *rq, struct kv_err *err)
{
  if (!who || !who->filter || !who->filter->use_perms || !who->gid)
    return 0;
  struct kvfilter_src src = { tx, src_get, src_keys };
  if (kvfilter_begin(rq, who->filter, who->gid, &src, err) < 0) {
    kvfilter_end(rq);
    return -1;
  }
  return 1;
}

static json_object *
inner_header(struct exec_ctx *cx)
{
  json_object *h = json_object_new_object();
  json_object_array_add(cx->headers, json_object_get(h));
  return h;
}

static int exec_op(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_op *op, json_object *resp,
                   struct kv_err *err);

/* A record kept for sorting: its reply and what it sorts by. */
struct sorted_kv {
  json_object *kv;
  int64_t num;
  uint8_t *bytes;     /* key or value, for KEY and VALUE */
  size_t blen;
  size_t seq;         /* key order, to break ties */
};

struct range_acc {
  const struct kv_range_req *r;
  struct kvfilter_req *rq;   /* use_perms: only keys the caller may read */
  json_object *kvs;
  int64_t count;
  bool fetch_all;     /* sort or filters: collect everything, then cut */
  bool more;
  struct sorted_kv *all;
  size_t n, cap;
  bool oom;
};

static bool
filtered_out(const struct kv_range_req *q, const struct kv_rec *r)
{
  return (q->max_mod_revision && r->mod_rev > q->max_mod_revision) ||
         (q->min_mod_revision && r->mod_rev < q->min_mod_revision) ||
         (q->max_create_revision && r->create_rev > q->max_create_revision) ||
         (q->min_create_revision && r->create_rev < q->min_create_revision);
}

static int
range_cb(void *opaque, const struct kv_rec *r)
{
  struct range_acc *a = opaque;
  if (a->rq && !kvfilter_may_read(a->rq, r->key, r->klen, r->val, r->vlen))
    return 0;
  a->count++;
  if (a->r->count_only)
    return 0;
  if (!a->fetch_all) {
    if (a->r->limit > 0 && a->count > a->r->limit) {
      a->more = true;
      return 0;   /* keep counting */
    }
    json_object_array_add(a->kvs, kvx_kv(r, a->r->keys_only));
    return 0;
  }
  if (filtered_out(a->r, r))
    return 0;
  if (tc_grow(&a->all, &a->cap, a->n + 1, sizeof *a->all, 64) < 0) {
    a->oom = true;
    return 1;
  }
  struct sorted_kv *e = &a->all[a->n];
  memset(e, 0, sizeof *e);
  e->seq = a->n;
  switch (a->r->sort_target) {
  case KV_SORT_VERSION: e->num = r->version; break;
  case KV_SORT_CREATE: e->num = r->create_rev; break;
  case KV_SORT_MOD: e->num = r->mod_rev; break;
  case KV_SORT_VALUE: case KV_SORT_KEY: {
    const uint8_t *p = a->r->sort_target == KV_SORT_KEY ? r->key : r->val;
    e->blen = a->r->sort_target == KV_SORT_KEY ? r->klen : r->vlen;
    e->bytes = malloc(e->blen ? e->blen : 1);
    if (!e->bytes) {
      a->oom = true;
      return 1;
    }
    memcpy(e->bytes, p, e->blen);
    break;
  }
  }
  e->kv = kvx_kv(r, a->r->keys_only);
  a->n++;
  return 0;
}

static int
sorted_cmp(const void *x, const void *y, void *descending)
{
  const struct sorted_kv *a = x, *b = y;
  int c;
  if (a->bytes || b->bytes)
    c = kv_bytes_cmp(a->bytes, a->blen, b->bytes, b->blen);
  else
    c = a->num < b->num ? -1 : a->num > b->num;
  if (*(bool *) descending)
    c = -c;
  if (!c)
    c = a->seq < b->seq ? -1 : a->seq > b->seq;
  return c;
}

/* etcd's Range: fetch, prune by the revision filters, sort, then cut to limit. */
static void
finish_sorted(struct range_acc *a)
{
  int order = a->r->sort_order;
  if (order == KV_SORT_NONE && a->r->sort_target != KV_SORT_KEY)
    order = KV_SORT_ASCEND;
  if (order != KV_SORT_NONE) {
    bool descending = order == KV_SORT_DESCEND;
    qsort_r(a->all, a->n, sizeof *a->all, sorted_cmp, &descending);
  }
  for (size_t i = 0; i < a->n; i++) {
    if (a->r->limit > 0 && i >= (size_t) a->r->limit) {
      a->more = true;
      json_object_put(a->all[i].kv);
    } else
      json_object_array_add(a->kvs, a->all[i].kv);
    free(a->all[i].bytes);
  }
  free(a->all);
  a->all = NULL;
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
exec_range(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_range_req *r, json_object *resp,
           struct kv_err *err)
{
  if (r->key.n == 0)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is not provided");
  if (check_revision(tx, r->revision, err) < 0)
    return -1;
  struct range_acc a = { .r = r, .rq = cx->rq, .kvs = json_object_new_array() };
  a.fetch_all = r->sort_order != KV_SORT_NONE || r->sort_target != KV_SORT_KEY || r->min_mod_revision ||
                r->max_mod_revision || r->min_create_revision || r->max_create_revision;
  int rc = kvs_range(tx, r->key.p, r->key.n, r->end.p, r->end.n, r->revision, range_cb, &a, err);
  if (rc == 0 && a.oom)
    rc = kv_err_set(err, KV_INTERNAL, "range: out of memory");
  if (rc < 0) {
    for (size_t i = 0; i < a.n; i++) {
      json_object_put(a.all[i].kv);
      free(a.all[i].bytes);
    }
    free(a.all);
    json_object_put(a.kvs);
    return -1;
  }
  if (a.fetch_all)
    finish_sorted(&a);
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
  if (tc_grow(&a->keys, &a->cap, a->len + r->klen + sizeof(size_t), 1, 4096) < 0) {
    a->oom = true;
    return 1;
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

static bool
compare_kv(const struct kv_compare *c, const struct kv_rec *r)
{
  int64_t d;
  switch (c->target) {
  case KV_CMP_VALUE: d = kv_bytes_cmp(r->val, r->vlen, c->value.p, c->value.n); break;
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

/* etcd decides every branch, nested txns included, on the state before
 * the txn runs (compareToPath); the outcomes go into cx->path in order. */
static int
compute_path(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_txn_req *t, struct kv_err *err)
{
  bool ok = true;
  for (size_t i = 0; i < t->ncmp && ok; i++)
    if (eval_compare(tx, &t->cmp[i], &ok, err) < 0)
      return -1;
  if (tc_grow(&cx->path, &cx->cap, cx->npath + 1, sizeof *cx->path, 8) < 0)
    return kv_err_set(err, KV_INTERNAL, "out of memory");
  cx->path[cx->npath++] = ok;
  const struct kv_op *ops = ok ? t->succ : t->fail;
  size_t n = ok ? t->nsucc : t->nfail;
  for (size_t i = 0; i < n; i++)
    if (ops[i].type == KV_OP_TXN && compute_path(tx, cx, &ops[i].txn, err) < 0)
      return -1;
  return 0;
}

static int
exec_txn(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_txn_req *t, json_object *resp,
         struct kv_err *err)
{
  if (cx->pos >= cx->npath)
    return kv_err_set(err, KV_INTERNAL, "txn: compare outcomes out of step");
  bool ok = cx->path[cx->pos++];
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
  case KV_OP_RANGE: return exec_range(tx, cx, &op->range, resp, err);
  case KV_OP_PUT: return exec_put(tx, &op->put, resp, err);
  case KV_OP_DELETE: return exec_delete(tx, &op->del, resp, err);
  case KV_OP_TXN: return exec_txn(tx, cx, &op->txn, resp, err);
  }
  return kv_err_set(err, KV_INVALID_ARGUMENT, "unknown operation");
}

struct op_job {
  const struct kv_op *op;
  const struct caller *who;
  json_object *resp;
};

/* etcd's checkRequests: refuse a request on the state before it runs, so
 * that a write fails before its first change (see kvs_write). */
static int
validate_op(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_op *op, size_t *pos, struct kv_err *err)
{
  switch (op->type) {
  case KV_OP_RANGE:
    if (op->range.key.n == 0)
      return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is not provided");
    return check_revision(tx, op->range.revision, err);
  case KV_OP_DELETE:
    if (op->del.key.n == 0)
      return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is not provided");
    return 0;
  case KV_OP_PUT: {
    const struct kv_put_req *r = &op->put;
    struct kv_rec cur;
    if (r->key.n == 0)
      return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is not provided");
    if (r->key.n > KV_MAX_KEY)
      return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is longer than %d bytes", KV_MAX_KEY);
    if (r->ignore_value && r->value.n)
      return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: value is provided");
    if (r->ignore_lease && r->lease)
      return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: lease is provided");
    if (r->ignore_value || r->ignore_lease) {
      int had = kvs_get(tx, r->key.p, r->key.n, &cur, err);
      if (had < 0)
        return -1;
      if (!had)
        return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key not found");
    }
    if (r->lease && !r->ignore_lease) {
      int ex = kvs_lease_exists(tx, r->lease);
      if (ex < 0)
        return kv_err_set(err, KV_INTERNAL, "store: lease lookup failed");
      if (!ex)
        return kv_err_set(err, KV_NOT_FOUND, "etcdserver: requested lease not found");
    }
    return 0;
  }
  case KV_OP_TXN: {
    if (*pos >= cx->npath)
      return kv_err_set(err, KV_INTERNAL, "txn: compare outcomes out of step");
    bool ok = cx->path[(*pos)++];
    const struct kv_op *ops = ok ? op->txn.succ : op->txn.fail;
    size_t n = ok ? op->txn.nsucc : op->txn.nfail;
    for (size_t i = 0; i < n; i++)
      if (validate_op(tx, cx, &ops[i], pos, err) < 0)
        return -1;
    return 0;
  }
  }
  return kv_err_set(err, KV_INVALID_ARGUMENT, "unknown operation");
}

/* Run a top-level op: decide the txn branches, check, then execute. */
static int
run_op(struct kvs_txn *tx, struct exec_ctx *cx, const struct kv_op *op, json_object *resp, struct kv_err *err)
{
  size_t pos = 0;
  if (cx->rq && kvfilter_check_op(cx->rq, op, err) < 0)
    return -1;
  if (op->type == KV_OP_TXN && compute_path(tx, cx, &op->txn, err) < 0)
    return -1;
  if (validate_op(tx, cx, op, &pos, err) < 0)
    return -1;
  return exec_op(tx, cx, op, resp, err);
}

static void
finish(struct kvs *s, json_object *resp, struct exec_ctx *cx, int64_t rev)
{
  for (size_t i = 0; i < json_object_array_length(cx->headers); i++)
    json_object_object_add(json_object_array_get_idx(cx->headers, i), "revision", kvx_int64(rev));
  json_object_object_add(resp, "header", kvx_header(s, rev));
  json_object_put(cx->headers);
  free(cx->path);
}

static int
write_fn(struct kvs_txn *tx, void *arg, struct kv_err *err)
{
  struct op_job *j = arg;
  struct exec_ctx cx = { .headers = json_object_new_array() };
  struct kvfilter_req rq;
  int f = kvx_filter_begin(tx, j->who, &rq, err);
  if (f < 0) {
    json_object_put(cx.headers);
    return -1;
  }
  cx.rq = f ? &rq : NULL;
  j->resp = json_object_new_object();
  json_object_object_add(j->resp, "header", NULL);   /* first, as etcd prints it */
  int rc = run_op(tx, &cx, j->op, j->resp, err);
  if (f)
    kvfilter_end(&rq);
  if (rc < 0) {
    json_object_put(cx.headers);
    free(cx.path);
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
  if (kv_op_writes(op)) {
    struct op_job j = { op, who, NULL };
    if (kvs_write(s, write_fn, NULL, &j, err) < 0) {
      json_object_put(j.resp);
      return NULL;
    }
    return j.resp;
  }
  struct kvs_txn tx;
  if (kvs_read_begin(s, &tx, err) < 0)
    return NULL;
  struct exec_ctx cx = { .headers = json_object_new_array() };
  struct kvfilter_req rq;
  int f = kvx_filter_begin(&tx, who, &rq, err);
  if (f < 0) {
    kvs_read_end(&tx);
    json_object_put(cx.headers);
    return NULL;
  }
  cx.rq = f ? &rq : NULL;
  json_object *resp = json_object_new_object();
  json_object_object_add(resp, "header", NULL);
  int rc = run_op(&tx, &cx, op, resp, err);
  if (f)
    kvfilter_end(&rq);
  if (rc < 0) {
    kvs_read_end(&tx);
    json_object_put(cx.headers);
    free(cx.path);
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
  if (who && who->filter && who->gid) {
    struct kvfilter_req rq;
    struct kvs_txn tx;
    if (kvs_read_begin(s, &tx, err) < 0)
      return NULL;
    int f = kvx_filter_begin(&tx, who, &rq, err);
    int rc = f < 0 ? -1 : f ? kvfilter_check_compact(&rq, err) : 0;
    if (f > 0)
      kvfilter_end(&rq);
    kvs_read_end(&tx);
    if (rc < 0)
      return NULL;
  }
  struct compact_job j = { r, 0 };
  if (kvs_write(s, compact_fn, NULL, &j, err) < 0)
    return NULL;
  json_object *resp = json_object_new_object();
  json_object_object_add(resp, "header", kvx_header(s, j.rev));
  return resp;
}
