/* The KV service over libmicrohttpd: one thread per connection, so a
 * watch stream can block in its content reader without holding up others. */
#include <config.h>
#include <errno.h>
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
#include "kvexec.h"
#include "kvfilter.h"
#include "gw_identity.h"
#include "crypto.h"
#include "watch.h"
#include "error.h"
#include "log.h"

struct kv_server {
  struct MHD_Daemon *d;
  struct kvs *s;
  struct leases *l;
  int fd;
  size_t max_body;
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

struct req_ctx {
  char *body;
  size_t len, cap;
  bool too_big;
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
handle(struct kvs *s, struct leases *l, const struct caller *who, const char *method, const char *path,
       const char *body, size_t len, int *status, size_t *outlen)
{
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
    resp = kvx_op(s, who, &req.op, &err);
    break;
  case KV_EP_COMPACT: resp = kvx_compact(s, who, &req.compact, &err); break;
  case KV_EP_LEASE_GRANT: resp = lease_grant(l, who, &req.lease, &err); break;
  case KV_EP_LEASE_REVOKE: resp = lease_revoke(l, who, &req.lease, &err); break;
  case KV_EP_LEASE_TTL: resp = lease_timetolive(l, who, &req.lease, &err); break;
  case KV_EP_LEASE_LEASES: resp = lease_list(l, who, &err); break;
  case KV_EP_LEASE_KEEPALIVE: {
    json_object *r = lease_keepalive(l, who, &req.lease, &err);
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
  return handle(s, l, &who, method, path, body, len, status, outlen);
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

static enum MHD_Result
start_watch(struct kv_server *srv, struct MHD_Connection *conn, const struct caller *who,
            const char *body, size_t len)
{
  struct kv_request req;
  struct kv_err err = { 0, "" };
  int status;
  size_t n;
  if (kv_request_parse(KV_EP_WATCH, body, len, &req, &err) < 0) {
    char *t = error_text(&err, &status, &n);
    return send_text(conn, status, t, n);
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  struct watch_stream *w = watch_new(srv->s, who, &req.watch, ci ? ci->connect_fd : -1, &srv->stopping,
                                     srv->progress_ms);
  kv_request_free(&req);
  if (!w)
    return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, watch_read, w, watch_free);
  if (!r) {
    watch_free(w);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
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
    return MHD_YES;
  }
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (rc->too_big || rc->len + n > srv->max_body) {
      rc->too_big = true;
      return MHD_YES;
    }
    if (rc->len + n + 1 > rc->cap) {
      size_t cap = rc->cap ? rc->cap : 4096;
      while (cap < rc->len + n + 1)
        cap *= 2;
      char *nb = realloc(rc->body, cap);
      if (!nb)
        return MHD_NO;
      rc->body = nb;
      rc->cap = cap;
    }
    memcpy(rc->body + rc->len, upload_data, n);
    rc->len += n;
    return MHD_YES;
  }
  char peer[96];
  peer_name(conn, peer, sizeof peer);
  struct gw_identity gid;
  struct caller who = { "anyone", peer, NULL, NULL };
  int status;
  size_t n;
  gw_identity_anyone(&gid);
  if (srv->https && gw_trust_any(srv->trust)) {
    const union MHD_ConnectionInfo *ti = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (gw_identity_from_session(srv->trust, ti ? ti->tls_session : NULL, &gid) < 0 && srv->use_perms) {
      /* With use_perms nobody is served without a valid certificate. */
      struct kv_err err;
      kv_err_set(&err, KV_UNAUTHENTICATED, "etcdserver: unauthenticated: %s", tc_last_error());
      tc_warn("%s %s from %s refused: %s", method, url, peer, err.msg);
      char *t = error_text(&err, &status, &n);
      return send_text(conn, status, t, n);
    }
  }
  if (srv->use_perms) {
    who.gid = &gid;
    who.filter = &srv->filter;
  }
  who.identity = gid.desc;
  if (rc->too_big) {
    struct kv_err err;
    kv_err_set(&err, KV_INVALID_ARGUMENT, "etcdserver: request is too large (limit %zu bytes, "
               "option gateway_max_request_bytes)", srv->max_body);
    char *t = error_text(&err, &status, &n);
    return send_text(conn, status, t, n);
  }
  if (kv_endpoint_of(url) == KV_EP_WATCH && strcmp(method, "POST") == 0)
    return start_watch(srv, conn, &who, rc->body ? rc->body : "", rc->len);
  char *t = handle(srv->s, srv->l, &who, method, url, rc->body ? rc->body : "", rc->len, &status, &n);
  if (status >= 500)
    tc_warn("%s %s from %s (%s): %d %.*s", method, url, peer, who.identity, status, (int) n, t ? t : "");
  else if (status >= 400)
    tc_debug("%s %s from %s (%s): %d %.*s", method, url, peer, who.identity, status, (int) n, t ? t : "");
  return send_text(conn, status, t, n);
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
  struct req_ctx *rc = *con_cls;
  (void) cls; (void) conn; (void) toe;
  if (rc) {
    free(rc->body);
    free(rc);
  }
  *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
  char buf[512];
  (void) cls;
  vsnprintf(buf, sizeof buf, fmt, ap);
  size_t n = strlen(buf);
  while (n && buf[n - 1] == '\n')
    buf[--n] = 0;
  tc_debug("libmicrohttpd: %s", buf);
}

/* HOST:PORT or [V6]:PORT into a bound, listening socket. */
static int
listen_on(const char *address, char *bound, size_t bound_len)
{
  char host[256];
  const char *port;
  if (address[0] == '[') {
    const char *close = strchr(address, ']');
    if (!close || close[1] != ':' || (size_t) (close - address - 1) >= sizeof host)
      return tc_error(EINVAL, "gateway_address '%s': expected HOST:PORT or [IPV6]:PORT", address);
    memcpy(host, address + 1, (size_t) (close - address - 1));
    host[close - address - 1] = 0;
    port = close + 2;
  } else {
    const char *colon = strrchr(address, ':');
    if (!colon || colon == address || (size_t) (colon - address) >= sizeof host)
      return tc_error(EINVAL, "gateway_address '%s': expected HOST:PORT", address);
    memcpy(host, address, (size_t) (colon - address));
    host[colon - address] = 0;
    port = colon + 1;
  }
  char *end;
  long p = strtol(port, &end, 10);
  if (!*port || *end || p < 0 || p > 65535)
    return tc_error(EINVAL, "gateway_address '%s': bad port '%s'", address, port);
  struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_family = AF_UNSPEC,
                            .ai_socktype = SOCK_STREAM }, *ai;
  int rc = getaddrinfo(host, port, &hints, &ai);
  if (rc)
    return tc_error(EINVAL, "gateway_address '%s': %s", address, gai_strerror(rc));
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(ai);
    return tc_error(errno, "gateway_address '%s': socket: %s", address, strerror(errno));
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 512) < 0) {
    int e = errno;
    freeaddrinfo(ai);
    close(fd);
    return tc_error(e, "gateway_address '%s': cannot listen: %s", address, strerror(e));
  }
  freeaddrinfo(ai);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char h[64] = "?";
  int bport = 0;
  if (getsockname(fd, (struct sockaddr *) &ss, &sl) == 0) {
    if (ss.ss_family == AF_INET) {
      inet_ntop(AF_INET, &((struct sockaddr_in *) &ss)->sin_addr, h, sizeof h);
      bport = ntohs(((struct sockaddr_in *) &ss)->sin_port);
    } else {
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *) &ss)->sin6_addr, h, sizeof h);
      bport = ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
    }
  }
  snprintf(bound, bound_len, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", h, bport);
  return fd;
}

