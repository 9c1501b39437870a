/* Limits against hostile peers on a messenger server (msgr.h, DESIGN.md
 * section 5): caps on accepted connections, the per-operation frame limit,
 * payload budgets per connection and per endpoint, and the sweep that
 * closes stalled and idle connections. All on the loop thread. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "msgr_int.h"

#define SWEEP_MS 1000

int
tc_msgr_admit_conn(struct tc_msgr *m, const char *addr)
{
  if (m->nserved >= m->max_conns)
    return tc_error(EMFILE, "%u connections already (msgr_max_conns)", m->nserved);
  uint32_t same = 0;
  for (const struct tc_msgr_conn *c = m->conns; c; c = c->next)
    if (c->is_server && !strcmp(c->peeraddr, addr) && ++same >= m->max_conns_per_addr)
      return tc_error(EMFILE, "%u connections from %s already (msgr_max_conns_per_addr)", same, addr);
  return 0;
}

uint32_t
tc_msgr_request_max(const struct tc_msgr *m, const struct tc_frame_hdr *h)
{
  if (!m->request_limit)
    return m->max_frame;
  uint32_t lim = m->request_limit(h, m->limit_arg);
  return lim < m->max_frame ? lim : m->max_frame;
}

void
tc_msgr_set_request_limit(struct tc_msgr *m, tc_msgr_limit_cb fn, void *arg)
{
  m->request_limit = fn;
  m->limit_arg = arg;
}

int
tc_msgr_budget_reserve(struct tc_msgr_conn *c, uint64_t len)
{
  struct tc_msgr *m = c->m;
  /* A connection holding nothing may always take one frame up to its
   * budget, so one large request never waits for itself. */
  if (c->srv_bytes && c->srv_bytes + len > m->conn_budget)
    return -1;
  /* OSD peers are exempt from the endpoint's budget (still counted): a
   * primary's SEC_WRITE must not wait behind the client writes it serves. */
  if (c->peer.role != TC_ROLE_OSD && m->committed + len > m->budget)
    return -1;
  c->srv_bytes += len;
  c->pl_reserved = len;
  m->committed += len;
  return 0;
}

static void
release(struct tc_msgr_conn *c, uint64_t bytes)
{
  struct tc_msgr *m = c->m;
  c->srv_bytes -= bytes;
  m->committed -= bytes;
  if (bytes && !m->wake_budget) {
    m->wake_budget = 1;
    tc_msgr_schedule_post(m);
  }
}

int
tc_msgr_budget_deliver(struct tc_msgr_conn *c, uint64_t req_id)
{
  uint64_t bytes = c->pl_reserved;
  c->pl_reserved = 0;
  if (!bytes)
    return 0;
  struct tc_msgr_pending *p = malloc(sizeof *p);
  if (!p) {
    release(c, bytes);
    return tc_error(ENOMEM, "out of memory");
  }
  p->req_id = req_id;
  p->bytes = bytes;
  p->next = c->pending[req_id % TC_MSGR_HASH];
  c->pending[req_id % TC_MSGR_HASH] = p;
  return 0;
}

void
tc_msgr_budget_answered(struct tc_msgr_conn *c, uint64_t req_id)
{
  for (struct tc_msgr_pending **pp = &c->pending[req_id % TC_MSGR_HASH]; *pp; pp = &(*pp)->next)
    if ((*pp)->req_id == req_id) {
      struct tc_msgr_pending *p = *pp;
      *pp = p->next;
      release(c, p->bytes);
      free(p);
      return;
    }
}

void
tc_msgr_budget_release_all(struct tc_msgr_conn *c)
{
  for (int i = 0; i < TC_MSGR_HASH; i++)
    while (c->pending[i]) {
      struct tc_msgr_pending *p = c->pending[i];
      c->pending[i] = p->next;
      free(p);
    }
  if (c->srv_bytes)
    release(c, c->srv_bytes);
  c->pl_reserved = 0;
}

int
tc_msgr_budget_conn_full(const struct tc_msgr_conn *c)
{
  return c->srv_bytes >= c->m->conn_budget;
}

void
tc_msgr_ep_stats(const struct tc_msgr *m, struct tc_msgr_ep_stats *st)
{
  st->conns = m->nserved;
  st->refused = m->refused_conns;
  st->committed = m->committed;
}

