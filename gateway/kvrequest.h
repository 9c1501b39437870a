/* Requests of the etcd v3 JSON API, parsed from their JSON bodies into
 * plain structs (no store access: this is what the fuzz target drives). */
#ifndef TROMCHO_KVREQUEST_H
#define TROMCHO_KVREQUEST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "kvstore.h"

struct kv_bytes {
  uint8_t *p;
  size_t n;
};

enum kv_op_type { KV_OP_RANGE, KV_OP_PUT, KV_OP_DELETE, KV_OP_TXN };
enum kv_cmp_target { KV_CMP_VERSION = 0, KV_CMP_CREATE = 1, KV_CMP_MOD = 2, KV_CMP_VALUE = 3, KV_CMP_LEASE = 4 };
enum kv_cmp_result { KV_CMP_EQUAL = 0, KV_CMP_GREATER = 1, KV_CMP_LESS = 2, KV_CMP_NOT_EQUAL = 3 };

struct kv_range_req {
  struct kv_bytes key, end;
  int64_t limit, revision;
  bool keys_only, count_only;
};

struct kv_put_req {
  struct kv_bytes key, value;
  int64_t lease;
  bool prev_kv, ignore_value, ignore_lease;
};

struct kv_delete_req {
  struct kv_bytes key, end;
  bool prev_kv;
};

struct kv_compare {
  struct kv_bytes key, end, value;
  int target, result;
  int64_t num;            /* version, create/mod revision or lease */
};

struct kv_op;
struct kv_txn_req {
  size_t ncmp, nsucc, nfail;
  struct kv_compare *cmp;
  struct kv_op *succ, *fail;
};

struct kv_op {
  int type;
  union {
    struct kv_range_req range;
    struct kv_put_req put;
    struct kv_delete_req del;
    struct kv_txn_req txn;
  };
};

struct kv_lease_req {
  int64_t id, ttl;
  bool keys;
};

struct kv_watch_req {
  struct kv_bytes key, end;
  int64_t start_revision, watch_id;
  bool prev_kv, progress_notify, noput, nodelete;
};

struct kv_compact_req {
  int64_t revision;
  bool physical;
};

/* The endpoints, by path. */
enum kv_endpoint {
  KV_EP_RANGE, KV_EP_PUT, KV_EP_DELETE, KV_EP_TXN, KV_EP_COMPACT,
  KV_EP_WATCH, KV_EP_LEASE_GRANT, KV_EP_LEASE_REVOKE, KV_EP_LEASE_KEEPALIVE,
  KV_EP_LEASE_TTL, KV_EP_LEASE_LEASES, KV_EP_NONE
};
enum kv_endpoint kv_endpoint_of(const char *path);

struct kv_request {
  enum kv_endpoint ep;
  union {
    struct kv_op op;            /* range, put, delete, txn */
    struct kv_lease_req lease;
    struct kv_watch_req watch;
    struct kv_compact_req compact;
  };
};

/* Parse body (len bytes, not necessarily NUL-terminated) for endpoint ep.
 * Returns 0, or -1 with err holding etcd's code and message. */
int kv_request_parse(enum kv_endpoint ep, const char *body, size_t len, struct kv_request *out,
                     struct kv_err *err);
void kv_request_free(struct kv_request *r);
void kv_op_free(struct kv_op *op);
/* Whether the op (or any op inside a txn) changes data. */
bool kv_op_writes(const struct kv_op *op);

/* Base64 (standard alphabet; decoding also takes URL-safe and no padding,
 * like Go's JSON decoding of bytes). */
char *kv_b64_encode(const uint8_t *p, size_t n, size_t *outlen);
int kv_b64_decode(const char *s, size_t n, struct kv_bytes *out);

#endif
