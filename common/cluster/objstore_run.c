/* The one blocking adapter over the asynchronous object store (objstore.h):
 * the image layer, image administration and tc_cluster_run wait here. */
#include <config.h>
#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sched.h>
#include "error.h"
#include "evloop.h"
#include "objstore.h"
#include "log.h"
#include "poll_window.h"
#include "tune.h"

/* A caller that is the only one waiting polls its completion for up to
 * poll_ns (tc_objstore_run_set_poll_us; option idle_poll_us) before it
 * sleeps, yielding the CPU at each look: a thread with
 * work there (the client's loop, an OSD) runs first, but the CPU does not
 * go idle. On a VM each wake-up of a halted vCPU is a VM exit, the largest
 * part of a queue-depth-1 round trip there; with the vCPU kept awake the
 * reply reaches us without one. Through nbdkit, (c) XTS + gcm, A/B
 * (bench/README.md): 4 KiB write QD1 230 -> 155 us, read QD1 115 -> 88
 * us, a flush after each write 1.3x. A pause loop instead of the yield
 * made reads slower (it took the CPU the OSD needed). With others waiting
 * (a deep queue) nobody polls: the CPUs have work.
 * Process-wide (atomics: any thread): the callers waiting in take_one,
 * and how long a lone one polls. */
static atomic_int waiting;
static _Atomic uint64_t poll_ns;
/* The window a lone caller polls for now (poll_window.h): callers whose
 * completions come further apart than poll_ns (a guest's QD1 requests)
 * stop polling, which only took the CPU from the threads with work. */
static _Atomic uint64_t poll_cur_ns;

void
tc_objstore_run_set_poll_us(unsigned us)
{
  atomic_store(&poll_ns, (uint64_t) us * 1000);
  atomic_store(&poll_cur_ns, (uint64_t) us * 1000);
}

/* Whether callers go under SCHED_BATCH, and whether this thread has. */
static atomic_bool batch_callers;
static _Thread_local bool batched;

void
tc_objstore_run_set_sched_batch(bool on)
{
  atomic_store(&batch_callers, on);
}

/* Once per thread: nbdkit's and FUSE's workers are created by the front
 * end's framework, so they are reached here, at their first I/O. Where the
 * policy is refused (a seccomp filter), one warning and no more attempts. */
static void
batch_caller(void)
{
  if (batched || !atomic_load_explicit(&batch_callers, memory_order_relaxed))
    return;
  batched = true;
  if (tc_tune_sched_batch() < 0 && atomic_exchange(&batch_callers, false))
    tc_warn("%s (the threads keep their policy)", tc_last_error());
}


/* The caller counts what it submitted and takes one post of done for each
 * completion. A semaphore, not a condition variable: the completing thread
 * (the client's loop) posts and never touches w again, so it need not hold
 * a lock the woken caller would then wait for, and glibc's sem_post is
 * safe against the caller returning (destroying w) at once. */
struct run_wait {
  sem_t done;
  atomic_int error;              /* the first negative errno */
};

static void
set_error(struct run_wait *w, int e)
{
  int none = 0;
  atomic_compare_exchange_strong(&w->error, &none, e);
}

static void
run_op_done(struct tc_objop *op)
{
  struct run_wait *w = op->opaque;
  if (op->result < 0)
    set_error(w, op->result);
  sem_post(&w->done);
}

/* Poll done alone for up to ns; true if a completion was taken. */
static bool
spin_take(struct run_wait *w, uint64_t ns)
{
  uint64_t end = tc_now_ns() + ns;
  do {
    if (sem_trywait(&w->done) == 0)
      return true;
    sched_yield();
  } while (tc_now_ns() < end && atomic_load_explicit(&waiting, memory_order_relaxed) == 1);
  return false;
}

/* flush: the caller waits for a SYNC: poll the whole window, adapt nothing
 * (evloop.h, tc_evloop_poll_hold). */
static void
take_one(struct run_wait *w, size_t *inflight, bool flush)
{
  uint64_t max = atomic_load_explicit(&poll_ns, memory_order_relaxed);
  uint64_t cur = flush ? max : atomic_load_explicit(&poll_cur_ns, memory_order_relaxed);
  bool lone = atomic_fetch_add(&waiting, 1) == 0 && max;
  uint64_t t0 = lone ? tc_now_ns() : 0;
  bool got = lone && cur && spin_take(w, cur);
  while (!got && sem_wait(&w->done) < 0 && errno == EINTR)
    ;
  if (lone && !flush)
    atomic_store_explicit(&poll_cur_ns, tc_poll_window_adapt(cur, max, tc_now_ns() - t0), memory_order_relaxed);
  atomic_fetch_sub(&waiting, 1);
  (*inflight)--;
}

int
tc_objstore_run(const struct tc_objstore *os, struct tc_objop *ops, size_t n, size_t max_inflight,
                tc_objstore_progress_fn fn, void *arg)
{
  batch_caller();
  struct run_wait w;
  atomic_init(&w.error, 0);
  if (sem_init(&w.done, 0, 0) < 0)
    return -errno;
  size_t inflight = 0;
  bool flush = false;
  for (size_t i = 0; i < n; i++)
    flush |= ops[i].code == TC_OBJ_SYNC;
  for (size_t i = 0; i < n; i++) {
    if (ops[i].len == 0 && ops[i].code != TC_OBJ_SYNC)
      continue;
    while (max_inflight && inflight >= max_inflight)
      take_one(&w, &inflight, flush);
    if (atomic_load(&w.error))
      break;
    ops[i].done = run_op_done;
    ops[i].opaque = &w;
    if (fn)
      fn(arg, i, n);
    int r = os->submit(os->ctx, &ops[i]);
    if (r < 0) {   /* not submitted: its done is never called */
      set_error(&w, r);
      break;
    }
    inflight++;
  }
  /* What was submitted still completes, into this stack frame. */
  while (inflight > 0)
    take_one(&w, &inflight, flush);
  sem_destroy(&w.done);
  return atomic_load(&w.error);
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
