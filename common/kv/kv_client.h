/* The KV client: the etcd v3 JSON HTTP API (grpc-gateway shapes), spoken to
 * real etcd or to tromcho-gateway, over http or https, with failover across
 * several endpoints. libcurl for the transport, json-c for the bodies.
 *
 * Keys and values are byte strings (base64 on the wire). Wherever the API
 * takes `const void *p, size_t len`, len == 0 with p != NULL means "p is a
 * NUL-terminated string" (an empty key is never valid in etcd; an empty value
 * is value = NULL or ""). Bytes handed back (tc_kv_kv.key / .value) are
 * always followed by a NUL that is not counted in the length, so JSON values
 * can be parsed directly.
 *
 * Three ways to use it:
 *
 *  1. Blocking calls from any thread: tc_kv_get, tc_kv_get_prefix, tc_kv_put,
 *     tc_kv_delete, tc_kv_txn, tc_kv_lease_grant / _keepalive / _revoke, or
 *     the general tc_kv_request. Each returns 0, or -1 with errno and
 *     tc_last_error() set. Connections are kept alive and reused: at most 8
 *     blocking calls run at once per client, more callers wait their turn
 *     (the non-blocking calls below likewise hold at most 8 connections per
 *     endpoint and queue the rest). A request goes to the endpoint that last
 *     worked; when it cannot connect (refused, unreachable, not connected
 *     within etcd_quick_timeout, HTTP 503) or the server stops answering
 *     (nothing sent or received for etcd_slow_timeout ms: a slow server that
 *     keeps answering is waited for, and time spent waiting for a turn does
 *     not count), it moves to the next endpoint. Blocking calls go round the
 *     endpoints, pausing 100 ms after each round, until etcd_slow_timeout ms
 *     have passed and each was tried; a non-blocking request tries each
 *     endpoint once. A transaction whose outcome is unknown (the connection
 *     broke after it was sent) is not retried: it fails with EIO.
 *
 *  2. Non-blocking: tc_kv_submit queues a request and returns at once; the
 *     callback runs later on the loop thread with the result. Watches
 *     (tc_kv_watch) are non-blocking too. The loop is libcurl's multi
 *     interface, run either
 *       - by a background thread the client starts itself on first use
 *         (the default), or
 *       - by the caller's event loop: call tc_kv_attach_loop() before any
 *         non-blocking use. The client then asks the loop to watch fds and
 *         set one timer through struct tc_kv_loop_ops, and the loop calls
 *         tc_kv_loop_fd_ready() / tc_kv_loop_timeout() / tc_kv_loop_wakeup()
 *         back. No background thread is started then; every callback runs
 *         inside those three calls. With common/util/evloop.h the ops are:
 *         watch_fd -> tc_evloop_add_fd (on EEXIST: _mod_fd; events 0:
 *         _del_fd) with a callback calling tc_kv_loop_fd_ready (EPOLLIN,
 *         EPOLLHUP, EPOLLERR -> TC_KV_POLL_IN; EPOLLOUT -> TC_KV_POLL_OUT);
 *         set_timer -> cancel the previous tc_timer, tc_evloop_timer_add
 *         one calling tc_kv_loop_timeout; wakeup -> tc_evloop_submit of a
 *         call to tc_kv_loop_wakeup. (tests/test-kv-client.c drives the
 *         same seam with poll(2).)
 *
 *  3. Watches: tc_kv_watch(key or prefix, start revision) streams events to a
 *     callback. When the stream breaks (endpoint killed, restarted, network)
 *     it reconnects by itself, to the next endpoint, with back-off, resuming
 *     at (last delivered revision + 1): no event is lost or delivered twice.
 *     All events of one revision arrive in one callback. If the revision to
 *     resume from was compacted away, the callback gets compact_revision > 0
 *     and no events: events were lost, re-read the keys; the watch goes on
 *     from compact_revision.
 *
 * Leases: tc_kv_lease_keeper runs a thread that keeps a lease alive (every
 * TTL/3) and calls a callback if the lease is lost.
 *
 * Options used (tc_options.c): etcd_address (list of http[s]://host:port),
 * etcd_ca, etcd_client_cert + etcd_client_key (else cert + pkey),
 * etcd_quick_timeout (connect, TCP and TLS, ms), etcd_slow_timeout (silence
 * during a request, and the failover budget of a blocking call, ms),
 * etcd_prefix (only reported by tc_kv_prefix: keys are never rewritten). */
#ifndef TROMCHO_KV_CLIENT_H
#define TROMCHO_KV_CLIENT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tc_config.h"

