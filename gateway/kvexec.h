/* Executing etcd v3 requests against the store and shaping the replies
 * the way etcd's grpc-gateway prints them: int64 as strings, zero fields
 * omitted, keys and values in base64. */
#ifndef TROMCHO_KVEXEC_H
#define TROMCHO_KVEXEC_H
#include <json-c/json.h>
#include "kvrequest.h"
#include "kvstore.h"

struct gw_identity;
struct kvfilter;

/* Who sent a request. With use_perms, every request is checked by the
 * access filter (kvfilter.h) for gid, the identity its TLS client
 * certificate proved. */
struct caller {
  const char *identity;   /* for logs: "user alice", "osd CN=..", "anyone" */
  const char *peer;       /* address:port of the connection, for logs */
  struct gw_identity *gid;          /* NULL: trusted (no filter) */
  const struct kvfilter *filter;    /* NULL: no filter */
};

json_object *kvx_int64(int64_t v);
/* {"cluster_id", "member_id", "revision", "raft_term"} */
json_object *kvx_header(struct kvs *s, int64_t rev);
/* A KeyValue; value omitted when keys_only. */
json_object *kvx_kv(const struct kv_rec *r, bool keys_only);

struct kvfilter_req;
/* Set up the access filter for who on tx: 1 (rq to use, kvfilter_end after),
 * 0 (no filter: trusted or use_perms off), -1 with err set. */
int kvx_filter_begin(struct kvs_txn *tx, const struct caller *who, struct kvfilter_req *rq, struct kv_err *err);

/* range, put, deleterange, txn: the reply, or NULL with err set. */
json_object *kvx_op(struct kvs *s, const struct caller *who, const struct kv_op *op, struct kv_err *err);
json_object *kvx_compact(struct kvs *s, const struct caller *who, const struct kv_compact_req *r,
                         struct kv_err *err);

#endif
