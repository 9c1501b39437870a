/* The gateway's embedded KV store: MVCC over LMDB, like etcd's.
 *
 * Every change gets a revision (main revision of its write, plus a sub
 * revision inside the write). LMDB holds, in one environment:
 *   kv     key -> current record (create, mod, version, lease, value)
 *   log    (rev, sub) -> event (put or delete, the record), for watches
 *   idx    escaped key + (rev, sub) -> nothing, for reads at a past revision
 *   lease  id -> granted TTL
 *   lkeys  lease id + key -> nothing (keys attached to a lease)
 *   meta   revision, compact revision, cluster and member id, term
 * A write is durable when kvs_write returns: LMDB commits fsync the data and
 * then the meta page, so a crash at any instant leaves the last commit.
 * Concurrent writers share one commit (group commit). */
#ifndef TROMCHO_KVSTORE_H
#define TROMCHO_KVSTORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>

/* gRPC status codes that etcd's JSON errors carry. */
enum kv_code {
  KV_OK = 0, KV_INVALID_ARGUMENT = 3, KV_NOT_FOUND = 5, KV_FAILED_PRECONDITION = 9,
  KV_RESOURCE_EXHAUSTED = 8, KV_OUT_OF_RANGE = 11, KV_INTERNAL = 13, KV_UNAVAILABLE = 14,
  KV_PERMISSION_DENIED = 7, KV_UNAUTHENTICATED = 16,
};

/* An error to send back: the gRPC code and etcd's message. */
struct kv_err {
  int code;
  char msg[256];
};
int kv_err_set(struct kv_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Longest key: LMDB's key limit (511) less the index suffix and escaping. */
#define KV_MAX_KEY 240

struct kv_rec {
  const uint8_t *key; size_t klen;
  const uint8_t *val; size_t vlen;
  int64_t create_rev, mod_rev, version, lease;
  int64_t sub;          /* events only: sub revision of the change */
};

enum kv_event_type { KV_EV_PUT = 0, KV_EV_DELETE = 1 };

struct kvs;

/* A read snapshot or (inside kvs_write) a write transaction. */
struct kvs_txn {
  struct kvs *s;
  MDB_txn *t;
  int64_t rev;          /* revision of the snapshot (after this write's changes so far) */
  int64_t base_rev;     /* write: the revision before this write's changes */
  int64_t sub;          /* write: sub revision of the last change */
  int64_t compact_rev;
  bool write;
};

struct kvs *kvs_open(const char *dir, int64_t map_size);
void kvs_close(struct kvs *s);
/* meta_sync false: a commit flushes the data once and leaves the meta page
 * to the next commit or kvs_sync (LMDB's MDB_NOMETASYNC). kill -9 still
 * loses nothing; a power loss may undo the last commits, never corrupts. */
int kvs_set_meta_sync(struct kvs *s, bool meta_sync);
/* Flush everything committed so far. */
int kvs_sync(struct kvs *s);
void kvs_ids(struct kvs *s, uint64_t *cluster_id, uint64_t *member_id, int64_t *term);
int64_t kvs_revision(struct kvs *s);      /* last committed revision */

int kvs_read_begin(struct kvs *s, struct kvs_txn *tx, struct kv_err *err);
void kvs_read_end(struct kvs_txn *tx);

/* The current record of key: 1 found, 0 absent, -1 error. */
int kvs_get(struct kvs_txn *tx, const uint8_t *key, size_t klen, struct kv_rec *out, struct kv_err *err);

/* Call cb for each live key in [key, end) at revision at_rev (0: current),
 * in key order. end: NULL/0 = the key alone; "\0" = every key >= key.
 * cb returns 0 to go on, 1 to stop. Returns 0 or -1. */
typedef int (*kvs_rec_cb)(void *opaque, const struct kv_rec *r);
int kvs_range(struct kvs_txn *tx, const uint8_t *key, size_t klen, const uint8_t *end, size_t elen,
              int64_t at_rev, kvs_rec_cb cb, void *opaque, struct kv_err *err);

/* Byte strings in etcd's order (memcmp, then the shorter first); either may
 * be NULL when its length is 0. */
int kv_bytes_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn);

/* Whether key is inside [start, end) with etcd's conventions. */
bool kv_in_range(const uint8_t *key, size_t klen, const uint8_t *start, size_t slen,
                 const uint8_t *end, size_t elen);

/* Changes (write transactions only). Records read before a change are
 * invalid after it. kvs_delete returns 1 if the key existed, 0 if not. */
int kvs_put(struct kvs_txn *tx, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
            int64_t lease, struct kv_err *err);
int kvs_delete(struct kvs_txn *tx, const uint8_t *key, size_t klen, struct kv_err *err);

/* Leases (persisted part). */
int kvs_lease_exists(struct kvs_txn *tx, int64_t id);  /* 1, 0, -1 */
int kvs_lease_put(struct kvs_txn *tx, int64_t id, int64_t ttl, struct kv_err *err);
/* Delete the lease and every key attached to it. */
int kvs_lease_delete(struct kvs_txn *tx, int64_t id, struct kv_err *err);
/* Keys attached to a lease. */
int kvs_lease_keys(struct kvs_txn *tx, int64_t id, kvs_rec_cb cb, void *opaque, struct kv_err *err);
/* Every stored lease: cb(opaque, id, ttl). */
int kvs_lease_list(struct kvs *s, void (*cb)(void *opaque, int64_t id, int64_t ttl), void *opaque);

/* Forget history before revision rev (etcd's compaction). */
int kvs_compact(struct kvs_txn *tx, int64_t rev, struct kv_err *err);

/* Events from revision from_rev on, in order, to cb(opaque, type, rec);
 * cb returns 0 to go on, 1 to stop (after finishing the current revision is
 * the caller's business). */
typedef int (*kvs_event_cb)(void *opaque, int type, const struct kv_rec *r);
int kvs_events(struct kvs_txn *tx, int64_t from_rev, kvs_event_cb cb, void *opaque, struct kv_err *err);
/* The record of key just before the change (rev, sub): 1 found, 0 none. */
int kvs_prev_version(struct kvs_txn *tx, const uint8_t *key, size_t klen, int64_t rev, int64_t sub,
                     struct kv_rec *out, struct kv_err *err);

/* Run fn inside a write transaction shared with concurrent writers and
 * return once it is durable. fn returns 0, or -1 with err set; it must
 * check everything that can refuse the request before its first change:
 * a failure after a change (or with KV_INTERNAL) undoes the whole group's
 * writes, and every writer of the group gets the error. post (optional)
 * runs after the commit succeeded. Returns fn's result, or -1 if the
 * group failed. */
typedef int (*kvs_write_fn)(struct kvs_txn *tx, void *arg, struct kv_err *err);
int kvs_write(struct kvs *s, kvs_write_fn fn, void (*post)(void *arg), void *arg, struct kv_err *err);

/* Wait until the committed revision reaches rev, or timeout_ms, or
 * kvs_wake_all. Returns the committed revision. */
int64_t kvs_wait_revision(struct kvs *s, int64_t rev, int timeout_ms);
/* Wake every waiter (shutdown). */
void kvs_wake_all(struct kvs *s);

#endif
