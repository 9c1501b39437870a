/* Parsing etcd v3 JSON requests (see kvrequest.h). Field names and enum
 * spellings are those of etcd's protobuf messages as its grpc-gateway
 * accepts them: int64 as a JSON number or string, enums as name or number. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "b64.h"
#include "kvrequest.h"
#include "vector.h"

/* The gateway's names for the one codec (b64.h). */
char *
kv_b64_encode(const uint8_t *p, size_t n, size_t *outlen)
{
  return tc_base64_encode_n(p, n, outlen);
}

int
kv_b64_decode(const char *s, size_t n, struct kv_bytes *out)
{
  return tc_base64_decode_n(s, n, &out->p, &out->n);
}

enum kv_endpoint
kv_endpoint_of(const char *path)
{
  static const struct { const char *path; enum kv_endpoint ep; } t[] = {
    { "/v3/kv/range", KV_EP_RANGE }, { "/v3/kv/put", KV_EP_PUT },
    { "/v3/kv/deleterange", KV_EP_DELETE }, { "/v3/kv/txn", KV_EP_TXN },
    { "/v3/kv/compaction", KV_EP_COMPACT }, { "/v3/watch", KV_EP_WATCH },
    { "/v3/lease/grant", KV_EP_LEASE_GRANT }, { "/v3/lease/revoke", KV_EP_LEASE_REVOKE },
    { "/v3/kv/lease/revoke", KV_EP_LEASE_REVOKE },
    { "/v3/lease/keepalive", KV_EP_LEASE_KEEPALIVE }, { "/v3/lease/timetolive", KV_EP_LEASE_TTL },
    { "/v3/kv/lease/timetolive", KV_EP_LEASE_TTL }, { "/v3/lease/leases", KV_EP_LEASE_LEASES },
    { "/v3/kv/lease/leases", KV_EP_LEASE_LEASES },
  };
  /* etcd 3.4 also serves the older /v3beta and /v3alpha prefixes. */
  char alias[64];
  if (strncmp(path, "/v3beta/", 8) == 0 || strncmp(path, "/v3alpha/", 9) == 0) {
    const char *rest = strchr(path + 1, '/');
    if (snprintf(alias, sizeof alias, "/v3%s", rest) < (int) sizeof alias)
      path = alias;
  }
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(path, t[i].path) == 0)
      return t[i].ep;
  return KV_EP_NONE;
}

/* Field readers: absent -> default; wrong type -> error naming the field. */
static int
get_bytes(json_object *o, const char *name, struct kv_bytes *out, struct kv_err *err)
{
  json_object *v;
  if (!json_object_object_get_ex(o, name, &v) || json_object_is_type(v, json_type_null))
    return 0;
  if (!json_object_is_type(v, json_type_string))
    return kv_err_set(err, KV_INVALID_ARGUMENT, "field %s: expected a base64 string", name);
  const char *s = json_object_get_string(v);
  int bad = kv_b64_decode(s, (size_t) json_object_get_string_len(v), out);
  if (bad < 0)
    return kv_err_set(err, KV_INTERNAL, "out of memory");
  if (bad > 0)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "illegal base64 data at input byte %d (field %s)",
                      bad - 1, name);
  return 0;
}

static int
get_int(json_object *o, const char *name, int64_t *out, struct kv_err *err)
{
  json_object *v;
  if (!json_object_object_get_ex(o, name, &v) || json_object_is_type(v, json_type_null))
    return 0;
  if (json_object_is_type(v, json_type_int)) {
    *out = json_object_get_int64(v);
    return 0;
  }
  if (json_object_is_type(v, json_type_string)) {
    const char *s = json_object_get_string(v);
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!errno && end != s && *end == 0) {
      *out = x;
      return 0;
    }
  }
  return kv_err_set(err, KV_INVALID_ARGUMENT, "field %s: expected an integer", name);
}

