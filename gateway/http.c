/* The KV service over libmicrohttpd: a fixed pool of worker threads
 * (gateway_threads) serves every connection; conn_guard.c accepts them and
 * enforces the connection caps and deadlines; a watch with nothing to send
 * is suspended (watch_park.c) instead of holding a worker. */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include "http.h"
#include "fullio.h"
#include "kvexec.h"
#include "listen.h"
#include "kvfilter.h"
#include "gw_identity.h"
#include "crypto.h"
#include "watch.h"
#include "watch_park.h"
#include "proxy.h"
#include "proxy_watch.h"
#include "conn_guard.h"
#include "gw_metrics.h"
#include "error.h"
#include "log.h"
#include "cleanup.h"
#include <stdarg.h>

struct kv_server {
  struct MHD_Daemon *d;
  struct kv_backend b;
  int fd;
  size_t max_body;            /* put and txn bodies (gateway_max_request_bytes) */
  size_t body_budget;         /* bodies in memory together (gateway_max_body_memory) */
  size_t body_held;           /* guarded by body_mu */
  pthread_mutex_t body_mu;
  unsigned threads;
  struct conn_guard *guard;
  struct watch_park *park;
  struct gw_metrics *metrics;
  int64_t progress_ms;
  volatile bool stopping;
  char address[128];
  bool https;
  bool use_perms;
  struct gw_trust *trust;     /* client_ca, osd_ca, mon_ca (HTTPS only) */
  struct kvfilter filter;
  char *cert_pem, *key_pem;
};

/* etcd's --max-txn-ops (option gateway_max_txn_ops). */
static int64_t max_txn_ops = 128;

/* Bodies of the endpoints other than put and txn: a key is at most
 * KV_MAX_KEY bytes, so their requests are small (range, deleterange,
 * compaction, watch, lease). */
#define SMALL_BODY_LIMIT (64 * 1024)

struct req_ctx {
  char *body;
  size_t len, cap;
  size_t limit;               /* this endpoint's largest body */
  size_t held;                /* bytes counted in body_held */
  struct conn_slot *slot;
  enum kv_endpoint ep;
  double start;               /* tc_metrics_now() at the headers */
  struct gw_identity gid;
  bool authenticated;
  char peer[96];
};

static int
http_status(int code)
{
  switch (code) {
  case KV_INVALID_ARGUMENT: case KV_OUT_OF_RANGE: return 400;
  case KV_FAILED_PRECONDITION: return 412;
  case KV_NOT_FOUND: return 404;
  case KV_RESOURCE_EXHAUSTED: return 429;
  case KV_UNAVAILABLE: return 503;
  case KV_PERMISSION_DENIED: return 403;
  case KV_UNAUTHENTICATED: return 401;
  default: return 500;
  }
}

static char *
to_text(json_object *o, size_t *outlen, bool newline)
{
  size_t len;
  const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
  char *out = malloc(len + 2);
  if (!out)
    return NULL;
  memcpy(out, s, len);
  if (newline)
    out[len++] = '\n';
  out[len] = 0;
  *outlen = len;
  return out;
}

/* etcd's error shape: {"error", "message", "code"}. */
static char *
error_text(const struct kv_err *err, int *status, size_t *outlen)
{
  json_object *o = json_object_new_object();
  json_object_object_add(o, "error", json_object_new_string(err->msg));
  json_object_object_add(o, "message", json_object_new_string(err->msg));
  json_object_object_add(o, "code", json_object_new_int(err->code));
  *status = http_status(err->code);
  char *t = to_text(o, outlen, false);
  json_object_put(o);
  return t;
}

