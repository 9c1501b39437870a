/* The event loop: epoll for fds, a sorted list for timers (few per
 * connection, so a list is enough), an eventfd to wake the loop from other
 * threads. */
#include <config.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/queue.h>
#include <sys/eventfd.h>
#include "error.h"
#include "evloop.h"
#include "poll_window.h"
#include "vector.h"

struct fd_handler {
  int fd;
  int dead;
  tc_evloop_fd_cb cb;
  void *arg;
  struct fd_handler *next_dead;
};

struct tc_timer {
  uint64_t deadline;
  tc_evloop_cb cb;
  void *arg;
  struct tc_timer *next;
};

struct call {
  tc_evloop_cb cb;
  void *arg;
  STAILQ_ENTRY(call) next;
};
STAILQ_HEAD(calls, call);

struct tc_evloop {
  int epfd;
  int wakefd;
  struct fd_handler **fds;   /* indexed by fd */
  int nfds;
  struct fd_handler *dead;   /* freed at the end of a round */
  struct tc_timer *timers;   /* sorted by deadline */
  struct calls deferred;
  pthread_mutex_t lock;      /* guards submitted and stop */
  struct calls submitted;
  int stop;
  uint64_t poll_ns;          /* poll at most this long (yielding) before blocking, 0: never */
  uint64_t poll_cur_ns;      /* the window now (poll_window.h), <= poll_ns */
  int poll_hold;             /* > 0: a flush is awaited, poll the whole poll_ns */
};

uint64_t
tc_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

void
tc_evloop_set_poll_us(struct tc_evloop *l, unsigned us)
{
  l->poll_ns = (uint64_t) us * 1000;
  l->poll_cur_ns = l->poll_ns;
}

uint64_t
tc_evloop_poll_window_ns(const struct tc_evloop *l)
{
  return l->poll_hold ? l->poll_ns : l->poll_cur_ns;
}

void
tc_evloop_poll_hold(struct tc_evloop *l, int delta)
{
  l->poll_hold += delta;
}

uint64_t
tc_now_ms(void)
{
  return tc_now_ns() / 1000000;
}

struct tc_evloop *
tc_evloop_new(void)
{
  struct tc_evloop *l = calloc(1, sizeof *l);
  if (!l) {
    tc_error(ENOMEM, "tc_evloop_new: out of memory");
    return NULL;
  }
  STAILQ_INIT(&l->deferred);
  STAILQ_INIT(&l->submitted);
  l->epfd = epoll_create1(EPOLL_CLOEXEC);
  l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (l->epfd < 0 || l->wakefd < 0) {
    tc_error(errno, "tc_evloop_new: epoll_create1/eventfd: %s", strerror(errno));
    if (l->epfd >= 0) close(l->epfd);
    if (l->wakefd >= 0) close(l->wakefd);
    free(l);
    return NULL;
  }
  pthread_mutex_init(&l->lock, NULL);
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
  if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) < 0) {
    tc_error(errno, "tc_evloop_new: epoll_ctl(eventfd): %s", strerror(errno));
    tc_evloop_free(l);
    return NULL;
  }
  return l;
}

static void run_deferred(struct tc_evloop *l);

static void
free_dead(struct tc_evloop *l)
{
  while (l->dead) {
    struct fd_handler *h = l->dead;
    l->dead = h->next_dead;
    free(h);
  }
}

static void
free_calls(struct calls *q)
{
  while (!STAILQ_EMPTY(q)) {
    struct call *c = STAILQ_FIRST(q);
    STAILQ_REMOVE_HEAD(q, next);
    free(c);
  }
}

void
tc_evloop_free(struct tc_evloop *l)
{
  if (!l)
    return;
  run_deferred(l);
  for (int i = 0; i < l->nfds; i++)
    free(l->fds[i]);
  free(l->fds);
  free_dead(l);
  while (l->timers) {
    struct tc_timer *t = l->timers;
    l->timers = t->next;
    free(t);
  }
  free_calls(&l->deferred);
  free_calls(&l->submitted);
  close(l->epfd);
  close(l->wakefd);
  pthread_mutex_destroy(&l->lock);
  free(l);
}