static int
get_bool(json_object *o, const char *name, bool *out, struct kv_err *err)
{
  json_object *v;
  if (!json_object_object_get_ex(o, name, &v) || json_object_is_type(v, json_type_null))
    return 0;
  if (!json_object_is_type(v, json_type_boolean))
    return kv_err_set(err, KV_INVALID_ARGUMENT, "field %s: expected true or false", name);
  *out = json_object_get_boolean(v);
  return 0;
}

static int
get_enum(json_object *o, const char *name, const char *const *names, int count, int *out, struct kv_err *err)
{
  json_object *v;
  if (!json_object_object_get_ex(o, name, &v) || json_object_is_type(v, json_type_null))
    return 0;
  if (json_object_is_type(v, json_type_int)) {
    int64_t x = json_object_get_int64(v);
    if (x >= 0 && x < count) {
      *out = (int) x;
      return 0;
    }
  } else if (json_object_is_type(v, json_type_string)) {
    for (int i = 0; i < count; i++)
      if (strcmp(json_object_get_string(v), names[i]) == 0) {
        *out = i;
        return 0;
      }
  }
  return kv_err_set(err, KV_INVALID_ARGUMENT, "field %s: unknown value %s", name,
                    json_object_to_json_string(v));
}

static int
need_object(json_object *o, const char *what, struct kv_err *err)
{
  if (!json_object_is_type(o, json_type_object))
    return kv_err_set(err, KV_INVALID_ARGUMENT, "%s: expected a JSON object", what);
  return 0;
}

static int parse_op(json_object *o, struct kv_op *op, int depth, struct kv_err *err);

static int get_enum(json_object *o, const char *name, const char *const *names, int count, int *out,
                    struct kv_err *err);
static const char *const sort_order_names[] = { "NONE", "ASCEND", "DESCEND" };
static const char *const sort_target_names[] = { "KEY", "VERSION", "CREATE", "MOD", "VALUE" };

static int
parse_range(json_object *o, struct kv_range_req *r, struct kv_err *err)
{
  return get_bytes(o, "key", &r->key, err) || get_bytes(o, "range_end", &r->end, err) ||
         get_int(o, "limit", &r->limit, err) || get_int(o, "revision", &r->revision, err) ||
         get_enum(o, "sort_order", sort_order_names, 3, &r->sort_order, err) ||
         get_enum(o, "sort_target", sort_target_names, 5, &r->sort_target, err) ||
         get_int(o, "min_mod_revision", &r->min_mod_revision, err) ||
         get_int(o, "max_mod_revision", &r->max_mod_revision, err) ||
         get_int(o, "min_create_revision", &r->min_create_revision, err) ||
         get_int(o, "max_create_revision", &r->max_create_revision, err) ||
         get_bool(o, "keys_only", &r->keys_only, err) || get_bool(o, "count_only", &r->count_only, err)
         ? -1 : 0;
}

static int
parse_put(json_object *o, struct kv_put_req *r, struct kv_err *err)
{
  return get_bytes(o, "key", &r->key, err) || get_bytes(o, "value", &r->value, err) ||
         get_int(o, "lease", &r->lease, err) || get_bool(o, "prev_kv", &r->prev_kv, err) ||
         get_bool(o, "ignore_value", &r->ignore_value, err) ||
         get_bool(o, "ignore_lease", &r->ignore_lease, err) ? -1 : 0;
}

static int
parse_delete(json_object *o, struct kv_delete_req *r, struct kv_err *err)
{
  return get_bytes(o, "key", &r->key, err) || get_bytes(o, "range_end", &r->end, err) ||
         get_bool(o, "prev_kv", &r->prev_kv, err) ? -1 : 0;
}

static const char *const target_names[] = { "VERSION", "CREATE", "MOD", "VALUE", "LEASE" };
static const char *const result_names[] = { "EQUAL", "GREATER", "LESS", "NOT_EQUAL" };

