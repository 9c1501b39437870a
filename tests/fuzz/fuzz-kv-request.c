/* libFuzzer target: etcd v3 JSON requests, as the gateway gets them.
 * The first byte picks the endpoint, the rest is the body. Every input is
 * parsed (kvrequest.c) and then served by the whole handler (kv_handle)
 * against a real store in a temporary folder, so execution paths (txn,
 * compares, ranges at revisions, compaction, leases) are fuzzed too. */
#include <config.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http.h"
#include "kvrequest.h"
#include "kvstore.h"
#include "lease.h"

static const char *const paths[] = {
  "/v3/kv/range", "/v3/kv/put", "/v3/kv/deleterange", "/v3/kv/txn", "/v3/kv/compaction",
  "/v3/watch", "/v3/lease/grant", "/v3/lease/revoke", "/v3/lease/keepalive",
  "/v3/lease/timetolive", "/v3/lease/leases", "/v3/nothing", "/health",
};
#define NPATHS (sizeof paths / sizeof paths[0])

static struct kvs *store;
static struct leases *leases;
static char dir[] = "/tmp/tromcho-fuzz-kv.XXXXXX";

static void
cleanup(void)
{
  leases_stop(leases);
  kvs_close(store);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void) argc; (void) argv;
  if (!mkdtemp(dir) || !(store = kvs_open(dir, 1 << 30)) || !(leases = leases_start(store)))
    abort();
  atexit(cleanup);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  const char *path = paths[data[0] % NPATHS];
  const char *body = (const char *) data + 1;
  size_t len = size - 1;
  struct kv_request req;
  struct kv_err err;
  enum kv_endpoint ep = kv_endpoint_of(path);
  if (ep != KV_EP_NONE && kv_request_parse(ep, body, len, &req, &err) == 0) {
    if (ep <= KV_EP_TXN)
      (void) kv_op_writes(&req.op);
    kv_request_free(&req);
  }
  struct kv_bytes dec = { 0 };
  if (kv_b64_decode(body, len, &dec) == 0) {
    size_t elen;
    char *enc = kv_b64_encode(dec.p, dec.n, &elen);
    free(enc);
    free(dec.p);
  }
  if (ep == KV_EP_WATCH)   /* streams need a connection */
    return 0;
  int status;
  size_t outlen;
  char *out = kv_handle(store, leases, "POST", path, body, len, &status, &outlen);
  if (!out || status < 200 || status > 599)
    abort();
  free(out);
  return 0;
}