int
tc_evloop_add_fd(struct tc_evloop *l, int fd, uint32_t events, tc_evloop_fd_cb cb, void *arg)
{
  if (fd < 0)
    return tc_error(EBADF, "tc_evloop_add_fd: bad fd %d", fd);
  if (fd >= l->nfds) {
    size_t cap = (size_t) l->nfds;
    if (tc_grow(&l->fds, &cap, (size_t) fd + 1, sizeof *l->fds, 64) < 0 || cap > INT_MAX)
      return tc_error(ENOMEM, "tc_evloop_add_fd: out of memory");
    memset(l->fds + l->nfds, 0, (cap - (size_t) l->nfds) * sizeof *l->fds);
    l->nfds = (int) cap;
  }
  if (l->fds[fd])
    return tc_error(EEXIST, "tc_evloop_add_fd: fd %d is already watched", fd);
  struct fd_handler *h = calloc(1, sizeof *h);
  if (!h)
    return tc_error(ENOMEM, "tc_evloop_add_fd: out of memory");
  h->fd = fd;
  h->cb = cb;
  h->arg = arg;
  struct epoll_event ev = { .events = events, .data.ptr = h };
  if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
    int e = errno;
    free(h);
    return tc_error(e, "tc_evloop_add_fd: epoll_ctl(ADD, %d): %s", fd, strerror(e));
  }
  l->fds[fd] = h;
  return 0;
}

int
tc_evloop_mod_fd(struct tc_evloop *l, int fd, uint32_t events)
{
  if (fd < 0 || fd >= l->nfds || !l->fds[fd])
    return tc_error(ENOENT, "tc_evloop_mod_fd: fd %d is not watched", fd);
  struct epoll_event ev = { .events = events, .data.ptr = l->fds[fd] };
  if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
    return tc_error(errno, "tc_evloop_mod_fd: epoll_ctl(MOD, %d): %s", fd, strerror(errno));
  return 0;
}

int
tc_evloop_del_fd(struct tc_evloop *l, int fd)
{
  if (fd < 0 || fd >= l->nfds || !l->fds[fd])
    return tc_error(ENOENT, "tc_evloop_del_fd: fd %d is not watched", fd);
  struct fd_handler *h = l->fds[fd];
  l->fds[fd] = NULL;
  epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
  /* Events of this round may still point at h: keep it until the round ends. */
  h->dead = 1;
  h->next_dead = l->dead;
  l->dead = h;
  return 0;
}

struct tc_timer *
tc_evloop_timer_add(struct tc_evloop *l, uint64_t ms, tc_evloop_cb cb, void *arg)
{
  struct tc_timer *t = calloc(1, sizeof *t);
  if (!t) {
    tc_error(ENOMEM, "tc_evloop_timer_add: out of memory");
    return NULL;
  }
  t->deadline = tc_now_ms() + ms;
  t->cb = cb;
  t->arg = arg;
  struct tc_timer **p = &l->timers;
  while (*p && (*p)->deadline <= t->deadline)
    p = &(*p)->next;
  t->next = *p;
  *p = t;
  return t;
}

void
tc_evloop_timer_cancel(struct tc_evloop *l, struct tc_timer *t)
{
  for (struct tc_timer **p = &l->timers; *p; p = &(*p)->next)
    if (*p == t) {
      *p = t->next;
      free(t);
      return;
    }
}

static struct call *
new_call(tc_evloop_cb cb, void *arg)
{
  struct call *c = calloc(1, sizeof *c);
  if (c) {
    c->cb = cb;
    c->arg = arg;
  }
  return c;
}

int
tc_evloop_defer(struct tc_evloop *l, tc_evloop_cb cb, void *arg)
{
  struct call *c = new_call(cb, arg);
  if (!c)
    return tc_error(ENOMEM, "tc_evloop_defer: out of memory");
  STAILQ_INSERT_TAIL(&l->deferred, c, next);
  return 0;
}

static void
wake(struct tc_evloop *l)
{
  uint64_t one = 1;
  /* EAGAIN means the counter is already non-zero: the loop will wake. */
  if (write(l->wakefd, &one, sizeof one) < 0 && errno != EAGAIN)
    abort();
}

int
tc_evloop_submit(struct tc_evloop *l, tc_evloop_cb cb, void *arg)
{
  struct call *c = new_call(cb, arg);
  if (!c)
    return tc_error(ENOMEM, "tc_evloop_submit: out of memory");
  /* Only the call that makes the queue non-empty wakes the loop: the loop
   * reads the eventfd before it takes the queue, so a call added behind
   * others is run with them, and a syscall per call is saved when many
   * threads submit at once (nbdkit's workers at a deep queue). */
  pthread_mutex_lock(&l->lock);
  bool first = STAILQ_EMPTY(&l->submitted);
  STAILQ_INSERT_TAIL(&l->submitted, c, next);
  pthread_mutex_unlock(&l->lock);
  if (first)
    wake(l);
  return 0;
}

