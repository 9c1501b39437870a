/* The filtering proxy to etcd (see proxy.h): range, put, deleterange, txn
 * and compaction checked by the filter, then run on etcd. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "proxy.h"
#include "kvfilter.h"
#include "kv_json.h"
#include "error.h"
#include "log.h"
#include "vector.h"

struct kvproxy {
  struct tc_kv *kv;
  char *urls_text;                /* for messages: "https://a, https://b" */
  pthread_mutex_t mu;
  /* The last etcd header's cluster_id, member_id, raft_term, as text:
   * never a json_object shared between threads (json-c's reference counts
   * are not atomic: a header shared by two threads leaked, or worse). */
  char hdr[3][32];
  char prefix[128];
};

/* ---- the option ---- */

static int
check_file(const char *field, json_object *v, const char **out)
{
  if (!json_object_is_type(v, json_type_string) || !*json_object_get_string(v))
    return tc_error(EINVAL, "option etcd_proxy: field %s must be a file name (a string)", field);
  *out = json_object_get_string(v);
  if (access(*out, R_OK) < 0)
    return tc_error(errno, "option etcd_proxy: field %s: %s: %s", field, *out, strerror(errno));
  return 0;
}

struct kvproxy *
kvproxy_new(const struct tc_config *cfg)
{
  json_object *o = tc_config_obj(cfg, "etcd_proxy"), *urls = NULL;
  const char *cert = NULL, *key = NULL, *ca = NULL;
  if (!o || !json_object_is_type(o, json_type_object)) {
    tc_error(EINVAL, "option etcd_proxy must be an object {\"urls\": [...], \"cert\", \"key\", \"ca\"}");
    return NULL;
  }
  json_object_object_foreach(o, name, v) {
    int rc = 0;
    if (!strcmp(name, "urls"))
      urls = v;
    else if (!strcmp(name, "cert"))
      rc = check_file("cert", v, &cert);
    else if (!strcmp(name, "key"))
      rc = check_file("key", v, &key);
    else if (!strcmp(name, "ca"))
      rc = check_file("ca", v, &ca);
    else
      rc = tc_error(EINVAL, "option etcd_proxy: unknown field %s (fields: urls, cert, key, ca)", name);
    if (rc < 0)
      return NULL;
  }
  if (!urls || !json_object_is_type(urls, json_type_array) || json_object_array_length(urls) == 0) {
    tc_error(EINVAL, "option etcd_proxy: field urls must be a non-empty list of etcd client URLs "
             "(http[s]://host:port)");
    return NULL;
  }
  if (!cert != !key) {
    tc_error(EINVAL, "option etcd_proxy: field %s is missing: cert and key go together", cert ? "key" : "cert");
    return NULL;
  }
  size_t n = json_object_array_length(urls);
  if (n > 64) {
    tc_error(EINVAL, "option etcd_proxy: field urls: %zu URLs (at most 64)", n);
    return NULL;
  }
  const char *list[64];
  size_t textlen = 1;
  for (size_t i = 0; i < n; i++) {
    json_object *u = json_object_array_get_idx(urls, i);
    const char *s = json_object_is_type(u, json_type_string) ? json_object_get_string(u) : NULL;
    if (!s || (strncmp(s, "http://", 7) && strncmp(s, "https://", 8)) || strlen(s) > 900) {
      tc_error(EINVAL, "option etcd_proxy: field urls: element %zu (%.100s) is not an http:// or https:// URL", i,
               s ? s : json_object_to_json_string(u));
      return NULL;
    }
    if (!strncmp(s, "https://", 8) && !ca) {
      tc_error(EINVAL, "option etcd_proxy: field ca is missing: %s is https, and etcd's certificate is checked "
               "against ca only", s);
      return NULL;
    }
    list[i] = s;
    textlen += strlen(s) + 2;
  }
  struct kvproxy *px = calloc(1, sizeof *px);
  if (!px || !(px->urls_text = malloc(textlen))) {
    if (px)
      free(px->urls_text);
    free(px);
    tc_error(ENOMEM, "gateway: out of memory");
    return NULL;
  }
  px->urls_text[0] = 0;
  for (size_t i = 0; i < n; i++) {
    strcat(px->urls_text, list[i]);
    if (i + 1 < n)
      strcat(px->urls_text, ", ");
  }
  pthread_mutex_init(&px->mu, NULL);
  snprintf(px->prefix, sizeof px->prefix, "%s", tc_config_str(cfg, "etcd_prefix"));
  struct tc_kv_options ko = {
    .urls = list, .n_urls = (int) n, .ca = ca, .cert = cert, .key = key,
    .connect_timeout_ms = tc_config_int(cfg, "etcd_quick_timeout"),
    .request_timeout_ms = tc_config_int(cfg, "etcd_slow_timeout"),
    .prefix = tc_config_str(cfg, "etcd_prefix"),
  };
  if (!(px->kv = tc_kv_new(&ko))) {
    kvproxy_free(px);
    return NULL;
  }
  /* etcd must answer now: a wrong URL, CA or certificate is said at start. */
  struct kv_err err;
  json_object *q = json_object_new_object();
  if (q)
    json_object_object_add(q, "key", proxy_b64((const uint8_t *) ko.prefix, strlen(ko.prefix)));
  if (q)
    json_object_object_add(q, "count_only", json_object_new_boolean(1));
  json_object *r = kvproxy_forward(px, "/v3/kv/range", q, true, &err);
  if (!r) {
    tc_error(EIO, "option etcd_proxy: no etcd answered at %s: %s", px->urls_text, err.msg);
    kvproxy_free(px);
    return NULL;
  }
  json_object_put(r);
  tc_info("etcd_proxy: forwarding to etcd at %s (in use: %s)", px->urls_text, tc_kv_current_url(px->kv));
  return px;
}