struct tc_kv;

/* One key-value pair as the server returned it. */
struct tc_kv_kv {
  uint8_t *key;            /* NUL follows key[key_len] */
  size_t key_len;
  uint8_t *value;          /* NUL follows value[value_len]; never NULL */
  size_t value_len;
  int64_t create_revision;
  int64_t mod_revision;
  int64_t version;
  int64_t lease;           /* 0: none */
};

/* The result of a request; fields a request kind does not set stay 0. */
struct tc_kv_result {
  int64_t revision;                 /* header.revision: the store's revision */
  struct tc_kv_kv *kvs;             /* range: the pairs; put/delete: prev_kv if asked */
  size_t n_kvs;
  int64_t count;                    /* range: number of keys in the range */
  bool more;                        /* range: limit cut the answer short */
  int64_t deleted;                  /* delete: keys deleted */
  bool succeeded;                   /* txn: the compares held (success ops ran) */
  struct tc_kv_result *responses;   /* txn: one per operation that ran, in order */
  size_t n_responses;
  int64_t lease_id;                 /* lease grant / keepalive */
  int64_t ttl;                      /* lease grant / keepalive: seconds left */
};
/* Free what a result holds (not the struct itself) and zero it. */
void tc_kv_result_free(struct tc_kv_result *res);

enum tc_kv_op_type { TC_KV_RANGE, TC_KV_PUT, TC_KV_DELETE };

/* One operation: alone, or inside a transaction. */
struct tc_kv_op {
  enum tc_kv_op_type type;
  const void *key;
  size_t key_len;
  bool prefix;                /* range/delete: every key that starts with key */
  const void *range_end;      /* range/delete: [key, range_end) when not prefix */
  size_t range_end_len;
  const void *value;          /* put */
  size_t value_len;
  int64_t lease;              /* put: attach to this lease (0: none) */
  int64_t limit;              /* range: at most this many (0: all) */
  int64_t revision;           /* range: read at this revision (0: latest) */
  bool keys_only, count_only; /* range */
  bool prev_kv;               /* put/delete: return the previous pair(s) */
};

enum tc_kv_cmp_target { TC_KV_CMP_VALUE, TC_KV_CMP_VERSION, TC_KV_CMP_CREATE, TC_KV_CMP_MOD, TC_KV_CMP_LEASE };
enum tc_kv_cmp_result { TC_KV_EQUAL, TC_KV_NOT_EQUAL, TC_KV_GREATER, TC_KV_LESS };

/* One compare of a transaction: target(key) result operand. A key that
 * does not exist has version, create and mod revision 0. */
struct tc_kv_cmp {
  const void *key;
  size_t key_len;
  enum tc_kv_cmp_target target;
  enum tc_kv_cmp_result result;
  int64_t number;             /* VERSION, CREATE, MOD, LEASE */
  const void *value;          /* VALUE */
  size_t value_len;
};

struct tc_kv_txn {
  const struct tc_kv_cmp *cmp;
  size_t n_cmp;
  const struct tc_kv_op *success;
  size_t n_success;
  const struct tc_kv_op *failure;
  size_t n_failure;
};

enum tc_kv_req_type {
  TC_KV_REQ_OP,               /* req.op: range, put or delete */
  TC_KV_REQ_TXN,              /* req.txn */
  TC_KV_REQ_LEASE_GRANT,      /* req.ttl (seconds), req.lease_id (0: server picks) */
  TC_KV_REQ_LEASE_KEEPALIVE,  /* req.lease_id */
  TC_KV_REQ_LEASE_REVOKE,     /* req.lease_id */
};

struct tc_kv_request {
  enum tc_kv_req_type type;
  struct tc_kv_op op;
  struct tc_kv_txn txn;
  int64_t lease_id;
  int64_t ttl;
};

/* How to reach the KV. */
struct tc_kv_options {
  const char *const *urls;    /* http://host:port or https://host:port */
  int n_urls;
  const char *ca;             /* CA file for https (NULL: system store) */
  const char *cert, *key;     /* client certificate and key (NULL: none) */
  long connect_timeout_ms;    /* TCP + TLS connect, per attempt (0: 1000) */
  long request_timeout_ms;    /* silence allowed during a request (0: 5000) */
  const char *prefix;         /* reported by tc_kv_prefix (NULL: "/tromcho") */
};

struct tc_kv *tc_kv_new(const struct tc_kv_options *opts);
/* From the config (see the options above). */
struct tc_kv *tc_kv_new_from_config(const struct tc_config *cfg);
/* Stop the background thread, cancel watches, close connections. Requests
 * still queued complete with ECANCELED first. */
