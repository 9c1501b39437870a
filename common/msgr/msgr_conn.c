/* A messenger connection: the handshake, then frames in and out, request
 * matching and back-pressure (msgr.h). All on the loop thread. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include "error.h"
#include "log.h"
#include "msgr_int.h"

#define RBUF_SIZE (64 * 1024)
#define DIRECT_READ_MIN 16384   /* payloads this big are read straight into their buffer */
#define WRITE_IOV 128
/* The output queued is written once it reaches this, not only at the end
 * of the loop round: the peer starts on the first frames while we build
 * the next ones. Without it both sides of a busy connection took turns
 * (a batch of 32 4 KiB echoes in gcm: each side ~40% busy, 520 MB/s;
 * with a write every 32 KiB both are busy, 1180-1365 MB/s, and none goes
 * from ~1130 to ~2000 MB/s: bench/README.md, 2026-12-03). 16 KiB did as
 * well for none and worse for gcm, 8 KiB worse for both, 64 KiB half the
 * gain. A frame of 32 KiB or more goes at once. */
#define EARLY_WRITE (32 * 1024)

enum { REQ_IDLE = 0, REQ_WAITING, REQ_WRITING, REQ_SENT };

int tc_msgr_read_rounds = 16;

static void conn_event(struct tc_evloop *loop, int fd, uint32_t events, void *arg);
static void do_read(struct tc_msgr_conn *c);
static int write_out(struct tc_msgr_conn *c);

static const char *
peer_word(const struct tc_msgr_conn *c)
{
  return c->is_server ? "client" : "server";
}

static void
update_events(struct tc_msgr_conn *c)
{
  if (c->state == C_CLOSED)
    return;
  uint32_t ev = c->state == C_CONNECTING ? EPOLLOUT
    : (c->paused || c->rstate == R_BUDGET ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0);
  tc_evloop_mod_fd(c->m->loop, c->fd, ev);
}

static void
on_hs_timeout(struct tc_evloop *loop, void *arg)
{
  struct tc_msgr_conn *c = arg;
  c->hs_timer = NULL;
  tc_msgr_conn_fail(c, ETIMEDOUT, "handshake not finished after %d ms: closing", c->m->hs_timeout_ms);
}

struct tc_msgr_conn *
tc_msgr_conn_new(struct tc_msgr *m, int fd, int is_server, const char *peername)
{
  struct tc_msgr_conn *c = calloc(1, sizeof *c);
  if (!c || !(c->rbuf = malloc(RBUF_SIZE))) {
    free(c);
    tc_error(ENOMEM, "connection with %s: out of memory", peername);
    return NULL;
  }
  c->m = m;
  c->fd = fd;
  STAILQ_INIT(&c->out);
  STAILQ_INIT(&c->waiting);
  c->last_rx_ms = tc_now_ms();
  c->rcap = RBUF_SIZE;
  c->is_server = is_server;
  c->state = C_CONNECTING;
  snprintf(c->peername, sizeof c->peername, "%s", peername);
  /* "host:port" or "[v6]:port" -> the host, for the per-address cap. */
  snprintf(c->peeraddr, sizeof c->peeraddr, "%s", peername);
  char *colon = strrchr(c->peeraddr, ':');
  if (colon)
    *colon = 0;
  if (tc_hs_init(&c->hs, &m->hs, is_server) < 0 ||
      tc_evloop_add_fd(m->loop, fd, is_server ? EPOLLIN : EPOLLOUT, conn_event, c) < 0) {
    tc_hs_clear(&c->hs);
    free(c->rbuf);
    free(c);
    return NULL;
  }
  c->hs_timer = tc_evloop_timer_add(m->loop, m->hs_timeout_ms, on_hs_timeout, c);
  c->next = m->conns;
  if (m->conns)
    m->conns->prev = c;
  m->conns = c;
  if (is_server)
    m->nserved++;
  return c;
}

void
tc_msgr_conn_fail(struct tc_msgr_conn *c, int err, const char *fmt, ...)
{
  if (c->state == C_CLOSED)
    return;
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (err && !(err == ECONNRESET && c->state == C_UP && c->clean_eof))
    tc_warn("msgr: %s %s: %s", peer_word(c), c->peername, msg);
  else
    tc_info("msgr: %s %s: %s", peer_word(c), c->peername, msg);
  struct tc_msgr *m = c->m;
  snprintf(c->close_reason, sizeof c->close_reason, "%s", msg);
  c->state = C_CLOSED;
  c->close_err = err ? -err : -ECONNRESET;
  if (c->hs_timer) {
    tc_evloop_timer_cancel(m->loop, c->hs_timer);
    c->hs_timer = NULL;
  }
  tc_evloop_del_fd(m->loop, c->fd);
  close(c->fd);
  c->fd = -1;
  if (c->is_server)
    m->nserved--;
  tc_msgr_budget_release_all(c);
  if (c->prev)
    c->prev->next = c->next;
  else
    m->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  c->next_dead = m->dead;
  m->dead = c;
  tc_msgr_schedule_post(m);
}