static int
parse_compare(json_object *o, struct kv_compare *c, struct kv_err *err)
{
  if (need_object(o, "compare", err) || get_bytes(o, "key", &c->key, err) ||
      get_bytes(o, "range_end", &c->end, err) ||
      get_enum(o, "target", target_names, 5, &c->target, err) ||
      get_enum(o, "result", result_names, 4, &c->result, err))
    return -1;
  switch (c->target) {
  case KV_CMP_VERSION: return get_int(o, "version", &c->num, err);
  case KV_CMP_CREATE: return get_int(o, "create_revision", &c->num, err);
  case KV_CMP_MOD: return get_int(o, "mod_revision", &c->num, err);
  case KV_CMP_VALUE: return get_bytes(o, "value", &c->value, err);
  case KV_CMP_LEASE: return get_int(o, "lease", &c->num, err);
  }
  return 0;
}

static int
get_array(json_object *o, const char *name, json_object **arr, size_t *n, struct kv_err *err)
{
  json_object *v;
  *n = 0;
  *arr = NULL;
  if (!json_object_object_get_ex(o, name, &v) || json_object_is_type(v, json_type_null))
    return 0;
  if (!json_object_is_type(v, json_type_array))
    return kv_err_set(err, KV_INVALID_ARGUMENT, "field %s: expected an array", name);
  *arr = v;
  *n = json_object_array_length(v);
  return 0;
}

static int
parse_ops(json_object *o, const char *name, struct kv_op **ops, size_t *n, int depth, struct kv_err *err)
{
  json_object *arr;
  size_t count;
  if (get_array(o, name, &arr, &count, err))
    return -1;
  if (!count)
    return 0;
  *ops = calloc(count, sizeof **ops);
  if (!*ops)
    return kv_err_set(err, KV_INTERNAL, "out of memory");
  for (size_t i = 0; i < count; i++) {
    (*n)++;
    if (parse_op(json_object_array_get_idx(arr, i), &(*ops)[i], depth, err))
      return -1;
  }
  return 0;
}

static int
parse_txn(json_object *o, struct kv_txn_req *t, int depth, struct kv_err *err)
{
  json_object *arr;
  size_t count;
  if (depth > 16)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: too many operations in txn request");
  if (get_array(o, "compare", &arr, &count, err))
    return -1;
  if (count) {
    t->cmp = calloc(count, sizeof *t->cmp);
    if (!t->cmp)
      return kv_err_set(err, KV_INTERNAL, "out of memory");
    for (size_t i = 0; i < count; i++) {
      t->ncmp++;
      if (parse_compare(json_object_array_get_idx(arr, i), &t->cmp[i], err))
        return -1;
    }
  }
  return parse_ops(o, "success", &t->succ, &t->nsucc, depth + 1, err) ||
         parse_ops(o, "failure", &t->fail, &t->nfail, depth + 1, err) ? -1 : 0;
}

/* A RequestOp: one of request_range, request_put, request_delete_range, request_txn. */
static int
parse_op(json_object *o, struct kv_op *op, int depth, struct kv_err *err)
{
  json_object *v;
  op->type = -1;
  if (need_object(o, "txn operation", err))
    return -1;
  if (json_object_object_get_ex(o, "request_range", &v)) {
    op->type = KV_OP_RANGE;
    return need_object(v, "request_range", err) || parse_range(v, &op->range, err) ? -1 : 0;
  }
  if (json_object_object_get_ex(o, "request_put", &v)) {
    op->type = KV_OP_PUT;
    return need_object(v, "request_put", err) || parse_put(v, &op->put, err) ? -1 : 0;
  }
  if (json_object_object_get_ex(o, "request_delete_range", &v)) {
    op->type = KV_OP_DELETE;
    return need_object(v, "request_delete_range", err) || parse_delete(v, &op->del, err) ? -1 : 0;
  }
  if (json_object_object_get_ex(o, "request_txn", &v)) {
    op->type = KV_OP_TXN;
    return need_object(v, "request_txn", err) || parse_txn(v, &op->txn, depth, err) ? -1 : 0;
  }
  return kv_err_set(err, KV_INVALID_ARGUMENT, "txn operation: expected one of request_range, "
                    "request_put, request_delete_range, request_txn");
}