void tc_kv_free(struct tc_kv *kv);
/* etcd_prefix, e.g. "/tromcho". */
const char *tc_kv_prefix(const struct tc_kv *kv);
/* The URL of the endpoint in use now. */
const char *tc_kv_current_url(struct tc_kv *kv);

/* ---- blocking calls ---- */

/* Any request; fills *res (free it with tc_kv_result_free). Errors:
 * ECONNREFUSED/ETIMEDOUT (no endpoint answered), ENOENT (lease not found),
 * ERANGE (revision compacted), EINVAL (refused as invalid), EACCES
 * (permission denied), EIO (other server or transport failure). */
int tc_kv_request(struct tc_kv *kv, const struct tc_kv_request *req, struct tc_kv_result *res);
/* Read one key. res->n_kvs is 0 when it does not exist. */
int tc_kv_get(struct tc_kv *kv, const void *key, size_t key_len, struct tc_kv_result *res);
/* Read every key starting with prefix, in key order. */
int tc_kv_get_prefix(struct tc_kv *kv, const void *prefix, size_t prefix_len, struct tc_kv_result *res);
/* Write key = value (attached to lease unless 0). res may be NULL. */
int tc_kv_put(struct tc_kv *kv, const void *key, size_t key_len, const void *value, size_t value_len,
              int64_t lease, struct tc_kv_result *res);
/* Delete the key, or every key under the prefix. res may be NULL. */
int tc_kv_delete(struct tc_kv *kv, const void *key, size_t key_len, bool prefix, struct tc_kv_result *res);
/* Transaction: if every compare holds run success, else failure. */
int tc_kv_txn(struct tc_kv *kv, const struct tc_kv_txn *txn, struct tc_kv_result *res);
/* Grant a lease of ttl seconds; *id gets its ID. */
int tc_kv_lease_grant(struct tc_kv *kv, int64_t ttl, int64_t *id);
/* Renew a lease; *ttl (may be NULL) gets the TTL. ENOENT if it expired. */
int tc_kv_lease_keepalive(struct tc_kv *kv, int64_t id, int64_t *ttl);
/* Revoke a lease: its keys are deleted. */
int tc_kv_lease_revoke(struct tc_kv *kv, int64_t id);

/* POST body (JSON text, sent as it is) to path and hand back the server's
 * reply: *reply (NUL-terminated, caller frees), *reply_len, *status (the
 * HTTP status, whatever it is). For a proxy that encodes etcd requests
 * itself. Fails over like tc_kv_request; once a request was sent and its
 * answer lost (or the server answered 503), it goes to the next endpoint
 * only if idempotent (re-running it changes nothing a caller could tell
 * apart), else it fails with EIO ("outcome unknown"). 0 when a server
 * answered, or -1 with errno and tc_last_error() naming the URL. */
int tc_kv_raw(struct tc_kv *kv, const char *path, const char *body, bool idempotent, char **reply,
              size_t *reply_len, long *status);

/* ---- non-blocking calls ---- */

/* err = 0 and res filled, or err = errno value and msg says why (res then
 * empty). res is freed after the callback returns: take what you need. */
typedef void (*tc_kv_done_fn)(void *arg, int err, const char *msg, struct tc_kv_result *res);
/* Queue req (copied: its buffers may go away on return). Returns 0, or -1
 * if it could not even be queued. Safe from any thread and from callbacks. */
int tc_kv_submit(struct tc_kv *kv, const struct tc_kv_request *req, tc_kv_done_fn cb, void *arg);

/* ---- watches ---- */

enum tc_kv_event_type { TC_KV_EVENT_PUT, TC_KV_EVENT_DELETE };
struct tc_kv_event {
  enum tc_kv_event_type type;
  struct tc_kv_kv kv;           /* DELETE: key and mod_revision (the delete's) only */
  struct tc_kv_kv prev_kv;      /* watches asking prev_kv: the pair before (key NULL: none) */
};
/* A batch: every event of one or more revisions, in order; revision = the
 * last revision now fully delivered. compact_revision > 0: the events from
 * the resume point to compact_revision - 1 were compacted away (n = 0). */
struct tc_kv_watch_update {
  const struct tc_kv_event *events;
  size_t n_events;
  int64_t revision;
  int64_t compact_revision;
};
typedef void (*tc_kv_watch_fn)(void *arg, const struct tc_kv_watch_update *u);

