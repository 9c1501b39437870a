/* KV requests to JSON and JSON responses to results (etcd v3 grpc-gateway). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "b64.h"
#include "error.h"
#include "kv_json.h"

int64_t
tc_json_i64(json_object *o, const char *key)
{
  json_object *v;
  if (!o || !json_object_object_get_ex(o, key, &v))
    return 0;
  if (json_object_is_type(v, json_type_string))
    return strtoll(json_object_get_string(v), NULL, 10);
  return json_object_get_int64(v);
}

static bool
jbool(json_object *o, const char *key)
{
  json_object *v;
  return o && json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* Add key: base64(p[0..len)) to o. */
static int
add_b64(json_object *o, const char *name, const void *p, size_t len)
{
  char *s = tc_base64_encode(p, len);
  json_object *v = s ? json_object_new_string(s) : NULL;
  free(s);
  if (!v || json_object_object_add(o, name, v) < 0) {
    json_object_put(v);
    return tc_error(ENOMEM, "kv: out of memory encoding %s", name);
  }
  return 0;
}

static int
add_i64(json_object *o, const char *name, int64_t v)
{
  /* grpc-gateway reads int64 from strings or numbers; numbers are fine. */
  if (json_object_object_add(o, name, json_object_new_int64(v)) < 0)
    return tc_error(ENOMEM, "kv: out of memory");
  return 0;
}

static int
add_bool(json_object *o, const char *name, bool v)
{
  if (v && json_object_object_add(o, name, json_object_new_boolean(1)) < 0)
    return tc_error(ENOMEM, "kv: out of memory");
  return 0;
}

/* etcd's prefix rule: the range end is the prefix with its last byte that
 * is not 0xff incremented and the rest dropped; all 0xff: "\0" (to the end). */
static int
add_range_end(json_object *o, const void *key, size_t key_len)
{
  uint8_t *end = malloc(key_len ? key_len : 1);
  if (!end)
    return tc_error(ENOMEM, "kv: out of memory");
  memcpy(end, key, key_len);
  size_t n = key_len;
  while (n > 0 && end[n - 1] == 0xff)
    n--;
  if (n == 0) {
    end[0] = 0;
    n = 1;
  }
  else
    end[n - 1]++;
  int r = add_b64(o, "range_end", end, n);
  free(end);
  return r;
}

static int
encode_key_range(json_object *o, const struct tc_kv_op *op)
{
  size_t klen = tc_kv_len(op->key, op->key_len);
  if (!op->key || klen == 0)
    return tc_error(EINVAL, "kv: empty key");
  if (add_b64(o, "key", op->key, klen) < 0)
    return -1;
  if (op->prefix)
    return add_range_end(o, op->key, klen);
  if (op->range_end)
    return add_b64(o, "range_end", op->range_end, tc_kv_len(op->range_end, op->range_end_len));
  return 0;
}