void
tc_msgr_close(struct tc_msgr_conn *c)
{
  tc_msgr_conn_fail(c, 0, "closed locally");
}

static void
out_complete(struct tc_msgr_conn *c, struct tc_out *o, int written)
{
  c->out_bytes -= o->bytes;
  free(o->owned);
  tc_msgr_sealed_put(o->sealed);
  if (o->free_fn)
    o->free_fn(o->free_arg);
  if (written) {
    c->st.frames_out++;
    if (o->req)
      o->req->state = REQ_SENT;
    if (o->is_reply && c->srv_ops > 0)
      c->srv_ops--;
  }
  free(o);
}

void
tc_msgr_conn_destroy(struct tc_msgr_conn *c)
{
  int err = c->close_err ? c->close_err : -ECONNRESET;
  while (!STAILQ_EMPTY(&c->out)) {
    struct tc_out *o = STAILQ_FIRST(&c->out);
    STAILQ_REMOVE_HEAD(&c->out, next);
    out_complete(c, o, 0);
  }
  /* Every request still owned by this connection completes with an error,
   * so its owner can retry it elsewhere. */
  for (int i = 0; i < TC_MSGR_HASH; i++)
    while (c->inflight[i]) {
      struct tc_msgr_req *r = c->inflight[i];
      c->inflight[i] = r->hnext;
      r->state = REQ_IDLE;
      r->done(r, err, r->arg);
    }
  while (!STAILQ_EMPTY(&c->waiting)) {
    struct tc_msgr_req *r = STAILQ_FIRST(&c->waiting);
    STAILQ_REMOVE_HEAD(&c->waiting, next);
    tc_msgr_sealed_put(r->held);
    r->held = NULL;
    r->state = REQ_IDLE;
    r->done(r, err, r->arg);
  }
  if (c->cb && (!c->is_server || c->up_reported))
    c->cb(c, TC_MSGR_DOWN, c->close_err, c->cb_arg);
  if (c->pl_owned)
    free(c->pl);
  tc_msgr_sealed_put(c->cur_sealed);
  tc_hs_clear(&c->hs);
  tc_frame_ctx_clear(&c->fr);
  tc_buf_free(&c->hsout);
  free(c->rbuf);
  free(c);
}

static void
queue_out(struct tc_msgr_conn *c, struct tc_out *o)
{
  STAILQ_INSERT_TAIL(&c->out, o, next);
  c->out_bytes += o->bytes;
  if (!c->in_flushq) {
    c->in_flushq = 1;
    c->next_flush = c->m->flushq;
    c->m->flushq = c;
  }
  tc_msgr_schedule_post(c->m);
  /* The post still runs (it resumes a paused reader). */
  if (c->state == C_UP && !c->want_out && !c->writing && c->out_bytes >= EARLY_WRITE)
    (void) write_out(c);   /* EAGAIN or a closed c: the post and EPOLLOUT go on */
}

/* Handshake bytes to send. */
static int
queue_raw(struct tc_msgr_conn *c, struct tc_buf *b)
{
  struct tc_out *o = calloc(1, sizeof *o);
  if (!o)
    return tc_error(ENOMEM, "out of memory");
  o->owned = malloc(b->len);
  if (!o->owned) {
    free(o);
    return tc_error(ENOMEM, "out of memory");
  }
  memcpy(o->owned, b->p, b->len);
  o->iov[0].iov_base = o->owned;
  o->iov[0].iov_len = b->len;
  o->iovcnt = 1;
  o->bytes = b->len;
  b->len = 0;
  queue_out(c, o);
  return 0;
}