struct tc_kv_watch;
/* Watch key (or every key under it with prefix) from start_revision (0:
 * from now: the revision current at this call, read with a blocking range
 * request; called on the loop thread itself, from when the stream first
 * connects). Returns NULL on error. The callback runs on the loop thread
 * and should not block: while it runs, no other request or watch of the
 * client makes progress. */
struct tc_kv_watch *tc_kv_watch(struct tc_kv *kv, const void *key, size_t key_len, bool prefix,
                                int64_t start_revision, tc_kv_watch_fn cb, void *arg);
/* The same over [key, range_end) (range_end NULL: key alone; one zero
 * byte with end_len 1: every key from key on), with each event's previous
 * pair when prev_kv (for a filtering proxy that judges a delete by what it
 * deleted). */
struct tc_kv_watch *tc_kv_watch_range(struct tc_kv *kv, const void *key, size_t key_len, const void *range_end,
                                      size_t end_len, int64_t start_revision, bool prev_kv, tc_kv_watch_fn cb,
                                      void *arg);
/* Stop and free: after it returns the callback is not running and will not
 * run again. May be called from the watch's own callback. */
void tc_kv_watch_cancel(struct tc_kv_watch *w);
/* Times the stream (re)connected; for tests and status. */
int tc_kv_watch_connects(struct tc_kv_watch *w);

/* ---- event-loop seam ---- */

enum { TC_KV_POLL_IN = 1, TC_KV_POLL_OUT = 2 };
struct tc_kv_loop_ops {
  /* Watch fd for events (TC_KV_POLL_IN|OUT), or forget it (events = 0). */
  void (*watch_fd)(void *loop, int fd, int events);
  /* Call tc_kv_loop_timeout after ms milliseconds (replaces the previous
   * timer; ms = -1: no timer). */
  void (*set_timer)(void *loop, long ms);
  /* Another thread queued work: call tc_kv_loop_wakeup on the loop soon. */
  void (*wakeup)(void *loop);
};
/* Run the client on the caller's loop instead of a background thread. Call
 * it before any tc_kv_submit or tc_kv_watch. */
int tc_kv_attach_loop(struct tc_kv *kv, const struct tc_kv_loop_ops *ops, void *loop);
void tc_kv_loop_fd_ready(struct tc_kv *kv, int fd, int events);
void tc_kv_loop_timeout(struct tc_kv *kv);
void tc_kv_loop_wakeup(struct tc_kv *kv);

/* ---- lease keeper ---- */

typedef void (*tc_kv_lease_lost_fn)(void *arg, int64_t lease_id);
struct tc_kv_lease_keeper;
/* Keep lease alive every ttl/3 seconds in a thread of its own until
 * stopped. If the server says it is gone, call lost (once) and stop
 * renewing. While no endpoint answers, tc_kv_lease_keeper_until_ms runs
 * out (the lease is not held) but the keeper keeps trying the same lease:
 * a KV that restarted gives it a whole TTL again. granted_ms: tc_now_ms()
 * (CLOCK_MONOTONIC) taken before the grant was sent, 0 for now. */
struct tc_kv_lease_keeper *tc_kv_lease_keeper_start(struct tc_kv *kv, int64_t lease_id, int64_t ttl,
                                                    uint64_t granted_ms, tc_kv_lease_lost_fn lost, void *arg);
/* Until when (tc_now_ms(), CLOCK_MONOTONIC) the lease is certainly still
 * alive at the server: nine tenths of its TTL after the send of the last
 * renewal (or of the grant) the server answered. Past it the server may
 * have dropped the lease and the keys it holds, and others may act on
 * that (the monitor moves a lost OSD's PGs): a holder that must not
 * overlap with them stops first. 0 once lost, and for NULL. Any thread. */
uint64_t tc_kv_lease_keeper_until_ms(const struct tc_kv_lease_keeper *k);
/* Renew only while the holder shows life: *beat_ms (tc_now_ms(), which
 * the holder stores with __atomic_store_n) at most max_silence_ms old.
 * Past that the keeper lets the lease lapse, so a holder whose own thread
 * hangs while this one runs is seen as gone (the monitor moves a hung
 * OSD's PGs); it renews again once the holder beats again (the server
 * then may say the lease is gone: lost). beat_ms must outlive k. */
void tc_kv_lease_keeper_watch(struct tc_kv_lease_keeper *k, const uint64_t *beat_ms, uint64_t max_silence_ms);
/* Stop renewing (does not revoke) and free. */
void tc_kv_lease_keeper_stop(struct tc_kv_lease_keeper *k);

/* Base64 (tc_base64_encode, tc_base64_decode) is in b64.h. */
#include "b64.h"

#endif
