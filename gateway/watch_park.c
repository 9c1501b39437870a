/* Parked watches (see watch_park.h). */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include "watch_park.h"
#include "cleanup.h"
#include "error.h"
#include "evloop.h"
#include "log.h"

/* How often the parked watches' sockets are peeked for a hang-up. */
#define PEER_CHECK_MS 1000

struct watch_park {
  struct kvs *s;
  pthread_mutex_t mu;
  struct park_entry head;    /* circular list of parked entries */
  int count;
  /* Resumes under way: entries unparked under mu whose MHD_resume_connection
   * has not returned yet. watch_park_stop waits for none, so that no
   * connection is still suspended (libmicrohttpd aborts the process) or
   * resumed at all once MHD_stop_daemon runs. */
  int resuming;
  pthread_cond_t resumed;
  bool stopping, stop_thread;
  pthread_t thread;
};

bool
watch_peer_gone(int fd)
{
  char c;
  if (fd < 0)
    return false;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void
unpark(struct watch_park *p, struct park_entry *e)
{
  e->prev->next = e->next;
  e->next->prev = e->prev;
  e->parked = false;
  p->count--;
}

/* Resume a chain of unparked entries (linked by next), outside p->mu: MHD
 * takes its own locks. Each stays suspended until then, so it is not freed.
 * The caller counted the chain in p->resuming (under p->mu) when it
 * unparked it; a NULL chain was not counted. */
static void
resume_chain(struct watch_park *p, struct park_entry *e)
{
  if (!e)
    return;
  while (e) {
    struct park_entry *n = e->next;
    MHD_resume_connection(e->conn);
    e = n;
  }
  SCOPED_LOCK(&p->mu);
  if (--p->resuming == 0)
    pthread_cond_broadcast(&p->resumed);
}

static void *
park_thread(void *arg)
{
  struct watch_park *p = arg;
  int64_t rev = p->s ? kvs_revision(p->s) : 0, last_check = (int64_t) tc_now_ms();
  for (;;) {
    if (p->s)
      rev = kvs_wait_revision(p->s, rev + 1, 250);
    else {
      /* No store (proxy): streams are woken by watch_park_wake; this
       * thread only notices hang-ups and progress deadlines. */
      struct timespec ts = { 0, 250 * 1000 * 1000 };
      nanosleep(&ts, NULL);
    }
    int64_t now = (int64_t) tc_now_ms();
    bool check = now - last_check >= PEER_CHECK_MS;
    if (check)
      last_check = now;
    struct park_entry *ready = NULL;
    {
      SCOPED_LOCK(&p->mu);
      if (p->stop_thread)
        break;
      for (struct park_entry *e = p->head.next, *n; e != &p->head; e = n) {
        n = e->next;
        if (e->rev <= rev || (e->wake_ms && now >= e->wake_ms) || (check && watch_peer_gone(e->fd))) {
          unpark(p, e);
          e->next = ready;
          ready = e;
        }
      }
      if (ready)
        p->resuming++;
    }
    resume_chain(p, ready);
  }
  return NULL;
}

struct watch_park *
watch_park_start(struct kvs *s)
{
  struct watch_park *p = calloc(1, sizeof *p);
  if (!p) {
    tc_error(ENOMEM, "gateway: out of memory");
    return NULL;
  }
  p->s = s;
  p->head.next = p->head.prev = &p->head;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->resumed, NULL);
  int rc = pthread_create(&p->thread, NULL, park_thread, p);
  if (rc) {
    pthread_cond_destroy(&p->resumed);
    pthread_mutex_destroy(&p->mu);
    free(p);
    tc_error(rc, "gateway: starting the watch thread: %s", strerror(rc));
    return NULL;
  }
  return p;
}

bool
watch_park_suspend(struct watch_park *p, struct park_entry *e)
{
  /* Suspended before it is listed, so the thread never resumes a
   * connection that is not yet suspended. */
  MHD_suspend_connection(e->conn);
  {
    SCOPED_LOCK(&p->mu);
    if (e->wake_pending && !p->stopping) {
      /* Woken between the reader's look and here: run again at once. */
      e->wake_pending = false;
      goto resume;
    }
    if (!p->stopping) {
      e->parked = true;
      e->next = &p->head;
      e->prev = p->head.prev;
      e->prev->next = e;
      p->head.prev = e;
      p->count++;
      return true;
    }
  }
  MHD_resume_connection(e->conn);
  return false;
resume:
  MHD_resume_connection(e->conn);
  return true;
}

void
watch_park_wake(struct watch_park *p, struct park_entry *e)
{
  {
    SCOPED_LOCK(&p->mu);
    if (!e->parked) {
      e->wake_pending = true;
      return;
    }
    unpark(p, e);
    e->next = NULL;
    p->resuming++;
  }
  resume_chain(p, e);
}

void
watch_park_forget(struct watch_park *p, struct park_entry *e)
{
  SCOPED_LOCK(&p->mu);
  if (e->parked)
    unpark(p, e);
}

void
watch_park_stop(struct watch_park *p)
{
  if (!p)
    return;
  struct park_entry *ready = NULL;
  {
    SCOPED_LOCK(&p->mu);
    p->stopping = true;
    while (p->head.next != &p->head) {
      struct park_entry *e = p->head.next;
      unpark(p, e);
      e->next = ready;
      ready = e;
    }
    if (ready)
      p->resuming++;
  }
  resume_chain(p, ready);
  /* The park thread or a waker may have unparked entries just before and
   * be resuming them now: wait for them too. */
  SCOPED_LOCK(&p->mu);
  while (p->resuming > 0)
    pthread_cond_wait(&p->resumed, &p->mu);
}

void
watch_park_free(struct watch_park *p)
{
  if (!p)
    return;
  watch_park_stop(p);
  {
    SCOPED_LOCK(&p->mu);
    p->stop_thread = true;
  }
  if (p->s)
    kvs_wake_all(p->s);
  pthread_join(p->thread, NULL);
  pthread_cond_destroy(&p->resumed);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int
watch_park_count(struct watch_park *p)
{
  SCOPED_LOCK(&p->mu);
  return p->count;
}