/* write_out's loop. */
static int
write_some(struct tc_msgr_conn *c)
{
  while (!STAILQ_EMPTY(&c->out) && c->state != C_CLOSED) {
    struct iovec iov[WRITE_IOV];
    int n = 0;
    struct tc_out *first = STAILQ_FIRST(&c->out);
    for (struct tc_out *o = first; o && n < WRITE_IOV; o = STAILQ_NEXT(o, next))
      for (int i = o->iovpos; i < o->iovcnt && n < WRITE_IOV; i++) {
        iov[n] = o->iov[i];
        if (o == first && i == o->iovpos) {
          iov[n].iov_base = (char *) iov[n].iov_base + o->off;
          iov[n].iov_len -= o->off;
        }
        n++;
      }
    ssize_t w = writev(c->fd, iov, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN) {
        c->want_out = 1;
        update_events(c);
        return -1;
      }
      tc_msgr_conn_fail(c, errno, "write: %s", strerror(errno));
      return -1;
    }
    c->st.bytes_out += (uint64_t) w;
    size_t left = (size_t) w;
    while (!STAILQ_EMPTY(&c->out)) {
      struct tc_out *o = STAILQ_FIRST(&c->out);
      while (o->iovpos < o->iovcnt && left >= o->iov[o->iovpos].iov_len - o->off) {
        left -= o->iov[o->iovpos].iov_len - o->off;
        o->iovpos++;
        o->off = 0;
      }
      if (o->iovpos < o->iovcnt) {
        o->off += left;
        break;
      }
      STAILQ_REMOVE_HEAD(&c->out, next);
      out_complete(c, o, 1);
    }
  }
  return c->state == C_CLOSED ? -1 : 0;
}

/* Write what the socket takes: 0 once everything is written, -1 on
 * EAGAIN (EPOLLOUT is asked for) or when a write error closed c. Never
 * reads. */
static int
write_out(struct tc_msgr_conn *c)
{
  if (c->writing)
    return -1;   /* the outer call goes on */
  c->writing = 1;
  int r = write_some(c);
  c->writing = 0;
  return r;
}

void
tc_msgr_conn_flush(struct tc_msgr_conn *c)
{
  if (write_out(c) < 0)
    return;
  if (c->want_out) {
    c->want_out = 0;
    update_events(c);
  }
  /* Replies written: a paused server may read again (and parse what it
   * already holds). */
  if (c->paused && c->srv_ops < c->m->max_ops && c->out_bytes < c->m->max_bytes &&
      !tc_msgr_budget_conn_full(c)) {
    c->paused = 0;
    update_events(c);
    do_read(c);
  }
}

/* Seal hdr and the payload into o's iovecs (see msgr.h for the modes).
 * sealed: the payload's own-key form, used in gcm (requests only). */
static int
build_frame(struct tc_msgr_conn *c, struct tc_out *o, struct tc_frame_hdr *hdr,
            const struct iovec *iov, int iovcnt, unsigned flags, struct tc_msgr_sealed *sealed)
{
  if (iovcnt < 0 || iovcnt > TC_MSGR_MAX_IOV)
    return tc_error(EINVAL, "frame with %d iovecs (at most %d)", iovcnt, TC_MSGR_MAX_IOV);
  size_t len = 0;
  for (int i = 0; i < iovcnt; i++)
    len += iov[i].iov_len;
  bool gcm = len && c->fr.keyed && c->fr.mode == TC_MODE_GCM;
  if (sealed && sealed->len != len)
    sealed = NULL;
  bool own = gcm && !(hdr->flags & TC_FRAME_REPLY) && (sealed || (flags & TC_MSGR_OWN_KEY));
  hdr->flags = (uint16_t) ((hdr->flags & ~TC_FRAME_OWN_KEY) | (own ? TC_FRAME_OWN_KEY : 0));
  if (tc_frame_seal_hdr(&c->fr, hdr, iov, iovcnt, o->hdr) < 0)
    return -1;
  size_t hw = tc_frame_hdr_wire(&c->fr);
  int n = 0;
  o->iov[n].iov_base = o->hdr;
  o->iov[n++].iov_len = hw;
  if (own)
    return tc_msgr_build_own(c, o, n, iov, iovcnt, len, flags, sealed);
  if (gcm) {
    if (tc_msgr_seal_payload(c, o, n, iov, iovcnt, len, flags, NULL) < 0)
      return -1;
  }
  else {
    for (int i = 0; i < iovcnt; i++)
      if (iov[i].iov_len)
        o->iov[n++] = iov[i];
    o->iovcnt = n;
  }
  o->bytes = hw + tc_frame_payload_wire(&c->fr, (uint32_t) len);
  return 0;
}