void
kvproxy_free(struct kvproxy *px)
{
  if (!px)
    return;
  tc_kv_free(px->kv);
  pthread_mutex_destroy(&px->mu);
  free(px->urls_text);
  free(px);
}

struct tc_kv *
kvproxy_kv(struct kvproxy *px)
{
  return px->kv;
}

const char *
kvproxy_prefix(struct kvproxy *px)
{
  return px->prefix;
}

/* ---- talking to etcd ---- */

/* etcd's error bodies: {"error": "...", "code": n} (unary calls) or
 * {"error": {"grpc_code": n, "message": "..."}} (streams). */
static void
etcd_error(json_object *body, long status, const char *url, struct kv_err *err)
{
  json_object *e = NULL, *v;
  int code = status == 404 ? KV_NOT_FOUND : status == 400 ? KV_INVALID_ARGUMENT : status == 412 ?
             KV_FAILED_PRECONDITION : status == 429 ? KV_RESOURCE_EXHAUSTED : KV_UNAVAILABLE;
  const char *msg = NULL;
  if (body && json_object_object_get_ex(body, "error", &e)) {
    if (json_object_is_type(e, json_type_object)) {
      if (json_object_object_get_ex(e, "grpc_code", &v))
        code = json_object_get_int(v);
      if (json_object_object_get_ex(e, "message", &v))
        msg = json_object_get_string(v);
    } else {
      msg = json_object_get_string(e);
      if (json_object_object_get_ex(body, "code", &v))
        code = json_object_get_int(v);
    }
  }
  if (msg)
    kv_err_set(err, code, "%s", msg);
  else
    kv_err_set(err, code, "etcd_proxy: %s answered HTTP %ld without an etcd error", url, status);
}

static void
learn_header(struct kvproxy *px, json_object *reply)
{
  json_object *h;
  json_object *r = reply;
  if (json_object_object_get_ex(reply, "result", &h) && json_object_is_type(h, json_type_object))
    r = h;
  if (!json_object_object_get_ex(r, "header", &h) || !json_object_is_type(h, json_type_object))
    return;
  static const char *const names[] = { "cluster_id", "member_id", "raft_term" };
  pthread_mutex_lock(&px->mu);
  for (int i = 0; i < 3; i++) {
    json_object *v;
    if (json_object_object_get_ex(h, names[i], &v))
      snprintf(px->hdr[i], sizeof px->hdr[i], "%s", json_object_get_string(v));
  }
  pthread_mutex_unlock(&px->mu);
}

