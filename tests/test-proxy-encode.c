/* The proxy's requests to etcd (gateway/proxy_encode.c): what the gateway
 * parsed, encoded again, parses back to the same request (a round trip
 * through kvrequest.c), fields only etcd would read never reach it, and a
 * range encoded for the filter asks for everything. */
#include <config.h>
#include <stdlib.h>
#include <string.h>
#include "proxy.h"
#include "tap.h"

static char *
encode(enum kv_endpoint ep, const char *body, bool for_filter)
{
  struct kv_request r;
  struct kv_err err;
  if (kv_request_parse(ep, body, strlen(body), &r, &err) < 0) {
    fprintf(stderr, "parse %s: %s\n", body, err.msg);
    return NULL;
  }
  json_object *o = proxy_encode_op(&r.op, for_filter);
  char *s = o ? strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) : NULL;
  json_object_put(o);
  kv_request_free(&r);
  return s;
}

/* body -> encoded -> parsed -> encoded again: the same text. */
static void
round_trip(enum kv_endpoint ep, const char *body, const char *must, const char *must_not)
{
  char *a = encode(ep, body, false);
  char *b = a ? encode(ep, a, false) : NULL;
  CHECK(a && b && !strcmp(a, b), "round trip of %s: %s then %s", body, a ? a : "(none)", b ? b : "(none)");
  /* must: fragments separated by '|', each one in the encoding */
  for (const char *m = must; m && *m;) {
    const char *bar = strchr(m, '|');
    size_t n = bar ? (size_t) (bar - m) : strlen(m);
    char frag[128];
    snprintf(frag, sizeof frag, "%.*s", (int) n, m);
    CHECK(a && strstr(a, frag), "%s encoded as %s: no %s", body, a ? a : "(none)", frag);
    m += n + (bar ? 1 : 0);
  }
  CHECK(a && (!must_not || !strstr(a, must_not)), "%s encoded as %s: has %s", body, a ? a : "(none)", must_not);
  free(a);
  free(b);
}

int
main(void)
{
  /* "L2E=" is /a, "L2I=" /b, "L2M=" /c */
  round_trip(KV_EP_RANGE, "{\"key\":\"L2E=\",\"range_end\":\"L2M=\",\"limit\":\"5\",\"revision\":\"7\","
             "\"sort_order\":\"DESCEND\",\"sort_target\":\"MOD\",\"keys_only\":true,\"count_only\":true,"
             "\"min_mod_revision\":\"2\",\"max_mod_revision\":\"9\",\"min_create_revision\":\"1\","
             "\"max_create_revision\":\"8\"}", "\"sort_target\":\"MOD\"|\"sort_order\":\"DESCEND\"|\"limit\":\"5\"|\"revision\":\"7\"|keys_only|count_only|"
             "\"min_mod_revision\":\"2\"|\"max_mod_revision\":\"9\"|\"min_create_revision\":\"1\"|\"max_create_revision\":\"8\"", NULL);
  /* etcd's JSON gateway also reads camelCase: ours does not, so it must not pass. */
  round_trip(KV_EP_DELETE, "{\"key\":\"L2E=\",\"rangeEnd\":\"AA==\"}", "\"key\":\"L2E=\"", "AA==");
  round_trip(KV_EP_DELETE, "{\"key\":\"L2E=\",\"range_end\":\"AA==\",\"prev_kv\":true}", "\"range_end\":\"AA==\"", NULL);
  /* A key given twice: etcd sees the one the filter checked. */
  char *dup = encode(KV_EP_PUT, "{\"key\":\"L2E=\",\"key\":\"L2I=\",\"value\":\"eA==\"}", false);
  char *chk = encode(KV_EP_PUT, "{\"key\":\"L2I=\",\"value\":\"eA==\"}", false);
  CHECK(dup && chk && !strcmp(dup, chk) && !strstr(dup, "L2E="), "duplicate key: %s", dup ? dup : "(none)");
  free(dup);
  free(chk);
  round_trip(KV_EP_PUT, "{\"key\":\"L2E=\",\"value\":\"eA==\",\"lease\":\"123\",\"prev_kv\":true}", "\"lease\":\"123\"", NULL);
  round_trip(KV_EP_PUT, "{\"key\":\"L2E=\",\"ignore_value\":true,\"ignore_lease\":true}", "ignore_lease", NULL);
  round_trip(KV_EP_TXN, "{\"compare\":[{\"key\":\"L2E=\",\"target\":\"VERSION\",\"result\":\"GREATER\",\"version\":\"1\"},"
             "{\"key\":\"L2E=\",\"range_end\":\"L2M=\",\"target\":\"MOD\",\"result\":\"LESS\",\"mod_revision\":\"9\"},"
             "{\"key\":\"L2I=\",\"target\":\"VALUE\",\"result\":\"NOT_EQUAL\",\"value\":\"eA==\"},"
             "{\"key\":\"L2I=\",\"target\":\"CREATE\",\"create_revision\":\"3\"},"
             "{\"key\":\"L2I=\",\"target\":\"LEASE\",\"lease\":\"4\"}],"
             "\"success\":[{\"request_put\":{\"key\":\"L2E=\",\"value\":\"eA==\"}},"
             "{\"request_txn\":{\"success\":[{\"request_delete_range\":{\"key\":\"L2M=\"}}],"
             "\"failure\":[{\"request_range\":{\"key\":\"L2I=\",\"limit\":\"1\"}}]}}],"
             "\"failure\":[{\"request_range\":{\"key\":\"L2E=\"}}]}",
             "\"request_txn\"|\"version\":\"1\"|\"result\":\"GREATER\"|\"mod_revision\":\"9\"|\"range_end\":\"L2M=\"|"
             "\"value\":\"eA==\"|NOT_EQUAL|\"create_revision\":\"3\"|\"lease\":\"4\"|request_delete_range|\"limit\":\"1\"",
             NULL);
  /* For the filter: everything, values included; the proxy cuts after. */
  char *f = encode(KV_EP_RANGE, "{\"key\":\"L2E=\",\"range_end\":\"L2M=\",\"limit\":\"5\",\"keys_only\":true,"
                   "\"count_only\":true}", true);
  CHECK(f && strstr(f, "range_end") && !strstr(f, "limit") && !strstr(f, "keys_only") && !strstr(f, "count_only"),
        "range for the filter: %s", f ? f : "(none)");
  free(f);
  return DONE();
}