int
tc_msgr_seal_payload(struct tc_msgr_conn *c, struct tc_out *o, int n, const struct iovec *iov, int iovcnt,
                     size_t len, unsigned flags, const uint8_t *own_key)
{
  if (flags & TC_MSGR_INPLACE) {
    if ((own_key ? tc_frame_own_seal(&c->fr, own_key, iov, iovcnt, NULL, len, o->tag)
                 : tc_frame_seal_payload(&c->fr, iov, iovcnt, o->tag)) < 0)
      return -1;
    for (int i = 0; i < iovcnt; i++)
      if (iov[i].iov_len)
        o->iov[n++] = iov[i];
    o->iov[n].iov_base = o->tag;
    o->iov[n++].iov_len = TC_FRAME_TAG;
    o->iovcnt = n;
    return 0;
  }
  /* The copy and the sealing in one pass; the tag lands after the
   * ciphertext, so payload and tag go out as one iovec. */
  uint8_t *buf = malloc(len + TC_FRAME_TAG);
  if (!buf)
    return tc_error(ENOMEM, "frame of %zu bytes: out of memory", len);
  if ((own_key ? tc_frame_own_seal(&c->fr, own_key, iov, iovcnt, buf, len, NULL)
               : tc_frame_seal_payload_copy(&c->fr, iov, iovcnt, buf, len)) < 0) {
    free(buf);
    return -1;
  }
  o->owned = buf;
  o->iov[n].iov_base = buf;
  o->iov[n++].iov_len = len + TC_FRAME_TAG;
  o->iovcnt = n;
  return 0;
}

static size_t
iov_len(const struct iovec *iov, int n)
{
  size_t len = 0;
  for (int i = 0; i < n; i++)
    len += iov[i].iov_len;
  return len;
}

static int
admit(const struct tc_msgr_conn *c, uint64_t cost)
{
  return c->ops == 0 || (c->ops < c->m->max_ops && c->bytes + cost <= c->m->max_bytes);
}

static void
send_req(struct tc_msgr_conn *c, struct tc_msgr_req *req)
{
  struct tc_out *o = calloc(1, sizeof *o);
  req->hdr.req_id = ++c->next_req_id;
  req->hdr.flags &= (uint16_t) ~TC_FRAME_REPLY;
  int r = o ? build_frame(c, o, &req->hdr, req->iov, req->iovcnt, req->flags, req->held) : -1;
  tc_msgr_sealed_put(req->held);   /* o holds its own reference if it sends it */
  req->held = NULL;
  if (r < 0) {
    free(o ? o->owned : NULL);
    if (o)
      tc_msgr_sealed_put(o->sealed);
    free(o);
    /* The record counter may have moved: the connection cannot go on. */
    tc_msgr_conn_fail(c, errno ? errno : EIO, "sending request: %s", tc_last_error());
    req->state = REQ_IDLE;
    req->done(req, c->close_err, req->arg);
    return;
  }
  o->req = req;
  req->sent_sealed = o->sealed != NULL;
  req->state = REQ_WRITING;
  req->conn = c;
  int b = req->hdr.req_id % TC_MSGR_HASH;
  req->hnext = c->inflight[b];
  c->inflight[b] = req;
  if (c->ops++ == 0)
    c->busy_since_ms = tc_now_ms();
  c->bytes += req->cost;
  queue_out(c, o);
}

/* Send the waiting requests that fit under the caps, in order. */
static void
pump(struct tc_msgr_conn *c)
{
  while (!STAILQ_EMPTY(&c->waiting) && c->state == C_UP && admit(c, STAILQ_FIRST(&c->waiting)->cost)) {
    struct tc_msgr_req *r = STAILQ_FIRST(&c->waiting);
    STAILQ_REMOVE_HEAD(&c->waiting, next);
    c->nwaiting--;
    send_req(c, r);
  }
}

int
tc_msgr_call(struct tc_msgr_conn *c, struct tc_msgr_req *req)
{
  if (c->state == C_CLOSED)
    return tc_error(ENOTCONN, "request to %s: connection closed", c->peername);
  if (req->iovcnt < 0 || req->iovcnt > TC_MSGR_MAX_IOV)
    return tc_error(EINVAL, "request to %s: %d iovecs (at most %d)", c->peername, req->iovcnt, TC_MSGR_MAX_IOV);
  size_t len = iov_len(req->iov, req->iovcnt);
  if (len > c->m->max_frame)
    return tc_error(EMSGSIZE, "request to %s: %zu bytes, more than max_frame %u", c->peername, len,
                    c->m->max_frame);
  req->cost = len + req->rbuf_len;
  req->conn = c;
  req->reply_payload = NULL;
  req->held = req->sealed ? tc_msgr_sealed_get(req->sealed) : NULL;
  if (c->state == C_UP && STAILQ_EMPTY(&c->waiting) && admit(c, req->cost)) {
    send_req(c, req);
    return 0;
  }
  /* Over the cap or not connected yet: wait in order (no allocation). */
  req->state = REQ_WAITING;
  STAILQ_INSERT_TAIL(&c->waiting, req, next);
  c->nwaiting++;
  return 0;
}

