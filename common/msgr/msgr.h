/* The messenger: tromcho's data-plane transport (DESIGN.md section 5), for
 * client->OSD and OSD->OSD connections. Non-blocking; runs inside a
 * tc_evloop (common/util/evloop.h), no thread per connection. Every function
 * here must be called on the loop's thread; use tc_evloop_submit() to get
 * there from another thread.
 *
 * CONTRACT
 *
 * Endpoint. struct tc_msgr holds one process's transport settings for one
 * loop: its own certificate and key, the CAs it trusts, the modes it wants
 * and allows, the back-pressure caps. Build it from the config with
 * tc_msgr_new_from_config() (an OSD passes TC_MSGR_AS_OSD: its certificate is
 * osd_cert/osd_pkey; a client's is cert/pkey) or from tc_msgr_opts.
 *
 * Handshake (like TLS 1.3 with X25519). Keys exist when the server has a
 * certificate and the client has osd_ca: the server then proves it is an OSD
 * (its chain verifies against the client's osd_ca); the client proves an
 * identity if it has a certificate; both send a Finished MAC. Without keys
 * the connection runs in the clear (none or payload). The server learns the
 * peer's role from the CA the peer's chain verifies against: osd_ca -> OSD,
 * mon_ca -> MON, client_ca -> USER (name = CN); no certificate -> ANON. A
 * role not in the server's allowed_roles is refused (default: all roles,
 * anonymous included; an OSD-to-OSD port passes TC_ROLE_BIT(TC_ROLE_OSD)).
 *
 * Modes (proto_checksums) are negotiated inside the signed transcript:
 *   mode = the weaker of the client's and the server's proto_checksums,
 *          where gcm counts as payload when there are no keys;
 *   refused if mode is below either side's floor. A side's floor is its
 *   force_proto_checksums when set; otherwise, for a server with keys, the
 *   lesser of its own proto_checksums and payload (the seed: with
 *   certificates a client may not disable checksums unless allowed, and gcm
 *   may be downgraded to payload unless force_proto_checksums=gcm); otherwise
 *   none. force_proto_checksums=gcm without keys is always refused.
 *
 * Frames. Each frame is a 64-byte struct tc_frame_hdr (common/msgr/frame.h) and
 * hdr.len payload bytes.
 *   none, no keys:    plain header (hdr_check = XXH3 of the header), payload.
 *   payload, no keys: as none, and checksum = XXH3-64 of the payload.
 *   with keys:        the header is sealed with AES-256-GCM (80 bytes);
 *                     payload: checksum = XXH3-64 seeded with the secret salt;
 *                     gcm: the payload is sealed too (len + 16 bytes).
 * Every record uses nonce = IV base XOR record counter; keys are updated
 * every 2^rekey_log2 records (default 2^20, far below 2^24). A replayed,
 * reordered, dropped, truncated or altered record, a bad checksum, a bad
 * magic or an oversized length closes the connection with a log line naming
 * the peer.
 *
 * Requests and replies. A client (any side that connected) sends requests
 * with tc_msgr_call(); the server side gets each request through the
 * endpoint's on_request callback with the peer's identity available from
 * the connection, and answers with tc_msgr_reply() carrying the same
 * req_id. Replies are matched by req_id and complete the request's done
 * callback. When a connection closes, every request still in flight or
 * waiting completes with err = -ECONNRESET (or the error that closed it):
 * nothing is silently lost, and the owner retries.
 *
 * Back-pressure. At most max_inflight_ops requests and max_inflight_bytes
 * of payload (request + expected reply) are in flight per connection. A
 * tc_msgr_call() over the cap never fails: the request waits in order on the
 * connection (the msgr allocates nothing for it: the caller owns it) and is
 * sent when replies free room. The server stops reading a connection while
 * max_inflight_ops of its requests are unanswered or their replies unsent,
 * or max_inflight_bytes of replies wait to be written, so TCP pushes back on
 * the client; no queue grows without bound.
 *
 * Hostile peers (a server's accepted connections). A request whose
 * payload is over the operation's limit (tc_msgr_set_request_limit) closes
 * the connection. An incoming payload is reserved against a per-connection
 * (conn_budget) and a per-endpoint (budget) count when its header arrives,
 * and kept reserved until the request is answered; a frame that does not
 * fit waits, unread, until replies free room. The buffer itself grows as
 * the bytes arrive, so announcing a frame commits no memory. Connections
 * are capped in total (max_conns) and per source address
 * (max_conns_per_addr): more are closed at once. A handshake must finish
 * within handshake_timeout; a half-received frame that stalls for
 * frame_timeout, or a non-OSD peer silent for idle_timeout with nothing in
 * flight, is closed. With use_perms an OSD also refuses anonymous peers
 * (tc_msgr_set_allowed_roles).
 *
 * Copies. Request and reply payloads are written straight from the
 * caller's iovecs (none/payload) or sealed into one buffer (gcm; with
 * TC_MSGR_INPLACE the caller's buffers are sealed in place, no copy: the
 * OSD's replies, and the cluster client's writes of an encrypted image,
 * whose XTS ciphertext is its own scratch copy and whose replay-log record
 * keeps the bytes for a resend, cluster_dispatch.c). Incoming payloads are
 * read straight into req->rbuf when given (the part that arrived with the
 * header is copied from the read buffer), otherwise into one malloc'd
 * buffer handed over to the callback; gcm opens them in place.
 *
 * Own keys (mode gcm with keys, requests only). A request sent with
 * TC_MSGR_OWN_KEY has its payload sealed under a fresh random key of its
 * own instead of the session's, and that key travels in a key record, a
 * 48-byte record sealed under the session right after the header
 * (TC_FRAME_OWN_KEY in the header says it is there). Why: a server that
 * passes the payload on (an OSD primary's SEC_WRITEs) can send the bytes
 * as they came, with the key in its own key record to each peer, instead
 * of sealing them again for each: a replicated write costs four AES-GCM
 * passes instead of six. The server says which requests it keeps sealed
 * (tc_msgr_set_keep_sealed: their budget counts twice), opens those into
 * a second buffer, and its on_request callback may take the sealed form
 * (tc_msgr_take_sealed) and give it to tc_msgr_call as req->sealed. An
 * own key seals one payload, so the payload's nonce is a constant. What a
 * peer learns from it is that one payload, which it receives anyway; an
 * observer of two links sees the same ciphertext on both (it sees the
 * same sizes and timing today).
 *
 * Writes. Frames go out at the end of the loop round, a batch in one
 * writev, and as soon as 32 KiB are queued (so at once for a frame of
 * 32 KiB or more): the peer opens the first while we build the next (the
 * two sides otherwise took turns, each idle half the time). A reply's or
 * request's free_fn may therefore run before tc_msgr_reply or
 * tc_msgr_call returns.
 *
 * Lifetime. A connection is valid from tc_msgr_connect() (or the UP
 * callback of an accepted one) until its DOWN callback returns. Call
 * tc_msgr_free() from outside the endpoint's own callbacks (e.g. from a
 * tc_evloop_defer() call or after tc_evloop_run() returns).
 *
 * An OSD:
 *   struct tc_msgr *m = tc_msgr_new_from_config(loop, cfg, TC_MSGR_AS_OSD);
 *   tc_msgr_set_callbacks(m, on_request, on_conn, osd);
 *   tc_msgr_listen(m, bind_address, port);
 *   static void on_request(struct tc_msgr_conn *c, const struct tc_frame_hdr *h, void *p, void *osd) {
 *     const struct tc_msgr_identity *who = tc_msgr_conn_peer(c);   // role + CN: check rights
 *     struct tc_frame_hdr r = { .opcode = h->opcode, .req_id = h->req_id, .status = -EACCES };
 *     tc_msgr_reply(c, &r, NULL, 0, 0, NULL, NULL);
 *     free(p);
 *   }
 * A client:
 *   struct tc_msgr *m = tc_msgr_new_from_config(loop, cfg, 0);
 *   struct tc_msgr_conn *c = tc_msgr_connect(m, host, port, on_conn, cl);
 *   req->hdr.opcode = OP_READ; req->rbuf = buf; req->rbuf_len = len; req->done = read_done;
 *   tc_msgr_call(c, req);      // read_done(req, 0 or -errno, arg)
 *
 * Known limits: without keys the handshake and frames have no protection
 * against a man in the middle (trusted-network mode, as the seed says); in
 * mode none the payload is not checked at all (keyed or not). A client
 * sends its first request right after its Finished, so a server that
 * refuses the client's certificate answers with an alert where the client
 * expects its first reply: the client reports it as a refusal. */
