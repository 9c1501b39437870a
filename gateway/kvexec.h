/* Executing etcd v3 requests against the store and shaping the replies
 * the way etcd's grpc-gateway prints them: int64 as strings, zero fields
 * omitted, keys and values in base64. */
#ifndef TROMCHO_KVEXEC_H
#define TROMCHO_KVEXEC_H
#include <json-c/json.h>
#include "kvrequest.h"
#include "kvstore.h"

/* Who sent a request. Every handler gets one, so the access filter
 * (use_perms, client certificates) can decide per request later. */
struct caller {
  const char *identity;   /* "anyone" until TLS client certificates are checked */
  const char *peer;       /* address:port of the connection, for logs */
};

json_object *kvx_int64(int64_t v);
/* {"cluster_id", "member_id", "revision", "raft_term"} */
json_object *kvx_header(struct kvs *s, int64_t rev);
/* A KeyValue; value omitted when keys_only. */
json_object *kvx_kv(const struct kv_rec *r, bool keys_only);

/* range, put, deleterange, txn: the reply, or NULL with err set. */
json_object *kvx_op(struct kvs *s, const struct caller *who, const struct kv_op *op, struct kv_err *err);
json_object *kvx_compact(struct kvs *s, const struct caller *who, const struct kv_compact_req *r,
                         struct kv_err *err);

#endif