int
tc_msgr_reply(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, const struct iovec *iov, int iovcnt,
              unsigned flags, void (*free_fn)(void *), void *free_arg)
{
  if (c->state != C_UP) {
    if (free_fn)
      free_fn(free_arg);
    return tc_error(ENOTCONN, "reply to %s: connection closed", c->peername);
  }
  tc_msgr_budget_answered(c, hdr->req_id);
  struct tc_out *o = calloc(1, sizeof *o);
  struct tc_frame_hdr h = *hdr;
  h.flags |= TC_FRAME_REPLY;
  if (!o || build_frame(c, o, &h, iov, iovcnt, flags, NULL) < 0) {
    free(o ? o->owned : NULL);
    free(o);
    if (free_fn)
      free_fn(free_arg);
    tc_msgr_conn_fail(c, errno ? errno : EIO, "sending reply: %s", tc_last_error());
    return -1;
  }
  o->is_reply = 1;
  if (o->owned && !(flags & TC_MSGR_INPLACE)) {
    if (free_fn)   /* sealed into our own buffer: the caller's is free now */
      free_fn(free_arg);
  }
  else {
    o->free_fn = free_fn;
    o->free_arg = free_arg;
  }
  queue_out(c, o);
  return 0;
}

static void
hs_done(struct tc_msgr_conn *c)
{
  struct tc_hs *hs = &c->hs;
  c->fr.mode = hs->mode;
  c->fr.max_frame = c->m->max_frame;
  if (hs->keyed &&
      tc_frame_ctx_keys(&c->fr, c->is_server ? hs->s2c : hs->c2s, c->is_server ? hs->c2s : hs->s2c,
                        hs->salt, hs->rekey_log2) < 0) {
    tc_msgr_conn_fail(c, EIO, "keys: %s", tc_last_error());
    return;
  }
  c->peer = hs->ident;
  tc_hs_clear(hs);
  if (c->hs_timer) {
    tc_evloop_timer_cancel(c->m->loop, c->hs_timer);
    c->hs_timer = NULL;
  }
  c->state = C_UP;
  c->rstate = R_HDR;
  tc_info("msgr: %s %s: up, mode %s, %s, peer %s%s%s", peer_word(c), c->peername,
          tc_msgr_mode_name(c->fr.mode), c->fr.keyed ? "AES-256-GCM keys" : "no keys",
          tc_peer_role_name(c->peer.role), c->peer.name[0] ? " " : "", c->peer.name);
  c->up_reported = 1;
  if (c->cb)
    c->cb(c, TC_MSGR_UP, 0, c->cb_arg);
  if (c->state == C_UP)
    pump(c);
}

static struct tc_msgr_req *
inflight_take(struct tc_msgr_conn *c, uint64_t id, int remove)
{
  for (struct tc_msgr_req **p = &c->inflight[id % TC_MSGR_HASH]; *p; p = &(*p)->hnext)
    if ((*p)->hdr.req_id == id) {
      struct tc_msgr_req *r = *p;
      if (remove)
        *p = r->hnext;
      return r;
    }
  return NULL;
}

/* What the frame being received holds in memory until answered: its
 * payload, twice when kept sealed as well. */
static uint64_t
frame_cost(const struct tc_msgr_conn *c)
{
  return (uint64_t) c->cur.len * (c->pl_keep ? 2 : 1);
}

static int
begin_payload(struct tc_msgr_conn *c)
{
  struct tc_frame_hdr *h = &c->cur;
  struct tc_msgr_req *req = NULL;
  if (c->is_server && (h->flags & TC_FRAME_REPLY)) {
    tc_msgr_conn_fail(c, EPROTO, "sent a reply (req_id %" PRIu64 ") to a server", h->req_id);
    return -1;
  }
  if (!c->is_server) {
    if (!(h->flags & TC_FRAME_REPLY)) {
      tc_msgr_conn_fail(c, EPROTO, "sent a request (opcode %u) to a client", h->opcode);
      return -1;
    }
    req = inflight_take(c, h->req_id, 0);
    if (!req || req->state != REQ_SENT) {
      tc_msgr_conn_fail(c, EPROTO, "reply to %s request %" PRIu64, req ? "an unsent" : "an unknown", h->req_id);
      return -1;
    }
  }
  if (c->is_server) {
    uint32_t max = tc_msgr_request_max(c->m, h);
    if (h->len > max) {
      tc_msgr_conn_fail(c, EMSGSIZE, "request (opcode %u) announces %u payload bytes, more than the %u "
                        "its operation allows", h->opcode, h->len, max);
      return -1;
    }
  }
  c->cur_req = req;
  /* Own key (only requests get here with it: tc_frame_open_hdr). */
  c->pl_pre = h->flags & TC_FRAME_OWN_KEY ? TC_FRAME_KEYREC : 0;
  c->pl_keep = c->pl_pre && c->m->keep_sealed && c->m->keep_sealed(h, c->m->keep_arg);
  c->pl_need = c->pl_pre ? c->pl_pre + h->len + TC_FRAME_TAG : tc_frame_payload_wire(&c->fr, h->len);
  c->pl_got = 0;
  c->pl = NULL;
  c->pl_cap = 0;
  c->pl_owned = 0;
  if (h->len && req && req->rbuf && h->len <= req->rbuf_len) {
    c->pl = req->rbuf;
    c->pl_cap = h->len;
  }
  /* Memory for the payload is committed when its bytes arrive (pl_grow):
   * a server reserves all of it against its budgets first and then takes
   * it in one piece; a client grows it as the bytes come. */
  if (c->is_server && h->len && tc_msgr_budget_reserve(c, frame_cost(c)) < 0) {
    c->rstate = R_BUDGET;
    update_events(c);
    return 0;
  }
  c->rstate = R_PAYLOAD;
  return 0;
}

