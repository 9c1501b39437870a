/* The KV service: the etcd v3 JSON HTTP API over libmicrohttpd. */
#ifndef TROMCHO_HTTP_H
#define TROMCHO_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include "kvstore.h"
#include "lease.h"
#include "tc_config.h"

struct kv_server;
struct kvproxy;

/* Where requests run once parsed and (with use_perms) identified: the
 * embedded store (s and l), or etcd behind the filtering proxy (px, with
 * s and l NULL; proxy.h). Everything before execution (HTTP, limits,
 * identities, parsing, the filter's rules) is the same code for both. */
struct kv_backend {
  struct kvs *s;
  struct leases *l;
  struct kvproxy *px;
};

/* Listen on gateway_address and serve. NULL with tc_last_error() naming
 * the address on a bad address or a port in use. */
struct kv_server *kv_server_start(struct tc_config *cfg, const struct kv_backend *b);
/* Whether it serves HTTPS (antietcd_cert). */
bool kv_server_https(struct kv_server *srv);
/* The address actually bound (host:port). */
const char *kv_server_address(struct kv_server *srv);
void kv_server_stop(struct kv_server *srv);

/* Route one request; status receives the HTTP status. For tests and the
 * fuzz target: no streaming endpoints (watch, keepalive) through here. */
char *kv_handle(struct kvs *s, struct leases *l, const char *method, const char *path,
                const char *body, size_t len, int *status, size_t *outlen);
/* The same for a caller with an identity (and the access filter), as a
 * request over HTTPS gets it: for the fuzz target fuzz-kv-caller. */
struct caller;
char *kv_handle_as(struct kvs *s, struct leases *l, const struct caller *who, const char *method, const char *path,
                   const char *body, size_t len, int *status, size_t *outlen);

#endif
