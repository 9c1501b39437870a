/* The KV client's loop: non-blocking calls (and watch streams) on one curl
 * multi handle, run by a background thread or by the caller's event loop. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cleanup.h"
#include "error.h"
#include "kv_int.h"
#include "log.h"

_Thread_local struct tc_kv *kv_tl_loop;


void
kv_xfer_free(struct xfer *x)
{
  if (!x)
    return;
  if (x->easy)
    curl_easy_cleanup(x->easy);
  curl_slist_free_all(x->hdrs);
  free(x->resp.p);
  free(x->body);
  free(x);
}

/* Start x on endpoint x->ep. */
int
kv_xfer_start(struct tc_kv *kv, struct xfer *x);


int
kv_xfer_start(struct tc_kv *kv, struct xfer *x)
{
  if (!x->easy && !(x->easy = curl_easy_init()))
    return tc_error(ENOMEM, "kv: out of memory");
  curl_easy_reset(x->easy);
  x->resp.len = 0;
  kv_setup_easy(kv, x->easy, x->ep, x->path, x->body, x->hdrs, x->kind == X_WATCH);
  if (x->kind == X_WATCH) {
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, kv_watch_write);
    curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x->w);
  }
  else {
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, kv_buf_write);
    curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, &x->resp);
  }
  curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
  x->quiet = (struct silence) { 0 };
  if (curl_multi_add_handle(kv->multi, x->easy) != CURLM_OK)
    return tc_error(EIO, "kv: curl_multi_add_handle failed");
  x->next = kv->active;
  kv->active = x;
  return 0;
}

static void
unlink_active(struct tc_kv *kv, struct xfer *x)
{
  for (struct xfer **p = &kv->active; *p; p = &(*p)->next)
    if (*p == x) {
      *p = x->next;
      break;
    }
  curl_multi_remove_handle(kv->multi, x->easy);
}

void
kv_complete_req(struct xfer *x, int err, const char *msg, struct tc_kv_result *res)
{
  struct tc_kv_result empty = { 0 };
  if (x->cb)
    x->cb(x->arg, err, msg, res ? res : &empty);
  if (res)
    tc_kv_result_free(res);
}

/* Free a watch the loop is done with (or mark it for its canceller). */
void
kv_watch_reap(struct tc_kv *kv, struct tc_kv_watch *w)
{
  for (struct tc_kv_watch **p = &kv->watches; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  if (w->x) {
    unlink_active(kv, w->x);
    kv_xfer_free(w->x);
    w->x = NULL;
  }
  if (w->free_on_reap) {
    json_tokener_free(w->tok);
    free(w->key);
    free(w->range_end);
    free(w);
    return;
  }
  w->dead = true;
  pthread_cond_broadcast(&kv->cond);
}

/* The first queued request whose endpoint has a free connection, taken
 * off the queue and counted on it; NULL if none (under kv->lock). A
 * request not yet tried goes to the endpoint in use now; one failing over
 * keeps the endpoint it was given. */
static struct xfer *
queue_take(struct tc_kv *kv)
{
  for (struct xfer **p = &kv->queue, *prev = NULL; *p; prev = *p, p = &(*p)->next) {
    struct xfer *x = *p;
    int ep = x->tried ? x->ep : kv->cur;
    if (kv->n_active_ep[ep] >= CONNS_PER_ENDPOINT)
      continue;
    *p = x->next;
    if (kv->queue_tail == x)
      kv->queue_tail = prev;
    x->next = NULL;
    x->ep = ep;
    kv->n_active_ep[ep]++;
    return x;
  }
  return NULL;
}

/* Take the queue and the canceled watches (on the loop thread). */
static void
process_queue(struct tc_kv *kv)
{
  for (;;) {
    struct xfer *x;
    {
      SCOPED_LOCK(&kv->lock);
      if (!(x = queue_take(kv)))
        break;
    }
    if (kv_xfer_start(kv, x) < 0) {
      {
        SCOPED_LOCK(&kv->lock);
        kv->n_active_ep[x->ep]--;
      }
      kv_complete_req(x, errno, tc_last_error(), NULL);
      kv_xfer_free(x);
    }
  }
  for (;;) {
    struct tc_kv_watch *w = NULL;
    {
      SCOPED_LOCK(&kv->lock);
      for (w = kv->watches; w; w = w->next)
        if (w->cancel || !w->started)
          break;
      if (w && w->cancel) {
        kv_watch_reap(kv, w);
        continue;
      }
      if (w)
        w->started = true;
    }
    if (!w)
      break;
    if (kv_watch_connect(w) < 0) {
      tc_warn("kv: watch: %s", tc_last_error());
      w->retry_at = kv_now_s() + 0.5;
    }
  }
}

static void
schedule_reconnect(struct tc_kv_watch *w, bool failed)
{
  struct tc_kv *kv = w->kv;
  if (failed) {
    SCOPED_LOCK(&kv->lock);
    /* Move everyone off an endpoint that failed. */
    if (kv->cur == w->ep)
      kv->cur = (w->ep + 1) % kv->n_urls;
    w->ep = kv->cur;
  }
  if (w->reconnect_now) {
    w->reconnect_now = false;
    w->retry_at = kv_now_s();
    return;
  }
  w->retry_at = kv_now_s() + w->backoff_ms / 1e3;
  w->backoff_ms = w->backoff_ms * 2 > 2000 ? 2000 : w->backoff_ms * 2;
}

/* A transfer is over (off the multi handle) with rc: deliver, fail over
 * or reconnect. */
static void
xfer_done(struct tc_kv *kv, struct xfer *x, CURLcode rc)
{
  if (x->kind == X_WATCH) {
    struct tc_kv_watch *w = x->w;
    if (!w->reconnect_now)
      tc_debug("kv: watch stream from %s ended: %s", kv->urls[x->ep],
               rc == CURLE_OK ? "closed by the server" : curl_easy_strerror(rc));
    w->x = NULL;
    kv_xfer_free(x);
    schedule_reconnect(w, !w->reconnect_now);
    return;
  }
  {
    struct tc_kv_result res;
    memset(&res, 0, sizeof res);
    enum attempt a = kv_finish_attempt(kv, &x->req, x->ep, x->easy, rc, &x->resp, &res);
    {
      SCOPED_LOCK(&kv->lock);
      kv->n_active_ep[x->ep]--;
      if (a == A_DONE)
        kv->cur = x->ep;
      else if (a == A_NEXT_ENDPOINT && ++x->tried < kv->n_urls) {
        /* Fail over: first in line for a connection to the next one, and
         * send the requests still queued there too. */
        if (kv->cur == x->ep)
          kv->cur = (x->ep + 1) % kv->n_urls;
        x->ep = (x->ep + 1) % kv->n_urls;
        x->next = kv->queue;
        kv->queue = x;
        if (!kv->queue_tail)
          kv->queue_tail = x;
        return;
      }
    }
    if (a == A_DONE)
      kv_complete_req(x, 0, NULL, &res);
    else {
      char msg[1024];
      int err = errno;
      snprintf(msg, sizeof msg, "%s", tc_last_error());
      kv_complete_req(x, err, msg, NULL);
    }
    kv_xfer_free(x);
  }
}

/* Handle finished transfers. */
static void
process_done(struct tc_kv *kv)
{
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(kv->multi, &left))) {
    if (m->msg != CURLMSG_DONE)
      continue;
    struct xfer *x;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &x);
    CURLcode rc = m->data.result;
    unlink_active(kv, x);
    xfer_done(kv, x, rc);
  }
}