/* One non-streaming request from a caller. */
static char *
handle(const struct kv_backend *b, const struct caller *who, const char *method, const char *path,
       const char *body, size_t len, int *status, size_t *outlen)
{
  struct kvproxy *px = b->px;
  struct kv_err err = { 0, "" };
  json_object *resp = NULL;
  enum kv_endpoint ep = KV_EP_NONE;
  *status = 200;
  if (strcmp(path, "/health") == 0) {
    resp = json_object_new_object();
    json_object_object_add(resp, "health", json_object_new_string("true"));
    goto out;
  }
  if (strcmp(path, "/version") == 0) {
    resp = json_object_new_object();
    json_object_object_add(resp, "etcdserver", json_object_new_string("3.4.23"));
    json_object_object_add(resp, "etcdcluster", json_object_new_string("3.4.0"));
    json_object_object_add(resp, "tromcho", json_object_new_string(PACKAGE_VERSION));
    goto out;
  }
  ep = kv_endpoint_of(path);
  if (ep == KV_EP_NONE) {
    kv_err_set(&err, KV_NOT_FOUND, "unknown path %.200s: not an etcd v3 endpoint", path);
    return error_text(&err, status, outlen);
  }
  if (strcmp(method, "POST") != 0) {
    kv_err_set(&err, KV_INVALID_ARGUMENT, "method %.20s not allowed on %.200s: use POST", method, path);
    char *t = error_text(&err, status, outlen);
    *status = 405;
    return t;
  }
  struct kv_request req;
  if (kv_request_parse(ep, body, len, &req, &err) < 0)
    return error_text(&err, status, outlen);
  switch (ep) {
  case KV_EP_TXN:
    if (kv_txn_check(&req.op.txn, max_txn_ops, &err) < 0)
      break;
    /* fall through */
  case KV_EP_RANGE: case KV_EP_PUT: case KV_EP_DELETE:
    resp = px ? kvproxy_op(px, who, &req.op, &err) : kvx_op(b->s, who, &req.op, &err);
    break;
  case KV_EP_COMPACT:
    resp = px ? kvproxy_compact(px, who, &req.compact, &err) : kvx_compact(b->s, who, &req.compact, &err);
    break;
  case KV_EP_LEASE_GRANT:
    resp = px ? kvproxy_lease_grant(px, who, &req.lease, &err) : lease_grant(b->l, who, &req.lease, &err);
    break;
  case KV_EP_LEASE_REVOKE:
    resp = px ? kvproxy_lease_revoke(px, who, &req.lease, &err) : lease_revoke(b->l, who, &req.lease, &err);
    break;
  case KV_EP_LEASE_TTL:
    resp = px ? kvproxy_lease_timetolive(px, who, &req.lease, &err) : lease_timetolive(b->l, who, &req.lease, &err);
    break;
  case KV_EP_LEASE_LEASES: resp = px ? kvproxy_lease_list(px, who, &err) : lease_list(b->l, who, &err); break;
  case KV_EP_LEASE_KEEPALIVE: {
    json_object *r = px ? kvproxy_lease_keepalive(px, who, &req.lease, &err)
                        : lease_keepalive(b->l, who, &req.lease, &err);
    if (r) {
      resp = json_object_new_object();
      json_object_object_add(resp, "result", r);
    }
    break;
  }
  default:
    kv_err_set(&err, KV_INVALID_ARGUMENT, "%s: streaming endpoint", path);
    break;
  }
  kv_request_free(&req);
  if (!resp)
    return error_text(&err, status, outlen);
out:;
  char *t = to_text(resp, outlen, ep == KV_EP_LEASE_KEEPALIVE);
  json_object_put(resp);
  return t;
}

char *
kv_handle(struct kvs *s, struct leases *l, const char *method, const char *path,
          const char *body, size_t len, int *status, size_t *outlen)
{
  struct caller who = { "anyone", "test", NULL, NULL };
  struct kv_backend b = { s, l, NULL };
  return handle(&b, &who, method, path, body, len, status, outlen);
}

char *
kv_handle_as(struct kvs *s, struct leases *l, const struct caller *who, const char *method, const char *path,
             const char *body, size_t len, int *status, size_t *outlen)
{
  struct kv_backend b = { s, l, NULL };
  return handle(&b, who, method, path, body, len, status, outlen);
}

static enum MHD_Result
send_text(struct MHD_Connection *conn, int status, char *text, size_t len)
{
  if (!text)
    return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(conn, (unsigned) status, r);
  MHD_destroy_response(r);
  return ret;
}

static void
peer_name(struct MHD_Connection *conn, char *buf, size_t n)
{
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  char host[64] = "?";
  int port = 0;
  if (ci && ci->client_addr) {
    if (ci->client_addr->sa_family == AF_INET) {
      const struct sockaddr_in *a = (const void *) ci->client_addr;
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
      port = ntohs(a->sin_port);
    } else if (ci->client_addr->sa_family == AF_INET6) {
      const struct sockaddr_in6 *a = (const void *) ci->client_addr;
      inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
      port = ntohs(a->sin6_port);
    }
  }
  snprintf(buf, n, "%s:%d", host, port);
}