json_object *
kvproxy_header(struct kvproxy *px, int64_t rev)
{
  json_object *h = json_object_new_object();
  if (!h)
    return NULL;
  pthread_mutex_lock(&px->mu);
  static const char *const names[] = { "cluster_id", "member_id", "raft_term" };
  for (int i = 0; i < 3; i++)
    if (px->hdr[i][0])
      json_object_object_add(h, names[i], json_object_new_string(px->hdr[i]));
  pthread_mutex_unlock(&px->mu);
  if (rev)
    json_object_object_add(h, "revision", kvx_int64(rev));
  return h;
}

json_object *
kvproxy_forward(struct kvproxy *px, const char *path, json_object *body, bool idempotent, struct kv_err *err)
{
  if (!body) {
    kv_err_set(err, KV_INTERNAL, "gateway: out of memory");
    return NULL;
  }
  const char *text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
  char *reply = NULL;
  size_t len;
  long status;
  int rc = text ? tc_kv_raw(px->kv, path, text, idempotent, &reply, &len, &status) : -1;
  json_object_put(body);
  if (rc < 0) {
    /* Unknown outcome: 500 (a client must not resend it as if refused);
     * nothing reached etcd: 503 (safe to resend). */
    kv_err_set(err, errno == EIO ? KV_INTERNAL : KV_UNAVAILABLE, "etcd_proxy: %s", tc_last_error());
    return NULL;
  }
  json_tokener *tok = json_tokener_new_ex(64);
  json_object *o = tok ? json_tokener_parse_ex(tok, reply, (int) len) : NULL;
  json_tokener_free(tok);
  free(reply);
  const char *url = tc_kv_current_url(px->kv);
  if (status != 200 || !o || !json_object_is_type(o, json_type_object) || json_object_object_get_ex(o, "error", NULL)) {
    if (status == 200 && (!o || !json_object_is_type(o, json_type_object)))
      kv_err_set(err, KV_INTERNAL, "etcd_proxy: %s: the reply to %s is not a JSON object", url, path);
    else
      etcd_error(o, status, url, err);
    json_object_put(o);
    return NULL;
  }
  learn_header(px, o);
  return o;
}

/* ---- the filter's records, read from etcd ---- */

/* A record the decision read: unchanged since, or the txn fails. A range
 * (end set): no key in it modified or created after rev. */
struct guard {
  uint8_t *key, *end;
  size_t klen, elen;
  int64_t mod;
};

#define MAX_GUARDS 1000

struct proxy_src {
  struct kvproxy *px;
  int64_t rev;                 /* every read at this revision (0: not yet known) */
  struct guard *g;
  size_t n, cap;
  bool reads_only;             /* a range or a watch: nothing to guard */
  bool failed;
  struct kv_err err;
};

struct proxy_src *
proxy_src_new(struct kvproxy *px, int64_t rev)
{
  struct proxy_src *ps = calloc(1, sizeof *ps);
  if (ps) {
    ps->px = px;
    ps->rev = rev;
  }
  return ps;
}

void
proxy_src_free(struct proxy_src *ps)
{
  if (!ps)
    return;
  for (size_t i = 0; i < ps->n; i++) {
    free(ps->g[i].key);
    free(ps->g[i].end);
  }
  free(ps->g);
  free(ps);
}

static int
src_fail(struct proxy_src *ps, const struct kv_err *err)
{
  if (!ps->failed) {
    ps->failed = true;
    ps->err = *err;
  }
  return -1;
}