/* How often the loop looks for silent requests while any is on the multi. */
#define SILENCE_TICK 0.1

/* Fail the requests whose server went silent (they then fail over);
 * returns seconds until the next look (a large number: none active). */
static double
check_silence(struct tc_kv *kv)
{
  double now = kv_now_s();
  bool any = false;
  for (struct xfer *x = kv->active, *next; x; x = next) {
    next = x->next;
    if (x->kind != X_REQ)
      continue;
    if (!kv_silent_for(&x->quiet, x->easy, kv->request_ms, now)) {
      any = true;
      continue;
    }
    unlink_active(kv, x);
    xfer_done(kv, x, CURLE_OPERATION_TIMEDOUT);
  }
  return any ? SILENCE_TICK : 1e9;
}

/* check_silence when due; returns seconds until it is due again. */
static double
service_silence(struct tc_kv *kv)
{
  double now = kv_now_s();
  if (!kv->silence_due || kv->silence_due <= now) {
    double next = check_silence(kv);
    kv->silence_due = next < 1e8 ? now + next : 0;
  }
  return kv->silence_due ? kv->silence_due - now : 1e9;
}

/* Reconnect watches that are due; returns seconds until the next one (or
 * a large number). */
static double
service_retries(struct tc_kv *kv)
{
  double now = kv_now_s(), next = 1e9;
  for (struct tc_kv_watch *w = kv->watches; w; w = w->next) {
    if (w->x || w->cancel || !w->started || !w->retry_at)
      continue;
    if (w->retry_at <= now) {
      w->retry_at = 0;
      if (kv_watch_connect(w) < 0) {
        tc_warn("kv: watch: %s", tc_last_error());
        w->retry_at = now + 0.5;
      }
    }
    if (w->retry_at && w->retry_at - now < next)
      next = w->retry_at - now;
  }
  return next;
}

static void *
loop_thread(void *arg)
{
  struct tc_kv *kv = arg;
  kv_tl_loop = kv;
  for (;;) {
    {
      SCOPED_LOCK(&kv->lock);
      if (kv->stop)
        break;
    }
    process_queue(kv);
    int running;
    curl_multi_perform(kv->multi, &running);
    process_done(kv);
    double next = service_silence(kv);
    /* Completions free room for queued requests: start them now. */
    process_queue(kv);
    double retry = service_retries(kv);
    if (retry < next)
      next = retry;
    int ms = next > 1 ? 1000 : (int) (next * 1000) + 1;
    curl_multi_poll(kv->multi, NULL, 0, ms, NULL);
  }
  return NULL;
}