/* Send a reply and count it in the metrics. */
static enum MHD_Result
reply(struct kv_server *srv, struct MHD_Connection *conn, struct req_ctx *rc, int status, char *text, size_t n)
{
  gw_metrics_request(srv->metrics, rc->ep, status, rc->len, text ? n : 0, rc->start);
  return send_text(conn, status, text, n);
}

static void
watch_ended(void *arg)
{
  gw_metrics_watches(arg, -1);
}

static enum MHD_Result
start_watch(struct kv_server *srv, struct MHD_Connection *conn, const struct caller *who, struct req_ctx *rc)
{
  struct kv_request req;
  struct kv_err err = { 0, "" };
  int status;
  size_t n;
  if (kv_request_parse(KV_EP_WATCH, rc->body ? rc->body : "", rc->len, &req, &err) < 0) {
    char *t = error_text(&err, &status, &n);
    return reply(srv, conn, rc, status, t, n);
  }
  void *w;
  MHD_ContentReaderCallback read_fn;
  MHD_ContentReaderFreeCallback free_fn;
  if (srv->b.px) {
    struct proxy_watch *pw = kvproxy_watch_new(srv->b.px, who, &req.watch, conn, srv->park, &srv->stopping,
                                               srv->progress_ms, &err);
    kv_request_free(&req);
    if (!pw) {
      char *t = error_text(&err, &status, &n);
      return reply(srv, conn, rc, status, t, n);
    }
    kvproxy_watch_on_free(pw, watch_ended, srv->metrics);
    w = pw;
    read_fn = kvproxy_watch_read;
    free_fn = kvproxy_watch_free;
  } else {
    struct watch_stream *ws = watch_new(srv->b.s, who, &req.watch, conn, srv->park, &srv->stopping,
                                        srv->progress_ms);
    kv_request_free(&req);
    if (!ws)
      return MHD_NO;
    watch_on_free(ws, watch_ended, srv->metrics);
    w = ws;
    read_fn = watch_read;
    free_fn = watch_free;
  }
  gw_metrics_watches(srv->metrics, 1);
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, read_fn, w, free_fn);
  if (!r) {
    free_fn(w);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  gw_metrics_request(srv->metrics, KV_EP_WATCH, 200, rc->len, 0, rc->start);
  return ret;
}