static int
add_guard(struct proxy_src *ps, const uint8_t *key, size_t klen, const uint8_t *end, size_t elen, int64_t mod)
{
  if (ps->reads_only)
    return 0;
  for (size_t i = 0; i < ps->n; i++)
    if (ps->g[i].klen == klen && !memcmp(ps->g[i].key, key, klen) && ps->g[i].elen == elen &&
        (!elen || !memcmp(ps->g[i].end, end, elen)))
      return 0;
  struct kv_err err;
  if (ps->n == MAX_GUARDS) {
    kv_err_set(&err, KV_RESOURCE_EXHAUSTED, "etcdserver: too many records to check (more than %d) for one "
               "request through etcd_proxy", MAX_GUARDS);
    return src_fail(ps, &err);
  }
  if (tc_grow(&ps->g, &ps->cap, ps->n + 1, sizeof *ps->g, 8) < 0)
    goto oom;
  struct guard *g = &ps->g[ps->n];
  memset(g, 0, sizeof *g);
  if (!(g->key = malloc(klen + 1)) || (elen && !(g->end = malloc(elen)))) {
    free(g->key);
    goto oom;
  }
  memcpy(g->key, key, klen);
  g->klen = klen;
  if (elen)
    memcpy(g->end, end, elen);
  g->elen = elen;
  g->mod = mod;
  ps->n++;
  return 0;
oom:
  kv_err_set(&err, KV_INTERNAL, "gateway: out of memory");
  return src_fail(ps, &err);
}

/* A range read at the source's revision (learning it on the first read). */
static json_object *
src_range(struct proxy_src *ps, const uint8_t *key, size_t klen, const uint8_t *end, size_t elen, bool keys_only)
{
  json_object *q = json_object_new_object();
  struct kv_err err;
  if (q) {
    json_object_object_add(q, "key", proxy_b64(key, klen));
    if (elen)
      json_object_object_add(q, "range_end", proxy_b64(end, elen));
    if (ps->rev)
      json_object_object_add(q, "revision", kvx_int64(ps->rev));
    if (keys_only)
      json_object_object_add(q, "keys_only", json_object_new_boolean(1));
  }
  json_object *r = kvproxy_forward(ps->px, "/v3/kv/range", q, true, &err);
  if (!r) {
    src_fail(ps, &err);
    return NULL;
  }
  json_object *h;
  if (!ps->rev && json_object_object_get_ex(r, "header", &h))
    ps->rev = tc_json_i64(h, "revision");
  return r;
}

static int
decode_b64_field(json_object *o, const char *name, struct kv_bytes *out)
{
  json_object *v;
  out->p = NULL;
  out->n = 0;
  if (!json_object_object_get_ex(o, name, &v))
    return 0;
  return kv_b64_decode(json_object_get_string(v), (size_t) json_object_get_string_len(v), out) == 0 ? 0 : -1;
}

static int
src_get(void *ctx, const uint8_t *key, size_t klen, char **val, size_t *len)
{
  struct proxy_src *ps = ctx;
  json_object *r = src_range(ps, key, klen, NULL, 0, false), *kvs;
  if (!r)
    return -1;
  int found = 0;
  int64_t mod = 0;
  if (json_object_object_get_ex(r, "kvs", &kvs) && json_object_array_length(kvs) > 0) {
    json_object *kv = json_object_array_get_idx(kvs, 0);
    struct kv_bytes v;
    if (decode_b64_field(kv, "value", &v) < 0) {
      json_object_put(r);
      return -1;
    }
    mod = tc_json_i64(kv, "mod_revision");
    *val = malloc(v.n + 1);
    if (!*val) {
      free(v.p);
      json_object_put(r);
      return -1;
    }
    if (v.n)
      memcpy(*val, v.p, v.n);
    (*val)[v.n] = 0;
    *len = v.n;
    free(v.p);
    found = 1;
  }
  json_object_put(r);
  if (add_guard(ps, key, klen, NULL, 0, mod) < 0) {
    if (found)
      free(*val);
    return -1;
  }
  return found;
}

static int
src_keys(void *ctx, const uint8_t *key, size_t klen, const uint8_t *end, size_t elen,
         int (*cb)(void *opaque, const uint8_t *k, size_t kl), void *opaque)
{
  struct proxy_src *ps = ctx;
  json_object *r = src_range(ps, key, klen, end, elen, true), *kvs;
  if (!r)
    return -1;
  int rc = 0;
  if (json_object_object_get_ex(r, "kvs", &kvs))
    for (size_t i = 0; i < json_object_array_length(kvs); i++) {
      struct kv_bytes k;
      if (decode_b64_field(json_object_array_get_idx(kvs, i), "key", &k) < 0) {
        rc = -1;
        break;
      }
      int stop = cb(opaque, k.p, k.n);
      free(k.p);
      if (stop)
        break;
    }
  json_object_put(r);
  if (rc == 0 && add_guard(ps, key, klen, end, elen ? elen : 0, -1) < 0)
    rc = -1;
  return rc;
}