/* Make room for the payload's first want bytes (want <= cur.len). */
static int
pl_grow(struct tc_msgr_conn *c, size_t want)
{
  if (want <= c->pl_cap)
    return 0;
  /* A server reserved the whole payload against its budgets already
   * (begin_payload): take it at once rather than grow it by copies. */
  size_t ncap = c->is_server ? c->cur.len : c->pl_cap ? c->pl_cap * 2 : RBUF_SIZE;
  if (ncap < want)
    ncap = want;
  if (ncap > c->cur.len)
    ncap = c->cur.len;
  uint8_t *p = realloc(c->pl_owned ? c->pl : NULL, ncap);
  if (!p) {
    tc_msgr_conn_fail(c, ENOMEM, "payload of %u bytes: out of memory", c->cur.len);
    return -1;
  }
  c->pl = p;
  c->pl_owned = 1;
  c->pl_cap = ncap;
  return 0;
}

/* A connection waiting for budget: take it now if there is room, and read
 * on. Returns 1 if it goes on. */
int
tc_msgr_conn_budget_retry(struct tc_msgr_conn *c)
{
  if (c->state != C_UP || c->rstate != R_BUDGET || tc_msgr_budget_reserve(c, frame_cost(c)) < 0)
    return 0;
  c->rstate = R_PAYLOAD;
  c->last_rx_ms = tc_now_ms();
  update_events(c);
  do_read(c);
  return 1;
}

static int
finish_payload(struct tc_msgr_conn *c)
{
  if (c->pl_pre ? tc_msgr_open_own(c) < 0 : tc_frame_open_payload(&c->fr, &c->cur, c->pl, c->pl_tag) < 0) {
    tc_msgr_conn_fail(c, EBADMSG, "%s", tc_last_error());
    return -1;
  }
  c->rstate = R_HDR;
  c->st.frames_in++;
  c->big_run = c->cur.len >= DIRECT_READ_MIN;
  void *payload = c->pl;
  c->pl = NULL;
  c->pl_owned = 0;
  struct tc_frame_hdr h = c->cur;
  if (c->is_server) {
    c->srv_ops++;
    if (tc_msgr_budget_deliver(c, h.req_id) < 0) {
      free(payload);
      tc_msgr_conn_fail(c, ENOMEM, "request %" PRIu64 ": %s", h.req_id, tc_last_error());
      return -1;
    }
    if (c->srv_ops >= c->m->max_ops || c->out_bytes >= c->m->max_bytes || tc_msgr_budget_conn_full(c)) {
      c->paused = 1;   /* back-pressure: stop reading until replies go out */
      update_events(c);
    }
    if (c->m->on_request)
      c->m->on_request(c, &h, payload, c->m->arg);
    else
      free(payload);
    tc_msgr_sealed_put(tc_msgr_take_sealed(c));   /* not taken */
    return 0;
  }
  struct tc_msgr_req *req = c->cur_req;
  c->cur_req = NULL;
  inflight_take(c, h.req_id, 1);
  c->ops--;
  c->bytes -= req->cost;
  req->reply = h;
  req->reply_payload = payload;
  req->state = REQ_IDLE;
  req->done(req, 0, req->arg);
  if (c->state == C_UP)
    pump(c);
  return 0;
}