static int
parse_watch(json_object *o, struct kv_watch_req *w, struct kv_err *err)
{
  json_object *cr, *filters;
  if (!json_object_object_get_ex(o, "create_request", &cr))
    return kv_err_set(err, KV_INVALID_ARGUMENT, "watch: expected a create_request");
  if (need_object(cr, "create_request", err) || get_bytes(cr, "key", &w->key, err) ||
      get_bytes(cr, "range_end", &w->end, err) ||
      get_int(cr, "start_revision", &w->start_revision, err) ||
      get_int(cr, "watch_id", &w->watch_id, err) ||
      get_bool(cr, "prev_kv", &w->prev_kv, err) ||
      get_bool(cr, "progress_notify", &w->progress_notify, err))
    return -1;
  if (json_object_object_get_ex(cr, "filters", &filters) && !json_object_is_type(filters, json_type_null)) {
    if (!json_object_is_type(filters, json_type_array))
      return kv_err_set(err, KV_INVALID_ARGUMENT, "field filters: expected an array");
    for (size_t i = 0; i < json_object_array_length(filters); i++) {
      json_object *f = json_object_array_get_idx(filters, i);
      const char *s = json_object_get_string(f);
      if ((json_object_is_type(f, json_type_int) && json_object_get_int(f) == 0) ||
          (json_object_is_type(f, json_type_string) && strcmp(s, "NOPUT") == 0))
        w->noput = true;
      else if ((json_object_is_type(f, json_type_int) && json_object_get_int(f) == 1) ||
               (json_object_is_type(f, json_type_string) && strcmp(s, "NODELETE") == 0))
        w->nodelete = true;
      else
        return kv_err_set(err, KV_INVALID_ARGUMENT, "field filters: unknown filter %s",
                          json_object_to_json_string(f));
    }
  }
  return 0;
}

int
kv_request_parse(enum kv_endpoint ep, const char *body, size_t len, struct kv_request *out,
                 struct kv_err *err)
{
  memset(out, 0, sizeof *out);
  out->ep = ep;
  if (ep == KV_EP_RANGE || ep == KV_EP_PUT || ep == KV_EP_DELETE || ep == KV_EP_TXN)
    out->op.type = ep == KV_EP_RANGE ? KV_OP_RANGE : ep == KV_EP_PUT ? KV_OP_PUT
                   : ep == KV_EP_DELETE ? KV_OP_DELETE : KV_OP_TXN;
  json_tokener *tok = json_tokener_new_ex(64);
  if (!tok)
    return kv_err_set(err, KV_INTERNAL, "out of memory");
  json_object *o = NULL;
  if (len > (size_t) INT32_MAX) {
    json_tokener_free(tok);
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: request is too large");
  }
  if (len > 0)
    o = json_tokener_parse_ex(tok, body, (int) len);
  enum json_tokener_error jerr = len ? json_tokener_get_error(tok) : json_tokener_success;
  size_t end = len ? json_tokener_get_parse_end(tok) : 0;
  if (len && jerr == json_tokener_continue) {
    /* A bare number at the very end waits for a delimiter: give it one. */
    o = json_tokener_parse_ex(tok, " ", 1);
    jerr = json_tokener_get_error(tok);
    end = len;
  }
  json_tokener_free(tok);
  if (len && (!o || jerr != json_tokener_success)) {
    json_object_put(o);
    return kv_err_set(err, KV_INVALID_ARGUMENT, "invalid JSON at byte %zu: %s", end,
                      jerr == json_tokener_success || jerr == json_tokener_continue
                      ? "unexpected end of input" : json_tokener_error_desc(jerr));
  }
  for (size_t i = end; i < len; i++)
    if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t') {
      json_object_put(o);
      return kv_err_set(err, KV_INVALID_ARGUMENT, "invalid JSON: text after the object at byte %zu", i);
    }
  if (!o)   /* an empty body is an empty request, as with etcd */
    o = json_object_new_object();
  if (!o || need_object(o, "request body", err)) {
    json_object_put(o);
    return o ? -1 : kv_err_set(err, KV_INTERNAL, "out of memory");
  }
  int rc = 0;
  switch (ep) {
  case KV_EP_RANGE: rc = parse_range(o, &out->op.range, err); break;
  case KV_EP_PUT: rc = parse_put(o, &out->op.put, err); break;
  case KV_EP_DELETE: rc = parse_delete(o, &out->op.del, err); break;
  case KV_EP_TXN: rc = parse_txn(o, &out->op.txn, 0, err); break;
  case KV_EP_COMPACT:
    rc = get_int(o, "revision", &out->compact.revision, err) ||
         get_bool(o, "physical", &out->compact.physical, err) ? -1 : 0;
    break;
  case KV_EP_WATCH: rc = parse_watch(o, &out->watch, err); break;
  case KV_EP_LEASE_GRANT: case KV_EP_LEASE_REVOKE: case KV_EP_LEASE_KEEPALIVE:
  case KV_EP_LEASE_TTL: case KV_EP_LEASE_LEASES:
    rc = get_int(o, "ID", &out->lease.id, err) || get_int(o, "TTL", &out->lease.ttl, err) ||
         get_bool(o, "keys", &out->lease.keys, err) ? -1 : 0;
    break;
  case KV_EP_NONE:
    rc = kv_err_set(err, KV_NOT_FOUND, "unknown endpoint");
    break;
  }
  json_object_put(o);
  if (rc)
    kv_request_free(out);
  return rc ? -1 : 0;
}

