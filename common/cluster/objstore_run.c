/* The one blocking adapter over the asynchronous object store (objstore.h):
 * the image layer, image administration and tc_cluster_run wait here. */
#include <config.h>
#include <pthread.h>
#include "objstore.h"

struct run_wait {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  size_t inflight;
  int error;                     /* the first negative errno */
};

static void
run_op_done(struct tc_objop *op)
{
  struct run_wait *w = op->opaque;
  pthread_mutex_lock(&w->lock);
  if (op->result < 0 && !w->error)
    w->error = op->result;
  w->inflight--;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

int
tc_objstore_run(const struct tc_objstore *os, struct tc_objop *ops, size_t n, size_t max_inflight,
                tc_objstore_progress_fn fn, void *arg)
{
  struct run_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
  pthread_mutex_lock(&w.lock);
  for (size_t i = 0; i < n && !w.error; i++) {
    if (ops[i].len == 0 && ops[i].code != TC_OBJ_SYNC)
      continue;
    while (max_inflight && w.inflight >= max_inflight)
      pthread_cond_wait(&w.cond, &w.lock);
    if (w.error)
      break;
    ops[i].done = run_op_done;
    ops[i].opaque = &w;
    w.inflight++;
    pthread_mutex_unlock(&w.lock);
    if (fn)
      fn(arg, i, n);
    int r = os->submit(os->ctx, &ops[i]);
    pthread_mutex_lock(&w.lock);
    if (r < 0) {
      w.inflight--;
      if (!w.error)
        w.error = r;
    }
  }
  /* What was submitted still completes, into this stack frame. */
  while (w.inflight > 0)
    pthread_cond_wait(&w.cond, &w.lock);
  int e = w.error;
  pthread_mutex_unlock(&w.lock);
  pthread_mutex_destroy(&w.lock);
  pthread_cond_destroy(&w.cond);
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