void
proxy_src_reads_only(struct proxy_src *ps)
{
  ps->reads_only = true;
}

void
proxy_src_bind(struct proxy_src *ps, struct kvfilter_src *src)
{
  src->ctx = ps;
  src->get = src_get;
  src->keys = src_keys;
}

int
proxy_filter_begin(struct proxy_src *ps, const struct caller *who, struct kvfilter_req *rq, struct kv_err *err)
{
  if (!who || !who->filter || !who->filter->use_perms || !who->gid)
    return 0;
  struct kvfilter_src src;
  proxy_src_bind(ps, &src);
  if (kvfilter_begin(rq, who->filter, who->gid, &src, err) < 0) {
    proxy_src_failed(ps, err);
    kvfilter_end(rq);
    return -1;
  }
  return 1;
}

bool
proxy_src_failed(struct proxy_src *ps, struct kv_err *err)
{
  if (ps->failed && err)
    *err = ps->err;
  return ps->failed;
}

json_object *
proxy_src_guards(struct proxy_src *ps)
{
  if (!ps->n)
    return NULL;
  json_object *a = json_object_new_array();
  for (size_t i = 0; a && i < ps->n; i++) {
    const struct guard *g = &ps->g[i];
    json_object *c = json_object_new_object();
    if (!c) {
      json_object_put(a);
      return NULL;
    }
    json_object_object_add(c, "key", proxy_b64(g->key, g->klen));
    json_object_object_add(c, "target", json_object_new_string("MOD"));
    if (g->mod >= 0) {
      /* An absent key compares as mod_revision 0. */
      json_object_object_add(c, "result", json_object_new_string("EQUAL"));
      json_object_object_add(c, "mod_revision", kvx_int64(g->mod));
    } else {
      json_object_object_add(c, "range_end", proxy_b64(g->end, g->elen));
      json_object_object_add(c, "result", json_object_new_string("LESS"));
      json_object_object_add(c, "mod_revision", kvx_int64(ps->rev + 1));
    }
    json_object_array_add(a, c);
  }
  return a;
}

/* ---- filtering replies ---- */

int
proxy_filter_range_reply(struct kvfilter_req *rq, const struct kv_range_req *orig, json_object *resp)
{
  json_object *kvs = NULL, *out = json_object_new_array();
  if (!out)
    return -1;
  int64_t count = 0;
  if (json_object_object_get_ex(resp, "kvs", &kvs))
    for (size_t i = 0; i < json_object_array_length(kvs); i++) {
      json_object *kv = json_object_array_get_idx(kvs, i);
      struct kv_bytes k, v;
      if (decode_b64_field(kv, "key", &k) < 0 || decode_b64_field(kv, "value", &v) < 0) {
        free(k.p);
        json_object_put(out);
        return -1;
      }
      bool may = kvfilter_may_read(rq, k.p, k.n, v.p, v.n);
      free(k.p);
      free(v.p);
      if (!may)
        continue;
      count++;
      if (orig->count_only || (orig->limit > 0 && count > orig->limit))
        continue;
      if (orig->keys_only)
        json_object_object_del(kv, "value");
      json_object_array_add(out, json_object_get(kv));
    }
  json_object_object_del(resp, "kvs");
  json_object_object_del(resp, "count");
  json_object_object_del(resp, "more");
  if (json_object_array_length(out))
    json_object_object_add(resp, "kvs", out);
  else
    json_object_put(out);
  if (orig->limit > 0 && count > orig->limit)
    json_object_object_add(resp, "more", json_object_new_boolean(1));
  if (count)
    json_object_object_add(resp, "count", kvx_int64(count));
  return 0;
}