#ifndef TROMCHO_MSGR_H
#define TROMCHO_MSGR_H
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/uio.h>
#include "evloop.h"
#include "frame.h"
#include "identity.h"
#include "tc_config.h"

enum tc_msgr_mode { TC_MODE_NONE = 0, TC_MODE_PAYLOAD = 1, TC_MODE_GCM = 2 };
#define TC_MODE_UNSET (-1)
/* "none", "payload", "gcm" -> mode; NULL or "" -> TC_MODE_UNSET; anything else -> -2. */
int tc_msgr_mode_parse(const char *s);
const char *tc_msgr_mode_name(int mode);

/* enum tc_peer_role: identity.h */
#define TC_ROLE_BIT(r) (1u << (r))
#define TC_ROLES_ALL (TC_ROLE_BIT(TC_ROLE_ANON) | TC_ROLE_BIT(TC_ROLE_OSD) | \
                      TC_ROLE_BIT(TC_ROLE_MON) | TC_ROLE_BIT(TC_ROLE_USER))
const char *tc_peer_role_name(int role);

struct tc_msgr_identity {
  enum tc_peer_role role;
  char name[128];        /* the certificate's CN; "" for ANON */
};

struct tc_msgr;
struct tc_msgr_conn;

/* An incoming request on the server side. payload is malloc'd (NULL when
 * hdr->len == 0) and now belongs to the callee: free() it or pass it to
 * tc_msgr_reply() with free as free_fn. */
