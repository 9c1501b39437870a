/* Requests to OSDs on a private loop (see osd_call.h). */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "evloop.h"
#include "msgr.h"
#include "osd_call.h"
#include "osd_proto.h"

struct call {
  struct tc_msgr_req req;
  struct tc_msgr_conn *conn;
  struct cli_osd_reply *r;
  int done;
};

static void
call_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct call *c = arg;
  c->done = 1;
  c->r->status = err ? err : req->reply.status;
  if (!err && req->reply_payload) {
    /* a copy with a NUL after it: the callers parse it as text */
    size_t len = req->reply.len;
    c->r->payload = malloc(len + 1);
    if (c->r->payload) {
      memcpy(c->r->payload, req->reply_payload, len);
      c->r->payload[len] = 0;
      c->r->len = len;
    } else if (c->r->status >= 0)
      c->r->status = -ENOMEM;
  }
  free(req->reply_payload);
  req->reply_payload = NULL;
}

static void
conn_event(struct tc_msgr_conn *conn, int event, int err, void *arg)
{
  (void) conn;
  (void) event;
  (void) err;
  (void) arg;   /* a connection that fails fails its request through call_done */
}

int
cli_osd_call_all(const struct tc_config *cfg, const struct tc_osd_addr *osds, size_t n, uint16_t opcode,
                 int timeout_ms, struct cli_osd_reply *r)
{
  memset(r, 0, n * sizeof *r);
  struct tc_evloop *loop = tc_evloop_new();
  struct tc_msgr *m = loop ? tc_msgr_new_from_config(loop, cfg, 0) : NULL;
  struct call *calls = n ? calloc(n, sizeof *calls) : NULL;
  if (!loop || !m || (n && !calls)) {
    if (!loop || (m && n && !calls))
      tc_error(ENOMEM, "out of memory");
    if (m)
      tc_msgr_free(m);
    if (loop)
      tc_evloop_free(loop);
    free(calls);
    return -1;
  }
  size_t pending = 0;
  for (size_t i = 0; i < n; i++) {
    struct call *c = &calls[i];
    c->r = &r[i];
    r[i].osd = osds[i].id;
    r[i].status = -ETIMEDOUT;
    c->req.hdr.opcode = opcode;
    c->req.done = call_done;
    c->req.arg = c;
    c->conn = osds[i].addr ? tc_msgr_connect(m, osds[i].addr, osds[i].port, conn_event, NULL) : NULL;
    if (!c->conn || tc_msgr_call(c->conn, &c->req) < 0) {
      r[i].status = -EHOSTUNREACH;
      c->done = 1;
      continue;
    }
    pending++;
  }
  uint64_t deadline = tc_now_ms() + (uint64_t) timeout_ms;
  while (pending && tc_now_ms() < deadline) {
    tc_evloop_run_once(loop, 50);
    pending = 0;
    for (size_t i = 0; i < n; i++)
      pending += !calls[i].done;
  }
  /* Closing fails the requests still waiting (their done runs with an
   * error and frees any payload); the loop runs until every DOWN ran. */
  for (size_t i = 0; i < n; i++)
    if (calls[i].conn)
      tc_msgr_close(calls[i].conn);
  for (int k = 0; k < 20; k++)
    tc_evloop_run_once(loop, 5);
  tc_msgr_free(m);
  tc_evloop_free(loop);
  for (size_t i = 0; i < n; i++)
    if (!calls[i].done)
      r[i].status = -ETIMEDOUT;
  free(calls);
  return 0;
}

void
cli_osd_replies_free(struct cli_osd_reply *r, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(r[i].payload);
    r[i].payload = NULL;
  }
}
