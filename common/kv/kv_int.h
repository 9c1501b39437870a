/* The KV client's internals, shared by its files (not for other layers):
 * kv_client.c (construction, teardown), kv_attempt.c (one request on one
 * endpoint: curl options, silence, the reply), kv_call.c (blocking calls),
 * kv_multi.c (the curl multi loop: non-blocking calls), kv_watch.c
 * (watches), kv_lease.c (leases and the lease keeper). */
#ifndef TROMCHO_KV_INT_H
#define TROMCHO_KV_INT_H
#include <pthread.h>
#include <stdbool.h>
#include <curl/curl.h>
#include "kv_client.h"
#include "kv_json.h"

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
  uint8_t *range_end;            /* or NULL (key alone, or prefix) */
  size_t end_len;
  bool prev_kv;                  /* ask for each event's previous pair */
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

/* Result of one attempt. */
enum attempt { A_DONE, A_FAILED, A_NEXT_ENDPOINT, A_DONE_RAW_503 /* kv_call.c only */ };

struct blocking_progress {
  struct tc_kv *kv;
  CURL *e;
  struct silence quiet;
  bool silent;                   /* aborted for silence */
};

/* kv_multi.c: the client whose loop runs on this thread (NULL: none). */
extern _Thread_local struct tc_kv *kv_tl_loop;

/* kv_attempt.c */
double kv_now_s(void);
size_t kv_buf_write(char *data, size_t size, size_t nmemb, void *userdata);
void kv_setup_easy(struct tc_kv *kv, CURL *e, int ep, const char *path, const char *body, struct curl_slist *hdrs,
                bool stream);
struct curl_slist *kv_http_headers(void);
bool kv_silent_for(struct silence *q, CURL *e, long ms, double now);
int kv_blocking_xferinfo(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
enum attempt kv_finish_attempt(struct tc_kv *kv, const struct tc_kv_request *req, int ep, CURL *e, CURLcode rc,
                            struct buf *resp, struct tc_kv_result *res);

/* kv_multi.c */
void kv_xfer_free(struct xfer *x);
int kv_xfer_start(struct tc_kv *kv, struct xfer *x);
void kv_complete_req(struct xfer *x, int err, const char *msg, struct tc_kv_result *res);
void kv_watch_reap(struct tc_kv *kv, struct tc_kv_watch *w);
int kv_loop_kick(struct tc_kv *kv);

/* kv_watch.c */
size_t kv_watch_write(char *data, size_t size, size_t nmemb, void *userdata);
int kv_watch_connect(struct tc_kv_watch *w);

#endif