typedef void (*tc_msgr_request_cb)(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr,
                                   void *payload, void *arg);
/* A connection's life: TC_MSGR_UP after the handshake, TC_MSGR_DOWN once
 * when it closes (err = 0 for a local close, else -errno). After DOWN
 * returns, the connection is freed. */
enum { TC_MSGR_UP = 1, TC_MSGR_DOWN = 2 };
typedef void (*tc_msgr_conn_cb)(struct tc_msgr_conn *c, int event, int err, void *arg);

/* The largest payload a request with this header may carry (a server
 * closes the connection of a peer that announces more): the protocol's
 * real maximum for the operation. */
typedef uint32_t (*tc_msgr_limit_cb)(const struct tc_frame_hdr *hdr, void *arg);

struct tc_msgr_opts {
  int mode;                      /* proto_checksums */
  int force;                     /* force_proto_checksums or TC_MODE_UNSET */
  const char *cert, *pkey;       /* our identity (NULL: none) */
  const char *osd_ca, *client_ca, *mon_ca;
  unsigned allowed_roles;        /* server: which peers may connect (0 = all) */
  uint32_t max_inflight_ops;     /* 0 = 256 */
  uint64_t max_inflight_bytes;   /* 0 = 64 MiB */
  uint32_t max_frame;            /* largest payload accepted; 0 = 64 MiB */
  int handshake_timeout_ms;      /* 0 = 10 s */
  /* Limits on accepted connections (hostile peers, DESIGN.md section 5). */
  uint32_t max_conns;            /* 0 = 1024 */
  uint32_t max_conns_per_addr;   /* 0 = 64 */
  uint64_t conn_budget;          /* request payload held per connection; 0 = 16 MiB */
  uint64_t budget;               /* ... by all connections; 0 = 256 MiB */
  int frame_timeout_ms;          /* a half-received frame may stall this long; 0 = 30 s */
  int idle_timeout_ms;           /* a silent non-OSD peer with nothing in flight; 0 = 600 s */
  int rekey_log2;                /* server: key update every 2^n records; 0 = 20 */
  int unchecked_key;             /* tests only: do not check that pkey matches cert */
  tc_msgr_request_cb on_request; /* server side */
  tc_msgr_conn_cb on_conn;       /* default connection callback (accepted conns) */
  void *arg;
};

