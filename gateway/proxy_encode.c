/* Requests as the proxy sends them to etcd: encoded from the parsed
 * struct kv_op, so etcd runs exactly what the filter checked. */
#include <config.h>
#include <stdlib.h>
#include "proxy.h"

json_object *
proxy_b64(const uint8_t *p, size_t n)
{
  size_t len;
  char *s = kv_b64_encode(p ? p : (const uint8_t *) "", n, &len);
  if (!s)
    return NULL;
  json_object *o = json_object_new_string_len(s, (int) len);
  free(s);
  return o;
}

/* Each add reports whether it could allocate; any failure fails the whole. */
static bool
add(json_object *o, const char *name, json_object *v)
{
  if (!v)
    return false;
  return json_object_object_add(o, name, v) == 0;
}

static bool
add_bytes(json_object *o, const char *name, const struct kv_bytes *b)
{
  return !b->n || add(o, name, proxy_b64(b->p, b->n));
}

static bool
add_i64(json_object *o, const char *name, int64_t v)
{
  return !v || add(o, name, kvx_int64(v));
}

static bool
add_true(json_object *o, const char *name, bool v)
{
  return !v || add(o, name, json_object_new_boolean(1));
}

static const char *const sort_orders[] = { "NONE", "ASCEND", "DESCEND" };
static const char *const sort_targets[] = { "KEY", "VERSION", "CREATE", "MOD", "VALUE" };
static const char *const cmp_targets[] = { "VERSION", "CREATE", "MOD", "VALUE", "LEASE" };
static const char *const cmp_results[] = { "EQUAL", "GREATER", "LESS", "NOT_EQUAL" };

static bool
enc_range(json_object *o, const struct kv_range_req *r, bool for_filter)
{
  bool ok = add_bytes(o, "key", &r->key) && add_bytes(o, "range_end", &r->end) &&
            add_i64(o, "revision", r->revision) && add_i64(o, "min_mod_revision", r->min_mod_revision) &&
            add_i64(o, "max_mod_revision", r->max_mod_revision) &&
            add_i64(o, "min_create_revision", r->min_create_revision) &&
            add_i64(o, "max_create_revision", r->max_create_revision);
  if (ok && r->sort_order > 0 && r->sort_order < 3)
    ok = add(o, "sort_order", json_object_new_string(sort_orders[r->sort_order]));
  if (ok && r->sort_target > 0 && r->sort_target < 5)
    ok = add(o, "sort_target", json_object_new_string(sort_targets[r->sort_target]));
  if (ok && !for_filter)
    ok = add_i64(o, "limit", r->limit) && add_true(o, "keys_only", r->keys_only) &&
         add_true(o, "count_only", r->count_only);
  return ok;
}

static bool
enc_put(json_object *o, const struct kv_put_req *p)
{
  return add_bytes(o, "key", &p->key) && add_bytes(o, "value", &p->value) && add_i64(o, "lease", p->lease) &&
         add_true(o, "prev_kv", p->prev_kv) && add_true(o, "ignore_value", p->ignore_value) &&
         add_true(o, "ignore_lease", p->ignore_lease);
}

static bool
enc_delete(json_object *o, const struct kv_delete_req *d)
{
  return add_bytes(o, "key", &d->key) && add_bytes(o, "range_end", &d->end) && add_true(o, "prev_kv", d->prev_kv);
}

static json_object *
enc_compare(const struct kv_compare *c)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  bool ok = c->target >= 0 && c->target < 5 && c->result >= 0 && c->result < 4 &&
            add_bytes(o, "key", &c->key) && add_bytes(o, "range_end", &c->end) &&
            add(o, "target", json_object_new_string(cmp_targets[c->target])) &&
            add(o, "result", json_object_new_string(cmp_results[c->result]));
  if (ok) {
    switch (c->target) {
    case KV_CMP_VERSION: ok = add(o, "version", kvx_int64(c->num)); break;
    case KV_CMP_CREATE: ok = add(o, "create_revision", kvx_int64(c->num)); break;
    case KV_CMP_MOD: ok = add(o, "mod_revision", kvx_int64(c->num)); break;
    case KV_CMP_LEASE: ok = add(o, "lease", kvx_int64(c->num)); break;
    default: ok = add(o, "value", proxy_b64(c->value.p, c->value.n)); break;
    }
  }
  if (!ok) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

static bool
enc_list(json_object *o, const char *name, const struct kv_op *ops, size_t n, bool for_filter)
{
  if (!n)
    return true;
  json_object *a = json_object_new_array();
  if (!add(o, name, a))
    return false;
  for (size_t i = 0; i < n; i++)
    if (json_object_array_add(a, proxy_encode_request_op(&ops[i], for_filter)) != 0 ||
        !json_object_array_get_idx(a, i))
      return false;
  return true;
}

static bool
enc_txn(json_object *o, const struct kv_txn_req *t, bool for_filter)
{
  if (t->ncmp) {
    json_object *a = json_object_new_array();
    if (!add(o, "compare", a))
      return false;
    for (size_t i = 0; i < t->ncmp; i++) {
      json_object *c = enc_compare(&t->cmp[i]);
      if (!c || json_object_array_add(a, c) != 0) {
        json_object_put(c);
        return false;
      }
    }
  }
  return enc_list(o, "success", t->succ, t->nsucc, for_filter) &&
         enc_list(o, "failure", t->fail, t->nfail, for_filter);
}

json_object *
proxy_encode_op(const struct kv_op *op, bool for_filter)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  bool ok = false;
  switch (op->type) {
  case KV_OP_RANGE: ok = enc_range(o, &op->range, for_filter); break;
  case KV_OP_PUT: ok = enc_put(o, &op->put); break;
  case KV_OP_DELETE: ok = enc_delete(o, &op->del); break;
  case KV_OP_TXN: ok = enc_txn(o, &op->txn, for_filter); break;
  }
  if (!ok) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

json_object *
proxy_encode_request_op(const struct kv_op *op, bool for_filter)
{
  static const char *const names[] = { "request_range", "request_put", "request_delete_range", "request_txn" };
  json_object *inner = op->type >= 0 && op->type < 4 ? proxy_encode_op(op, for_filter) : NULL;
  json_object *o = inner ? json_object_new_object() : NULL;
  if (!o || json_object_object_add(o, names[op->type], inner) != 0) {
    json_object_put(inner);
    json_object_put(o);
    return NULL;
  }
  return o;
}
