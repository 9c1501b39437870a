/* Messenger internals shared by msgr*.c and the fuzz targets; not a public
 * API (see msgr.h). */
#ifndef TROMCHO_MSGR_INT_H
#define TROMCHO_MSGR_INT_H
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/uio.h>
#include "certs.h"
#include "crypto.h"
#include "frame.h"
#include "msgr.h"

/* A growable byte buffer. */
struct tc_buf {
  uint8_t *p;
  size_t len, cap;
};
int tc_buf_append(struct tc_buf *b, const void *data, size_t len);
void tc_buf_consume(struct tc_buf *b, size_t n);
void tc_buf_free(struct tc_buf *b);

/* ---- frames (msgr_frame.c): pure functions over one connection's state ---- */

#define TC_FRAME_TAG 16
#define TC_FRAME_HDR_MAX (sizeof(struct tc_frame_hdr) + TC_FRAME_TAG)
#define TC_REKEY_LOG2_DEFAULT 20
#define TC_REKEY_LOG2_MIN 2
#define TC_REKEY_LOG2_MAX 23   /* always well before 2^24 records per key */

/* One direction's record protection. */
struct tc_msgr_dir {
  struct tc_gcm *gcm;
  uint8_t secret[TC_SHA256_SIZE];
  uint8_t iv[TC_GCM_NONCE_SIZE];
  uint64_t seq;
  int rekey_log2;
  uint64_t rekeys;
};

struct tc_frame_ctx {
  int mode;
  int keyed;
  uint64_t salt;
  uint32_t max_frame;
  struct tc_msgr_dir tx, rx;
  struct tc_gcm *own;   /* own-key payloads: re-keyed for each (created at the first) */
};

/* Own-key frames (TC_FRAME_OWN_KEY): the key record after the header. */
#define TC_FRAME_KEYREC (TC_GCM_KEY_SIZE + TC_FRAME_TAG)

/* Set up a keyed context from the two traffic secrets. */
int tc_frame_ctx_keys(struct tc_frame_ctx *f, const uint8_t tx_secret[32], const uint8_t rx_secret[32],
                      uint64_t salt, int rekey_log2);
void tc_frame_ctx_clear(struct tc_frame_ctx *f);
size_t tc_frame_hdr_wire(const struct tc_frame_ctx *f);
size_t tc_frame_payload_wire(const struct tc_frame_ctx *f, uint32_t len);
/* Fill magic, len, checksum, hdr_check of hdr and write its wire form to
 * out (tc_frame_hdr_wire() bytes). In gcm, then seal the payload with
 * tc_frame_seal_payload() before sealing any other frame. */
int tc_frame_seal_hdr(struct tc_frame_ctx *f, struct tc_frame_hdr *hdr, const struct iovec *iov,
                      int iovcnt, uint8_t out[TC_FRAME_HDR_MAX]);
int tc_frame_seal_payload(struct tc_frame_ctx *f, const struct iovec *iov, int iovcnt,
                          uint8_t tag[TC_FRAME_TAG]);
/* The same, sealing a copy: the payload gathered from iov into out (room
 * for len + TC_FRAME_TAG: the tag follows the ciphertext) in one pass. */
int tc_frame_seal_payload_copy(struct tc_frame_ctx *f, const struct iovec *iov, int iovcnt, void *out,
                               size_t len);
/* Own keys (msgr.h): seal key under the session into out (the key record,
 * the record after the header), or open a received one into key. */
int tc_frame_seal_keyrec(struct tc_frame_ctx *f, const uint8_t key[TC_GCM_KEY_SIZE],
                         uint8_t out[TC_FRAME_KEYREC]);
int tc_frame_open_keyrec(struct tc_frame_ctx *f, const struct tc_frame_hdr *hdr, const uint8_t *wire,
                         uint8_t key[TC_GCM_KEY_SIZE]);
/* Seal the payload gathered from iov under its own key: in place (out
 * NULL; the tag into tag) or into out (len + TC_FRAME_TAG bytes, the tag
 * after the ciphertext; tag unused). Uses no record number. */