void
tc_evloop_stop(struct tc_evloop *l)
{
  pthread_mutex_lock(&l->lock);
  l->stop = 1;
  pthread_mutex_unlock(&l->lock);
  wake(l);
}

static void
run_submitted(struct tc_evloop *l)
{
  struct calls q = STAILQ_HEAD_INITIALIZER(q);
  pthread_mutex_lock(&l->lock);
  STAILQ_CONCAT(&q, &l->submitted);   /* leaves l->submitted empty */
  pthread_mutex_unlock(&l->lock);
  while (!STAILQ_EMPTY(&q)) {
    struct call *c = STAILQ_FIRST(&q);
    STAILQ_REMOVE_HEAD(&q, next);
    c->cb(l, c->arg);
    free(c);
  }
}

static void
run_deferred(struct tc_evloop *l)
{
  while (!STAILQ_EMPTY(&l->deferred)) {
    struct call *c = STAILQ_FIRST(&l->deferred);
    STAILQ_REMOVE_HEAD(&l->deferred, next);
    c->cb(l, c->arg);
    free(c);
  }
}

static void
run_timers(struct tc_evloop *l)
{
  uint64_t now = tc_now_ms();
  while (l->timers && l->timers->deadline <= now) {
    struct tc_timer *t = l->timers;
    l->timers = t->next;
    tc_evloop_cb cb = t->cb;
    void *arg = t->arg;
    free(t);
    cb(l, arg);
  }
}

int
tc_evloop_run_once(struct tc_evloop *l, int timeout_ms)
{
  if (!STAILQ_EMPTY(&l->deferred))
    timeout_ms = 0;
  if (l->timers) {
    uint64_t now = tc_now_ms();
    int64_t left = l->timers->deadline > now ? (int64_t) (l->timers->deadline - now) : 0;
    if (timeout_ms < 0 || left < timeout_ms)
      timeout_ms = (int) left;
  }
  struct epoll_event evs[64];
  int n = epoll_wait(l->epfd, evs, 64, l->poll_ns && timeout_ms ? 0 : timeout_ms);
  if (n == 0 && l->poll_ns && timeout_ms) {
    /* Nothing ready: look again, yielding the CPU between looks, for the
     * poll window before blocking (tc_evloop_set_poll_us), then adapt the
     * window to how long this idle period lasted. */
    uint64_t t0 = tc_now_ns(), cur = l->poll_hold ? l->poll_ns : l->poll_cur_ns;
    while (n == 0 && cur && tc_now_ns() - t0 < cur) {
      sched_yield();
      n = epoll_wait(l->epfd, evs, 64, 0);
    }
    if (n == 0)
      n = epoll_wait(l->epfd, evs, 64, timeout_ms);
    if (!l->poll_hold)
      l->poll_cur_ns = tc_poll_window_adapt(cur, l->poll_ns, tc_now_ns() - t0);
  }
  if (n < 0) {
    if (errno == EINTR)
      n = 0;
    else
      return tc_error(errno, "tc_evloop_run_once: epoll_wait: %s", strerror(errno));
  }
  for (int i = 0; i < n; i++) {
    struct fd_handler *h = evs[i].data.ptr;
    if (!h) {
      uint64_t v;
      if (read(l->wakefd, &v, sizeof v) < 0 && errno != EAGAIN)
        return tc_error(errno, "tc_evloop_run_once: read(eventfd): %s", strerror(errno));
      run_submitted(l);
      continue;
    }
    if (!h->dead)
      h->cb(l, h->fd, evs[i].events, h->arg);
  }
  run_timers(l);
  run_deferred(l);
  free_dead(l);
  return 0;
}

int
tc_evloop_run(struct tc_evloop *l)
{
  for (;;) {
    pthread_mutex_lock(&l->lock);
    int stop = l->stop;
    l->stop = 0;
    pthread_mutex_unlock(&l->lock);
    if (stop)
      return 0;
    if (tc_evloop_run_once(l, -1) < 0)
      return -1;
  }
}
