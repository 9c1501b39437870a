/* The access filter of use_perms on the etcd v3 API (seed document,
 * "etcd data access rights"; the rules themselves are perms.c's
 * tc_perm_kv, shared with the OSDs and the client library).
 *
 * Image rights are resolved at each request from the store itself
 * (/config/user/NAME, /config/inode/..., /index/image/..., /config/pools), read
 * through `src`, so a revoked right is gone at the next request: no cache.
 * In the embedded gateway, src reads the LMDB snapshot the request runs on
 * (the checks and the write see the same state); a proxy backend gives a
 * src that reads from etcd.
 *
 * Keys given to these functions are full keys (with etcd_prefix). */
#ifndef TROMCHO_KVFILTER_H
#define TROMCHO_KVFILTER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gw_identity.h"
#include "kvrequest.h"

/* Where the filter reads current values. get returns 1 with *val (caller
 * frees, NUL-terminated) and *len, 0 if absent, -1 on error. */
struct kvfilter_src {
  void *ctx;
  int (*get)(void *ctx, const uint8_t *key, size_t klen, char **val, size_t *len);
  /* Call cb for each existing key in [key, end) (etcd's range_end rules);
   * cb returns 1 to stop. 0 or -1. NULL: ranged deletes and compares are
   * refused to everyone but the trusted-network mode. */
  int (*keys)(void *ctx, const uint8_t *key, size_t klen, const uint8_t *end, size_t elen,
              int (*cb)(void *opaque, const uint8_t *k, size_t kl), void *opaque);
};

/* The filter of one gateway: its prefix and whether use_perms is on.
 * Without use_perms every kvfilter_check_* allows everything. */
struct kvfilter {
  char prefix[128];
  size_t plen;
  bool use_perms;
};
int kvfilter_init(struct kvfilter *f, const char *prefix, bool use_perms);

/* One request's view: the identity, its user record (for users) and the
 * records read while checking it. Set up per request, freed after. */
struct kvfilter_req {
  const struct kvfilter *f;
  struct gw_identity *who;
  struct kvfilter_src src;
  struct tc_user user;
  char *user_buf;             /* storage behind user */
  char **groups;
  void *memo;                 /* records read while checking (internal) */
};

/* Read /config/user/<CN> for a user identity and point who->id.user at it.
 * Returns 0 or -1 with err set. */
int kvfilter_begin(struct kvfilter_req *rq, const struct kvfilter *f, struct gw_identity *who,
                   const struct kvfilter_src *src, struct kv_err *err);
void kvfilter_end(struct kvfilter_req *rq);

/* May the caller read this key with this value (the value of an image
 * record decides who reads it)? For range results and watch events; val
 * may be NULL for a delete event, prev_val then is the value before it. */
bool kvfilter_may_read(struct kvfilter_req *rq, const uint8_t *key, size_t klen,
                       const uint8_t *val, size_t vlen);

/* Check a whole range/put/deleterange/txn before it runs: every compare
 * key must be readable, every put and every existing key a deleterange
 * would remove must be writable, in both branches of a txn. Ranges are not
 * refused (their results are filtered). Returns 0, or -1 with err
 * (PERMISSION_DENIED, naming the operation, the key and the identity). */
int kvfilter_check_op(struct kvfilter_req *rq, const struct kv_op *op, struct kv_err *err);

/* May the caller watch [key, end)? Always yes for a user (events are
 * filtered one by one); refuses a watch that could see no key at all. */
int kvfilter_check_watch(struct kvfilter_req *rq, const struct kv_watch_req *w, struct kv_err *err);

/* Compaction: administrators (and the gateway's own work) only. */
int kvfilter_check_compact(struct kvfilter_req *rq, struct kv_err *err);

#endif
