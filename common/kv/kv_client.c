/* The KV client (see kv_client.h): blocking calls on pooled curl easy
 * handles; non-blocking calls and watches on one curl multi handle run by a
 * background thread or by the caller's event loop. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <curl/curl.h>
#include "cleanup.h"
#include "error.h"
#include "kv_json.h"
#include "log.h"

#define MAX_REPLY (64 << 20)
/* Connections kept alive per endpoint for the loop's requests: a request
 * holds one while on the multi handle, the rest wait in the client's own
 * queue, so a burst reuses a few connections instead of racing hundreds of
 * TLS handshakes into the connect timeout. The queue is ours, not
 * CURLMOPT_MAX_HOST_CONNECTIONS: curl starts a transfer's timers when it is
 * added, so time spent pending inside curl would count against the request,
 * and watch streams (which hold a connection for ever) would starve it. */
#define CONNS_PER_ENDPOINT 8
/* After a blocking call found no endpoint reachable, the calls of the next
 * DOWN_HOLD_S seconds fail at once with its error, and later ones try each
 * endpoint once instead of for etcd_slow_timeout: a command against a KV
 * that is down says so within one timeout, not one per request it makes. */
#define DOWN_HOLD_S 1.0
/* Easy handles (each with its kept-alive connection) for blocking calls;
 * more callers wait for one. */
#define BLOCKING_CONNS 8

struct buf {
  char *p;
  size_t len, cap;
};

enum xfer_kind { X_REQ, X_WATCH };

/* Watching a request for silence: when its bytes (either way) last moved. */
struct silence {
  double last;                   /* monotonic s; 0: not started */
  curl_off_t seen;               /* bytes moved when last looked */
};

/* One transfer on the multi handle. */
struct xfer {
  enum xfer_kind kind;
  struct tc_kv *kv;
  CURL *easy;
  struct curl_slist *hdrs;
  struct buf resp;
  char *body;
  const char *path;
  struct tc_kv_request req;      /* scalars only: what decoding needs */
  int ep;                        /* endpoint index used */
  int tried;                     /* endpoints tried so far */
  struct silence quiet;          /* requests: since when the server is silent */
  tc_kv_done_fn cb;
  void *arg;
  struct tc_kv_watch *w;
  struct xfer *next;
};

struct tc_kv_watch {
  struct tc_kv *kv;
  uint8_t *key;
  size_t key_len;
  bool prefix;
  int64_t start_rev;
  int64_t last_rev;              /* every event up to here was delivered */
  bool have_last;
  tc_kv_watch_fn cb;
  void *arg;
  struct xfer *x;                /* the stream, or NULL while waiting to reconnect */
  json_tokener *tok;
  double retry_at;               /* reconnect at (monotonic s); 0: not scheduled */
  int backoff_ms;
  int ep;
  int connects;
  bool reconnect_now;            /* server canceled: reconnect without back-off */
  bool cancel;                   /* asked to stop */
  bool free_on_reap;             /* canceled from the loop thread: loop frees it */
  bool dead;                     /* loop is done with it */
  bool started;                  /* added to the loop */
  struct tc_kv_watch *next;
};

struct tc_kv {
  char **urls;
  int n_urls;
  int cur;                       /* endpoint to use first (under lock) */
  char *ca, *cert, *key, *prefix;
  long connect_ms, request_ms;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  CURL *pool[BLOCKING_CONNS];    /* idle easy handles for blocking calls */
  int n_pool;                    /* idle ones in pool */
  int n_easy;                    /* blocking handles that exist (idle or in use) */
  pthread_cond_t pool_cond;      /* a blocking handle was returned */
  double down_at;                /* when blocking calls last found no endpoint (0: reachable) */
  int down_err;                  /* ... its errno and message */
  char down_msg[512];
  /* the loop */
  CURLM *multi;
  bool loop_ready, external, stop;
  pthread_t thread;
  const struct tc_kv_loop_ops *ops;
  void *loop;
  struct xfer *queue, *queue_tail; /* submitted, not yet on the multi (FIFO) */
  int *n_active_ep;              /* requests (not watches) on the multi, per endpoint */
  struct xfer *active;           /* on the multi */
  struct tc_kv_watch *watches;
  double curl_due;               /* curl's timer (monotonic s); 0: none */
  double silence_due;            /* next check_silence (monotonic s); 0: none */
};