/* Whether c holds part of a frame (a stall there is the peer's doing). */
static int
mid_frame(const struct tc_msgr_conn *c)
{
  return (c->rstate == R_PAYLOAD) || (c->rstate == R_HDR && c->rpos < c->rlen);
}

/* The id of the oldest request in flight on c (ids only grow). */
static uint64_t
oldest_inflight(const struct tc_msgr_conn *c)
{
  uint64_t min = UINT64_MAX;
  for (int b = 0; b < TC_MSGR_HASH; b++)
    for (const struct tc_msgr_req *r = c->inflight[b]; r; r = r->hnext)
      if (r->hdr.req_id < min)
        min = r->hdr.req_id;
  return min;
}

static void
sweep(struct tc_evloop *loop, void *arg)
{
  struct tc_msgr *m = arg;
  uint64_t now = tc_now_ms();
  struct tc_msgr_conn *next;
  for (struct tc_msgr_conn *c = m->conns; c; c = next) {
    next = c->next;
    if (!c->is_server && m->call_timeout_ms > 0 && c->state == C_UP && c->ops > 0) {
      /* Our requests wait and the peer sends nothing: hung, or cut off
       * with its kernel still taking our bytes (or TCP retrying for
       * minutes): close, so the requests fail over. */
      uint64_t since = c->last_rx_ms > c->busy_since_ms ? c->last_rx_ms : c->busy_since_ms;
      uint64_t oldest = oldest_inflight(c);
      if (oldest != c->oldest_id || !c->oldest_since_ms) {
        c->oldest_id = oldest;
        c->oldest_since_ms = now;
      }
      if (now > since && now - since >= (uint64_t) m->call_timeout_ms)
        tc_msgr_conn_fail(c, ETIMEDOUT, "no reply for %" PRIu64 " ms with %" PRIu32 " requests in flight: peer hung or"
                          " cut off", now - since, c->ops);
      else if (now - c->oldest_since_ms >= 2 * (uint64_t) m->call_timeout_ms)
        /* Replies come, but not to this one: a peer that lost it (or sits
         * on it) would hold its caller for ever; twice the timeout, as a
         * peer may rightly wait one timeout for a peer of its own. */
        tc_msgr_conn_fail(c, ETIMEDOUT, "request %" PRIu64 " unanswered for %" PRIu64 " ms while later ones were: "
                          "peer lost it", oldest, now - c->oldest_since_ms);
      continue;
    }
    if (!c->is_server || c->state != C_UP || c->paused || c->rstate == R_BUDGET)
      continue;   /* waiting on us, not on the peer */
    uint64_t quiet = now - c->last_rx_ms;
    if (mid_frame(c) && quiet >= (uint64_t) m->frame_timeout_ms)
      tc_msgr_conn_fail(c, ETIMEDOUT, "frame stalled: nothing received for %" PRIu64 " ms (msgr_frame_timeout)",
                        quiet);
    else if (!mid_frame(c) && c->peer.role != TC_ROLE_OSD && c->srv_ops == 0 && STAILQ_EMPTY(&c->out) &&
             quiet >= (uint64_t) m->idle_timeout_ms)
      tc_msgr_conn_fail(c, ETIMEDOUT, "idle for %" PRIu64 " ms (msgr_idle_timeout)", quiet);
  }
  m->sweep_timer = tc_evloop_timer_add(loop, SWEEP_MS, sweep, m);
  if (!m->sweep_timer)
    tc_warn("msgr: port %d: cannot re-arm the timeout sweep: %s", m->listen_port, tc_last_error());
}

int
tc_msgr_set_call_timeout(struct tc_msgr *m, int ms)
{
  m->call_timeout_ms = ms > 0 ? ms : 0;
  return ms > 0 ? tc_msgr_sweep_start(m) : 0;
}

int
tc_msgr_sweep_start(struct tc_msgr *m)
{
  if (m->sweep_timer)
    return 0;
  m->sweep_timer = tc_evloop_timer_add(m->loop, SWEEP_MS, sweep, m);
  return m->sweep_timer ? 0 : -1;
}

void
tc_msgr_sweep_stop(struct tc_msgr *m)
{
  if (m->sweep_timer) {
    tc_evloop_timer_cancel(m->loop, m->sweep_timer);
    m->sweep_timer = NULL;
  }
}
