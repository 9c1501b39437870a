/* The write window (client_max_dirty_bytes): the bytes of writes submitted
 * and not complete, plus what the unsynced-write log holds, stay under the
 * option, so a process's client memory is bounded whatever its callers do
 * (nbdkit: as many threads in pwrite as its connections bring). A caller
 * of cluster_submit waits while a write would go past it, until writes in
 * flight complete or a background sync cuts the log; the log is synced in
 * the background from half the window on, so a steady writer rarely waits.
 * The loop thread never waits (it is what completes the writes). */
#include <config.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "cluster_int.h"
#include "log.h"

void
cluster_window_init(struct tc_cluster *cl)
{
  pthread_mutex_init(&cl->win_lock, NULL);
  pthread_cond_init(&cl->win_cond, NULL);
}

void
cluster_window_destroy(struct tc_cluster *cl)
{
  pthread_mutex_destroy(&cl->win_lock);
  pthread_cond_destroy(&cl->win_cond);
}

/* On the loop: a background sync started (true) or ended; waiters look
 * again (with nothing in flight and no sync running, one goes). */
void
cluster_window_syncing(struct tc_cluster *cl, bool syncing)
{
  pthread_mutex_lock(&cl->win_lock);
  cl->win_syncing = syncing;
  cl->win_log = cl->log.mem;
  if (cl->win_waiters)
    pthread_cond_broadcast(&cl->win_cond);
  pthread_mutex_unlock(&cl->win_lock);
}

/* On the loop: a waiter asked for the log to be synced. */
static void
window_kick(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct tc_cluster *cl = arg;
  pthread_mutex_lock(&cl->win_lock);
  cl->win_kicked = false;
  pthread_mutex_unlock(&cl->win_lock);
  if (cl->log.mem)
    cluster_auto_sync(cl);
  cluster_window_syncing(cl, cl->auto_syncing);
}

/* A caller's write of bytes: wait for room, then count it in flight;
 * returns what it counted (0 on the loop thread, which never waits). A
 * write waits for writes in flight to complete, or for a sync to cut the
 * log; with neither to wait for (a write larger than the window, a log
 * that syncs that fail leave full) one goes, so none waits for ever. */
uint64_t
cluster_window_enter(struct tc_cluster *cl, uint64_t bytes)
{
  if (!bytes || pthread_equal(pthread_self(), cl->io_thread))
    return 0;
  pthread_mutex_lock(&cl->win_lock);
  bool waited = false;
  while (!cl->win_stop && cl->win_inflight + cl->win_log + bytes > cl->max_dirty) {
    if (!cl->win_kicked && !cl->win_syncing && cl->win_log && tc_evloop_submit(cl->loop, window_kick, cl) == 0)
      cl->win_kicked = true;
    if (!cl->win_inflight && !cl->win_syncing && !cl->win_kicked)
      break;
    waited = true;
    cl->win_waiters++;
    pthread_cond_wait(&cl->win_cond, &cl->win_lock);
    cl->win_waiters--;
  }
  cl->win_inflight += bytes;
  if (cl->win_inflight + cl->win_log > cl->win_peak)
    cl->win_peak = cl->win_inflight + cl->win_log;
  pthread_mutex_unlock(&cl->win_lock);
  if (waited)
    STAT_INC(cl, window_waits);
  return bytes;
}

static void
window_update(struct tc_cluster *cl, uint64_t bytes, bool on_loop)
{
  pthread_mutex_lock(&cl->win_lock);
  cl->win_inflight -= bytes < cl->win_inflight ? bytes : cl->win_inflight;
  if (on_loop)
    cl->win_log = cl->log.mem;
  if (cl->win_waiters)
    pthread_cond_broadcast(&cl->win_cond);
  pthread_mutex_unlock(&cl->win_lock);
}

/* On the loop: bytes of writes are complete (0: none), and the log holds
 * what it holds now (a write added, a sync cut); waiters look again. */
void
cluster_window_done(struct tc_cluster *cl, uint64_t bytes)
{
  window_update(cl, bytes, true);
}

/* On the caller's thread: an entered write was never started. */
void
cluster_window_undo(struct tc_cluster *cl, uint64_t bytes)
{
  window_update(cl, bytes, false);
}

/* The figures tc_cluster_free logs: the window's fullest, and how many
 * writes waited for room. */
void
cluster_window_figures(struct tc_cluster *cl, uint64_t *peak, uint64_t *waits)
{
  pthread_mutex_lock(&cl->win_lock);
  *peak = cl->win_peak;
  pthread_mutex_unlock(&cl->win_lock);
  pthread_mutex_lock(&cl->stats_lock);
  *waits = cl->stats.window_waits;
  pthread_mutex_unlock(&cl->stats_lock);
}

/* The client stops: nobody waits any more. */
void
cluster_window_stop(struct tc_cluster *cl)
{
  pthread_mutex_lock(&cl->win_lock);
  cl->win_stop = true;
  pthread_cond_broadcast(&cl->win_cond);
  pthread_mutex_unlock(&cl->win_lock);
}