#define TC_MSGR_AS_OSD 1
/* Endpoint from the config: proto_checksums, force_proto_checksums,
 * osd_ca/client_ca/mon_ca, cert/pkey (or osd_cert/osd_pkey with
 * TC_MSGR_AS_OSD), msgr_max_inflight_ops/bytes, handshake_timeout. The
 * caller then sets on_request/on_conn with tc_msgr_set_callbacks(). */
struct tc_msgr *tc_msgr_new_from_config(struct tc_evloop *loop, const struct tc_config *cfg, int flags);
struct tc_msgr *tc_msgr_new(struct tc_evloop *loop, const struct tc_msgr_opts *opts);
void tc_msgr_set_callbacks(struct tc_msgr *m, tc_msgr_request_cb on_request, tc_msgr_conn_cb on_conn,
                           void *arg);
void tc_msgr_set_allowed_roles(struct tc_msgr *m, unsigned roles);
/* Server: the per-operation payload limit (default: max_frame for all). */
void tc_msgr_set_request_limit(struct tc_msgr *m, tc_msgr_limit_cb fn, void *arg);
/* Client side: a connection whose requests have waited ms with nothing
 * received meanwhile (no reply, no byte), or one of whose requests has
 * waited twice ms while later ones were answered, is closed with
 * ETIMEDOUT (its requests fail, DOWN runs), checked every second; 0 (the
 * default) never. For peers that answer in bounded time: a partition the
 * kernel does not report for minutes, a peer whose loop hangs, a peer that
 * lost a request. 0, or -1 if the endpoint's timer cannot start. */
int tc_msgr_set_call_timeout(struct tc_msgr *m, int ms);
/* Endpoint counters: accepted connections alive, refused by the caps,
 * request payload bytes reserved now. */
struct tc_msgr_ep_stats { uint64_t conns, refused, committed; };
void tc_msgr_ep_stats(const struct tc_msgr *m, struct tc_msgr_ep_stats *st);
/* Closes every connection and listener (DOWN callbacks run), frees m. */
void tc_msgr_free(struct tc_msgr *m);
/* Whether this endpoint will use keys as a client (has osd_ca) / server
 * (has a certificate). */
int tc_msgr_has_keys(const struct tc_msgr *m);

/* Listen on host:port (port 0: any; tc_msgr_listen_port() tells which). */
int tc_msgr_listen(struct tc_msgr *m, const char *host, int port);
int tc_msgr_listen_port(const struct tc_msgr *m);
/* Start a connection (non-blocking). Requests may be sent at once: they
 * wait for the handshake. cb gets UP or DOWN. NULL on immediate failure. */
struct tc_msgr_conn *tc_msgr_connect(struct tc_msgr *m, const char *host, int port,
                                     tc_msgr_conn_cb cb, void *arg);
/* Close (DOWN runs from the loop, not from inside this call). */
void tc_msgr_close(struct tc_msgr_conn *c);