int tc_frame_own_seal(struct tc_frame_ctx *f, const uint8_t key[TC_GCM_KEY_SIZE], const struct iovec *iov,
                      int iovcnt, void *out, size_t len, uint8_t tag[TC_FRAME_TAG]);
/* Open hdr's payload under its own key: in place (out NULL) or into out
 * (hdr->len bytes), payload then left as it came. EBADMSG on a bad tag
 * (the plaintext wiped). */
int tc_frame_own_open(struct tc_frame_ctx *f, const struct tc_frame_hdr *hdr, const uint8_t key[TC_GCM_KEY_SIZE],
                      void *payload, const uint8_t tag[TC_FRAME_TAG], void *out);
/* Open a wire header (tc_frame_hdr_wire() bytes) into hdr: checks the tag
 * or hdr_check, the magic and the length limit. */
int tc_frame_open_hdr(struct tc_frame_ctx *f, const uint8_t *wire, struct tc_frame_hdr *hdr);
/* Check (payload) or open in place (gcm) the payload of hdr; tag is the 16
 * bytes after it in gcm. */
int tc_frame_open_payload(struct tc_frame_ctx *f, const struct tc_frame_hdr *hdr, void *payload,
                          const uint8_t *tag);

/* ---- handshake (msgr_handshake.c) ---- */

#define TC_HS_MAX_MSG 32768
#define TC_MSGR_MIN_BUDGET (1u << 20)   /* a budget holds at least the largest OSD request */

struct tc_hs_cfg {
  int mode, force;
  struct tc_cert_identity *id;
  struct tc_cert_trust *osd_ca, *client_ca, *mon_ca;
  unsigned allowed_roles;
  int rekey_log2;
};

struct tc_hs {
  const struct tc_hs_cfg *cfg;
  int is_server, state;
  uint8_t priv[32], pub[32], peer_pub[32];
  uint8_t master[32], c_fin[32], s_fin[32];
  struct tc_buf transcript;
  int want_keys, keyed, mode, rekey_log2;
  struct tc_cert_peer *peer;
  uint8_t th_cv[32];           /* transcript hash the next CertVerify signs */
  struct tc_msgr_identity ident;
  /* results when done */
  uint8_t c2s[32], s2c[32];
  uint64_t salt;
};

/* Decide the mode (see msgr.h) from both sides' settings. Returns the mode
 * or -1 with why filled in. */
int tc_msgr_negotiate(int cmode, int cforce, int smode, int sforce, int keyed, char *why, size_t whylen);

int tc_hs_init(struct tc_hs *hs, const struct tc_hs_cfg *cfg, int is_server);
void tc_hs_clear(struct tc_hs *hs);
/* Client: append the ClientHello to out. */
int tc_hs_start(struct tc_hs *hs, struct tc_buf *out);
/* Consume the complete messages at the front of in (*used bytes), append
 * what to send to out. Returns 0 (more needed), 1 (done: results valid) or
 * -1 (refused: tc_last_error() says why; out may hold an alert to send). */
int tc_hs_feed(struct tc_hs *hs, const uint8_t *in, size_t len, size_t *used, struct tc_buf *out);

/* ---- endpoint and connections (msgr.c, msgr_conn.c) ---- */

struct tc_msgr {
  struct tc_evloop *loop;
  struct tc_hs_cfg hs;
  uint32_t max_ops;
  uint64_t max_bytes;
  uint32_t max_frame;
  int hs_timeout_ms;
  /* limits on accepted connections (msgr_limits.c) */
  uint32_t max_conns, max_conns_per_addr;
  uint32_t nserved;                /* accepted connections alive */
  uint64_t conn_budget, budget;    /* request payload bytes: per connection, all together */
  uint64_t committed;              /* request payload bytes reserved now (all connections) */
  int frame_timeout_ms, idle_timeout_ms;
  int call_timeout_ms;             /* tc_msgr_set_call_timeout; 0: none */
  struct tc_timer *sweep_timer;
  int wake_budget;                 /* bytes were released: retry the connections waiting */
  uint64_t refused_conns;          /* counters for tests and logs */
  uint64_t refused_log_ms;         /* last refusal logged as a warning */
  tc_msgr_limit_cb request_limit;
  void *limit_arg;
  tc_msgr_keep_cb keep_sealed;
  void *keep_arg;
  tc_msgr_request_cb on_request;
  tc_msgr_conn_cb on_conn;
  void *arg;
  int listen_fd, listen_port;
  struct tc_msgr_conn *conns;      /* live connections */
  struct tc_msgr_conn *flushq;     /* connections with output to write */
  struct tc_msgr_conn *dead;       /* closed, waiting to be freed */
  int post_scheduled, freeing;
};