/* The ranges inside a txn reply, filtered by the ops that ran. */
static int
filter_txn_reply(struct kvfilter_req *rq, const struct kv_txn_req *t, json_object *resp)
{
  json_object *v, *rs;
  bool ok = json_object_object_get_ex(resp, "succeeded", &v) && json_object_get_boolean(v);
  const struct kv_op *ops = ok ? t->succ : t->fail;
  size_t n = ok ? t->nsucc : t->nfail;
  if (!json_object_object_get_ex(resp, "responses", &rs))
    return 0;
  for (size_t i = 0; i < n && i < json_object_array_length(rs); i++) {
    json_object *r = json_object_array_get_idx(rs, i), *inner;
    if (ops[i].type == KV_OP_RANGE && json_object_object_get_ex(r, "response_range", &inner) &&
        proxy_filter_range_reply(rq, &ops[i].range, inner) < 0)
      return -1;
    if (ops[i].type == KV_OP_TXN && json_object_object_get_ex(r, "response_txn", &inner) &&
        filter_txn_reply(rq, &ops[i].txn, inner) < 0)
      return -1;
  }
  return 0;
}

/* ---- the operations ---- */

static const char *const op_paths[] = { "/v3/kv/range", "/v3/kv/put", "/v3/kv/deleterange", "/v3/kv/txn" };
static const char *const op_replies[] = { "response_range", "response_put", "response_delete_range",
                                          "response_txn" };

static json_object *
range_op(struct kvproxy *px, struct proxy_src *ps, struct kvfilter_req *rq, const struct kv_op *op,
         struct kv_err *err)
{
  json_object *q = proxy_encode_op(op, true);
  /* The range and the records that decide who reads it: one revision. */
  if (q && !op->range.revision && ps->rev)
    json_object_object_add(q, "revision", kvx_int64(ps->rev));
  json_object *r = kvproxy_forward(px, op_paths[KV_OP_RANGE], q, true, err);
  if (r && proxy_filter_range_reply(rq, &op->range, r) < 0) {
    json_object_put(r);
    kv_err_set(err, KV_INTERNAL, "gateway: out of memory");
    return NULL;
  }
  /* A record the filter could not read would hide keys silently: the
   * range fails instead, naming why. */
  if (r && proxy_src_failed(ps, err)) {
    json_object_put(r);
    return NULL;
  }
  return r;
}

/* One filtered write: checked, then run inside a txn guarding what the
 * check read. NULL with err; *again: the guards failed, check again. */
static json_object *
write_op(struct kvproxy *px, struct proxy_src *ps, struct kvfilter_req *rq, const struct kv_op *op, bool *again,
         struct kv_err *err)
{
  *again = false;
  if (kvfilter_check_op(rq, op, err) < 0) {
    /* A record that could not be read is an outage, not a refusal. */
    proxy_src_failed(ps, err);
    return NULL;
  }
  json_object *guards = proxy_src_guards(ps);
  bool idempotent = op->type != KV_OP_TXN;
  json_object *r;
  if (!guards) {
    r = kvproxy_forward(px, op_paths[op->type], proxy_encode_op(op, true), idempotent, err);
  } else {
    json_object *w = json_object_new_object(), *succ = json_object_new_array();
    json_object *inner = proxy_encode_request_op(op, true);
    if (!w || !succ || !inner) {
      json_object_put(w);
      json_object_put(succ);
      json_object_put(inner);
      json_object_put(guards);
      kv_err_set(err, KV_INTERNAL, "gateway: out of memory");
      return NULL;
    }
    json_object_object_add(w, "compare", guards);
    json_object_array_add(succ, inner);
    json_object_object_add(w, "success", succ);
    json_object *outer = kvproxy_forward(px, op_paths[KV_OP_TXN], w, idempotent, err);
    if (!outer)
      return NULL;
    json_object *v, *rs, *hdr = NULL;
    if (!json_object_object_get_ex(outer, "succeeded", &v) || !json_object_get_boolean(v)) {
      json_object_put(outer);
      *again = true;
      return NULL;
    }
    json_object_object_get_ex(outer, "header", &hdr);
    r = NULL;
    if (json_object_object_get_ex(outer, "responses", &rs) && json_object_array_length(rs) == 1 &&
        json_object_object_get_ex(json_object_array_get_idx(rs, 0), op_replies[op->type], &v))
      r = json_object_get(v);
    if (!r) {
      json_object_put(outer);
      kv_err_set(err, KV_INTERNAL, "etcd_proxy: %s: a txn reply without its response", tc_kv_current_url(px->kv));
      return NULL;
    }
    if (hdr)
      json_object_object_add(r, "header", json_object_get(hdr));
    json_object_put(outer);
  }
  if (r && op->type == KV_OP_TXN && filter_txn_reply(rq, &op->txn, r) < 0) {
    json_object_put(r);
    kv_err_set(err, KV_INTERNAL, "gateway: out of memory");
    return NULL;
  }
  return r;
}