static _Thread_local struct tc_kv *tl_loop_kv;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void
curl_init_once(void)
{
  curl_init_rc = curl_global_init(CURL_GLOBAL_ALL);
}

static double
now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t
buf_write(char *data, size_t size, size_t nmemb, void *userdata)
{
  struct buf *b = userdata;
  size_t n = size * nmemb;
  if (b->len + n + 1 > b->cap) {
    if (b->len + n + 1 > MAX_REPLY)
      return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
      return 0;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = 0;
  return n;
}

/* ---- construction ---- */

struct tc_kv *
tc_kv_new(const struct tc_kv_options *o)
{
  pthread_once(&curl_once, curl_init_once);
  if (curl_init_rc != CURLE_OK) {
    tc_error(EIO, "kv: curl_global_init: %s", curl_easy_strerror(curl_init_rc));
    return NULL;
  }
  if (o->n_urls < 1) {
    tc_error(EINVAL, "kv: no endpoint (etcd_address is empty)");
    return NULL;
  }
  struct tc_kv *kv = calloc(1, sizeof *kv);
  if (!kv)
    goto nomem;
  pthread_mutex_init(&kv->lock, NULL);
  pthread_cond_init(&kv->cond, NULL);
  pthread_cond_init(&kv->pool_cond, NULL);
  kv->urls = calloc((size_t) o->n_urls, sizeof *kv->urls);
  kv->n_active_ep = calloc((size_t) o->n_urls, sizeof *kv->n_active_ep);
  if (!kv->urls || !kv->n_active_ep)
    goto nomem;
  for (int i = 0; i < o->n_urls; i++) {
    const char *u = o->urls[i];
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)) {
      /* Like etcdctl, a bare host:port means http. */
      if (strstr(u, "://")) {
        tc_error(EINVAL, "kv: endpoint '%s' is neither http:// nor https://", u);
        tc_kv_free(kv);
        return NULL;
      }
      if (asprintf(&kv->urls[i], "http://%s", u) < 0)
        kv->urls[i] = NULL;
    }
    else
      kv->urls[i] = strdup(u);
    if (!kv->urls[i])
      goto nomem;
    size_t l = strlen(kv->urls[i]);
    while (l > 0 && kv->urls[i][l - 1] == '/')
      kv->urls[i][--l] = 0;
    kv->n_urls++;
  }
  if ((o->ca && !(kv->ca = strdup(o->ca))) || (o->cert && !(kv->cert = strdup(o->cert))) ||
      (o->key && !(kv->key = strdup(o->key))) ||
      !(kv->prefix = strdup(o->prefix ? o->prefix : "/tromcho")))
    goto nomem;
  kv->connect_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 1000;
  kv->request_ms = o->request_timeout_ms > 0 ? o->request_timeout_ms : 5000;
  return kv;
nomem:
  tc_kv_free(kv);
  tc_error(ENOMEM, "kv: out of memory");
  return NULL;
}

