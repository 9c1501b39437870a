/* The gateway as a filtering proxy to etcd (option etcd_proxy; the seed's
 * "Mon as an etcd proxy"): the same etcd v3 JSON API, parsed and checked
 * by the same code (kvrequest.c, kvfilter.c, perms.c), executed on a real
 * etcd through the KV client (common/kv/) with the gateway's own
 * certificate, instead of on the embedded store.
 *
 * Every request is re-encoded from what the gateway parsed (proxy_encode.c),
 * never forwarded as the client's bytes: etcd sees exactly what the filter
 * checked (no field spelled in a way only etcd reads, like rangeEnd).
 *
 * Rights follow changes at once: nothing is cached. The records a decision
 * needs (/config/user/<CN>, /config/inode/..., /index/image/...,
 * /config/pools, /osd/state/...) are read from etcd at decision time, at one
 * revision R, and a write runs inside an etcd txn whose compares say that
 * none of them changed since R (mod_revision of each record read; no key
 * modified or created in a range that was listed): a right revoked between
 * the check and the write makes the txn fail, and the request is checked
 * again from the start (PROXY_MAX_RETRIES times, then UNAVAILABLE). */
#ifndef TROMCHO_PROXY_H
#define TROMCHO_PROXY_H
#include <json-c/json.h>
#include "kvexec.h"
#include "kv_client.h"
#include "tc_config.h"

struct kvproxy;

/* From option etcd_proxy ({urls, cert, key, ca}): checks every field
 * (naming the one that is wrong) and that etcd answers (naming the URLs
 * tried). NULL with tc_last_error() set. */
struct kvproxy *kvproxy_new(const struct tc_config *cfg);
void kvproxy_free(struct kvproxy *px);
/* The KV client the proxy forwards with. */
struct tc_kv *kvproxy_kv(struct kvproxy *px);

/* range, put, deleterange, txn: the reply, or NULL with err set. */
json_object *kvproxy_op(struct kvproxy *px, const struct caller *who, const struct kv_op *op, struct kv_err *err);
json_object *kvproxy_compact(struct kvproxy *px, const struct caller *who, const struct kv_compact_req *r,
                             struct kv_err *err);
/* Leases (proxy_lease.c). A lease's owner is kept in etcd itself, at
 * <etcd_prefix>/gateway/lease/<id> = "<role>:<CN>", attached to the lease
 * (it goes with it), which no identity may read or write through the
 * filter; the gateway picks lease IDs at random (etcd's own are
 * predictable). Only the owner may keep a lease alive, revoke or read it;
 * a lease without an owner record (granted around the proxy) is refused
 * to every filtered caller. keepalive returns the inner result. */
json_object *kvproxy_lease_grant(struct kvproxy *px, const struct caller *who, const struct kv_lease_req *r,
                                 struct kv_err *err);
json_object *kvproxy_lease_revoke(struct kvproxy *px, const struct caller *who, const struct kv_lease_req *r,
                                  struct kv_err *err);
json_object *kvproxy_lease_keepalive(struct kvproxy *px, const struct caller *who, const struct kv_lease_req *r,
                                     struct kv_err *err);
json_object *kvproxy_lease_timetolive(struct kvproxy *px, const struct caller *who, const struct kv_lease_req *r,
                                      struct kv_err *err);
json_object *kvproxy_lease_list(struct kvproxy *px, const struct caller *who, struct kv_err *err);

/* gateway_bootstrap_admin through etcd: create key = {"type":"admin"} if
 * absent. 1 written, 0 it existed, -1 error. */
int kvproxy_bootstrap_admin(struct kvproxy *px, const char *key);

/* ---- shared by proxy*.c ---- */

/* POST body to etcd at path; the parsed reply of a 200, or NULL with err
 * set from etcd's error (its code and message) or the transport (naming
 * the URL). Takes body. */
json_object *kvproxy_forward(struct kvproxy *px, const char *path, json_object *body, bool idempotent,
                             struct kv_err *err);
/* A header like etcd's with this revision (cluster and member of the etcd
 * last heard from). */
json_object *kvproxy_header(struct kvproxy *px, int64_t rev);

/* Where the filter reads records from etcd (kvfilter_src over etcd): every
 * read at one revision (the first read's), and each record read remembered
 * as a guard for the write's txn. */
struct proxy_src;
struct kvfilter_src;
struct kvfilter_req;
struct proxy_src *proxy_src_new(struct kvproxy *px, int64_t rev);
void proxy_src_free(struct proxy_src *ps);
void proxy_src_bind(struct proxy_src *ps, struct kvfilter_src *src);
/* Reads only (a range, a watch): no guards kept, so no limit on how many
 * records a filtered reply may need. */
void proxy_src_reads_only(struct proxy_src *ps);
/* Start the filter for who: 1 (rq set, kvfilter_end after), 0 (no filter),
 * -1 with err set. */
int proxy_filter_begin(struct proxy_src *ps, const struct caller *who, struct kvfilter_req *rq, struct kv_err *err);
/* The guards as etcd compares (a new array), or NULL if there are none. */
json_object *proxy_src_guards(struct proxy_src *ps);
/* Whether a read failed (then the filter refused what it could not read). */
bool proxy_src_failed(struct proxy_src *ps, struct kv_err *err);

/* proxy_encode.c: kv_op -> etcd's JSON request. With for_filter, ranges
 * ask for everything (no limit, values, not count_only): the proxy cuts
 * them after filtering. */
json_object *proxy_encode_op(const struct kv_op *op, bool for_filter);
/* {"request_range": ...} etc., for a txn's success/failure list. */
json_object *proxy_encode_request_op(const struct kv_op *op, bool for_filter);
json_object *proxy_b64(const uint8_t *p, size_t n);

/* Filter a range reply in place for the caller, then apply the original
 * request's limit, count_only and keys_only. 0 or -1 (out of memory). */
int proxy_filter_range_reply(struct kvfilter_req *rq, const struct kv_range_req *orig, json_object *resp);

#define PROXY_MAX_RETRIES 8

/* etcd_prefix, for the keys the proxy keeps itself (lease owners). */
const char *kvproxy_prefix(struct kvproxy *px);

#endif