/* GET /metrics: Prometheus text (with use_perms, for any valid certificate). */
static enum MHD_Result
send_metrics(struct kv_server *srv, struct MHD_Connection *conn, struct req_ctx *rc)
{
  (void) rc;
  size_t n;
  char *t = gw_metrics_render(srv->metrics, &n);
  if (!t)
    return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_buffer(n, t, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(t);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
  enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

/* Count n more body bytes against gateway_max_body_memory; false if over. */
static bool
hold_body(struct kv_server *srv, struct req_ctx *rc, size_t n)
{
  SCOPED_LOCK(&srv->body_mu);
  if (srv->body_held + n > srv->body_budget)
    return false;
  srv->body_held += n;
  rc->held += n;
  return true;
}

static void
release_body(struct kv_server *srv, struct req_ctx *rc)
{
  SCOPED_LOCK(&srv->body_mu);
  srv->body_held -= rc->held;
  rc->held = 0;
}

static enum MHD_Result
send_error(struct kv_server *srv, struct MHD_Connection *conn, struct req_ctx *rc, int code,
           const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static enum MHD_Result
send_error(struct kv_server *srv, struct MHD_Connection *conn, struct req_ctx *rc, int code,
           const char *fmt, ...)
{
  struct kv_err err = { code, "" };
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err.msg, sizeof err.msg, fmt, ap);
  va_end(ap);
  int status;
  size_t n;
  char *t = error_text(&err, &status, &n);
  return reply(srv, conn, rc, status, t, n);
}

/* The first call of a request, its headers in: who is calling (a refusal
 * comes before any body is read), the endpoint's body limit against the
 * announced length, memory for it. */
static enum MHD_Result
request_begin(struct kv_server *srv, struct MHD_Connection *conn, const char *url, const char *method,
              struct req_ctx *rc)
{
  rc->slot = conn_guard_slot(conn);
  rc->start = tc_metrics_now();
  rc->ep = kv_endpoint_of(url);
  conn_guard_request_begin(srv->guard, rc->slot);
  peer_name(conn, rc->peer, sizeof rc->peer);
  gw_identity_anyone(&rc->gid);
  if (srv->https && gw_trust_any(srv->trust)) {
    const union MHD_ConnectionInfo *ti = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (gw_identity_from_session(srv->trust, ti ? ti->tls_session : NULL, &rc->gid) == 0) {
      rc->authenticated = true;
      conn_guard_authenticated(srv->guard, rc->slot);
    } else if (srv->use_perms) {
      /* With use_perms nobody is served without a valid certificate. */
      char why[256];
      snprintf(why, sizeof why, "%s", tc_last_error());
      tc_warn("%s %s from %s refused: etcdserver: unauthenticated: %s", method, url, rc->peer, why);
      return send_error(srv, conn, rc, KV_UNAUTHENTICATED, "etcdserver: unauthenticated: %s", why);
    }
  }
  rc->limit = rc->ep == KV_EP_PUT || rc->ep == KV_EP_TXN ? srv->max_body : SMALL_BODY_LIMIT;
  if (rc->limit > srv->max_body)
    rc->limit = srv->max_body;
  const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl) {
    char *end;
    errno = 0;
    unsigned long long len = strtoull(cl, &end, 10);
    if (errno || *end || end == cl || len > rc->limit) {
      tc_debug("%s %s from %s (%s): body of %.30s bytes refused", method, url, rc->peer, rc->gid.desc, cl);
      return send_error(srv, conn, rc, KV_INVALID_ARGUMENT, "etcdserver: request is too large (%s takes at most "
                        "%zu bytes%s)", url, rc->limit, rc->limit == srv->max_body ?
                        ", option gateway_max_request_bytes" : "");
    }
    if (len > SMALL_BODY_LIMIT && !hold_body(srv, rc, (size_t) len)) {
      tc_warn("%s %s from %s (%s): %llu body bytes refused: gateway_max_body_memory (%zu) is in use",
              method, url, rc->peer, rc->gid.desc, len, srv->body_budget);
      return send_error(srv, conn, rc, KV_RESOURCE_EXHAUSTED, "etcdserver: too many requests (request bodies "
                        "fill gateway_max_body_memory, try again)");
    }
  }
  return MHD_YES;
}

/* Body bytes: kept up to the endpoint's limit. false: over it (the
 * connection is closed: MHD cannot answer in the middle of a body). */
static bool
take_body(struct kv_server *srv, struct req_ctx *rc, const char *data, size_t n)
{
  if (rc->len + n > rc->limit)
    return false;
  if (rc->len + n + 1 > rc->cap) {
    size_t cap = rc->cap ? rc->cap : 4096;
    while (cap < rc->len + n + 1)
      cap *= 2;
    if (cap > rc->limit + 1)
      cap = rc->limit + 1;
    /* Without an announced length, bodies past the small limit are
     * counted as they grow. */
    if (cap > SMALL_BODY_LIMIT && cap > rc->held && !hold_body(srv, rc, cap - rc->held))
      return false;
    char *nb = realloc(rc->body, cap);
    if (!nb)
      return false;
    rc->body = nb;
    rc->cap = cap;
  }
  memcpy(rc->body + rc->len, data, n);
  rc->len += n;
  return true;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
           const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
  struct kv_server *srv = cls;
  struct req_ctx *rc = *con_cls;
  (void) version;
  if (!rc) {
    rc = calloc(1, sizeof *rc);
    if (!rc)
      return MHD_NO;
    *con_cls = rc;
    return request_begin(srv, conn, url, method, rc);
  }
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (!take_body(srv, rc, upload_data, n)) {
      tc_warn("%s %s from %s (%s): body over %zu bytes or gateway_max_body_memory: connection closed",
              method, url, rc->peer, rc->gid.desc, rc->limit);
      return MHD_NO;
    }
    return MHD_YES;
  }
  struct caller who = { "anyone", rc->peer, NULL, NULL };
  int status;
  size_t n;
  if (srv->use_perms) {
    who.gid = &rc->gid;
    who.filter = &srv->filter;
  }
  who.identity = rc->gid.desc;
  if (rc->ep == KV_EP_WATCH && strcmp(method, "POST") == 0) {
    enum MHD_Result r = start_watch(srv, conn, &who, rc);
    conn_guard_streaming(srv->guard, rc->slot);
    return r;
  }
  if (strcmp(url, "/metrics") == 0 && strcmp(method, "GET") == 0)
    return send_metrics(srv, conn, rc);
  char *t = handle(&srv->b, &who, method, url, rc->body ? rc->body : "", rc->len, &status, &n);
  if (status >= 500)
    tc_warn("%s %s from %s (%s): %d %.*s", method, url, rc->peer, who.identity, status, (int) n, t ? t : "");
  else if (status >= 400)
    tc_debug("%s %s from %s (%s): %d %.*s", method, url, rc->peer, who.identity, status, (int) n, t ? t : "");
  return reply(srv, conn, rc, status, t, n);
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
  struct kv_server *srv = cls;
  struct req_ctx *rc = *con_cls;
  (void) conn; (void) toe;
  if (rc) {
    release_body(srv, rc);
    conn_guard_request_end(srv->guard, rc->slot);
    free(rc->body);
    free(rc);
  }
  *con_cls = NULL;
}