json_object *
kvproxy_op(struct kvproxy *px, const struct caller *who, const struct kv_op *op, struct kv_err *err)
{
  if (op->type < 0 || op->type > KV_OP_TXN) {
    kv_err_set(err, KV_INVALID_ARGUMENT, "unknown operation");
    return NULL;
  }
  for (int attempt = 0; attempt < PROXY_MAX_RETRIES; attempt++) {
    struct proxy_src *ps = proxy_src_new(px, 0);
    if (!ps) {
      kv_err_set(err, KV_INTERNAL, "gateway: out of memory");
      return NULL;
    }
    struct kvfilter_req rq;
    if (op->type == KV_OP_RANGE)
      proxy_src_reads_only(ps);
    int f = proxy_filter_begin(ps, who, &rq, err);
    json_object *r = NULL;
    bool again = false;
    if (f == 0)
      r = kvproxy_forward(px, op_paths[op->type], proxy_encode_op(op, false), op->type != KV_OP_TXN, err);
    else if (f > 0 && op->type == KV_OP_RANGE)
      r = range_op(px, ps, &rq, op, err);
    else if (f > 0)
      r = write_op(px, ps, &rq, op, &again, err);
    if (f > 0)
      kvfilter_end(&rq);
    proxy_src_free(ps);
    if (!again)
      return r;
    tc_debug("etcd_proxy: a record %s's request was checked against changed while it ran; checking again",
             who->identity);
  }
  kv_err_set(err, KV_UNAVAILABLE, "etcdserver: the records deciding %s's rights changed while the request was "
             "checked, %d times in a row: try again", who->identity, PROXY_MAX_RETRIES);
  return NULL;
}

json_object *
kvproxy_compact(struct kvproxy *px, const struct caller *who, const struct kv_compact_req *r, struct kv_err *err)
{
  struct proxy_src *ps = proxy_src_new(px, 0);
  if (!ps) {
    kv_err_set(err, KV_INTERNAL, "gateway: out of memory");
    return NULL;
  }
  struct kvfilter_req rq;
  int f = proxy_filter_begin(ps, who, &rq, err);
  int rc = f > 0 ? kvfilter_check_compact(&rq, err) : f;
  if (f > 0)
    kvfilter_end(&rq);
  proxy_src_free(ps);
  if (rc < 0)
    return NULL;
  json_object *q = json_object_new_object();
  if (q) {
    json_object_object_add(q, "revision", kvx_int64(r->revision));
    if (r->physical)
      json_object_object_add(q, "physical", json_object_new_boolean(1));
  }
  return kvproxy_forward(px, "/v3/kv/compaction", q, true, err);
}

int
kvproxy_bootstrap_admin(struct kvproxy *px, const char *key)
{
  static const char val[] = "{\"type\":\"admin\"}";
  struct tc_kv_cmp cmp = { .key = key, .target = TC_KV_CMP_VERSION, .result = TC_KV_EQUAL, .number = 0 };
  struct tc_kv_op put = { .type = TC_KV_PUT, .key = key, .value = val, .value_len = sizeof val - 1 };
  struct tc_kv_txn t = { .cmp = &cmp, .n_cmp = 1, .success = &put, .n_success = 1 };
  struct tc_kv_result res;
  if (tc_kv_txn(px->kv, &t, &res) < 0)
    return -1;
  int written = res.succeeded;
  tc_kv_result_free(&res);
  return written;
}
