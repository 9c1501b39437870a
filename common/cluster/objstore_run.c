/* The one blocking adapter over the asynchronous object store (objstore.h):
 * the image layer, image administration and tc_cluster_run wait here. */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include "objstore.h"

/* The caller counts what it submitted and takes one post of done for each
 * completion. A semaphore, not a condition variable: the completing thread
 * (the client's loop) posts and never touches w again, so it need not hold
 * a lock the woken caller would then wait for, and glibc's sem_post is
 * safe against the caller returning (destroying w) at once. */
struct run_wait {
  pthread_mutex_t lock;          /* error */
  sem_t done;
  int error;                     /* the first negative errno */
};

static void
run_op_done(struct tc_objop *op)
{
  struct run_wait *w = op->opaque;
  if (op->result < 0) {
    pthread_mutex_lock(&w->lock);
    if (!w->error)
      w->error = op->result;
    pthread_mutex_unlock(&w->lock);
  }
  sem_post(&w->done);
}

static void
take_one(struct run_wait *w, size_t *inflight)
{
  while (sem_wait(&w->done) < 0 && errno == EINTR)
    ;
  (*inflight)--;
}

static int
first_error(struct run_wait *w)
{
  pthread_mutex_lock(&w->lock);
  int e = w->error;
  pthread_mutex_unlock(&w->lock);
  return e;
}

int
tc_objstore_run(const struct tc_objstore *os, struct tc_objop *ops, size_t n, size_t max_inflight,
                tc_objstore_progress_fn fn, void *arg)
{
  struct run_wait w = { .lock = PTHREAD_MUTEX_INITIALIZER };
  if (sem_init(&w.done, 0, 0) < 0)
    return -errno;
  size_t inflight = 0;
  for (size_t i = 0; i < n; i++) {
    if (ops[i].len == 0 && ops[i].code != TC_OBJ_SYNC)
      continue;
    while (max_inflight && inflight >= max_inflight)
      take_one(&w, &inflight);
    if (first_error(&w))
      break;
    ops[i].done = run_op_done;
    ops[i].opaque = &w;
    if (fn)
      fn(arg, i, n);
    int r = os->submit(os->ctx, &ops[i]);
    if (r < 0) {   /* not submitted: its done is never called */
      pthread_mutex_lock(&w.lock);
      if (!w.error)
        w.error = r;
      pthread_mutex_unlock(&w.lock);
      break;
    }
    inflight++;
  }
  /* What was submitted still completes, into this stack frame. */
  while (inflight > 0)
    take_one(&w, &inflight);
  int e = w.error;
  sem_destroy(&w.done);
  pthread_mutex_destroy(&w.lock);
  return e;
}

static int
flagged_submit(void *ctx, struct tc_objop *op)
{
  const struct tc_objstore_flagged *f = ctx;
  if (op->code == TC_OBJ_WRITE || op->code == TC_OBJ_WRITE_PARTIAL || op->code == TC_OBJ_WRITE_IF ||
      op->code == TC_OBJ_DELETE)
    op->flags |= f->flags;
  return f->inner->submit(f->inner->ctx, op);
}

struct tc_objstore
tc_objstore_with_flags(struct tc_objstore_flagged *f, const struct tc_objstore *inner, unsigned flags)
{
  f->inner = inner;
  f->flags = flags;
  return (struct tc_objstore) { .submit = flagged_submit, .ctx = f };
}
