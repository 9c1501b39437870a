/* A small epoll event loop: fd callbacks, one-shot timers, deferred calls
 * and a thread-safe submit. One loop runs on one thread (the OSD's loop,
 * the client's I/O thread); everything except tc_evloop_submit() and
 * tc_evloop_stop() must be called on that thread.
 *
 * Usage:
 *   struct tc_evloop *loop = tc_evloop_new();
 *   tc_evloop_add_fd(loop, fd, EPOLLIN, on_readable, ctx);
 *   struct tc_timer *t = tc_evloop_timer_add(loop, 5000, on_timeout, ctx);
 *   tc_evloop_run(loop);            // until tc_evloop_stop()
 *
 * Callbacks may add, modify or delete any fd or timer, including their own:
 * a deleted fd's pending events of the current round are dropped. Deferred
 * calls (tc_evloop_defer) run after the current round of events, on the loop
 * thread, in the order they were made: use them to free an object from
 * inside one of its own callbacks. */
#ifndef TROMCHO_EVLOOP_H
#define TROMCHO_EVLOOP_H
#include <stdint.h>
#include <sys/epoll.h>

struct tc_evloop;
struct tc_timer;

/* events is a mask of EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLLRDHUP. */
typedef void (*tc_evloop_fd_cb)(struct tc_evloop *loop, int fd, uint32_t events, void *arg);
typedef void (*tc_evloop_cb)(struct tc_evloop *loop, void *arg);

struct tc_evloop *tc_evloop_new(void);
/* Frees the loop: runs pending deferred calls first (they free objects),
 * drops submitted calls and timers. Registered fds are not closed. */
void tc_evloop_free(struct tc_evloop *loop);

/* Watch fd (level-triggered). One registration per fd. */
int tc_evloop_add_fd(struct tc_evloop *loop, int fd, uint32_t events, tc_evloop_fd_cb cb, void *arg);
int tc_evloop_mod_fd(struct tc_evloop *loop, int fd, uint32_t events);
/* Stop watching fd (does not close it). */
int tc_evloop_del_fd(struct tc_evloop *loop, int fd);

/* Call cb once, after ms milliseconds. The handle is valid until the
 * callback runs or the timer is cancelled. */
struct tc_timer *tc_evloop_timer_add(struct tc_evloop *loop, uint64_t ms, tc_evloop_cb cb, void *arg);
void tc_evloop_timer_cancel(struct tc_evloop *loop, struct tc_timer *t);

/* Run cb(arg) on the loop thread after the current round (loop thread only). */
int tc_evloop_defer(struct tc_evloop *loop, tc_evloop_cb cb, void *arg);
/* Thread-safe: run cb(arg) on the loop thread soon, waking the loop. */
int tc_evloop_submit(struct tc_evloop *loop, tc_evloop_cb cb, void *arg);

/* Run rounds until tc_evloop_stop(). Returns 0, or -1 if epoll fails. */
int tc_evloop_run(struct tc_evloop *loop);
/* One round: wait at most timeout_ms (-1: until something happens), run the
 * ready callbacks, expired timers, submitted and deferred calls. */
int tc_evloop_run_once(struct tc_evloop *loop, int timeout_ms);
/* Thread-safe: make tc_evloop_run() return after the current round. */
void tc_evloop_stop(struct tc_evloop *loop);

/* Before blocking for events, keep looking for up to us microseconds,
 * yielding the CPU between looks (option idle_poll_us): a thread with
 * work on this CPU runs first, but the CPU does not halt, and on a VM the
 * wake-up of a halted vCPU (a VM exit) is the largest part of a QD1 round
 * trip; the window shrinks while events come further apart than us, and
 * grows back when they come closer (poll_window.h). 0 (the default): block
 * at once. Call before the loop runs. */
void tc_evloop_set_poll_us(struct tc_evloop *loop, unsigned us);
/* The window the next idle round polls for: us at most, adapted to how far
 * apart events came (poll_window.h). For tests and metrics. */
uint64_t tc_evloop_poll_window_ns(const struct tc_evloop *loop);
/* Loop thread only: +1 while a flush (a store commit, a SYNC) is awaited,
 * -1 when it ended. Meanwhile the loop polls the whole idle_poll_us and
 * leaves its window as it was: a flush outlasts any window, yet on a VM
 * the vCPUs kept awake for its first part made flushes 15-20% faster
 * (bench/README.md, 2026-12-05), which the adaptation cannot see. */
void tc_evloop_poll_hold(struct tc_evloop *loop, int delta);
#define TC_IDLE_POLL_US_MAX 10000   /* option idle_poll_us: 0..this */

/* Monotonic milliseconds, nanoseconds. */
uint64_t tc_now_ms(void);
uint64_t tc_now_ns(void);

#endif
