/* The event loop (common/util/evloop.c) with and without idle polling
 * (tc_evloop_set_poll_us, option idle_poll_us): an fd that becomes ready
 * and a call submitted from another thread are served whether they come
 * during the polling or after it (the loop then blocks), timers fire on
 * time, a round with timeout 0 never polls, and a round with a timeout
 * returns once it passed; calls submitted by several threads at once
 * are all run (only the first of a queue wakes the loop: none may be
 * left behind); the poll window shrinks to none while events come
 * further apart than idle_poll_us and grows back when they come closer
 * (poll_window.h), except while a flush is awaited (tc_evloop_poll_hold). */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/epoll.h>
#include "evloop.h"
#include "poll_window.h"
#include "tap.h"

struct later {
  struct tc_evloop *loop;
  useconds_t after_us;
  int fd;                /* write a byte here, or -1: submit a call */
};

static int called, fd_ready, timer_fired;

static void
on_call(struct tc_evloop *l, void *arg)
{
  (void) l;
  (void) arg;
  called++;
}

static void
on_fd(struct tc_evloop *l, int fd, uint32_t ev, void *arg)
{
  (void) l;
  (void) arg;
  char c;
  if ((ev & EPOLLIN) && read(fd, &c, 1) == 1)
    fd_ready++;
}

static void
on_timer(struct tc_evloop *l, void *arg)
{
  (void) l;
  (void) arg;
  timer_fired++;
}

static void *
later_thread(void *arg)
{
  struct later *t = arg;
  usleep(t->after_us);
  if (t->fd >= 0) {
    if (write(t->fd, "x", 1) != 1)
      return NULL;
  }
  else
    tc_evloop_submit(t->loop, on_call, NULL);
  return NULL;
}

/* One round of loop while another thread acts after after_us; returns
 * the round's duration in us. */
static uint64_t
round_with(struct tc_evloop *loop, useconds_t after_us, int fd, int timeout_ms)
{
  struct later t = { loop, after_us, fd };
  pthread_t th;
  if (pthread_create(&th, NULL, later_thread, &t) != 0)
    return UINT64_MAX;
  uint64_t t0 = tc_now_ns();
  int r = tc_evloop_run_once(loop, timeout_ms);
  uint64_t dt = (tc_now_ns() - t0) / 1000;
  pthread_join(th, NULL);
  return r < 0 ? UINT64_MAX : dt;
}

static void
run_cases(unsigned poll_us)
{
  struct tc_evloop *loop = tc_evloop_new();
  int p[2];
  if (!loop || pipe(p) < 0) {
    CHECK(0, "a loop and a pipe");
    return;
  }
  tc_evloop_set_poll_us(loop, poll_us);
  CHECK(tc_evloop_add_fd(loop, p[0], EPOLLIN, on_fd, NULL) == 0, "pipe watched");

  /* ready during the polling window (50 us) and after it (20 ms) */
  useconds_t waits[2] = { 50, 20000 };
  for (int i = 0; i < 2; i++) {
    int before = fd_ready;
    uint64_t dt = round_with(loop, waits[i], p[1], -1);
    CHECK(fd_ready == before + 1 && dt < 5000000, "poll %u us: fd ready after %u us served (%llu us)", poll_us,
          waits[i], (unsigned long long) dt);
    before = called;
    dt = round_with(loop, waits[i], -1, -1);
    CHECK(called == before + 1 && dt < 5000000, "poll %u us: call submitted after %u us run (%llu us)", poll_us,
          waits[i], (unsigned long long) dt);
  }

  /* a timer 30 ms out fires in time, polling or not */
  int before = timer_fired;
  uint64_t t0 = tc_now_ns();
  CHECK(tc_evloop_timer_add(loop, 30, on_timer, NULL) != NULL, "timer added");
  while (timer_fired == before && tc_now_ns() - t0 < 2000000000u)
    tc_evloop_run_once(loop, -1);
  uint64_t ms = (tc_now_ns() - t0) / 1000000;
  CHECK(timer_fired == before + 1 && ms >= 29 && ms < 1000, "poll %u us: a 30 ms timer fired after %llu ms", poll_us,
        (unsigned long long) ms);

  /* timeout 0: no polling, no blocking; timeout 20 ms: returns after it */
  t0 = tc_now_ns();
  tc_evloop_run_once(loop, 0);
  uint64_t us = (tc_now_ns() - t0) / 1000;
  CHECK(us < 5000, "poll %u us: a round with timeout 0 returns at once (%llu us)", poll_us, (unsigned long long) us);
  t0 = tc_now_ns();
  tc_evloop_run_once(loop, 20);
  ms = (tc_now_ns() - t0) / 1000000;
  CHECK(ms >= 19 && ms < 1000, "poll %u us: a round with timeout 20 ms took %llu ms", poll_us,
        (unsigned long long) ms);

  tc_evloop_del_fd(loop, p[0]);
  close(p[0]);
  close(p[1]);
  tc_evloop_free(loop);
}

/* Several threads submit calls in bursts and one by one while the loop
 * runs: every call runs, and none waits for a later wake-up. */
enum { SUBMITTERS = 4, CALLS = 20000 };