/* Process what the read buffer holds. -1 once the connection is closed. */
static int
parse(struct tc_msgr_conn *c)
{
  for (;;) {
    if (c->state == C_CLOSED)
      return -1;
    size_t avail = c->rlen - c->rpos;
    if (c->state == C_HANDSHAKE) {
      size_t used = 0;
      int r = tc_hs_feed(&c->hs, c->rbuf + c->rpos, avail, &used, &c->hsout);
      c->rpos += used;
      if (r < 0) {
        int e = errno;
        char msg[600];
        snprintf(msg, sizeof msg, "%s", tc_last_error());
        if (c->hsout.len) {
          /* Best effort: tell the peer why before closing. */
          if (write(c->fd, c->hsout.p, c->hsout.len) < 0) { /* nothing more to do */ }
          c->hsout.len = 0;
        }
        tc_msgr_conn_fail(c, e ? e : EPROTO, "handshake refused: %s", msg);
        return -1;
      }
      if (c->hsout.len && queue_raw(c, &c->hsout) < 0) {
        tc_msgr_conn_fail(c, ENOMEM, "handshake: %s", tc_last_error());
        return -1;
      }
      if (r == 0)
        return 0;
      hs_done(c);
      continue;
    }
    if (c->state != C_UP || c->paused || c->rstate == R_BUDGET)
      return 0;
    if (c->rstate == R_HDR) {
      size_t hw = tc_frame_hdr_wire(&c->fr);
      /* A server that refuses our certificate answers our Finished with an
       * alert, which arrives where we expect the first frame. */
      if (!c->is_server && c->st.frames_in == 0 && avail >= 4 &&
          !memcmp(c->rbuf + c->rpos, (const uint8_t[4]) { 0x0f, TC_PROTO_VERSION, 0, 0 }, 4)) {
        const uint8_t *a = c->rbuf + c->rpos;
        if (avail < 8)
          return 0;
        uint32_t alen = a[4] | a[5] << 8 | (uint32_t) a[6] << 16 | (uint32_t) a[7] << 24;
        if (alen >= 2 && alen <= 402) {
          if (avail < 8 + alen)
            return 0;
          char text[401];
          size_t n = alen - 2;
          for (size_t i = 0; i < n; i++)
            text[i] = a[10 + i] >= 0x20 && a[10 + i] < 0x7f ? (char) a[10 + i] : '?';
          text[n] = 0;
          tc_msgr_conn_fail(c, ECONNREFUSED, "handshake refused: server refused the handshake: %s", text);
          return -1;
        }
      }
      if (avail < hw)
        return 0;
      if (tc_frame_open_hdr(&c->fr, c->rbuf + c->rpos, &c->cur) < 0) {
        tc_msgr_conn_fail(c, EBADMSG, "%s", tc_last_error());
        return -1;
      }
      c->rpos += hw;
      if (begin_payload(c) < 0)
        return -1;
      continue;
    }
    size_t need = c->pl_need - c->pl_got;
    size_t n = avail < need ? avail : need;
    /* The wire holds [key record] payload [tag]; pos counts payload bytes. */
    size_t pre = c->pl_pre, end = c->pl_got + n;
    size_t upto = end <= pre ? 0 : end - pre < c->cur.len ? end - pre : c->cur.len;
    if (pl_grow(c, upto) < 0)
      return -1;
    for (size_t done = 0; done < n;) {
      size_t at = c->pl_got + done;
      size_t k;
      if (at < pre) {
        k = pre - at < n - done ? pre - at : n - done;
        memcpy(c->pl_keyrec + at, c->rbuf + c->rpos + done, k);
      }
      else if (at - pre < c->cur.len) {
        size_t pos = at - pre;
        k = c->cur.len - pos < n - done ? c->cur.len - pos : n - done;
        memcpy(c->pl + pos, c->rbuf + c->rpos + done, k);
      }
      else {
        k = n - done;
        memcpy(c->pl_tag + (at - pre - c->cur.len), c->rbuf + c->rpos + done, k);
      }
      done += k;
    }
    c->rpos += n;
    c->pl_got += n;
    if (c->pl_got < c->pl_need)
      return 0;
    if (finish_payload(c) < 0)
      return -1;
  }
}

