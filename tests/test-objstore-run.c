/* tc_objstore_run, the blocking adapter over an asynchronous object store
 * (common/cluster/objstore_run.c), against a store whose operations
 * complete on another thread, as the cluster client's do on its loop:
 * every submitted operation is waited for, never more than max_inflight
 * are out at once, the first error stops the submitting and is returned
 * (after what was already out has completed), a submit that fails returns
 * its error, zero-length operations are skipped, completions that come
 * before submit returns (on the submitter's own thread) are counted, a
 * lone caller gets completions that come after its polling window, and
 * callers on several threads at once each get theirs. */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "objstore.h"
#include "tap.h"

#define MAXQ 256

struct fake {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct tc_objop *q[MAXQ];
  size_t n;
  bool stop;
  pthread_t th;
  size_t submitted, out, max_out;
  size_t fail_at;        /* the op with this offset completes with -EIO */
  size_t refuse_at;      /* submit refuses the op with this offset (-ENOSPC) */
  bool inline_done;      /* complete on the submitter's thread, inside submit */
  useconds_t delay_us;   /* before each completion */
  bool alive[MAXQ];      /* per offset: submitted and not yet completed */
};

static void
complete(struct fake *f, struct tc_objop *op)
{
  pthread_mutex_lock(&f->lock);
  f->out--;
  f->alive[op->offset] = false;
  pthread_mutex_unlock(&f->lock);
  op->result = op->offset == f->fail_at ? -EIO : 0;
  op->done(op);
}

static void *
completer(void *arg)
{
  struct fake *f = arg;
  pthread_mutex_lock(&f->lock);
  for (;;) {
    while (!f->n && !f->stop)
      pthread_cond_wait(&f->cond, &f->lock);
    if (!f->n && f->stop)
      break;
    struct tc_objop *op = f->q[0];
    memmove(&f->q[0], &f->q[1], --f->n * sizeof f->q[0]);
    pthread_mutex_unlock(&f->lock);
    usleep(f->delay_us);   /* let the submitter run ahead */
    complete(f, op);
    pthread_mutex_lock(&f->lock);
  }
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

static int
fake_submit(void *ctx, struct tc_objop *op)
{
  struct fake *f = ctx;
  if (op->offset == f->refuse_at)
    return -ENOSPC;
  pthread_mutex_lock(&f->lock);
  f->submitted++;
  if (++f->out > f->max_out)
    f->max_out = f->out;
  f->alive[op->offset] = true;
  if (f->inline_done) {
    pthread_mutex_unlock(&f->lock);
    complete(f, op);
    return 0;
  }
  f->q[f->n++] = op;
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->lock);
  return 0;
}

static void
fake_start(struct fake *f)
{
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->cond, NULL);
  f->fail_at = f->refuse_at = (size_t) -1;
  f->delay_us = 100;
  if (pthread_create(&f->th, NULL, completer, f) != 0)
    abort();
}

static void
fake_stop(struct fake *f)
{
  pthread_mutex_lock(&f->lock);
  f->stop = true;
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->lock);
  pthread_join(f->th, NULL);
  pthread_mutex_destroy(&f->lock);
  pthread_cond_destroy(&f->cond);
}

/* n operations, the op with offset i at index i, each 4 KiB */
static void
ops_init(struct tc_objop *ops, size_t n)
{
  memset(ops, 0, n * sizeof *ops);
  for (size_t i = 0; i < n; i++) {
    ops[i].code = TC_OBJ_READ;
    ops[i].offset = i;
    ops[i].len = 4096;
    ops[i].result = 1;   /* not completed */
  }
}

static size_t
completed(const struct tc_objop *ops, size_t n)
{
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    c += ops[i].result != 1;
  return c;
}

static bool
none_alive(const struct fake *f)
{
  for (size_t i = 0; i < MAXQ; i++)
    if (f->alive[i])
      return false;
  return true;
}

struct caller {
  const struct tc_objstore *os;
  struct tc_objop ops[100];
  int r;
};

static void *
caller_thread(void *arg)
{
  struct caller *c = arg;
  ops_init(c->ops, 100);
  c->r = tc_objstore_run(c->os, c->ops, 100, 4, NULL, NULL);
  return NULL;
}

static size_t progress_calls;
static void
progress(void *arg, size_t i, size_t n)
{
  (void) arg;
  (void) i;
  (void) n;
  progress_calls++;
}