struct submitter {
  struct tc_evloop *loop;
  int id;
};

static void *
submit_thread(void *arg)
{
  struct submitter *s = arg;
  for (int i = 0; i < CALLS; i++) {
    if (tc_evloop_submit(s->loop, on_call, NULL) < 0)
      return NULL;
    if ((i + s->id) % 97 == 0)
      usleep(50);   /* let the loop drain the queue, so the next one wakes it */
  }
  return NULL;
}

static void
many_submitters(unsigned poll_us)
{
  struct tc_evloop *loop = tc_evloop_new();
  if (!loop) {
    CHECK(0, "a loop");
    return;
  }
  tc_evloop_set_poll_us(loop, poll_us);
  called = 0;
  struct submitter subs[SUBMITTERS];
  pthread_t th[SUBMITTERS];
  int started = 0;
  for (int i = 0; i < SUBMITTERS; i++) {
    subs[i] = (struct submitter) { loop, i };
    if (pthread_create(&th[i], NULL, submit_thread, &subs[i]) == 0)
      started++;
  }
  CHECK(started == SUBMITTERS, "%d submitting threads", started);
  /* Run until every call ran; each round waits at most 1 s, so a lost
   * wake-up shows as a stall, not a hang. */
  uint64_t last = tc_now_ns();
  int seen = 0;
  while (called < started * CALLS && tc_now_ns() - last < 2000000000u) {
    tc_evloop_run_once(loop, 1000);
    if (called != seen) {
      seen = called;
      last = tc_now_ns();
    }
  }
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  CHECK(called == started * CALLS, "poll %u us: %d of %d calls from %d threads ran", poll_us, called,
        started * CALLS, started);
  tc_evloop_free(loop);
}

/* The rule alone: keep, grow (doubling from 10 us, up to the max), shrink
 * (halving, under 10 us none); max 0 never polls. */
static void
window_rule(void)
{
  const uint64_t max = 200000;
  CHECK(tc_poll_window_adapt(40000, max, 30000) == 40000, "an event within the window keeps it");
  CHECK(tc_poll_window_adapt(40000, max, 150000) == 80000, "an event after the window, within the max, doubles it");
  CHECK(tc_poll_window_adapt(160000, max, 190000) == max, "growth stops at the max");
  CHECK(tc_poll_window_adapt(0, max, 50000) == TC_POLL_WINDOW_MIN_NS, "from none it grows to 10 us");
  CHECK(tc_poll_window_adapt(max, max, 5000000) == max / 2, "an event after the max halves the window");
  CHECK(tc_poll_window_adapt(15000, max, 5000000) == 0, "under 10 us the window closes");
  CHECK(tc_poll_window_adapt(0, max, 5000000) == 0, "a closed window stays closed while events stay far apart");
  CHECK(tc_poll_window_adapt(0, 0, 50) == 0 && tc_poll_window_adapt(5000, 0, 50) == 0, "max 0: never poll");
}

/* A loop with idle_poll_us 10000: rounds idle 20 ms each (no poll would
 * catch anything) close the window; rounds idle 1 ms each open it again. */
static void
window_in_loop(void)
{
  struct tc_evloop *loop = tc_evloop_new();
  if (!loop) {
    CHECK(0, "a loop");
    return;
  }
  tc_evloop_set_poll_us(loop, 10000);
  CHECK(tc_evloop_poll_window_ns(loop) == 10000000, "the window starts at idle_poll_us");
  /* While a flush is awaited the loop polls the whole window and adapts
   * nothing: three idle rounds of 20 ms leave it where it was. */
  tc_evloop_poll_hold(loop, 1);
  for (int i = 0; i < 3; i++)
    tc_evloop_run_once(loop, 20);
  CHECK(tc_evloop_poll_window_ns(loop) == 10000000, "held: the window stays whole through long idle rounds");
  tc_evloop_poll_hold(loop, -1);
  tc_evloop_run_once(loop, 20);
  CHECK(tc_evloop_poll_window_ns(loop) == 5000000, "released: the next long idle round halves it (%llu us)",
        (unsigned long long) tc_evloop_poll_window_ns(loop) / 1000);
  int rounds = 0;
  while (tc_evloop_poll_window_ns(loop) && rounds < 40) {
    tc_evloop_run_once(loop, 20);
    rounds++;
  }
  CHECK(tc_evloop_poll_window_ns(loop) == 0, "idle 20 ms a round: the window closed after %d rounds", rounds);
  rounds = 0;
  while (tc_evloop_poll_window_ns(loop) < 1000000 && rounds < 200) {
    tc_evloop_run_once(loop, 1);
    rounds++;
  }
  CHECK(tc_evloop_poll_window_ns(loop) >= 1000000 && tc_evloop_poll_window_ns(loop) <= 10000000,
        "idle 1 ms a round: the window grew to %llu us after %d rounds",
        (unsigned long long) tc_evloop_poll_window_ns(loop) / 1000, rounds);
  tc_evloop_free(loop);
}

int
main(void)
{
  window_rule();
  window_in_loop();
  run_cases(0);
  run_cases(200);
  run_cases(10000);
  many_submitters(0);
  many_submitters(200);
  return DONE();
}