static void
do_read(struct tc_msgr_conn *c)
{
  for (int round = 0; round < tc_msgr_read_rounds; round++) {
    if (parse(c) < 0 || c->paused || c->rstate == R_BUDGET)
      return;
    ssize_t n;
    size_t pos = c->pl_got - c->pl_pre;   /* payload bytes in (when past the key record) */
    if (c->rstate == R_PAYLOAD && c->state == C_UP && c->rpos == c->rlen && c->pl_got >= c->pl_pre &&
        pos < c->cur.len && c->cur.len - pos >= DIRECT_READ_MIN) {
      if (pl_grow(c, pos + DIRECT_READ_MIN) < 0)
        return;
      n = read(c->fd, c->pl + pos, c->pl_cap - pos);
      if (n > 0) {
        c->pl_got += (size_t) n;
        c->st.bytes_in += (uint64_t) n;
        c->last_rx_ms = tc_now_ms();
        continue;
      }
    }
    else {
      if (c->rpos == c->rlen)
        c->rpos = c->rlen = 0;
      else if (c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
      }
      size_t room = c->rcap - c->rlen;
      /* While large payloads flow, read no further than the next header:
       * its payload then goes straight into its own buffer (the direct
       * read above) instead of being copied out of rbuf. */
      if (c->big_run && c->state == C_UP) {
        /* The next header (and its key record, if the last frame had one),
         * the rest of a key record, or the rest of a small payload and the
         * next header. */
        size_t hw = tc_frame_hdr_wire(&c->fr);
        size_t upto = c->rstate != R_PAYLOAD ? hw + c->pl_pre
                    : c->pl_got < c->pl_pre ? c->pl_pre - c->pl_got
                    : c->pl_need - c->pl_got + hw;
        size_t have = c->rlen - c->rpos;
        if (upto > have && upto - have < room)
          room = upto - have;
      }
      n = read(c->fd, c->rbuf + c->rlen, room);
      if (n > 0) {
        c->rlen += (size_t) n;
        c->st.bytes_in += (uint64_t) n;
        c->last_rx_ms = tc_now_ms();
        continue;
      }
    }
    if (n == 0) {
      int clean = c->state == C_UP && c->rstate == R_HDR && c->rpos == c->rlen;
      c->clean_eof = clean;
      if (clean)
        tc_msgr_conn_fail(c, ECONNRESET, "closed by the peer");
      else
        tc_msgr_conn_fail(c, EPIPE, "closed by the peer in the middle of %s (truncated)",
                          c->state == C_UP ? "a frame" : "the handshake");
      return;
    }
    if (errno == EAGAIN)
      return;
    if (errno != EINTR) {
      tc_msgr_conn_fail(c, errno, "read: %s", strerror(errno));
      return;
    }
  }
  /* Out of rounds: process what the last read brought (the rest of the
   * socket's data wakes us again, level-triggered). */
  parse(c);
}

void
tc_msgr_conn_start(struct tc_msgr_conn *c)
{
  c->state = C_HANDSHAKE;
  if (!c->is_server) {
    if (tc_hs_start(&c->hs, &c->hsout) < 0 || queue_raw(c, &c->hsout) < 0) {
      tc_msgr_conn_fail(c, EIO, "handshake: %s", tc_last_error());
      return;
    }
  }
  update_events(c);
}

static void
conn_event(struct tc_evloop *loop, int fd, uint32_t events, void *arg)
{
  struct tc_msgr_conn *c = arg;
  if (c->state == C_CONNECTING) {
    int err = 0;
    socklen_t sl = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
      err = errno;
    if (err) {
      tc_msgr_conn_fail(c, err, "connect: %s", strerror(err));
      return;
    }
    tc_msgr_conn_start(c);
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
    do_read(c);
  if (c->state != C_CLOSED && (events & EPOLLOUT))
    tc_msgr_conn_flush(c);
}

int
tc_msgr_conn_mode(const struct tc_msgr_conn *c)
{
  return c->fr.mode;
}

int
tc_msgr_conn_keyed(const struct tc_msgr_conn *c)
{
  return c->fr.keyed;
}

const struct tc_msgr_identity *
tc_msgr_conn_peer(const struct tc_msgr_conn *c)
{
  return &c->peer;
}

const char *
tc_msgr_conn_peername(const struct tc_msgr_conn *c)
{
  return c->peername;
}

void
tc_msgr_conn_set_data(struct tc_msgr_conn *c, void *data)
{
  c->data = data;
}

void *
tc_msgr_conn_get_data(const struct tc_msgr_conn *c)
{
  return c->data;
}

const char *
tc_msgr_conn_close_reason(const struct tc_msgr_conn *c)
{
  return c->close_reason;
}

void
tc_msgr_conn_stats(const struct tc_msgr_conn *c, struct tc_msgr_stats *st)
{
  *st = c->st;
  st->rekeys = c->fr.tx.rekeys + c->fr.rx.rekeys;
  st->inflight_ops = c->is_server ? c->srv_ops : c->ops;
  st->inflight_bytes = c->is_server ? c->out_bytes : c->bytes;
  st->waiting = c->nwaiting;
}
