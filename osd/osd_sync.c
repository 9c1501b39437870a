/* The store's syncs off the event loop: one thread runs tc_store_sync for
 * every SYNC and SEC_SYNC that arrived meanwhile (one commit answers them
 * all), while the loop goes on serving the network and the writes (the
 * store queues writes made during a commit's flushes for the next batch:
 * store/store.md). Completions come back to the loop through
 * tc_evloop_submit, in the order the syncs were asked for. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include "error.h"
#include "log.h"
#include "osd.h"
#include "tune.h"

struct osd_sync_req {
  STAILQ_ENTRY(osd_sync_req) next;
  osd_sync_cb cb;
  void *arg;
  int err;
  uint64_t asked_ms;   /* tc_now_ms() when the loop asked */
};

STAILQ_HEAD(osd_sync_reqs, osd_sync_req);

struct osd_syncer {
  struct osd *o;
  pthread_t th;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct osd_sync_reqs queue;                 /* asked, not yet taken */
  struct osd_sync_reqs done;                  /* synced, not yet delivered */
  int stop;
  int deliver_pending;                        /* a deliver call is submitted */
  uint64_t batch_asked_ms;                    /* the batch in the store's hands: its oldest ask (0: none) */
};

/* On the loop: run the callbacks of the finished syncs. */
static void
deliver(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct osd_syncer *s = arg;
  struct osd_sync_reqs q = STAILQ_HEAD_INITIALIZER(q);
  pthread_mutex_lock(&s->lock);
  STAILQ_CONCAT(&q, &s->done);
  s->deliver_pending = 0;
  pthread_mutex_unlock(&s->lock);
  while (!STAILQ_EMPTY(&q)) {
    struct osd_sync_req *r = STAILQ_FIRST(&q);
    STAILQ_REMOVE_HEAD(&q, next);
    tc_evloop_poll_hold(s->o->loop, -1);
    r->cb(s->o, r->arg, r->err);
    free(r);
  }
}

static void *
sync_thread(void *arg)
{
  struct osd_syncer *s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (STAILQ_EMPTY(&s->queue) && !s->stop)
      pthread_cond_wait(&s->cond, &s->lock);
    if (STAILQ_EMPTY(&s->queue))
      break;
    /* One store commit answers every sync asked so far. */
    struct osd_sync_reqs batch = STAILQ_HEAD_INITIALIZER(batch);
    STAILQ_CONCAT(&batch, &s->queue);
    s->batch_asked_ms = STAILQ_FIRST(&batch)->asked_ms;
    pthread_mutex_unlock(&s->lock);
    int err = 0;
    double t0 = tc_metrics_now();
    int rc = tc_store_sync(s->o->store);
    if (s->o->m)
      tc_histogram_since(s->o->m->store_sync, t0);
    if (rc < 0) {
      err = errno ? errno : EIO;
      tc_err("osd %" PRIu64 ": store sync: %s", s->o->osd_num, tc_last_error());
    }
    tc_tune_release();   /* off the loop: give back what a burst of writes left free */
    struct osd_sync_req *r;
    STAILQ_FOREACH(r, &batch, next)
      r->err = err;
    pthread_mutex_lock(&s->lock);
    s->batch_asked_ms = 0;
    STAILQ_CONCAT(&s->done, &batch);
    if (!s->deliver_pending && !s->stop) {
      s->deliver_pending = 1;
      if (tc_evloop_submit(s->o->loop, deliver, s) < 0) {
        s->deliver_pending = 0;
        tc_err("osd %" PRIu64 ": cannot hand sync results to the loop: %s", s->o->osd_num, tc_last_error());
      }
    }
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

int
osd_sync_start(struct osd *o)
{
  struct osd_syncer *s = calloc(1, sizeof *s);
  if (!s)
    return tc_error(ENOMEM, "no memory for the sync thread");
  s->o = o;
  STAILQ_INIT(&s->queue);
  STAILQ_INIT(&s->done);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cond, NULL);
  int rc = pthread_create(&s->th, NULL, sync_thread, s);
  if (rc) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
    return tc_error(rc, "starting the sync thread: %s", strerror(rc));
  }
  pthread_setname_np(s->th, "tc-osd-sync");   /* for top -H, gdb, tests/freeze-thread.py */
  o->syncer = s;
  return 0;
}

void
osd_sync_stop(struct osd *o)
{
  struct osd_syncer *s = o->syncer;
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  s->stop = 1;   /* the thread still syncs what was asked, then ends */
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->th, NULL);
  /* On the loop thread: answer what finished (a submitted deliver, if
   * any, is dropped with the loop and finds nothing). */
  deliver(o->loop, s);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->cond);
  free(s);
  o->syncer = NULL;
}

int
osd_sync_async(struct osd *o, osd_sync_cb cb, void *arg)
{
  struct osd_syncer *s = o->syncer;
  struct osd_sync_req *r = calloc(1, sizeof *r);
  if (!r)
    return tc_error(ENOMEM, "no memory for a sync");
  if (!s) {   /* not started (never in the daemon): sync here */
    r->err = tc_store_sync(o->store) < 0 ? (errno ? errno : EIO) : 0;
    cb(o, arg, r->err);
    free(r);
    return 0;
  }
  r->cb = cb;
  r->arg = arg;
  r->asked_ms = tc_now_ms();
  tc_evloop_poll_hold(o->loop, 1);   /* released in deliver (evloop.h) */
  pthread_mutex_lock(&s->lock);
  STAILQ_INSERT_TAIL(&s->queue, r, next);
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

uint64_t
osd_sync_oldest_ms(struct osd *o)
{
  struct osd_syncer *s = o->syncer;
  if (!s)
    return 0;
  pthread_mutex_lock(&s->lock);
  uint64_t t = s->batch_asked_ms;
  if (!t && !STAILQ_EMPTY(&s->queue))
    t = STAILQ_FIRST(&s->queue)->asked_ms;
  pthread_mutex_unlock(&s->lock);
  return t;
}
