/* The KV client's blocking calls, on pooled curl easy handles. */
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

/* An idle blocking handle, or a new one while fewer than BLOCKING_CONNS
 * exist; else wait for one (the wait does not count against the request's
 * timeouts). NULL: out of memory. */
static CURL *
pool_get(struct tc_kv *kv)
{
  {
    SCOPED_LOCK(&kv->lock);
    while (!kv->n_pool && kv->n_easy >= BLOCKING_CONNS)
      pthread_cond_wait(&kv->pool_cond, &kv->lock);
    if (kv->n_pool)
      return kv->pool[--kv->n_pool];
    kv->n_easy++;
  }
  CURL *e = curl_easy_init();
  if (!e) {
    SCOPED_LOCK(&kv->lock);
    kv->n_easy--;
    pthread_cond_signal(&kv->pool_cond);
  }
  return e;
}

static void
pool_put(struct tc_kv *kv, CURL *e)
{
  SCOPED_LOCK(&kv->lock);
  kv->pool[kv->n_pool++] = e;
  pthread_cond_signal(&kv->pool_cond);
}

/* How one attempt's outcome is read: decoded into a result, or kept raw. */
struct finisher {
  enum attempt (*fn)(struct finisher *f, struct tc_kv *kv, int ep, CURL *e, CURLcode rc, struct buf *resp);
  const struct tc_kv_request *req;
  struct tc_kv_result *res;
};

static enum attempt
finish_decoded(struct finisher *f, struct tc_kv *kv, int ep, CURL *e, CURLcode rc, struct buf *resp)
{
  return kv_finish_attempt(kv, f->req, ep, e, rc, resp, f->res);
}

static int blocking_call(struct tc_kv *kv, const char *path, const char *body, struct finisher *f);

int
tc_kv_request(struct tc_kv *kv, const struct tc_kv_request *req, struct tc_kv_result *res)
{
  const char *path;
  memset(res, 0, sizeof *res);
  CLEANUP_FREE char *body = tc_kv_encode(req, &path);
  if (!body)
    return -1;
  struct finisher f = { finish_decoded, req, res };
  return blocking_call(kv, path, body, &f);
}

struct raw_finisher {
  struct finisher f;
  bool idempotent;
  char *reply;
  size_t len;
  long status;
};

static enum attempt
finish_raw(struct finisher *f, struct tc_kv *kv, int ep, CURL *e, CURLcode rc, struct buf *resp)
{
  struct raw_finisher *r = (struct raw_finisher *) f;
  const char *url = kv->urls[ep];
  if (rc != CURLE_OK) {
    /* The same reading of the failure as decoded calls: a request that
     * never left goes to the next endpoint in any case. */
    static const struct tc_kv_request op = { .type = TC_KV_REQ_OP }, txn = { .type = TC_KV_REQ_TXN };
    struct tc_kv_result none = { 0 };
    enum attempt a = kv_finish_attempt(kv, r->idempotent ? &op : &txn, ep, e, rc, resp, &none);
    if (a == A_FAILED && !r->idempotent)
      tc_error(EIO, "kv: %s: %s (sent, and the answer lost: the outcome is unknown)", url, curl_easy_strerror(rc));
    return a;
  }
  long status = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  if (status == 503) {
    tc_error(EAGAIN, "kv: %s: HTTP 503 (%.200s)", url, resp->p ? resp->p : "");
    return r->idempotent ? A_NEXT_ENDPOINT : A_DONE_RAW_503;
  }
  r->status = status;
  r->len = resp->len;
  r->reply = resp->p ? resp->p : strdup("");
  if (!r->reply) {
    tc_error(ENOMEM, "kv: out of memory");
    return A_FAILED;
  }
  resp->p = NULL;
  resp->len = resp->cap = 0;
  return A_DONE;
}

int
tc_kv_raw(struct tc_kv *kv, const char *path, const char *body, bool idempotent, char **reply, size_t *reply_len,
          long *status)
{
  struct raw_finisher r = { { finish_raw, NULL, NULL }, idempotent, NULL, 0, 0 };
  *reply = NULL;
  *reply_len = 0;
  *status = 0;
  if (blocking_call(kv, path, body, &r.f) < 0) {
    free(r.reply);
    return -1;
  }
  *reply = r.reply;
  *reply_len = r.len;
  *status = r.status;
  return 0;
}

/* Send body to path on the endpoint that last worked, failing over as the
 * header says; f reads each attempt's outcome. */
