/* Encoding of KV requests and decoding of KV responses: the etcd v3 JSON
 * (grpc-gateway) shapes. Internal to the KV client. */
#ifndef TROMCHO_KV_JSON_H
#define TROMCHO_KV_JSON_H
#include <json-c/json.h>
#include "kv_client.h"

/* The JSON body of req as a malloc'd string; *path gets the URL path
 * (e.g. "/v3/kv/range"). NULL on error (tc_last_error set). */
char *tc_kv_encode(const struct tc_kv_request *req, const char **path);
/* The body of a watch create request. */
char *tc_kv_encode_watch(const void *key, size_t key_len, bool prefix, int64_t start_revision);
/* The same over [key, range_end) (range_end NULL: key alone, or prefix),
 * asking for each event's previous pair when prev_kv. */
char *tc_kv_encode_watch_range(const void *key, size_t key_len, bool prefix, const void *range_end, size_t end_len,
                               int64_t start_revision, bool prev_kv);
/* Decode a successful response to a request of kind type into *res. */
int tc_kv_decode(const struct tc_kv_request *req, json_object *body, struct tc_kv_result *res);
/* Decode one mvccpb.KeyValue. */
int tc_kv_decode_kv(json_object *o, struct tc_kv_kv *kv);
void tc_kv_kv_free(struct tc_kv_kv *kv);
/* An int64 field that grpc-gateway writes as a string (or a number); 0 if absent. */
int64_t tc_json_i64(json_object *o, const char *key);
/* An error body ({"error": .., "code": n, "message": ..}) or HTTP status
 * to an errno value, with a message in msg. */
int tc_kv_error_errno(json_object *body, long http_status, char *msg, size_t msgsize);
/* Length of a key/value argument (len == 0 and p: NUL-terminated). */
static inline size_t tc_kv_len(const void *p, size_t len)
{
  return p && len == 0 ? __builtin_strlen(p) : len;
}

#endif