int
main(void)
{
  /* A lone waiter polls first (the cluster client's idle_poll_us). */
  tc_objstore_run_set_poll_us(200);
  struct fake f;
  struct tc_objop ops[200];
  struct tc_objstore os = { fake_submit, &f };

  /* all complete; the window holds */
  fake_start(&f);
  ops_init(ops, 200);
  progress_calls = 0;
  int r = tc_objstore_run(&os, ops, 200, 8, progress, NULL);
  CHECK(r == 0 && completed(ops, 200) == 200 && f.submitted == 200, "200 operations all complete (r %d, %zu done)",
        r, completed(ops, 200));
  CHECK(f.max_out <= 8 && f.max_out >= 2, "at most 8 out at once, and more than one (%zu)", f.max_out);
  CHECK(progress_calls == 200, "progress before each (%zu)", progress_calls);
  fake_stop(&f);

  /* no limit */
  fake_start(&f);
  ops_init(ops, 100);
  r = tc_objstore_run(&os, ops, 100, 0, NULL, NULL);
  CHECK(r == 0 && completed(ops, 100) == 100 && none_alive(&f), "without a limit all 100 complete");
  fake_stop(&f);

  /* an error: returned, nothing submitted long after it, everything out has completed */
  fake_start(&f);
  ops_init(ops, 200);
  f.fail_at = 20;
  r = tc_objstore_run(&os, ops, 200, 4, NULL, NULL);
  CHECK(r == -EIO, "the failed operation's error is returned (%d)", r);
  CHECK(none_alive(&f), "every submitted operation completed before the return");
  CHECK(f.submitted >= 21 && f.submitted <= 21 + 4 + 1, "submitting stopped within a window of the error (%zu)",
        f.submitted);
  fake_stop(&f);

  /* a refused submit: its error, no completion expected for it, the rest waited for */
  fake_start(&f);
  ops_init(ops, 50);
  f.refuse_at = 30;
  r = tc_objstore_run(&os, ops, 50, 16, NULL, NULL);
  CHECK(r == -ENOSPC && f.submitted == 30 && completed(ops, 50) == 30 && none_alive(&f),
        "a refused submit returns its error once the 30 before it completed (r %d, %zu submitted)", r, f.submitted);
  fake_stop(&f);

  /* zero-length operations are skipped, a zero-length SYNC is not */
  fake_start(&f);
  ops_init(ops, 10);
  for (size_t i = 0; i < 10; i += 2)
    ops[i].len = 0;
  ops[4].code = TC_OBJ_SYNC;
  r = tc_objstore_run(&os, ops, 10, 2, NULL, NULL);
  CHECK(r == 0 && f.submitted == 6 && ops[0].result == 1 && ops[4].result == 0,
        "4 empty operations skipped, the SYNC and the 5 others run (%zu)", f.submitted);
  fake_stop(&f);

  /* completions inside submit, on the submitter's thread */
  fake_start(&f);
  ops_init(ops, 100);
  f.inline_done = true;
  r = tc_objstore_run(&os, ops, 100, 1, NULL, NULL);
  CHECK(r == 0 && completed(ops, 100) == 100, "completions inside submit are counted");
  ops_init(ops, 100);
  f.fail_at = 50;
  f.submitted = 0;
  r = tc_objstore_run(&os, ops, 100, 3, NULL, NULL);
  CHECK(r == -EIO && f.submitted == 51, "an inline error stops at once (%d, %zu)", r, f.submitted);
  fake_stop(&f);

  /* many runs back to back: a completion never touches a finished run */
  fake_start(&f);
  bool ok = true;
  for (int k = 0; k < 300 && ok; k++) {
    ops_init(ops, 3);
    ok = tc_objstore_run(&os, ops, 3, 3, NULL, NULL) == 0 && completed(ops, 3) == 3;
  }
  CHECK(ok, "300 short runs back to back");
  fake_stop(&f);

  /* completions slower than a lone caller's polling window (200 us) */
  fake_start(&f);
  f.delay_us = 2000;
  ops_init(ops, 20);
  r = tc_objstore_run(&os, ops, 20, 1, NULL, NULL);
  CHECK(r == 0 && completed(ops, 20) == 20 && none_alive(&f), "20 completions 2 ms apart, one at a time");
  fake_stop(&f);

  /* four callers at once on one store: none polls, each gets its own */
  fake_start(&f);
  f.delay_us = 20;
  struct caller cs[4];
  pthread_t th[4];
  int started = 0;
  for (int i = 0; i < 4; i++) {
    cs[i].os = &os;
    if (pthread_create(&th[i], NULL, caller_thread, &cs[i]) == 0)
      started++;
  }
  ok = started == 4;
  for (int i = 0; i < started; i++) {
    pthread_join(th[i], NULL);
    ok = ok && cs[i].r == 0 && completed(cs[i].ops, 100) == 100;
  }
  CHECK(ok && f.submitted == 400 && none_alive(&f), "four threads, 100 operations each, all complete (%zu)",
        f.submitted);
  fake_stop(&f);
  return DONE();
}