static json_object *
encode_op(const struct tc_kv_op *op)
{
  json_object *o = json_object_new_object();
  if (!o) {
    tc_error(ENOMEM, "kv: out of memory");
    return NULL;
  }
  int r = encode_key_range(o, op);
  switch (op->type) {
  case TC_KV_RANGE:
    if (!r && op->limit) r = add_i64(o, "limit", op->limit);
    if (!r && op->revision) r = add_i64(o, "revision", op->revision);
    if (!r) r = add_bool(o, "keys_only", op->keys_only);
    if (!r) r = add_bool(o, "count_only", op->count_only);
    break;
  case TC_KV_PUT:
    if (!r && (op->prefix || op->range_end))
      r = tc_error(EINVAL, "kv: put takes one key, not a range");
    if (!r) r = add_b64(o, "value", op->value ? op->value : "", tc_kv_len(op->value, op->value_len));
    if (!r && op->lease) r = add_i64(o, "lease", op->lease);
    if (!r) r = add_bool(o, "prev_kv", op->prev_kv);
    break;
  case TC_KV_DELETE:
    if (!r) r = add_bool(o, "prev_kv", op->prev_kv);
    break;
  default:
    r = tc_error(EINVAL, "kv: unknown operation %d", (int) op->type);
  }
  if (r < 0) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

static const char *const op_wrap[] = { "request_range", "request_put", "request_delete_range" };
static const char *const op_resp[] = { "response_range", "response_put", "response_delete_range" };

static json_object *
encode_ops(const struct tc_kv_op *ops, size_t n)
{
  json_object *arr = json_object_new_array();
  for (size_t i = 0; arr && i < n; i++) {
    json_object *op = encode_op(&ops[i]), *w = json_object_new_object();
    if (!op || !w || json_object_object_add(w, op_wrap[ops[i].type], op) < 0) {
      json_object_put(op);
      json_object_put(w);
      json_object_put(arr);
      return NULL;
    }
    json_object_array_add(arr, w);
  }
  return arr;
}

static json_object *
encode_txn(const struct tc_kv_txn *t)
{
  static const char *const targets[] = { "VALUE", "VERSION", "CREATE", "MOD", "LEASE" };
  static const char *const fields[] = { "value", "version", "create_revision", "mod_revision", "lease" };
  static const char *const results[] = { "EQUAL", "NOT_EQUAL", "GREATER", "LESS" };
  json_object *o = json_object_new_object(), *cmps = json_object_new_array();
  if (!o || !cmps)
    goto fail;
  json_object_object_add(o, "compare", cmps);
  for (size_t i = 0; i < t->n_cmp; i++) {
    const struct tc_kv_cmp *c = &t->cmp[i];
    json_object *co = json_object_new_object();
    if (!co)
      goto fail;
    json_object_array_add(cmps, co);
    size_t klen = tc_kv_len(c->key, c->key_len);
    if (!c->key || !klen) {
      tc_error(EINVAL, "kv: txn compare with an empty key");
      json_object_put(o);
      return NULL;
    }
    if ((unsigned) c->target > TC_KV_CMP_LEASE || (unsigned) c->result > TC_KV_LESS) {
      tc_error(EINVAL, "kv: txn compare: bad target or result");
      json_object_put(o);
      return NULL;
    }
    if (add_b64(co, "key", c->key, klen) < 0)
      goto fail;
    json_object_object_add(co, "target", json_object_new_string(targets[c->target]));
    json_object_object_add(co, "result", json_object_new_string(results[c->result]));
    if (c->target == TC_KV_CMP_VALUE) {
      if (add_b64(co, "value", c->value ? c->value : "", tc_kv_len(c->value, c->value_len)) < 0)
        goto fail;
    }
    else if (add_i64(co, fields[c->target], c->number) < 0)
      goto fail;
  }
  json_object *s = encode_ops(t->success, t->n_success);
  if (!s)
    goto fail;
  json_object_object_add(o, "success", s);
  json_object *f = encode_ops(t->failure, t->n_failure);
  if (!f)
    goto fail;
  json_object_object_add(o, "failure", f);
  return o;
fail:
  if (errno != EINVAL)
    tc_error(ENOMEM, "kv: out of memory encoding a txn");
  json_object_put(o);
  if (!o)
    json_object_put(cmps);
  return NULL;
}

char *
tc_kv_encode(const struct tc_kv_request *req, const char **path)
{
  static const char *const op_paths[] = { "/v3/kv/range", "/v3/kv/put", "/v3/kv/deleterange" };
  json_object *o = NULL;
  switch (req->type) {
  case TC_KV_REQ_OP:
    if ((unsigned) req->op.type > TC_KV_DELETE) {
      tc_error(EINVAL, "kv: unknown operation %d", (int) req->op.type);
      return NULL;
    }
    *path = op_paths[req->op.type];
    o = encode_op(&req->op);
    break;
  case TC_KV_REQ_TXN:
    *path = "/v3/kv/txn";
    o = encode_txn(&req->txn);
    break;
  case TC_KV_REQ_LEASE_GRANT:
    *path = "/v3/lease/grant";
    o = json_object_new_object();
    if (o && (add_i64(o, "TTL", req->ttl) < 0 || (req->lease_id && add_i64(o, "ID", req->lease_id) < 0))) {
      json_object_put(o);
      o = NULL;
    }
    break;
  case TC_KV_REQ_LEASE_KEEPALIVE:
  case TC_KV_REQ_LEASE_REVOKE:
    *path = req->type == TC_KV_REQ_LEASE_REVOKE ? "/v3/lease/revoke" : "/v3/lease/keepalive";
    o = json_object_new_object();
    if (o && add_i64(o, "ID", req->lease_id) < 0) {
      json_object_put(o);
      o = NULL;
    }
    break;
  default:
    tc_error(EINVAL, "kv: unknown request type %d", (int) req->type);
    return NULL;
  }
  if (!o)
    return NULL;
  char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  json_object_put(o);
  if (!s)
    tc_error(ENOMEM, "kv: out of memory");
  return s;
}

char *
tc_kv_encode_watch(const void *key, size_t key_len, bool prefix, int64_t start_revision)
{
  return tc_kv_encode_watch_range(key, key_len, prefix, NULL, 0, start_revision, false);
}

char *
tc_kv_encode_watch_range(const void *key, size_t key_len, bool prefix, const void *range_end, size_t end_len,
                         int64_t start_revision, bool prev_kv)
{
  struct tc_kv_op op = { .type = TC_KV_RANGE, .key = key, .key_len = key_len, .prefix = prefix,
                         .range_end = range_end, .range_end_len = end_len };
  json_object *o = json_object_new_object(), *c = json_object_new_object();
  char *s = NULL;
  if (!o || !c) {
    json_object_put(o);
    json_object_put(c);
    tc_error(ENOMEM, "kv: out of memory");
    return NULL;
  }
  json_object_object_add(o, "create_request", c);
  if (encode_key_range(c, &op) == 0 && (start_revision == 0 || add_i64(c, "start_revision", start_revision) == 0) &&
      (!prev_kv || add_bool(c, "prev_kv", true) == 0)) {
    s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    if (!s)
      tc_error(ENOMEM, "kv: out of memory");
  }
  json_object_put(o);
  return s;
}

void
tc_kv_kv_free(struct tc_kv_kv *kv)
{
  free(kv->key);
  free(kv->value);
  memset(kv, 0, sizeof *kv);
}

static uint8_t *
decode_b64_field(json_object *o, const char *name, size_t *len)
{
  json_object *v;
  const char *s = o && json_object_object_get_ex(o, name, &v) ? json_object_get_string(v) : "";
  uint8_t *r = tc_base64_decode(s ? s : "", len);
  if (!r)
    tc_error(errno == ENOMEM ? ENOMEM : EPROTO, "kv: field %s of the reply is not base64", name);
  return r;
}

int
tc_kv_decode_kv(json_object *o, struct tc_kv_kv *kv)
{
  memset(kv, 0, sizeof *kv);
  kv->key = decode_b64_field(o, "key", &kv->key_len);
  kv->value = kv->key ? decode_b64_field(o, "value", &kv->value_len) : NULL;
  if (!kv->value) {
    tc_kv_kv_free(kv);
    return -1;
  }
  kv->create_revision = tc_json_i64(o, "create_revision");
  kv->mod_revision = tc_json_i64(o, "mod_revision");
  kv->version = tc_json_i64(o, "version");
  kv->lease = tc_json_i64(o, "lease");
  return 0;
}

static int
decode_kvs(json_object *arr, struct tc_kv_result *res)
{
  if (!arr || !json_object_is_type(arr, json_type_array))
    return 0;
  size_t n = json_object_array_length(arr);
  if (!n)
    return 0;
  res->kvs = calloc(n, sizeof *res->kvs);
  if (!res->kvs)
    return tc_error(ENOMEM, "kv: out of memory");
  for (size_t i = 0; i < n; i++) {
    if (tc_kv_decode_kv(json_object_array_get_idx(arr, i), &res->kvs[i]) < 0)
      return -1;
    res->n_kvs++;
  }
  return 0;
}

/* Decode an op response (range, put or delete). */
static int
decode_op(enum tc_kv_op_type type, json_object *body, struct tc_kv_result *res)
{
  json_object *v;
  res->revision = tc_json_i64(json_object_object_get_ex(body, "header", &v) ? v : NULL, "revision");
  switch (type) {
  case TC_KV_RANGE:
    res->count = tc_json_i64(body, "count");
    res->more = jbool(body, "more");
    return decode_kvs(json_object_object_get_ex(body, "kvs", &v) ? v : NULL, res);
  case TC_KV_PUT:
    if (json_object_object_get_ex(body, "prev_kv", &v)) {
      res->kvs = calloc(1, sizeof *res->kvs);
      if (!res->kvs)
        return tc_error(ENOMEM, "kv: out of memory");
      if (tc_kv_decode_kv(v, &res->kvs[0]) < 0)
        return -1;
      res->n_kvs = 1;
    }
    return 0;
  case TC_KV_DELETE:
    res->deleted = tc_json_i64(body, "deleted");
    return decode_kvs(json_object_object_get_ex(body, "prev_kvs", &v) ? v : NULL, res);
  }
  return tc_error(EINVAL, "kv: unknown operation");
}

static int
decode_txn(json_object *body, struct tc_kv_result *res)
{
  json_object *v;
  res->revision = tc_json_i64(json_object_object_get_ex(body, "header", &v) ? v : NULL, "revision");
  res->succeeded = jbool(body, "succeeded");
  if (!json_object_object_get_ex(body, "responses", &v) || !json_object_is_type(v, json_type_array))
    return 0;
  size_t n = json_object_array_length(v);
  if (!n)
    return 0;
  res->responses = calloc(n, sizeof *res->responses);
  if (!res->responses)
    return tc_error(ENOMEM, "kv: out of memory");
  for (size_t i = 0; i < n; i++) {
    json_object *r = json_object_array_get_idx(v, i), *inner = NULL;
    int type;
    for (type = 0; type < 3; type++)
      if (json_object_object_get_ex(r, op_resp[type], &inner))
        break;
    if (type == 3)
      return tc_error(EPROTO, "kv: txn response %zu has no known operation", i);
    res->n_responses++;
    if (decode_op(type, inner, &res->responses[i]) < 0)
      return -1;
    if (!res->responses[i].revision)
      res->responses[i].revision = res->revision;
  }
  return 0;
}

int
tc_kv_decode(const struct tc_kv_request *req, json_object *body, struct tc_kv_result *res)
{
  json_object *v;
  memset(res, 0, sizeof *res);
  int r;
  switch (req->type) {
  case TC_KV_REQ_OP:
    r = decode_op(req->op.type, body, res);
    break;
  case TC_KV_REQ_TXN:
    r = decode_txn(body, res);
    break;
  case TC_KV_REQ_LEASE_KEEPALIVE:
    /* A streaming RPC: each message is wrapped in "result". */
    if (json_object_object_get_ex(body, "result", &v))
      body = v;
    /* fall through */
  case TC_KV_REQ_LEASE_GRANT:
  case TC_KV_REQ_LEASE_REVOKE:
    res->revision = tc_json_i64(json_object_object_get_ex(body, "header", &v) ? v : NULL, "revision");
    res->lease_id = tc_json_i64(body, "ID");
    res->ttl = tc_json_i64(body, "TTL");
    if (json_object_object_get_ex(body, "error", &v) && json_object_is_type(v, json_type_string))
      return tc_error(EIO, "kv: %s", json_object_get_string(v));
    if (req->type == TC_KV_REQ_LEASE_KEEPALIVE && res->ttl <= 0)
      return tc_error(ENOENT, "kv: lease %" PRIx64 " not found (expired or revoked)", (uint64_t) req->lease_id);
    if (req->type == TC_KV_REQ_LEASE_GRANT && res->lease_id == 0)
      return tc_error(EPROTO, "kv: lease grant reply without an ID");
    return 0;
  default:
    return tc_error(EINVAL, "kv: unknown request type");
  }
  if (r < 0)
    tc_kv_result_free(res);
  return r;
}

void
tc_kv_result_free(struct tc_kv_result *res)
{
  if (!res)
    return;
  for (size_t i = 0; i < res->n_kvs; i++)
    tc_kv_kv_free(&res->kvs[i]);
  free(res->kvs);
  for (size_t i = 0; i < res->n_responses; i++)
    tc_kv_result_free(&res->responses[i]);
  free(res->responses);
  memset(res, 0, sizeof *res);
}

int
tc_kv_error_errno(json_object *body, long http_status, char *msg, size_t msgsize)
{
  json_object *v;
  const char *text = NULL;
  int64_t code = 0;
  if (body && json_object_is_type(body, json_type_object)) {
    json_object *e = body;
    /* A stream error is {"error": {"grpc_code": .., "message": ..}}. */
    if (json_object_object_get_ex(body, "error", &v) && json_object_is_type(v, json_type_object))
      e = v;
    if (json_object_object_get_ex(e, "message", &v) || json_object_object_get_ex(e, "error", &v))
      text = json_object_get_string(v);
    code = tc_json_i64(e, "code");
    if (!code)
      code = tc_json_i64(e, "grpc_code");
  }
  snprintf(msg, msgsize, "%s (HTTP %ld)", text && *text ? text : "server error", http_status);
  switch (code) {
  case 3: return EINVAL;        /* InvalidArgument */
  case 5: return ENOENT;        /* NotFound: lease not found */
  case 7: case 16: return EACCES; /* PermissionDenied, Unauthenticated */
  case 11: return ERANGE;       /* OutOfRange: compacted / future revision */
  case 14: return EAGAIN;       /* Unavailable */
  }
  if (text && strstr(text, "compacted"))
    return ERANGE;
  if (text && strstr(text, "lease not found"))
    return ENOENT;
  if (http_status == 403 || http_status == 401)
    return EACCES;
  if (http_status == 404)
    return ENOENT;
  if (http_status == 400)
    return EINVAL;
  if (http_status == 503)
    return EAGAIN;
  return EIO;
}