/* External loop: curl's socket and timer callbacks go to the loop's ops. */
static int
sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
  struct tc_kv *kv = userp;
  int ev = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
    ev |= TC_KV_POLL_IN;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
    ev |= TC_KV_POLL_OUT;
  kv->ops->watch_fd(kv->loop, s, what == CURL_POLL_REMOVE ? 0 : ev);
  return 0;
}

static int
timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
  struct tc_kv *kv = userp;
  kv->curl_due = timeout_ms < 0 ? 0 : kv_now_s() + timeout_ms / 1e3;
  return 0;
}

/* Ask the external loop for one timer: the earlier of curl's and ours. */
static void
rearm(struct tc_kv *kv)
{
  double now = kv_now_s(), due = kv->curl_due;
  if (kv->silence_due && (!due || kv->silence_due < due))
    due = kv->silence_due;
  for (struct tc_kv_watch *w = kv->watches; w; w = w->next)
    if (!w->x && w->retry_at && (!due || w->retry_at < due))
      due = w->retry_at;
  kv->ops->set_timer(kv->loop, !due ? -1 : due <= now ? 0 : (long) ((due - now) * 1000) + 1);
}

int
tc_kv_attach_loop(struct tc_kv *kv, const struct tc_kv_loop_ops *ops, void *loop)
{
  SCOPED_LOCK(&kv->lock);
  if (kv->loop_ready)
    return tc_error(EBUSY, "kv: the client already runs a loop");
  if (!(kv->multi = curl_multi_init()))
    return tc_error(ENOMEM, "kv: out of memory");
  kv->ops = ops;
  kv->loop = loop;
  kv->external = true;
  curl_multi_setopt(kv->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
  curl_multi_setopt(kv->multi, CURLMOPT_SOCKETDATA, kv);
  curl_multi_setopt(kv->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(kv->multi, CURLMOPT_TIMERDATA, kv);
  kv->loop_ready = true;
  return 0;
}

void
tc_kv_loop_fd_ready(struct tc_kv *kv, int fd, int events)
{
  int running, mask = 0;
  kv_tl_loop = kv;
  if (events & TC_KV_POLL_IN) mask |= CURL_CSELECT_IN;
  if (events & TC_KV_POLL_OUT) mask |= CURL_CSELECT_OUT;
  curl_multi_socket_action(kv->multi, fd, mask, &running);
  process_done(kv);
  service_silence(kv);
  process_queue(kv);
  rearm(kv);
}

void
tc_kv_loop_timeout(struct tc_kv *kv)
{
  int running;
  kv_tl_loop = kv;
  if (kv->curl_due && kv->curl_due <= kv_now_s() + 0.0005) {
    kv->curl_due = 0;
    curl_multi_socket_action(kv->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  }
  process_done(kv);
  service_silence(kv);
  service_retries(kv);
  process_queue(kv);
  rearm(kv);
}

void
tc_kv_loop_wakeup(struct tc_kv *kv)
{
  kv_tl_loop = kv;
  process_queue(kv);
  process_done(kv);
  service_silence(kv);
  process_queue(kv);
  rearm(kv);
}

/* Make sure a loop runs (start the background thread if none); then wake it. */
int
kv_loop_kick(struct tc_kv *kv)
{
  bool external;
  {
    SCOPED_LOCK(&kv->lock);
    if (!kv->loop_ready) {
      if (!(kv->multi = curl_multi_init()))
        return tc_error(ENOMEM, "kv: out of memory");
      int r = pthread_create(&kv->thread, NULL, loop_thread, kv);
      if (r) {
        curl_multi_cleanup(kv->multi);
        kv->multi = NULL;
        return tc_error(r, "kv: cannot start the loop thread: %s", strerror(r));
      }
      kv->loop_ready = true;
    }
    external = kv->external;
  }
  if (external) {
    if (kv_tl_loop != kv)
      kv->ops->wakeup(kv->loop);
  }
  else
    curl_multi_wakeup(kv->multi);
  return 0;
}

int
tc_kv_submit(struct tc_kv *kv, const struct tc_kv_request *req, tc_kv_done_fn cb, void *arg)
{
  struct xfer *x = calloc(1, sizeof *x);
  if (!x)
    return tc_error(ENOMEM, "kv: out of memory");
  x->kind = X_REQ;
  x->kv = kv;
  x->cb = cb;
  x->arg = arg;
  x->req.type = req->type;
  x->req.op.type = req->op.type;
  x->req.lease_id = req->lease_id;
  x->body = tc_kv_encode(req, &x->path);
  x->hdrs = kv_http_headers();
  if (!x->body || !x->hdrs) {
    if (x->body)
      tc_error(ENOMEM, "kv: out of memory");
    kv_xfer_free(x);
    return -1;
  }
  {
    SCOPED_LOCK(&kv->lock);
    x->ep = kv->cur;
    x->next = NULL;
    if (kv->queue_tail)
      kv->queue_tail->next = x;
    else
      kv->queue = x;
    kv->queue_tail = x;
  }
  return kv_loop_kick(kv);
}

