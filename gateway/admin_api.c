/* The admin HTTPS API daemon: TLS with server_cert/server_pkey (MHD over
 * GnuTLS), the caller's certificate checked against client_ca with our own
 * chain verification (certs.c: dates, CA constraints, key usage), then one
 * call parsed (admin_req.c) and run (admin_ops.c). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include "admin_api.h"
#include "admin_ops.h"
#include "admin_req.h"
#include "certs.h"
#include "crypto.h"
#include "client.h"
#include "error.h"
#include "fullio.h"
#include "listen.h"
#include "log.h"
#include "vector.h"

/* Requests are small JSON objects. */
#define ADMIN_MAX_BODY (1 << 20)

struct admin_api {
  struct MHD_Daemon *d;
  struct tc_client *cl;
  struct tc_cert_trust *trust;    /* client_ca, or NULL: callers are anonymous */
  struct tc_config *work_cfg;     /* the client's: use_perms off, see admin_api_start */
  bool use_perms;
  char *cert_pem, *key_pem, *ca_pem;
  char address[128];
};

struct admin_conn {
  char *body;
  size_t len, cap;
  bool too_big;
};

static enum MHD_Result
reply(struct MHD_Connection *conn, int status, json_object *o)
{
  size_t len;
  const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
  char *text = malloc(len + 1);
  if (!text) {
    json_object_put(o);
    return MHD_NO;
  }
  memcpy(text, s, len);
  text[len++] = '\n';
  json_object_put(o);
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
reply_error(struct MHD_Connection *conn, const struct admin_err *e)
{
  json_object *o = json_object_new_object();
  json_object_object_add(o, "error", json_object_new_string(e->msg));
  json_object_object_add(o, "status", json_object_new_int(e->status));
  return reply(conn, e->status, o);
}

/* Who is calling: the verified client certificate's CN and its record.
 * -1 with e set (401 without a valid certificate). */
static int
caller_of(struct admin_api *a, struct MHD_Connection *conn, struct admin_caller *c, struct admin_err *e)
{
  if (!a->trust) {
    admin_caller_anonymous(c);
    return 0;
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  unsigned n = 0;
  const gnutls_datum_t *peers = ci && ci->tls_session ? gnutls_certificate_get_peers(ci->tls_session, &n) : NULL;
  if (!peers || !n) {
    admin_err_set(e, 401, "no client certificate: the admin API needs one that chains to client_ca");
    return -1;
  }
  if (n > TC_CERT_MAX_CHAIN)
    n = TC_CERT_MAX_CHAIN;
  const uint8_t *der[TC_CERT_MAX_CHAIN];
  size_t len[TC_CERT_MAX_CHAIN];
  for (unsigned i = 0; i < n; i++) {
    der[i] = peers[i].data;
    len[i] = peers[i].size;
  }
  struct tc_cert_peer *p = tc_cert_verify_chain(a->trust, der, len, (int) n, TC_CERT_CLIENT);
  if (!p) {
    char cn[TC_CN_MAX];
    tc_cert_der_cn(der[0], len[0], cn, sizeof cn);
    admin_err_set(e, 401, "client certificate CN=%s refused (client_ca): %s", cn, tc_last_error());
    return -1;
  }
  int rc = admin_caller_load(a->cl, tc_cert_peer_cn(p), c, e);
  tc_cert_peer_free(p);
  return rc;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
           const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
  struct admin_api *a = cls;
  struct admin_conn *rc = *con_cls;
  (void) version;
  if (!rc) {
    if (!(rc = calloc(1, sizeof *rc)))
      return MHD_NO;
    *con_cls = rc;
    return MHD_YES;
  }
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (rc->too_big || rc->len + n > ADMIN_MAX_BODY) {
      rc->too_big = true;
      return MHD_YES;
    }
    if (tc_grow(&rc->body, &rc->cap, rc->len + n + 1, 1, 4096) < 0)
      return MHD_NO;
    memcpy(rc->body + rc->len, upload_data, n);
    rc->len += n;
    return MHD_YES;
  }
  struct admin_err e = { 0, "" };
  struct admin_caller c;
  if (caller_of(a, conn, &c, &e) < 0) {
    tc_warn("admin API: %s %s: %s", method, url, e.msg);
    return reply_error(conn, &e);
  }
  char who[160];
  tc_identity_str(&c.id, who, sizeof who);
  enum MHD_Result ret;
  struct admin_req r;
  if (rc->too_big) {
    admin_err_set(&e, 413, "%s: request body over %d bytes", url, ADMIN_MAX_BODY);
    ret = reply_error(conn, &e);
  }
  else if (admin_req_parse(method, url, rc->body ? rc->body : "", rc->len, &r, &e) < 0)
    ret = reply_error(conn, &e);
  else {
    json_object *o = admin_exec(a->cl, a->use_perms, &c.id, &r, &e);
    tc_info("admin API: %s by %s: %s", r.call_name, who, o ? "ok" : e.msg);
    admin_req_free(&r);
    ret = o ? reply(conn, 200, o) : reply_error(conn, &e);
  }
  if (e.status && e.status < 500)
    tc_debug("admin API: %s %s by %s: %d %s", method, url, who, e.status, e.msg);
  admin_caller_free(&c);
  return ret;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
  struct admin_conn *rc = *con_cls;
  (void) cls; (void) conn; (void) toe;
  if (rc) {
    free(rc->body);
    free(rc);
  }
  *con_cls = NULL;
}

void
admin_api_stop(struct admin_api *a)
{
  if (!a)
    return;
  if (a->d)
    MHD_stop_daemon(a->d);
  tc_client_free(a->cl);
  tc_config_free(a->work_cfg);
  tc_cert_trust_free(a->trust);
  if (a->key_pem)
    tc_wipe(a->key_pem, strlen(a->key_pem));
  free(a->key_pem);
  free(a->cert_pem);
  free(a->ca_pem);
  free(a);
}

const char *
admin_api_address(const struct admin_api *a)
{
  return a->address;
}

int
admin_api_start(struct tc_config *cfg, struct admin_api **out)
{
  *out = NULL;
  const char *cert = tc_config_str(cfg, "server_cert"), *key = tc_config_str(cfg, "server_pkey");
  const char *ca = tc_config_str(cfg, "client_ca");
  if (!cert) {
    if (key)
      return tc_error(EINVAL, "option server_pkey is set but server_cert is not: the admin API needs both");
    if (tc_config_given(cfg, "gateway_api_address"))
      return tc_error(EINVAL, "option gateway_api_address is set but server_cert is not: "
                      "the admin API is served over HTTPS only (server_cert, server_pkey)");
    return 0;
  }
  if (!key)
    return tc_error(EINVAL, "option server_cert is set but server_pkey is not: the admin API needs both");
  bool use_perms = tc_config_bool(cfg, "use_perms");
  if (use_perms && !ca)
    return tc_error(EINVAL, "option use_perms: the admin API needs client_ca to know who calls it");
  if (use_perms && (!tc_config_str(cfg, "cert") || !tc_config_str(cfg, "pkey")))
    return tc_error(EINVAL, "options cert and pkey: with use_perms the admin API works as the gateway's own user "
                    "(an administrator's certificate, as Vitastor's `vitastor-cli serve`), and none is set");
  /* Prove the pair before serving with it: a clear error now, not a TLS
   * failure per connection later. */
  struct tc_cert_identity *probe = tc_cert_identity_load(cert, key, 0);
  if (!probe)
    return tc_error(errno, "option server_cert/server_pkey: %s", tc_last_error());
  tc_cert_identity_free(probe);
  struct admin_api *a = calloc(1, sizeof *a);
  if (!a)
    return tc_error(ENOMEM, "admin API: out of memory");
  a->use_perms = use_perms;
  if (!(a->cert_pem = gw_read_pem("server_cert", cert)) || !(a->key_pem = gw_read_pem("server_pkey", key)))
    goto fail;
  if (ca && (!(a->ca_pem = gw_read_pem("client_ca", ca)) || !(a->trust = tc_cert_trust_load(ca))))
    goto fail;
  /* The work is done by a client whose own checks are off: each call's
   * rights were checked for its caller (admin_ops.c), and a client that
   * checked the gateway's identity as well would act on a /config/user
   * record read once at start. Everything outside (the OSDs, the KV filter)
   * still sees the gateway's own certificate (cert/pkey). */
  if (!(a->work_cfg = tc_config_dup(cfg)) || tc_config_set(a->work_cfg, "use_perms", "false") < 0)
    goto fail;
  /* ... and reaches the KV with cert too, not as the embedded monitor
   * (main.c points etcd_client_cert at mon_etcd_client_cert for it). */
  const char *ucert = tc_config_str(cfg, "cert"), *ukey = tc_config_str(cfg, "pkey");
  if (ucert && ukey && (tc_config_set(a->work_cfg, "etcd_client_cert", ucert) < 0 ||
                        tc_config_set(a->work_cfg, "etcd_client_key", ukey) < 0))
    goto fail;
  if (!(a->cl = tc_client_new(a->work_cfg))) {
    tc_error(errno ? errno : EIO, "admin API: cannot reach the cluster: %s", tc_last_error());
    goto fail;
  }
  int fd = gw_listen("gateway_api_address", tc_config_str(cfg, "gateway_api_address"), a->address,
                     sizeof a->address);
  if (fd < 0)
    goto fail;
  struct MHD_OptionItem opts[] = {
    { MHD_OPTION_HTTPS_MEM_KEY, 0, a->key_pem },
    { MHD_OPTION_HTTPS_MEM_CERT, 0, a->cert_pem },
    { MHD_OPTION_LISTEN_SOCKET, fd, NULL },
    { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t) on_completed, a },
    { MHD_OPTION_EXTERNAL_LOGGER, (intptr_t) gw_mhd_log, (void *) "admin API" },
    { MHD_OPTION_CONNECTION_TIMEOUT, 60, NULL },
    { MHD_OPTION_CONNECTION_LIMIT, 256, NULL },
    { MHD_OPTION_PER_IP_CONNECTION_LIMIT, 64, NULL },
    /* Asks for (does not demand) a client certificate; caller_of decides. */
    { a->ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, a->ca_pem },
    { MHD_OPTION_END, 0, NULL },
  };
  a->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                          MHD_USE_TLS | MHD_USE_ERROR_LOG,
                          0, NULL, NULL, on_request, a, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
  if (!a->d) {
    close(fd);
    tc_error(EIO, "gateway_api_address %s: libmicrohttpd failed to start the admin API (TLS with server_cert %s)",
             a->address, cert);
    goto fail;
  }
  tc_info("admin API on https://%s%s", a->address, a->trust ? ", client certificates from client_ca" : "");
  *out = a;
  return 0;
fail:;
  int err = errno;
  admin_api_stop(a);
  errno = err;
  return -1;
}
