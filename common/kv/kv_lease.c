/* The KV client's leases: grant, keep alive, revoke, and the lease keeper
 * thread. */
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
  uint64_t until_ms;   /* atomic: tc_kv_lease_keeper_until_ms */
  const uint64_t *beat_ms;   /* under lock: tc_kv_lease_keeper_watch */
  uint64_t max_silence_ms;
};

/* Whether the holder has beaten within max_silence_ms (always, when it is
 * not watched). Tells the log once per silence. */
static bool
holder_alive(struct tc_kv_lease_keeper *k, bool *told)
{
  const uint64_t *beat;
  uint64_t max;
  {
    SCOPED_LOCK(&k->lock);
    beat = k->beat_ms;
    max = k->max_silence_ms;
  }
  if (!beat)
    return true;
  uint64_t now = (uint64_t) (kv_now_s() * 1000), last = __atomic_load_n(beat, __ATOMIC_ACQUIRE);
  if (now <= last || now - last <= max) {
    if (*told)
      tc_warn("kv: the holder of lease %" PRIx64 " shows life again: renewing it", (uint64_t) k->id);
    *told = false;
    return true;
  }
  if (!*told)
    tc_warn("kv: the holder of lease %" PRIx64 " has shown no life for %" PRIu64 " ms: letting the lease lapse",
            (uint64_t) k->id, now - last);
  *told = true;
  return false;
}

/* A renewal sent at t (ms, CLOCK_MONOTONIC) that the server answered
 * holds the lease there until at least t + TTL: the server counts from
 * when it got the request, later. A tenth of the TTL is kept back for
 * clocks that run at slightly different rates. */
static void
set_until(struct tc_kv_lease_keeper *k, uint64_t sent_ms, int64_t ttl)
{
  uint64_t span = (uint64_t) ttl * 1000;
  __atomic_store_n(&k->until_ms, sent_ms + span - span / 10, __ATOMIC_RELEASE);
}

uint64_t
tc_kv_lease_keeper_until_ms(const struct tc_kv_lease_keeper *k)
{
  return k ? __atomic_load_n(&k->until_ms, __ATOMIC_ACQUIRE) : 0;
}

static void *
keeper_thread(void *arg)
{
  struct tc_kv_lease_keeper *k = arg;
  double last_ok = kv_now_s(), last_warn = 0, period = k->ttl / 3.0;
  bool silent = false, unanswered = false;
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
    if (!holder_alive(k, &silent)) {
      last_ok = kv_now_s();   /* the silence is the holder's, not the KV's */
      continue;
    }
    int64_t ttl;
    uint64_t sent = (uint64_t) (kv_now_s() * 1000);
    if (tc_kv_lease_keepalive(k->kv, k->id, &ttl) == 0) {
      if (unanswered)
        tc_warn("kv: lease %" PRIx64 " renewed again after %.1f s without an answer", (uint64_t) k->id,
                kv_now_s() - last_ok);
      unanswered = false;
      last_ok = kv_now_s();
      set_until(k, sent, ttl > 0 ? ttl : k->ttl);
      continue;
    }
    int err = errno;
    if (err == ENOENT) {
      tc_warn("kv: keeping lease %" PRIx64 " alive: %s", (uint64_t) k->id, tc_last_error());
      __atomic_store_n(&k->until_ms, 0, __ATOMIC_RELEASE);   /* gone (expired, revoked, a KV that forgot it) */
      if (k->lost)
        k->lost(k->arg, k->id);
      return NULL;
    }
    /* No answer (a KV restarting, a link down): until_ms runs out by
     * itself and the holder stops counting on the lease, but the lease is
     * not known to be gone. A KV that restarted restores its leases with
     * a whole TTL (etcd does so on taking the lead, tromcho-gateway when
     * it loads its store): renewing the same lease then holds it again at
     * once, where a new one could not take the holder's keys before the
     * old one ran out. The server's own answer says when it is gone. */
    double now = kv_now_s();
    if (!unanswered || now - last_warn >= 10) {   /* at most every 10 s while it lasts */
      tc_warn("kv: keeping lease %" PRIx64 " alive: %s%s", (uint64_t) k->id, tc_last_error(),
              now - last_ok > (double) k->ttl ? " (not held now; still trying)" : "");
      last_warn = now;
    }
    unanswered = true;
  }
}

struct tc_kv_lease_keeper *
tc_kv_lease_keeper_start(struct tc_kv *kv, int64_t lease_id, int64_t ttl, uint64_t granted_ms,
                         tc_kv_lease_lost_fn lost, void *arg)
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
  set_until(k, granted_ms ? granted_ms : (uint64_t) (kv_now_s() * 1000), k->ttl);
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
tc_kv_lease_keeper_watch(struct tc_kv_lease_keeper *k, const uint64_t *beat_ms, uint64_t max_silence_ms)
{
  SCOPED_LOCK(&k->lock);
  k->beat_ms = beat_ms;
  k->max_silence_ms = max_silence_ms;
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