struct tc_msgr_sealed {
  int refs;
  uint32_t len;
  uint8_t *buf;                    /* the ciphertext, len bytes */
  uint8_t tag[TC_FRAME_TAG];
  uint8_t key[TC_GCM_KEY_SIZE];
};
struct tc_msgr_sealed *tc_msgr_sealed_get(struct tc_msgr_sealed *s);

struct tc_out {
  STAILQ_ENTRY(tc_out) next;
  int iovcnt, iovpos;
  size_t off;                      /* into iov[iovpos] */
  void *owned;                     /* freed once written */
  void (*free_fn)(void *);
  void *free_arg;
  struct tc_msgr_req *req;         /* a request being written */
  int is_reply;
  size_t bytes;
  struct tc_msgr_sealed *sealed;   /* sent as is: a reference */
  uint8_t hdr[TC_FRAME_HDR_MAX];
  uint8_t keyrec[TC_FRAME_KEYREC];
  uint8_t tag[TC_FRAME_TAG];
  struct iovec iov[TC_MSGR_MAX_IOV + 3];
};

enum { C_CONNECTING, C_HANDSHAKE, C_UP, C_CLOSED };
enum { R_HDR, R_PAYLOAD, R_BUDGET };   /* R_BUDGET: header read, waiting for budget */
#define TC_MSGR_HASH 256

struct tc_msgr_conn {
  struct tc_msgr *m;
  struct tc_msgr_conn *next, *prev;   /* in m->conns */
  struct tc_msgr_conn *next_flush, *next_dead;
  int in_flushq;
  int fd, state, is_server, close_err, up_reported, clean_eof;
  char peername[64];
  char peeraddr[64];               /* the source address without the port */
  char close_reason[700];
  tc_msgr_conn_cb cb;
  void *cb_arg, *data;
  struct tc_timer *hs_timer;
  struct tc_hs hs;
  struct tc_buf hsout;
  struct tc_frame_ctx fr;
  struct tc_msgr_identity peer;
  /* reading */
  uint8_t *rbuf;
  size_t rpos, rlen, rcap;
  int rstate, paused;
  struct tc_frame_hdr cur;
  uint8_t *pl;
  int pl_owned;
  int big_run;                     /* the last payload was read straight into its buffer */
  size_t pl_got, pl_need, pl_cap;
  uint64_t last_rx_ms;             /* last time bytes arrived */
  uint8_t pl_tag[TC_FRAME_TAG];
  size_t pl_pre;                   /* own key: the key record before the payload */
  int pl_keep;                     /* ... and the sealed form kept */
  uint8_t pl_keyrec[TC_FRAME_KEYREC];
  struct tc_msgr_sealed *cur_sealed;   /* during on_request */
  struct tc_msgr_req *cur_req;
  /* writing */
  STAILQ_HEAD(, tc_out) out;       /* frames to write, in order */
  size_t out_bytes;
  int want_out;
  int writing;                     /* in write_out (a free_fn queued more: no nested write) */
  /* client side */
  STAILQ_HEAD(, tc_msgr_req) waiting;   /* requests over the caps or before the handshake */
  struct tc_msgr_req *inflight[TC_MSGR_HASH];
  uint64_t next_req_id;
  uint32_t ops;
  uint64_t busy_since_ms;          /* when ops last went from 0 to 1 */
  uint64_t oldest_id, oldest_since_ms;   /* the oldest request in flight at the last sweeps, since when */
  uint64_t bytes;
  uint64_t nwaiting;
  /* server side */
  uint32_t srv_ops;
  uint64_t srv_bytes;              /* reserved request payload: receiving + unanswered */
  uint64_t pl_reserved;            /* of which the frame being received */
  struct tc_msgr_pending *pending[TC_MSGR_HASH];   /* unanswered requests' reservations */
  struct tc_msgr_stats st;
};