static int
blocking_call(struct tc_kv *kv, const char *path, const char *body, struct finisher *f)
{
  bool was_down;
  {
    SCOPED_LOCK(&kv->lock);
    was_down = kv->down_at != 0;
    if (was_down && kv_now_s() - kv->down_at < DOWN_HOLD_S)
      return tc_error(kv->down_err, "%s", kv->down_msg);
  }
  struct curl_slist *hdrs = kv_http_headers();
  CURL *e = hdrs ? pool_get(kv) : NULL;
  if (!e) {
    curl_slist_free_all(hdrs);
    return tc_error(ENOMEM, "kv: out of memory");
  }
  int start;
  {
    SCOPED_LOCK(&kv->lock);
    start = kv->cur;
  }
  double deadline = kv_now_s() + (was_down ? 0 : kv->request_ms / 1e3);
  struct buf resp = { 0 };
  int rv = -1;
  enum attempt a = A_FAILED;
  for (int attempt = 0;; attempt++) {
    int ep = (start + attempt) % kv->n_urls;
    resp.len = 0;
    curl_easy_reset(e);
    kv_setup_easy(kv, e, ep, path, body, hdrs, false);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, kv_buf_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
    struct blocking_progress prog = { .kv = kv, .e = e };
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, kv_blocking_xferinfo);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, &prog);
    CURLcode rc = curl_easy_perform(e);
    if (rc == CURLE_ABORTED_BY_CALLBACK && prog.silent)
      rc = CURLE_OPERATION_TIMEDOUT;
    a = f->fn(f, kv, ep, e, rc, &resp);
    if (a == A_DONE_RAW_503) {
      /* A non-idempotent request the server may have run: its word goes
       * back to the caller (as EIO, naming it), not to another endpoint. */
      tc_error(EIO, "%s: the outcome is unknown", tc_last_error());
      a = A_FAILED;
    }
    if (a == A_DONE) {
      SCOPED_LOCK(&kv->lock);
      kv->cur = ep;
      kv->down_at = 0;
      rv = 0;
      break;
    }
    if (a == A_NEXT_ENDPOINT) {
      /* Other callers skip it too until one finds it working again. */
      SCOPED_LOCK(&kv->lock);
      if (kv->cur == ep)
        kv->cur = (ep + 1) % kv->n_urls;
    }
    /* Past the deadline, still try each endpoint once: one that stopped
     * answering may have used up the time alone. */
    if (a == A_FAILED || (kv_now_s() >= deadline && attempt + 1 >= kv->n_urls))
      break;
    /* Every endpoint failed once: pause before the next round; a TLS
     * verification failure will not heal by waiting. */
    if ((attempt + 1) % kv->n_urls == 0) {
      if (errno == EACCES)
        break;
      struct timespec ts = { 0, 100 * 1000 * 1000 };
      nanosleep(&ts, NULL);
    }
  }
  if (rv < 0 && a == A_NEXT_ENDPOINT) {
    int err = errno;
    SCOPED_LOCK(&kv->lock);
    kv->down_at = kv_now_s();
    kv->down_err = err;
    snprintf(kv->down_msg, sizeof kv->down_msg, "%s", tc_last_error());
    errno = err;
  }
  else if (rv < 0) {
    /* A server answered (with an error): reachable. */
    int err = errno;
    SCOPED_LOCK(&kv->lock);
    kv->down_at = 0;
    errno = err;
  }
  int err = errno;
  free(resp.p);
  curl_slist_free_all(hdrs);
  pool_put(kv, e);
  errno = err;
  return rv;
}

int
tc_kv_get(struct tc_kv *kv, const void *key, size_t key_len, struct tc_kv_result *res)
{
  struct tc_kv_request r = { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_RANGE, .key = key, .key_len = key_len } };
  return tc_kv_request(kv, &r, res);
}

int
tc_kv_get_prefix(struct tc_kv *kv, const void *prefix, size_t prefix_len, struct tc_kv_result *res)
{
  struct tc_kv_request r = { .type = TC_KV_REQ_OP,
                             .op = { .type = TC_KV_RANGE, .key = prefix, .key_len = prefix_len, .prefix = true } };
  return tc_kv_request(kv, &r, res);
}

int
tc_kv_put(struct tc_kv *kv, const void *key, size_t key_len, const void *value, size_t value_len,
          int64_t lease, struct tc_kv_result *res)
{
  struct tc_kv_result tmp;
  struct tc_kv_request r = { .type = TC_KV_REQ_OP,
                             .op = { .type = TC_KV_PUT, .key = key, .key_len = key_len, .value = value,
                                     .value_len = value_len, .lease = lease } };
  int rv = tc_kv_request(kv, &r, res ? res : &tmp);
  if (!res)
    tc_kv_result_free(&tmp);
  return rv;
}

int
tc_kv_delete(struct tc_kv *kv, const void *key, size_t key_len, bool prefix, struct tc_kv_result *res)
{
  struct tc_kv_result tmp;
  struct tc_kv_request r = { .type = TC_KV_REQ_OP,
                             .op = { .type = TC_KV_DELETE, .key = key, .key_len = key_len, .prefix = prefix } };
  int rv = tc_kv_request(kv, &r, res ? res : &tmp);
  if (!res)
    tc_kv_result_free(&tmp);
  return rv;
}

int
tc_kv_txn(struct tc_kv *kv, const struct tc_kv_txn *txn, struct tc_kv_result *res)
{
  struct tc_kv_request r = { .type = TC_KV_REQ_TXN, .txn = *txn };
  return tc_kv_request(kv, &r, res);
}