struct tc_kv *
tc_kv_new_from_config(const struct tc_config *cfg)
{
  int n = tc_config_list_len(cfg, "etcd_address");
  const char *urls[16];
  if (n > 16) {
    tc_error(EINVAL, "kv: etcd_address lists %d endpoints, at most 16 are supported", n);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    urls[i] = tc_config_list_get(cfg, "etcd_address", i);
  struct tc_kv_options o = {
    .urls = urls, .n_urls = n,
    .ca = tc_config_str(cfg, "etcd_ca"),
    .cert = tc_config_str(cfg, "etcd_client_cert"),
    .key = tc_config_str(cfg, "etcd_client_key"),
    .connect_timeout_ms = tc_config_int(cfg, "etcd_quick_timeout"),
    .request_timeout_ms = tc_config_int(cfg, "etcd_slow_timeout"),
    .prefix = tc_config_str(cfg, "etcd_prefix"),
  };
  if (!o.cert) {
    o.cert = tc_config_str(cfg, "cert");
    o.key = tc_config_str(cfg, "pkey");
  }
  if (o.cert && !o.key) {
    tc_error(EINVAL, "kv: a client certificate (%s) without its key (etcd_client_key or pkey)", o.cert);
    return NULL;
  }
  return tc_kv_new(&o);
}

const char *
tc_kv_prefix(const struct tc_kv *kv)
{
  return kv->prefix;
}

const char *
tc_kv_current_url(struct tc_kv *kv)
{
  SCOPED_LOCK(&kv->lock);
  return kv->urls[kv->cur];
}

/* Set the options every request shares. */
static void
setup_easy(struct tc_kv *kv, CURL *e, int ep, const char *path, const char *body,
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
   * fails only when the server stops answering (silent_for): no total
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

static struct curl_slist *
json_headers(void)
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
static bool
silent_for(struct silence *q, CURL *e, long ms, double now)
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

struct blocking_progress {
  struct tc_kv *kv;
  CURL *e;
  struct silence quiet;
  bool silent;                   /* aborted for silence */
};

/* Blocking calls: curl_easy_perform calls this at least once a second. */
static int
blocking_xferinfo(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
  struct blocking_progress *p = arg;
  (void) dltotal, (void) dlnow, (void) ultotal, (void) ulnow;
  if (silent_for(&p->quiet, p->e, p->kv->request_ms, now_s())) {
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

/* Result of one attempt. */
enum attempt { A_DONE, A_FAILED, A_NEXT_ENDPOINT };

/* Interpret a finished transfer: decode into res, or set the error. */
static enum attempt
finish_attempt(struct tc_kv *kv, const struct tc_kv_request *req, int ep, CURL *e, CURLcode rc,
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

/* ---- blocking calls ---- */

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

int
tc_kv_request(struct tc_kv *kv, const struct tc_kv_request *req, struct tc_kv_result *res)
{
  const char *path;
  memset(res, 0, sizeof *res);
  CLEANUP_FREE char *body = tc_kv_encode(req, &path);
  if (!body)
    return -1;
  bool was_down;
  {
    SCOPED_LOCK(&kv->lock);
    was_down = kv->down_at != 0;
    if (was_down && now_s() - kv->down_at < DOWN_HOLD_S)
      return tc_error(kv->down_err, "%s", kv->down_msg);
  }
  struct curl_slist *hdrs = json_headers();
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
  double deadline = now_s() + (was_down ? 0 : kv->request_ms / 1e3);
  struct buf resp = { 0 };
  int rv = -1;
  enum attempt a = A_FAILED;
  for (int attempt = 0;; attempt++) {
    int ep = (start + attempt) % kv->n_urls;
    resp.len = 0;
    curl_easy_reset(e);
    setup_easy(kv, e, ep, path, body, hdrs, false);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
    struct blocking_progress prog = { .kv = kv, .e = e };
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, blocking_xferinfo);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, &prog);
    CURLcode rc = curl_easy_perform(e);
    if (rc == CURLE_ABORTED_BY_CALLBACK && prog.silent)
      rc = CURLE_OPERATION_TIMEDOUT;
    a = finish_attempt(kv, req, ep, e, rc, &resp, res);
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
    if (a == A_FAILED || (now_s() >= deadline && attempt + 1 >= kv->n_urls))
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
    kv->down_at = now_s();
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

int
tc_kv_lease_grant(struct tc_kv *kv, int64_t ttl, int64_t *id)
{
  struct tc_kv_result res;
  struct tc_kv_request r = { .type = TC_KV_REQ_LEASE_GRANT, .ttl = ttl };
  if (ttl <= 0)
    return tc_error(EINVAL, "kv: lease TTL %" PRId64 " is not positive", ttl);
  if (tc_kv_request(kv, &r, &res) < 0)
    return -1;
  *id = res.lease_id;
  tc_kv_result_free(&res);
  return 0;
}

int
tc_kv_lease_keepalive(struct tc_kv *kv, int64_t id, int64_t *ttl)
{
  struct tc_kv_result res;
  struct tc_kv_request r = { .type = TC_KV_REQ_LEASE_KEEPALIVE, .lease_id = id };
  if (tc_kv_request(kv, &r, &res) < 0)
    return -1;
  if (ttl)
    *ttl = res.ttl;
  tc_kv_result_free(&res);
  return 0;
}

int
tc_kv_lease_revoke(struct tc_kv *kv, int64_t id)
{
  struct tc_kv_result res;
  struct tc_kv_request r = { .type = TC_KV_REQ_LEASE_REVOKE, .lease_id = id };
  if (tc_kv_request(kv, &r, &res) < 0)
    return -1;
  tc_kv_result_free(&res);
  return 0;
}

/* ---- the loop: shared by the background thread and an external loop ---- */

static void xfer_free(struct xfer *x);
static int watch_connect(struct tc_kv_watch *w);

static void
xfer_free(struct xfer *x)
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
static int
xfer_start(struct tc_kv *kv, struct xfer *x);

static size_t watch_write(char *data, size_t size, size_t nmemb, void *userdata);

static int
xfer_start(struct tc_kv *kv, struct xfer *x)
{
  if (!x->easy && !(x->easy = curl_easy_init()))
    return tc_error(ENOMEM, "kv: out of memory");
  curl_easy_reset(x->easy);
  x->resp.len = 0;
  setup_easy(kv, x->easy, x->ep, x->path, x->body, x->hdrs, x->kind == X_WATCH);
  if (x->kind == X_WATCH) {
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x->w);
  }
  else {
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, buf_write);
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

static void
complete_req(struct xfer *x, int err, const char *msg, struct tc_kv_result *res)
{
  struct tc_kv_result empty = { 0 };
  if (x->cb)
    x->cb(x->arg, err, msg, res ? res : &empty);
  if (res)
    tc_kv_result_free(res);
}

/* Free a watch the loop is done with (or mark it for its canceller). */
static void
watch_reap(struct tc_kv *kv, struct tc_kv_watch *w)
{
  for (struct tc_kv_watch **p = &kv->watches; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  if (w->x) {
    unlink_active(kv, w->x);
    xfer_free(w->x);
    w->x = NULL;
  }
  if (w->free_on_reap) {
    json_tokener_free(w->tok);
    free(w->key);
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
    if (xfer_start(kv, x) < 0) {
      {
        SCOPED_LOCK(&kv->lock);
        kv->n_active_ep[x->ep]--;
      }
      complete_req(x, errno, tc_last_error(), NULL);
      xfer_free(x);
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
        watch_reap(kv, w);
        continue;
      }
      if (w)
        w->started = true;
    }
    if (!w)
      break;
    if (watch_connect(w) < 0) {
      tc_warn("kv: watch: %s", tc_last_error());
      w->retry_at = now_s() + 0.5;
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
    w->retry_at = now_s();
    return;
  }
  w->retry_at = now_s() + w->backoff_ms / 1e3;
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
    xfer_free(x);
    schedule_reconnect(w, !w->reconnect_now);
    return;
  }
  {
    struct tc_kv_result res;
    memset(&res, 0, sizeof res);
    enum attempt a = finish_attempt(kv, &x->req, x->ep, x->easy, rc, &x->resp, &res);
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
      complete_req(x, 0, NULL, &res);
    else {
      char msg[1024];
      int err = errno;
      snprintf(msg, sizeof msg, "%s", tc_last_error());
      complete_req(x, err, msg, NULL);
    }
    xfer_free(x);
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
  double now = now_s();
  bool any = false;
  for (struct xfer *x = kv->active, *next; x; x = next) {
    next = x->next;
    if (x->kind != X_REQ)
      continue;
    if (!silent_for(&x->quiet, x->easy, kv->request_ms, now)) {
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
  double now = now_s();
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
  double now = now_s(), next = 1e9;
  for (struct tc_kv_watch *w = kv->watches; w; w = w->next) {
    if (w->x || w->cancel || !w->started || !w->retry_at)
      continue;
    if (w->retry_at <= now) {
      w->retry_at = 0;
      if (watch_connect(w) < 0) {
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
  tl_loop_kv = kv;
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
  kv->curl_due = timeout_ms < 0 ? 0 : now_s() + timeout_ms / 1e3;
  return 0;
}

/* Ask the external loop for one timer: the earlier of curl's and ours. */
static void
rearm(struct tc_kv *kv)
{
  double now = now_s(), due = kv->curl_due;
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
  tl_loop_kv = kv;
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
  tl_loop_kv = kv;
  if (kv->curl_due && kv->curl_due <= now_s() + 0.0005) {
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
  tl_loop_kv = kv;
  process_queue(kv);
  process_done(kv);
  service_silence(kv);
  process_queue(kv);
  rearm(kv);
}

/* Make sure a loop runs (start the background thread if none); then wake it. */
static int
loop_kick(struct tc_kv *kv)
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
    if (tl_loop_kv != kv)
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
  x->hdrs = json_headers();
  if (!x->body || !x->hdrs) {
    if (x->body)
      tc_error(ENOMEM, "kv: out of memory");
    xfer_free(x);
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
  return loop_kick(kv);
}

/* ---- watches ---- */

static void
watch_deliver(struct tc_kv_watch *w, json_object *result)
{
  json_object *evs;
  if (!json_object_object_get_ex(result, "events", &evs) || !json_object_is_type(evs, json_type_array))
    return;
  size_t n = json_object_array_length(evs), k = 0;
  if (!n)
    return;
  struct tc_kv_event *out = calloc(n, sizeof *out);
  if (!out) {
    /* Cannot deliver: reconnect and get them again. */
    w->reconnect_now = true;
    return;
  }
  int64_t last = w->last_rev;
  for (size_t i = 0; i < n; i++) {
    json_object *e = json_object_array_get_idx(evs, i), *kvo, *t;
    struct tc_kv_kv kv;
    if (!json_object_object_get_ex(e, "kv", &kvo) || tc_kv_decode_kv(kvo, &kv) < 0)
      continue;
    /* A resumed stream never repeats what was delivered; be sure anyway. */
    if (w->have_last && kv.mod_revision <= w->last_rev) {
      tc_kv_kv_free(&kv);
      continue;
    }
    out[k].type = json_object_object_get_ex(e, "type", &t) &&
                  !strcmp(json_object_get_string(t), "DELETE") ? TC_KV_EVENT_DELETE : TC_KV_EVENT_PUT;
    out[k++].kv = kv;
    if (kv.mod_revision > last)
      last = kv.mod_revision;
  }
  if (k) {
    w->last_rev = last;
    w->have_last = true;
    struct tc_kv_watch_update u = { .events = out, .n_events = k, .revision = last };
    w->cb(w->arg, &u);
  }
  for (size_t i = 0; i < k; i++)
    tc_kv_kv_free(&out[i].kv);
  free(out);
}

/* One message of the stream; false: drop the stream. */
static bool
watch_message(struct tc_kv_watch *w, json_object *msg)
{
  json_object *result, *v;
  if (json_object_object_get_ex(msg, "error", &v)) {
    char text[512];
    tc_kv_error_errno(msg, 200, text, sizeof text);
    tc_warn("kv: watch on %s: %s", w->kv->urls[w->ep], text);
    return false;
  }
  if (!json_object_object_get_ex(msg, "result", &result))
    result = msg;
  int64_t hdr_rev = tc_json_i64(json_object_object_get_ex(result, "header", &v) ? v : NULL, "revision");
  int64_t compact = tc_json_i64(result, "compact_revision");
  if (compact > 0) {
    tc_warn("kv: watch of %s: revisions before %" PRId64 " were compacted; resuming there", w->key, compact);
    w->last_rev = compact - 1;
    w->have_last = true;
    struct tc_kv_watch_update u = { .revision = compact - 1, .compact_revision = compact };
    w->cb(w->arg, &u);
    w->reconnect_now = true;
    return false;
  }
  if (json_object_object_get_ex(result, "created", &v) && json_object_get_boolean(v)) {
    w->backoff_ms = 100;
    if (!w->have_last && w->start_rev == 0) {
      /* "From now": events after the revision the watch was created at. */
      w->last_rev = hdr_rev;
      w->have_last = true;
    }
  }
  watch_deliver(w, result);
  if (json_object_object_get_ex(result, "canceled", &v) && json_object_get_boolean(v)) {
    tc_warn("kv: watch of %s canceled by the server; reconnecting", w->key);
    return false;
  }
  if (w->cancel)
    return false;
  return true;
}

static size_t
watch_write(char *data, size_t size, size_t nmemb, void *userdata)
{
  struct tc_kv_watch *w = userdata;
  size_t n = size * nmemb, off = 0;
  while (off < n) {
    json_object *o = json_tokener_parse_ex(w->tok, data + off, (int) (n - off));
    enum json_tokener_error jerr = json_tokener_get_error(w->tok);
    if (jerr == json_tokener_continue)
      return n;
    if (!o || jerr != json_tokener_success) {
      tc_warn("kv: watch stream from %s: bad JSON: %s", w->kv->urls[w->ep], json_tokener_error_desc(jerr));
      json_object_put(o);
      return 0;
    }
    off += json_tokener_get_parse_end(w->tok);
    json_tokener_reset(w->tok);
    bool keep = watch_message(w, o);
    json_object_put(o);
    if (!keep)
      return 0;
    while (off < n && (data[off] == '\n' || data[off] == '\r' || data[off] == ' '))
      off++;
  }
  return n;
}

static int
watch_connect(struct tc_kv_watch *w)
{
  struct tc_kv *kv = w->kv;
  struct xfer *x = calloc(1, sizeof *x);
  if (!x)
    return tc_error(ENOMEM, "kv: out of memory");
  int64_t from = w->have_last ? w->last_rev + 1 : w->start_rev;
  x->kind = X_WATCH;
  x->kv = kv;
  x->w = w;
  x->ep = w->ep;
  x->path = "/v3/watch";
  x->body = tc_kv_encode_watch(w->key, w->key_len, w->prefix, from);
  x->hdrs = json_headers();
  if (!x->body || !x->hdrs) {
    xfer_free(x);
    return tc_error(ENOMEM, "kv: out of memory");
  }
  json_tokener_reset(w->tok);
  if (xfer_start(kv, x) < 0) {
    xfer_free(x);
    return -1;
  }
  w->x = x;
  w->connects++;
  tc_debug("kv: watch of %s from revision %" PRId64 " on %s", w->key, from, kv->urls[w->ep]);
  return 0;
}

struct tc_kv_watch *
tc_kv_watch(struct tc_kv *kv, const void *key, size_t key_len, bool prefix, int64_t start_revision,
            tc_kv_watch_fn cb, void *arg)
{
  key_len = tc_kv_len(key, key_len);
  if (!key || !key_len) {
    tc_error(EINVAL, "kv: watch of an empty key");
    return NULL;
  }
  /* "From now" means from this call: learn the revision first, unless on
   * the loop thread, which must not block (then: from when it connects). */
  if (start_revision == 0 && tl_loop_kv != kv) {
    struct tc_kv_result r;
    struct tc_kv_request req = { .type = TC_KV_REQ_OP,
                                 .op = { .type = TC_KV_RANGE, .key = key, .key_len = key_len, .count_only = true } };
    if (tc_kv_request(kv, &req, &r) == 0) {
      start_revision = r.revision + 1;
      tc_kv_result_free(&r);
    }
  }
  struct tc_kv_watch *w = calloc(1, sizeof *w);
  if (!w || !(w->key = malloc(key_len + 1)) || !(w->tok = json_tokener_new_ex(64))) {
    if (w)
      free(w->key);
    free(w);
    tc_error(ENOMEM, "kv: out of memory");
    return NULL;
  }
  memcpy(w->key, key, key_len);
  w->key[key_len] = 0;
  w->key_len = key_len;
  w->kv = kv;
  w->prefix = prefix;
  w->start_rev = start_revision;
  w->cb = cb;
  w->arg = arg;
  w->backoff_ms = 100;
  {
    SCOPED_LOCK(&kv->lock);
    w->ep = kv->cur;
    w->next = kv->watches;
    kv->watches = w;
  }
  if (loop_kick(kv) < 0) {
    SCOPED_LOCK(&kv->lock);
    kv->watches = w->next;
    json_tokener_free(w->tok);
    free(w->key);
    free(w);
    return NULL;
  }
  return w;
}

int
tc_kv_watch_connects(struct tc_kv_watch *w)
{
  SCOPED_LOCK(&w->kv->lock);
  return w->connects;
}

void
tc_kv_watch_cancel(struct tc_kv_watch *w)
{
  if (!w)
    return;
  struct tc_kv *kv = w->kv;
  if (tl_loop_kv == kv) {
    /* On the loop thread (e.g. in the callback): the loop frees it. */
    SCOPED_LOCK(&kv->lock);
    w->cancel = true;
    w->free_on_reap = true;
    return;
  }
  {
    SCOPED_LOCK(&kv->lock);
    w->cancel = true;
  }
  loop_kick(kv);
  {
    SCOPED_LOCK(&kv->lock);
    while (!w->dead)
      pthread_cond_wait(&kv->cond, &kv->lock);
  }
  json_tokener_free(w->tok);
  free(w->key);
  free(w);
}

/* ---- teardown ---- */

void
tc_kv_free(struct tc_kv *kv)
{
  if (!kv)
    return;
  if (kv->loop_ready && !kv->external) {
    {
      SCOPED_LOCK(&kv->lock);
      kv->stop = true;
    }
    curl_multi_wakeup(kv->multi);
    pthread_join(kv->thread, NULL);
  }
  /* Whatever is left: queued and active requests fail, watches go. */
  tl_loop_kv = kv;
  while (kv->watches) {
    kv->watches->free_on_reap = true;
    watch_reap(kv, kv->watches);
  }
  struct xfer *lists[2] = { kv->queue, kv->active };
  kv->queue = kv->queue_tail = kv->active = NULL;
  for (int i = 0; i < 2; i++)
    while (lists[i]) {
      struct xfer *x = lists[i];
      lists[i] = x->next;
      if (i == 1)
        curl_multi_remove_handle(kv->multi, x->easy);
      complete_req(x, ECANCELED, "kv: the client was closed", NULL);
      xfer_free(x);
    }
  tl_loop_kv = NULL;
  if (kv->multi)
    curl_multi_cleanup(kv->multi);
  for (int i = 0; i < kv->n_pool; i++)
    curl_easy_cleanup(kv->pool[i]);
  free(kv->n_active_ep);
  for (int i = 0; i < kv->n_urls; i++)
    free(kv->urls[i]);
  free(kv->urls);
  free(kv->ca);
  free(kv->cert);
  free(kv->key);
  free(kv->prefix);
  pthread_mutex_destroy(&kv->lock);
  pthread_cond_destroy(&kv->cond);
  pthread_cond_destroy(&kv->pool_cond);
  free(kv);
}

/* ---- lease keeper ---- */

struct tc_kv_lease_keeper {
  struct tc_kv *kv;
  int64_t id, ttl;
  tc_kv_lease_lost_fn lost;
  void *arg;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop;
};

static void *
keeper_thread(void *arg)
{
  struct tc_kv_lease_keeper *k = arg;
  double last_ok = now_s(), period = k->ttl / 3.0;
  if (period < 0.2)
    period = 0.2;
  for (;;) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = ts.tv_sec + ts.tv_nsec / 1e9 + period;
    ts.tv_sec = (time_t) t;
    ts.tv_nsec = (long) ((t - (double) ts.tv_sec) * 1e9);
    {
      SCOPED_LOCK(&k->lock);
      while (!k->stop && pthread_cond_timedwait(&k->cond, &k->lock, &ts) != ETIMEDOUT)
        ;
      if (k->stop)
        return NULL;
    }
    int64_t ttl;
    if (tc_kv_lease_keepalive(k->kv, k->id, &ttl) == 0) {
      last_ok = now_s();
      continue;
    }
    int err = errno;
    tc_warn("kv: keeping lease %" PRIx64 " alive: %s", (uint64_t) k->id, tc_last_error());
    if (err == ENOENT || now_s() - last_ok > (double) k->ttl) {
      if (k->lost)
        k->lost(k->arg, k->id);
      return NULL;
    }
  }
}

struct tc_kv_lease_keeper *
tc_kv_lease_keeper_start(struct tc_kv *kv, int64_t lease_id, int64_t ttl, tc_kv_lease_lost_fn lost, void *arg)
{
  struct tc_kv_lease_keeper *k = calloc(1, sizeof *k);
  if (!k) {
    tc_error(ENOMEM, "kv: out of memory");
    return NULL;
  }
  k->kv = kv;
  k->id = lease_id;
  k->ttl = ttl > 0 ? ttl : 1;
  k->lost = lost;
  k->arg = arg;
  pthread_mutex_init(&k->lock, NULL);
  pthread_cond_init(&k->cond, NULL);
  int r = pthread_create(&k->thread, NULL, keeper_thread, k);
  if (r) {
    free(k);
    tc_error(r, "kv: cannot start the lease keeper: %s", strerror(r));
    return NULL;
  }
  return k;
}

void
tc_kv_lease_keeper_stop(struct tc_kv_lease_keeper *k)
{
  if (!k)
    return;
  {
    SCOPED_LOCK(&k->lock);
    k->stop = true;
    pthread_cond_broadcast(&k->cond);
  }
  pthread_join(k->thread, NULL);
  pthread_mutex_destroy(&k->lock);
  pthread_cond_destroy(&k->cond);
  free(k);
}