/* HTTPS and use_perms settings; -1 with a message naming the option. */
static int
setup_tls(struct kv_server *srv, struct tc_config *cfg)
{
  const char *cert = tc_config_str(cfg, "antietcd_cert"), *key = tc_config_str(cfg, "antietcd_key");
  srv->use_perms = tc_config_bool(cfg, "use_perms");
  if (kvfilter_init(&srv->filter, tc_config_str(cfg, "etcd_prefix"), srv->use_perms) < 0)
    return -1;
  if (!cert != !key)
    return tc_error(EINVAL, "option %s is set but %s is not: the KV API's HTTPS needs both",
                    cert ? "antietcd_cert" : "antietcd_key", cert ? "antietcd_key" : "antietcd_cert");
  if (!cert) {
    if (srv->use_perms)
      return tc_error(EINVAL, "use_perms needs HTTPS with client certificates on the KV API: set "
                      "antietcd_cert, antietcd_key and client_ca (plain HTTP is for trusted networks only)");
    return 0;
  }
  if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    return tc_error(ENOTSUP, "antietcd_cert: this libmicrohttpd is built without TLS");
  if (!(srv->cert_pem = gw_read_pem("antietcd_cert", cert)) || !(srv->key_pem = gw_read_pem("antietcd_key", key)))
    return -1;
  if (!(srv->trust = gw_trust_load(cfg)))
    return -1;
  if (srv->use_perms && !gw_trust_any(srv->trust))
    return tc_error(EINVAL, "use_perms needs client certificates on the KV API: set client_ca "
                    "(and osd_ca, mon_ca for OSDs and monitors)");
  srv->https = true;
  return 0;
}

static void
server_free(struct kv_server *srv)
{
  watch_park_free(srv->park);
  gw_metrics_free(srv->metrics);
  conn_guard_free(srv->guard);
  pthread_mutex_destroy(&srv->body_mu);
  gw_trust_free(srv->trust);
  if (srv->key_pem) {
    tc_wipe(srv->key_pem, strlen(srv->key_pem));
    free(srv->key_pem);
  }
  free(srv->cert_pem);
  free(srv);
}

/* An option that must be a positive int. */
static int
positive(struct tc_config *cfg, const char *opt, int64_t max, int *out)
{
  int64_t v = tc_config_int(cfg, opt);
  if (v < 1 || v > max)
    return tc_error(EINVAL, "option %s: %" PRId64 " is out of range (1 to %" PRId64 ")", opt, v, max);
  *out = (int) v;
  return 0;
}

