/* One request on one endpoint: the curl options every request shares, the
 * reply buffer, noticing a silent server, reading the outcome. */
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
#include "vector.h"

double
kv_now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

size_t
kv_buf_write(char *data, size_t size, size_t nmemb, void *userdata)
{
  struct buf *b = userdata;
  size_t n = size * nmemb;
  if (n > MAX_REPLY || b->len + n + 1 > MAX_REPLY || tc_grow(&b->p, &b->cap, b->len + n + 1, 1, 4096) < 0)
    return 0;
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = 0;
  return n;
}

/* Set the options every request shares. */
void
kv_setup_easy(struct tc_kv *kv, CURL *e, int ep, const char *path, const char *body,
           struct curl_slist *hdrs, bool stream)
{
  char url[1024];
  snprintf(url, sizeof url, "%s%s", kv->urls[ep], path);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  /* Connecting (TCP and TLS) has its own limit; after that a request
   * fails only when the server stops answering (kv_silent_for): no total
   * timeout, which would also count a slow but live transfer. A watch
   * stream may be silent for ever (TCP keepalive notices a dead peer). */
  (void) stream;
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, kv->connect_ms);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 10L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 5L);
  if (kv->ca) {
    /* etcd_ca is the only trust anchor: without clearing CAPATH, libcurl
     * with GnuTLS also parses all of /etc/ssl/certs at every handshake
     * (~290 files: 0.5 s of CPU under ASan) and trusts every public CA. */
    curl_easy_setopt(e, CURLOPT_CAINFO, kv->ca);
    curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
  }
  if (kv->cert) {
    curl_easy_setopt(e, CURLOPT_SSLCERT, kv->cert);
    curl_easy_setopt(e, CURLOPT_SSLKEY, kv->key);
  }
}

struct curl_slist *
kv_http_headers(void)
{
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  /* No "Expect: 100-continue" round trip for larger bodies. */
  struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;
  if (!h2)
    curl_slist_free_all(h);
  return h2;
}

/* Has the transfer on e been connected and silent (no byte sent or
 * received) for longer than ms? Connecting has its own timeout and does
 * not count. curl's LOW_SPEED options cannot say this: they average over
 * seconds and noticed a silent server only after ~7 s. */
bool
kv_silent_for(struct silence *q, CURL *e, long ms, double now)
{
  curl_off_t pre = 0, up = 0, down = 0;
  long hdr = 0;
  curl_easy_getinfo(e, CURLINFO_PRETRANSFER_TIME_T, &pre);
  curl_easy_getinfo(e, CURLINFO_SIZE_UPLOAD_T, &up);
  curl_easy_getinfo(e, CURLINFO_SIZE_DOWNLOAD_T, &down);
  curl_easy_getinfo(e, CURLINFO_HEADER_SIZE, &hdr);
  curl_off_t moved = up + down + hdr;
  if (!q->last || !pre || moved != q->seen) {
    q->last = now;
    q->seen = moved;
    return false;
  }
  return (now - q->last) * 1e3 > (double) ms;
}

/* Blocking calls: curl_easy_perform calls this at least once a second. */
int
kv_blocking_xferinfo(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
  struct blocking_progress *p = arg;
  (void) dltotal, (void) dlnow, (void) ultotal, (void) ulnow;
  if (kv_silent_for(&p->quiet, p->e, p->kv->request_ms, kv_now_s())) {
    p->silent = true;
    return 1;
  }
  return 0;
}

/* A transport failure after which another endpoint may be tried safely:
 * the request never reached a server. */
static bool
never_sent(CURLcode rc, CURL *e)
{
  if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY ||
      rc == CURLE_SSL_CONNECT_ERROR)
    return true;
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    curl_off_t t = 0;
    curl_easy_getinfo(e, CURLINFO_PRETRANSFER_TIME_T, &t);
    return t == 0;
  }
  return false;
}

static int
transport_errno(CURLcode rc)
{
  switch (rc) {
  case CURLE_COULDNT_CONNECT: return ECONNREFUSED;
  case CURLE_OPERATION_TIMEDOUT: return ETIMEDOUT;
  case CURLE_COULDNT_RESOLVE_HOST: return EHOSTUNREACH;
  case CURLE_SSL_CONNECT_ERROR: case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CACERT_BADFILE: return EACCES;
  case CURLE_OUT_OF_MEMORY: return ENOMEM;
  default: return EIO;
  }
}

/* Interpret a finished transfer: decode into res, or set the error. */
enum attempt
kv_finish_attempt(struct tc_kv *kv, const struct tc_kv_request *req, int ep, CURL *e, CURLcode rc,
               struct buf *resp, struct tc_kv_result *res)
{
  const char *url = kv->urls[ep];
  if (rc != CURLE_OK) {
    int err = transport_errno(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT && never_sent(rc, e))
      tc_error(err, "kv: %s: no connection within %ld ms (etcd_quick_timeout)", url, kv->connect_ms);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
      tc_error(err, "kv: %s: the server did not answer for %ld ms (etcd_slow_timeout)", url, kv->request_ms);
    else {
      /* The system's word for it too: "Connection refused", "No route to host". */
      long os_err = 0;
      curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &os_err);
      if (os_err > 0)
        tc_error(err, "kv: %s: %s (%s)", url, curl_easy_strerror(rc), strerror((int) os_err));
      else
        tc_error(err, "kv: %s: %s", url, curl_easy_strerror(rc));
    }
    if (never_sent(rc, e) || rc == CURLE_PEER_FAILED_VERIFICATION)
      return A_NEXT_ENDPOINT;
    /* Sent, but the answer was lost: a transaction may or may not have
     * run, so only the caller can decide; other requests are idempotent. */
    if (req->type == TC_KV_REQ_TXN) {
      tc_error(EIO, "kv: %s: %s (the transaction's outcome is unknown)", url, curl_easy_strerror(rc));
      return A_FAILED;
    }
    return A_NEXT_ENDPOINT;
  }
  long status = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  json_tokener *tok = json_tokener_new_ex(64);
  json_object *body = tok && resp->p ? json_tokener_parse_ex(tok, resp->p, (int) resp->len) : NULL;
  json_tokener_free(tok);
  if (status != 200) {
    char msg[512];
    int err = tc_kv_error_errno(body, status, msg, sizeof msg);
    json_object_put(body);
    tc_error(err, "kv: %s: %s", url, msg);
    return err == EAGAIN ? A_NEXT_ENDPOINT : A_FAILED;
  }
  if (!body || !json_object_is_type(body, json_type_object)) {
    json_object_put(body);
    tc_error(EPROTO, "kv: %s: the reply is not a JSON object", url);
    return A_FAILED;
  }
  json_object *errv;
  if (json_object_object_get_ex(body, "error", &errv)) {
    char msg[512];
    int err = tc_kv_error_errno(body, status, msg, sizeof msg);
    json_object_put(body);
    tc_error(err, "kv: %s: %s", url, msg);
    return A_FAILED;
  }
  int r = tc_kv_decode(req, body, res);
  json_object_put(body);
  return r < 0 ? A_FAILED : A_DONE;
}