/* MHD's connection threads must not get SIGTERM/SIGPIPE: main waits for them. */
static void
notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                  enum MHD_ConnectionNotificationCode toe)
{
  (void) cls; (void) socket_context;
  if (toe != MHD_CONNECTION_NOTIFY_STARTED)
    return;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (ci) {
    int one = 1;
    setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
}

/* Read a PEM file for libmicrohttpd (caller frees). */
static char *
read_pem(const char *opt, const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    tc_error(errno, "option %s: cannot read %s: %s", opt, path, strerror(errno));
    return NULL;
  }
  char *buf = malloc(65537);
  size_t n = buf ? fread(buf, 1, 65536, f) : 0;
  int bad = ferror(f) || !feof(f);
  fclose(f);
  if (!buf || bad || n == 0) {
    free(buf);
    tc_error(EINVAL, "option %s: %s is empty, unreadable or larger than 64 KiB", opt, path);
    return NULL;
  }
  buf[n] = 0;
  return buf;
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
  if (!(srv->cert_pem = read_pem("antietcd_cert", cert)) || !(srv->key_pem = read_pem("antietcd_key", key)))
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
  gw_trust_free(srv->trust);
  if (srv->key_pem) {
    tc_wipe(srv->key_pem, strlen(srv->key_pem));
    free(srv->key_pem);
  }
  free(srv->cert_pem);
  free(srv);
}

struct kv_server *
kv_server_start(struct tc_config *cfg, struct kvs *s, struct leases *l)
{
  struct kv_server *srv = calloc(1, sizeof *srv);
  if (!srv) {
    tc_error(ENOMEM, "gateway: out of memory");
    return NULL;
  }
  srv->s = s;
  srv->l = l;
  srv->max_body = (size_t) tc_config_int(cfg, "gateway_max_request_bytes");
  max_txn_ops = tc_config_int(cfg, "gateway_max_txn_ops");
  srv->progress_ms = tc_config_int(cfg, "gateway_watch_progress_interval") * 1000;
  if (setup_tls(srv, cfg) < 0) {
    server_free(srv);
    return NULL;
  }
  srv->fd = listen_on(tc_config_str(cfg, "gateway_address"), srv->address, sizeof srv->address);
  if (srv->fd < 0) {
    server_free(srv);
    return NULL;
  }
  /* With HTTPS: our certificate, and the CAs whose certificates we ask
   * clients for (checked per request by identity.c, not by the handshake). */
  const char *trust_pem = gw_trust_pem(srv->trust);
  srv->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                            MHD_USE_POLL | MHD_USE_ERROR_LOG | (srv->https ? MHD_USE_TLS : 0),
                            0, NULL, NULL, on_request, srv,
                            MHD_OPTION_HTTPS_MEM_CERT, srv->https ? srv->cert_pem : NULL,
                            MHD_OPTION_HTTPS_MEM_KEY, srv->https ? srv->key_pem : NULL,
                            MHD_OPTION_HTTPS_MEM_TRUST, srv->https ? trust_pem : NULL,
                            MHD_OPTION_LISTEN_SOCKET, srv->fd,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, srv,
                            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) 0,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned) 4096,
                            MHD_OPTION_END);
  if (!srv->d) {
    close(srv->fd);
    server_free(srv);
    tc_error(EIO, "gateway_address %s: libmicrohttpd failed to start%s", tc_config_str(cfg, "gateway_address"),
             tc_config_str(cfg, "antietcd_cert") ? " (check antietcd_cert and antietcd_key: a certificate and "
             "its key in PEM)" : "");
    return NULL;
  }
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
  kvs_wake_all(srv->s);
  MHD_stop_daemon(srv->d);   /* closes the listening socket too */
  server_free(srv);
}