int tc_msgr_conn_mode(const struct tc_msgr_conn *c);     /* after UP */
int tc_msgr_conn_keyed(const struct tc_msgr_conn *c);    /* 1 if frames are sealed */
const struct tc_msgr_identity *tc_msgr_conn_peer(const struct tc_msgr_conn *c);
const char *tc_msgr_conn_peername(const struct tc_msgr_conn *c);   /* "127.0.0.1:5555" */
/* Why the connection closed (in the DOWN callback; "" before). */
const char *tc_msgr_conn_close_reason(const struct tc_msgr_conn *c);
void tc_msgr_conn_set_data(struct tc_msgr_conn *c, void *data);
void *tc_msgr_conn_get_data(const struct tc_msgr_conn *c);
/* Counters for tests and stats. */
struct tc_msgr_stats { uint64_t frames_in, frames_out, bytes_in, bytes_out, rekeys, inflight_ops,
                       inflight_bytes, waiting; };
void tc_msgr_conn_stats(const struct tc_msgr_conn *c, struct tc_msgr_stats *st);

#define TC_MSGR_INPLACE 1   /* gcm: seal the caller's payload buffers in place */
#define TC_MSGR_OWN_KEY 2   /* gcm, requests: seal the payload under a key of its own ("Own keys") */

/* A received payload as it was sealed under its own key ("Own keys"):
 * reference-counted, loop thread only. */
struct tc_msgr_sealed;
/* Inside on_request: the request's sealed form, if the endpoint kept it
 * (NULL otherwise); the caller owns the reference. */
struct tc_msgr_sealed *tc_msgr_take_sealed(struct tc_msgr_conn *c);
void tc_msgr_sealed_put(struct tc_msgr_sealed *s);
/* Server: whether to keep the sealed form of an own-key request (the
 * payload is then opened into a second buffer). */
typedef int (*tc_msgr_keep_cb)(const struct tc_frame_hdr *hdr, void *arg);
void tc_msgr_set_keep_sealed(struct tc_msgr *m, tc_msgr_keep_cb fn, void *arg);
#define TC_MSGR_MAX_IOV 64

/* A request, owned by the caller until done() runs. Fill hdr (opcode,
 * inode, offset, version, ...), iov (payload, may be empty), optionally
 * rbuf; the msgr sets hdr.magic, req_id, len, checksum. */
struct tc_msgr_req {
  struct tc_frame_hdr hdr;
  const struct iovec *iov;
  int iovcnt;
  unsigned flags;              /* TC_MSGR_INPLACE, TC_MSGR_OWN_KEY */
  /* The payload as some peer sealed it under its own key (the same bytes
   * as iov, from tc_msgr_take_sealed), or NULL: on a connection in mode gcm
   * it is sent as is, on any other iov is; the msgr takes its own
   * reference, the caller keeps its. */
  struct tc_msgr_sealed *sealed;
  void *rbuf;                  /* reply payload lands here if it fits */
  size_t rbuf_len;
  void (*done)(struct tc_msgr_req *req, int err, void *arg);   /* err 0 or -errno */
  void *arg;
  /* results, valid in done() when err == 0 */
  struct tc_frame_hdr reply;
  void *reply_payload;         /* rbuf, or malloc'd (caller frees) when it did not fit; NULL if empty */
  int sent_sealed;             /* sealed went out as it came (also when err != 0) */
  /* private */
  STAILQ_ENTRY(tc_msgr_req) next;   /* waiting on its connection */
  struct tc_msgr_req *hnext;
  struct tc_msgr_conn *conn;
  struct tc_msgr_sealed *held;      /* the msgr's reference to sealed until it is written */
  uint64_t cost;
  int state;
};

/* Send a request. Returns 0, or -1 (ENOTCONN) if the connection is closing;
 * never fails because of back-pressure. */
int tc_msgr_call(struct tc_msgr_conn *c, struct tc_msgr_req *req);

/* Answer a request: hdr carries the reply fields (req_id must be the
 * request's; status, version, ...). payload is not copied (except sealed
 * in gcm): free_fn(free_arg) runs once it is no longer needed (it may run
 * before this returns). Returns -1 if the connection is closing (free_fn
 * has run). */
int tc_msgr_reply(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr,
                  const struct iovec *iov, int iovcnt, unsigned flags,
                  void (*free_fn)(void *), void *free_arg);

#endif
