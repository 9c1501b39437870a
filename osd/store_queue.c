/* The store's asynchronous seam: one worker thread, a FIFO of requests, an
 * eventfd and a list of completions (see store_queue.h). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "cleanup.h"
#include "error.h"
#include "store_queue.h"

struct list { struct tc_store_req *head, *tail; };

struct tc_store_queue {
  struct tc_store *st;
  pthread_t worker;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct list pending, finished;
  int stop;
  int efd;
};

static void
push(struct list *l, struct tc_store_req *r)
{
  r->next = NULL;
  if (l->tail)
    l->tail->next = r;
  else
    l->head = r;
  l->tail = r;
}

static void
run(struct tc_store *st, struct tc_store_req *r)
{
  int rc;
  switch (r->op) {
  case TC_STORE_OP_READ:
    rc = tc_store_read(st, r->inode, r->offset, r->len, r->buf, r->bitmap, &r->version);
    break;
  case TC_STORE_OP_WRITE:
    rc = tc_store_write(st, r->inode, r->offset, r->len, r->buf, r->version);
    break;
  case TC_STORE_OP_DELETE:
    rc = tc_store_delete(st, r->inode, r->offset, r->len);
    break;
  case TC_STORE_OP_SYNC:
    rc = tc_store_sync(st);
    break;
  case TC_STORE_OP_SCRUB:
    rc = tc_store_scrub(st, r->inode, r->offset, r->bitmap);
    break;
  default:
    rc = tc_error(EINVAL, "store queue: unknown operation %d", (int) r->op);
  }
  r->result = rc < 0 ? -(errno ? errno : EIO) : rc;
  if (rc < 0)
    snprintf(r->error, sizeof r->error, "%s", tc_last_error());
  else
    r->error[0] = 0;
}

static void *
worker_main(void *arg)
{
  struct tc_store_queue *q = arg;
  pthread_mutex_lock(&q->lock);
  for (;;) {
    while (!q->pending.head && !q->stop)
      pthread_cond_wait(&q->cond, &q->lock);
    struct tc_store_req *r = q->pending.head;
    if (!r)
      break;   /* stopping and drained */
    q->pending.head = r->next;
    if (!q->pending.head)
      q->pending.tail = NULL;
    pthread_mutex_unlock(&q->lock);
    run(q->st, r);
    pthread_mutex_lock(&q->lock);
    push(&q->finished, r);
    uint64_t one = 1;
    if (write(q->efd, &one, sizeof one) < 0) {
      /* Only EAGAIN at a counter of 2^64-2: the waiting completions still
       * make the fd readable. */
    }
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

int
tc_store_queue_new(struct tc_store_queue **out, struct tc_store *st)
{
  struct tc_store_queue *q = calloc(1, sizeof *q);
  if (!q)
    return tc_error(ENOMEM, "store queue: no memory");
  q->st = st;
  q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (q->efd < 0) {
    free(q);
    return tc_error(errno, "store queue: eventfd: %m");
  }
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->cond, NULL);
  int e = pthread_create(&q->worker, NULL, worker_main, q);
  if (e) {
    close(q->efd);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
    free(q);
    return tc_error(e, "store queue: pthread_create: %s", strerror(e));
  }
  *out = q;
  return 0;
}

int
tc_store_queue_fd(const struct tc_store_queue *q)
{
  return q->efd;
}

int
tc_store_submit(struct tc_store_queue *q, struct tc_store_req *req)
{
  SCOPED_LOCK(&q->lock);
  if (q->stop)
    return tc_error(ESHUTDOWN, "store queue: stopping");
  push(&q->pending, req);
  pthread_cond_signal(&q->cond);
  return 0;
}

int
tc_store_queue_complete(struct tc_store_queue *q)
{
  uint64_t n;
  if (read(q->efd, &n, sizeof n) < 0 && errno != EAGAIN)
    return tc_error(errno, "store queue: read eventfd: %m");
  pthread_mutex_lock(&q->lock);
  struct tc_store_req *r = q->finished.head;
  q->finished.head = q->finished.tail = NULL;
  pthread_mutex_unlock(&q->lock);
  int count = 0;
  while (r) {
    struct tc_store_req *next = r->next;   /* done() may free or resubmit r */
    if (r->done)
      r->done(r);
    r = next;
    count++;
  }
  return count;
}

void
tc_store_queue_free(struct tc_store_queue *q)
{
  if (!q)
    return;
  pthread_mutex_lock(&q->lock);
  q->stop = 1;
  pthread_cond_signal(&q->cond);
  pthread_mutex_unlock(&q->lock);
  pthread_join(q->worker, NULL);
  tc_store_queue_complete(q);
  close(q->efd);
  pthread_mutex_destroy(&q->lock);
  pthread_cond_destroy(&q->cond);
  free(q);
}