void
kv_op_free(struct kv_op *op)
{
  switch (op->type) {
  case KV_OP_RANGE:
    free(op->range.key.p);
    free(op->range.end.p);
    break;
  case KV_OP_PUT:
    free(op->put.key.p);
    free(op->put.value.p);
    break;
  case KV_OP_DELETE:
    free(op->del.key.p);
    free(op->del.end.p);
    break;
  case KV_OP_TXN:
    for (size_t i = 0; i < op->txn.ncmp; i++) {
      free(op->txn.cmp[i].key.p);
      free(op->txn.cmp[i].end.p);
      free(op->txn.cmp[i].value.p);
    }
    free(op->txn.cmp);
    for (size_t i = 0; i < op->txn.nsucc; i++)
      kv_op_free(&op->txn.succ[i]);
    for (size_t i = 0; i < op->txn.nfail; i++)
      kv_op_free(&op->txn.fail[i]);
    free(op->txn.succ);
    free(op->txn.fail);
    break;
  }
  memset(op, 0, sizeof *op);
  op->type = -1;
}

void
kv_request_free(struct kv_request *r)
{
  switch (r->ep) {
  case KV_EP_RANGE: case KV_EP_PUT: case KV_EP_DELETE: case KV_EP_TXN:
    kv_op_free(&r->op);
    break;
  case KV_EP_WATCH:
    free(r->watch.key.p);
    free(r->watch.end.p);
    break;
  default:
    break;
  }
  r->ep = KV_EP_NONE;
}

bool
kv_op_writes(const struct kv_op *op)
{
  switch (op->type) {
  case KV_OP_PUT: case KV_OP_DELETE: return true;
  case KV_OP_TXN:
    for (size_t i = 0; i < op->txn.nsucc; i++)
      if (kv_op_writes(&op->txn.succ[i]))
        return true;
    for (size_t i = 0; i < op->txn.nfail; i++)
      if (kv_op_writes(&op->txn.fail[i]))
        return true;
    return false;
  }
  return false;
}

/* Keys put and ranges deleted by a list of ops (for kv_txn_check). */
struct key_set {
  const struct kv_bytes **puts;
  size_t nputs, capputs;
  const struct kv_delete_req **dels;
  size_t ndels, capdels;
  bool oom;
};

static void
set_free(struct key_set *s)
{
  free(s->puts);
  free(s->dels);
  memset(s, 0, sizeof *s);
}

static void
add_put(struct key_set *s, const struct kv_bytes *k)
{
  if (tc_grow(&s->puts, &s->capputs, s->nputs + 1, sizeof *s->puts, 16) < 0) {
    s->oom = true;
    return;
  }
  s->puts[s->nputs++] = k;
}