/* msgr_conn.c */
/* Reads per readiness event before yielding to other connections (16);
 * tests lower it to exercise the end of a round. */
extern int tc_msgr_read_rounds;
struct tc_msgr_conn *tc_msgr_conn_new(struct tc_msgr *m, int fd, int is_server, const char *peername);
void tc_msgr_conn_start(struct tc_msgr_conn *c);      /* socket connected: begin the handshake */
void tc_msgr_conn_destroy(struct tc_msgr_conn *c);    /* free a closed connection (DOWN runs) */
void tc_msgr_conn_flush(struct tc_msgr_conn *c);
/* A connection waiting for budget (R_BUDGET): go on if there is room now
 * (1), else keep waiting (0). */
int tc_msgr_conn_budget_retry(struct tc_msgr_conn *c);
void tc_msgr_conn_fail(struct tc_msgr_conn *c, int err, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));
/* msgr.c */
void tc_msgr_schedule_post(struct tc_msgr *m);
/* msgr_own_key.c: o's key record and payload for an own-key request
 * (its header is o->iov[0..n-1]): sealed now, or sealed as is; sets
 * o->iovcnt and o->bytes. Then, receiving, open c's own-key payload (the
 * key record and tag read): in place, or kept sealed (c->cur_sealed) and
 * opened into a new c->pl when c->pl_keep. */
int tc_msgr_build_own(struct tc_msgr_conn *c, struct tc_out *o, int n, const struct iovec *iov, int iovcnt,
                      size_t len, unsigned flags, struct tc_msgr_sealed *sealed);
int tc_msgr_open_own(struct tc_msgr_conn *c);
/* msgr_conn.c: seal o's payload in gcm (under own_key, or the session's
 * when NULL) into o->iov from n on: in place (TC_MSGR_INPLACE) or into a
 * buffer o owns; sets o->iovcnt. */
int tc_msgr_seal_payload(struct tc_msgr_conn *c, struct tc_out *o, int n, const struct iovec *iov, int iovcnt,
                         size_t len, unsigned flags, const uint8_t *own_key);

/* msgr_limits.c: caps on accepted connections, payload budgets, timeouts. */
struct tc_msgr_pending {
  struct tc_msgr_pending *next;
  uint64_t req_id, bytes;
};
/* Whether a new connection from addr may be accepted (0) or not (-1, with
 * the reason in tc_last_error()). */
int tc_msgr_admit_conn(struct tc_msgr *m, const char *addr);
/* The largest payload a request with this header may carry on this server. */
uint32_t tc_msgr_request_max(const struct tc_msgr *m, const struct tc_frame_hdr *h);
/* Reserve len bytes of budget for the frame c is receiving: 0, or -1 when
 * the budget is full now (c waits in R_BUDGET and is retried). */
int tc_msgr_budget_reserve(struct tc_msgr_conn *c, uint64_t len);
/* The frame c received is a request now unanswered: keep its reservation
 * under req_id until tc_msgr_budget_answered(). */
int tc_msgr_budget_deliver(struct tc_msgr_conn *c, uint64_t req_id);
void tc_msgr_budget_answered(struct tc_msgr_conn *c, uint64_t req_id);
/* Release everything c holds (it is closing). */
void tc_msgr_budget_release_all(struct tc_msgr_conn *c);
/* Whether c is over its own budget (stop reading until replies go out). */
int tc_msgr_budget_conn_full(const struct tc_msgr_conn *c);
/* Start the endpoint's sweep timer (idle and stalled-frame timeouts). */
int tc_msgr_sweep_start(struct tc_msgr *m);
void tc_msgr_sweep_stop(struct tc_msgr *m);

#endif
