/* The KV service: the etcd v3 JSON HTTP API over libmicrohttpd. */
#ifndef TROMCHO_HTTP_H
#define TROMCHO_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include "kvstore.h"
#include "lease.h"
#include "tc_config.h"

struct kv_server;

/* Listen on gateway_address and serve. NULL with tc_last_error() naming
 * the address on a bad address or a port in use. */
struct kv_server *kv_server_start(struct tc_config *cfg, struct kvs *s, struct leases *l);
/* Whether it serves HTTPS (antietcd_cert). */
bool kv_server_https(struct kv_server *srv);
/* The address actually bound (host:port). */
const char *kv_server_address(struct kv_server *srv);
void kv_server_stop(struct kv_server *srv);

/* Route one request; status receives the HTTP status. For tests and the
 * fuzz target: no streaming endpoints (watch, keepalive) through here. */
char *kv_handle(struct kvs *s, struct leases *l, const char *method, const char *path,
                const char *body, size_t len, int *status, size_t *outlen);

#endif