static void
add_del(struct key_set *s, const struct kv_delete_req *d)
{
  if (tc_grow(&s->dels, &s->capdels, s->ndels + 1, sizeof *s->dels, 16) < 0) {
    s->oom = true;
    return;
  }
  s->dels[s->ndels++] = d;
}

static bool
has_put(const struct key_set *s, const struct kv_bytes *k)
{
  for (size_t i = 0; i < s->nputs; i++)
    if (s->puts[i]->n == k->n && (k->n == 0 || memcmp(s->puts[i]->p, k->p, k->n) == 0))
      return true;
  return false;
}

static bool
deleted(const struct key_set *s, const struct kv_bytes *k)
{
  for (size_t i = 0; i < s->ndels; i++)
    if (kv_in_range(k->p, k->n, s->dels[i]->key.p, s->dels[i]->key.n, s->dels[i]->end.p, s->dels[i]->end.n))
      return true;
  return false;
}

static int
check_intervals(const struct kv_op *ops, size_t n, struct key_set *out, struct kv_err *err)
{
  struct key_set then = { 0 }, els = { 0 };
  for (size_t i = 0; i < n; i++)
    if (ops[i].type == KV_OP_DELETE)
      add_del(out, &ops[i].del);
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    if (ops[i].type != KV_OP_TXN)
      continue;
    set_free(&then);
    set_free(&els);
    if (check_intervals(ops[i].txn.succ, ops[i].txn.nsucc, &then, err) < 0 ||
        check_intervals(ops[i].txn.fail, ops[i].txn.nfail, &els, err) < 0) {
      rc = -1;
      break;
    }
    for (size_t j = 0; j < then.nputs && !rc; j++) {
      if (has_put(out, then.puts[j]) || deleted(out, then.puts[j]))
        rc = -1;
      add_put(out, then.puts[j]);
    }
    for (size_t j = 0; j < els.nputs && !rc; j++) {
      if ((has_put(out, els.puts[j]) && !has_put(&then, els.puts[j])) || deleted(out, els.puts[j]))
        rc = -1;
      add_put(out, els.puts[j]);
    }
    for (size_t j = 0; j < then.ndels; j++)
      add_del(out, then.dels[j]);
    for (size_t j = 0; j < els.ndels; j++)
      add_del(out, els.dels[j]);
    if (rc)
      kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request");
  }
  for (size_t i = 0; i < n && !rc; i++) {
    if (ops[i].type != KV_OP_PUT)
      continue;
    if (has_put(out, &ops[i].put.key) || deleted(out, &ops[i].put.key))
      rc = kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request");
    add_put(out, &ops[i].put.key);
  }
  if (!rc && (out->oom || then.oom || els.oom))
    rc = kv_err_set(err, KV_INTERNAL, "txn check: out of memory");
  set_free(&then);
  set_free(&els);
  return rc;
}

static int
check_ops(const struct kv_txn_req *t, int64_t max_ops, struct kv_err *err)
{
  if ((int64_t) t->ncmp > max_ops || (int64_t) t->nsucc > max_ops || (int64_t) t->nfail > max_ops)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: too many operations in txn request");
  for (size_t i = 0; i < t->nsucc; i++)
    if (t->succ[i].type == KV_OP_TXN && check_ops(&t->succ[i].txn, max_ops, err) < 0)
      return -1;
  for (size_t i = 0; i < t->nfail; i++)
    if (t->fail[i].type == KV_OP_TXN && check_ops(&t->fail[i].txn, max_ops, err) < 0)
      return -1;
  return 0;
}

int
kv_txn_check(const struct kv_txn_req *t, int64_t max_ops, struct kv_err *err)
{
  struct key_set a = { 0 }, b = { 0 };
  if (check_ops(t, max_ops, err) < 0)
    return -1;
  int rc = check_intervals(t->succ, t->nsucc, &a, err) < 0 || check_intervals(t->fail, t->nfail, &b, err) < 0
           ? -1 : 0;
  set_free(&a);
  set_free(&b);
  return rc;
}
