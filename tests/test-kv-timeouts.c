/* The KV client's timeouts (run by test-kv-timeouts.sh): a request fails
 * only when its server stops answering, and then moves on to the next
 * endpoint; a slow server that keeps answering is waited for.
 *
 *   KV_URL         a real KV server
 *   KV_SILENT_URL  kv-stub.py silent: connects, never answers
 *   KV_DRIP_URL    kv-stub.py drip: answers a range over ~3 s, a byte at a time
 *
 * Every client here allows 1 s of silence (request_timeout_ms). */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "kv_client.h"
#include "log.h"
#include "tap.h"

static double
mono(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct tc_kv *
client(const char *a, const char *b)
{
  const char *urls[2] = { a, b };
  struct tc_kv_options o = { .urls = urls, .n_urls = b ? 2 : 1, .connect_timeout_ms = 1000,
                             .request_timeout_ms = 1000 };
  struct tc_kv *kv = tc_kv_new(&o);
  if (!kv) {
    fprintf(stderr, "tc_kv_new: %s\n", tc_last_error());
    exit(1);
  }
  return kv;
}

struct waiter {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done, errors, last_err;
  int64_t revision;
};

static void
on_done(void *arg, int err, const char *msg, struct tc_kv_result *res)
{
  struct waiter *w = arg;
  pthread_mutex_lock(&w->lock);
  w->done++;
  if (err) {
    w->errors++;
    w->last_err = err;
    fprintf(stderr, "async: %s\n", msg);
  }
  w->revision = res->revision;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

/* n async gets of key; waits for all. */
static void
async_gets(struct tc_kv *kv, const char *key, int n, struct waiter *w)
{
  for (int i = 0; i < n; i++) {
    struct tc_kv_request req = { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_RANGE, .key = key } };
    CHECK(tc_kv_submit(kv, &req, on_done, w) == 0, "submit: %s", tc_last_error());
  }
  pthread_mutex_lock(&w->lock);
  while (w->done < n)
    pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
}

int
main(void)
{
  const char *real = getenv("KV_URL"), *silent = getenv("KV_SILENT_URL"), *drip = getenv("KV_DRIP_URL");
  if (!real || !silent || !drip) {
    printf("KV_URL, KV_SILENT_URL or KV_DRIP_URL unset: run through test-kv-timeouts.sh\n");
    return 1;
  }
  tc_log_open("test-kv-timeouts", 0);
  struct tc_kv_result r;
  double start = mono();

  /* A slow server that keeps answering: 3 s for one reply is fine with
   * 1 s of allowed silence, blocking and async. */
  struct tc_kv *kv = client(drip, NULL);
  double t0 = mono();
  int rc = tc_kv_get(kv, "/k", 0, &r);
  double t = mono() - t0;
  CHECK(rc == 0 && r.revision == 7, "a reply dripping for %.1f s is waited for: %s", t,
        rc ? tc_last_error() : "ok");
  printf("drip: %.1f s\n", t);
  CHECK(t > 2, "the drip took more than the request timeout (%.1f s)", t);
  tc_kv_result_free(&r);
  struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0 };
  async_gets(kv, "/k", 4, &w);
  CHECK(w.errors == 0 && w.revision == 7, "4 async gets from the drip succeed (%d failed)", w.errors);
  tc_kv_free(kv);

  /* A server that stopped answering: the request fails after about the
   * request timeout, naming the endpoint, as a timeout. */
  kv = client(silent, NULL);
  t0 = mono();
  rc = tc_kv_get(kv, "/k", 0, &r);
  int err = errno;
  t = mono() - t0;
  CHECK(rc < 0 && err == ETIMEDOUT && strstr(tc_last_error(), silent), "silent server: ETIMEDOUT naming it (%s)",
        tc_last_error());
  CHECK(t >= 0.9 && t < 5, "silent server given up after %.1f s", t);
  struct waiter w2 = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0 };
  t0 = mono();
  async_gets(kv, "/k", 2, &w2);
  t = mono() - t0;
  CHECK(w2.errors == 2 && w2.last_err == ETIMEDOUT, "async on the silent server: ETIMEDOUT (%d failed)",
        w2.errors);
  CHECK(t < 5, "async given up after %.1f s", t);
  tc_kv_free(kv);

  /* Silent first, real second: requests fail over and succeed. */
  kv = client(silent, real);
  t0 = mono();
  rc = tc_kv_put(kv, "/timeouts/a", 0, "1", 0, 0, NULL);
  t = mono() - t0;
  CHECK(rc == 0, "put fails over from the silent server: %s", rc ? tc_last_error() : "ok");
  CHECK(t < 5, "failover took %.1f s", t);
  CHECK(!strcmp(tc_kv_current_url(kv), real), "the working endpoint is now in use (%s)", tc_kv_current_url(kv));
  tc_kv_free(kv);
  kv = client(silent, real);
  struct waiter w3 = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0 };
  t0 = mono();
  async_gets(kv, "/timeouts/a", 20, &w3);
  t = mono() - t0;
  CHECK(w3.errors == 0, "20 async gets fail over from the silent server (%d failed)", w3.errors);
  CHECK(t < 5, "async failover took %.1f s", t);
  tc_kv_free(kv);
  printf("total %.1f s\n", mono() - start);
  return DONE();
}