struct kv_server *
kv_server_start(struct tc_config *cfg, const struct kv_backend *b)
{
  struct kv_server *srv = calloc(1, sizeof *srv);
  if (!srv) {
    tc_error(ENOMEM, "gateway: out of memory");
    return NULL;
  }
  pthread_mutex_init(&srv->body_mu, NULL);
  srv->b = *b;
  srv->max_body = (size_t) tc_config_int(cfg, "gateway_max_request_bytes");
  srv->body_budget = (size_t) tc_config_int(cfg, "gateway_max_body_memory");
  max_txn_ops = tc_config_int(cfg, "gateway_max_txn_ops");
  srv->progress_ms = tc_config_int(cfg, "gateway_watch_progress_interval") * 1000;
  struct conn_guard_limits lim = { 0, 0, 0, 0 };
  int threads = 0;
  if (positive(cfg, "gateway_threads", 1024, &threads) < 0 ||
      positive(cfg, "gateway_max_connections", 1 << 20, &lim.max_conns) < 0 ||
      positive(cfg, "gateway_max_connections_per_addr", 1 << 20, &lim.max_per_addr) < 0 ||
      positive(cfg, "gateway_idle_timeout", 86400, &lim.idle_timeout_s) < 0 ||
      positive(cfg, "gateway_request_timeout", 86400, &lim.request_timeout_s) < 0 ||
      setup_tls(srv, cfg) < 0 || !(srv->guard = conn_guard_new(&lim)) || !(srv->park = watch_park_start(b->s)) ||
      !(srv->metrics = gw_metrics_new(srv->guard, srv->park))) {
    server_free(srv);
    return NULL;
  }
  if (srv->body_budget < srv->max_body) {
    tc_error(EINVAL, "option gateway_max_body_memory (%zu) is below gateway_max_request_bytes (%zu): "
             "no request of the largest size could be taken", srv->body_budget, srv->max_body);
    server_free(srv);
    return NULL;
  }
  srv->threads = (unsigned) threads;
  srv->fd = gw_listen("gateway_address", tc_config_str(cfg, "gateway_address"), srv->address, sizeof srv->address);
  if (srv->fd < 0) {
    server_free(srv);
    return NULL;
  }
  /* With HTTPS: our certificate, and the CAs whose certificates we ask
   * clients for (checked per request by identity.c, not by the handshake).
   * conn_guard accepts (MHD_USE_NO_LISTEN_SOCKET) and enforces the caps;
   * MHD's own limit is only a backstop above them (the closing sockets
   * count until MHD has closed them). */
  const char *trust_pem = gw_trust_pem(srv->trust);
  /* The HTTPS options only with HTTPS: MHD prints a warning to stderr for
   * each one given to a plain HTTP daemon. */
  struct MHD_OptionItem opts[] = {
    { MHD_OPTION_THREAD_POOL_SIZE, (intptr_t) threads, NULL },
    { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t) on_completed, srv },
    { MHD_OPTION_NOTIFY_CONNECTION, (intptr_t) conn_guard_notify, srv->guard },
    { MHD_OPTION_EXTERNAL_LOGGER, (intptr_t) gw_mhd_log, (void *) "KV API" },
    { MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t) lim.idle_timeout_s, NULL },
    { MHD_OPTION_CONNECTION_LIMIT, (intptr_t) (2 * lim.max_conns + 2 * threads), NULL },
    { srv->https ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, srv->cert_pem },
    { MHD_OPTION_HTTPS_MEM_KEY, 0, srv->key_pem },
    { MHD_OPTION_HTTPS_MEM_TRUST, 0, (void *) trust_pem },
    { MHD_OPTION_END, 0, NULL },
  };
  srv->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET |
                            MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (srv->https ? MHD_USE_TLS : 0),
                            0, NULL, NULL, on_request, srv, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
  if (!srv->d) {
    close(srv->fd);
    server_free(srv);
    tc_error(EIO, "gateway_address %s: libmicrohttpd failed to start%s", tc_config_str(cfg, "gateway_address"),
             tc_config_str(cfg, "antietcd_cert") ? " (check antietcd_cert and antietcd_key: a certificate and "
             "its key in PEM)" : "");
    return NULL;
  }
  if (conn_guard_start(srv->guard, srv->fd, srv->d) < 0) {
    MHD_stop_daemon(srv->d);
    close(srv->fd);
    server_free(srv);
    return NULL;
  }
  tc_debug("KV API: %d worker threads, at most %d connections (%d per address), idle timeout %d s, "
           "request timeout %d s", threads, lim.max_conns, lim.max_per_addr, lim.idle_timeout_s,
           lim.request_timeout_s);
  return srv;
}

bool
kv_server_https(struct kv_server *srv)
{
  return srv->https;
}

const char *
kv_server_address(struct kv_server *srv)
{
  return srv->address;
}

void
kv_server_stop(struct kv_server *srv)
{
  if (!srv)
    return;
  srv->stopping = true;
  conn_guard_stop(srv->guard);      /* no new connections; closes the listening socket */
  if (srv->b.s)
    kvs_wake_all(srv->b.s);
  watch_park_stop(srv->park);       /* every watch resumed, ends its stream */
  MHD_stop_daemon(srv->d);
  server_free(srv);
}
