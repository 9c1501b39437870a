/* The cluster client: objstore.h over the messenger (see cluster.h); its
 * life (options, threads, teardown) and stats. The rest: cluster_int.h. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "cluster_int.h"
#include "error.h"
#include "log.h"
#include "tune.h"

void
tc_cluster_stats(struct tc_cluster *cl, struct tc_cluster_stats *st)
{
  pthread_mutex_lock(&cl->stats_lock);
  *st = cl->stats;
  pthread_mutex_unlock(&cl->stats_lock);
}

/* --- life --- */

static void *
io_main(void *arg)
{
  struct tc_cluster *cl = arg;
  if (cl->sched_batch && tc_tune_sched_batch() < 0)
    tc_warn("cluster: %s", tc_last_error());
  if (tc_evloop_run(cl->loop) < 0)
    tc_err("cluster: the I/O loop failed: %s", tc_last_error());
  return NULL;
}

struct tc_cluster *
tc_cluster_new(const struct tc_config *cfg, struct tc_kv *kv)
{
  struct tc_cluster *cl = calloc(1, sizeof *cl);
  if (!cl) {
    tc_error(ENOMEM, "cluster: out of memory");
    return NULL;
  }
  STAILQ_INIT(&cl->waiting);
  STAILQ_INIT(&cl->held);
  STAILQ_INIT(&cl->drain);
  cl->cfg = cfg;
  cl->kv = kv;
  pthread_mutex_init(&cl->map_lock, NULL);
  pthread_mutex_init(&cl->refresh_lock, NULL);
  pthread_cond_init(&cl->refresh_cond, NULL);
  pthread_mutex_init(&cl->stats_lock, NULL);
  cluster_window_init(cl);
  int64_t to = tc_config_int(cfg, "client_op_timeout"), ri = tc_config_int(cfg, "client_retry_interval");
  if (to < 1 || ri < 1 || ri > 60000) {
    tc_error(EINVAL, "options client_op_timeout (>= 1 s) or client_retry_interval (1..60000 ms) out of range");
    goto fail;
  }
  cl->op_timeout_ms = (uint64_t) to * 1000;
  int64_t md = tc_config_int(cfg, "client_max_dirty_bytes");
  if (md < (1 << 20)) {
    tc_error(EINVAL, "option client_max_dirty_bytes: at least 1M");
    goto fail;
  }
  cl->max_dirty = (uint64_t) md;
  int64_t poll;
  if (tc_config_int_in(cfg, "idle_poll_us", 0, TC_IDLE_POLL_US_MAX, &poll) < 0)
    goto fail;
  cl->retry_ms = (uint64_t) ri;
  if (!(cl->prefix = strdup(tc_kv_prefix(kv)))) {
    tc_error(ENOMEM, "cluster: out of memory");
    goto fail;
  }
  /* Watches first, so no change between the read and the watch is missed. */
  const char *keys[3] = { "/pg/config", "/osd/state/", "/config/pools" };
  for (int i = 0; i < 3; i++) {
    char key[512];
    snprintf(key, sizeof key, "%s%s", cl->prefix, keys[i]);
    if (!(cl->watches[i] = tc_kv_watch(kv, key, 0, i == 1, 0, cluster_watch_cb, cl)))
      goto fail;
  }
  if (!(cl->map = cluster_load_map(cl)))
    goto fail;
  cl->shared_map = tc_map_ref(cl->map);
  if (!(cl->loop = tc_evloop_new()))
    goto fail;
  tc_evloop_set_poll_us(cl->loop, (unsigned) poll);
  tc_objstore_run_set_poll_us((unsigned) poll);
  cl->sched_batch = tc_config_bool(cfg, "sched_batch");
  tc_objstore_run_set_sched_batch(cl->sched_batch);
  if (!(cl->msgr = tc_msgr_new_from_config(cl->loop, cfg, 0)))
    goto fail;
  /* Requests on a connection that stays silent (the OSD cut off from us
   * alone, or hung while still registered) fail over after four OSD
   * leases or the operation's timeout, whichever comes first: the link
   * closes and they retry where the map says then, instead of waiting
   * for TCP to give up (many minutes) or for ever. One lease more than
   * an OSD waits for a silent peer (osd_main.c), so a primary whose
   * member is silent answers our SYNC first (EAGAIN: sync again without
   * it) rather than us closing on it (a replay). */
  int64_t ttl = tc_config_int(cfg, "etcd_keepalive_timeout");
  uint64_t call_ms = cl->op_timeout_ms;
  if (ttl > 0 && ttl <= 3600 && (uint64_t) ttl * 4000 < call_ms)
    call_ms = (uint64_t) ttl * 4000;
  if (tc_msgr_set_call_timeout(cl->msgr, call_ms > INT_MAX ? INT_MAX : (int) call_ms) < 0)
    goto fail;
  int e = pthread_create(&cl->io_thread, NULL, io_main, cl);
  if (e) {
    tc_error(e, "cluster: cannot start the I/O thread: %s", strerror(e));
    goto fail;
  }
  cl->io_started = true;
  if ((e = pthread_create(&cl->refresh_thread, NULL, cluster_refresh_main, cl))) {
    tc_error(e, "cluster: cannot start the map thread: %s", strerror(e));
    goto fail;
  }
  cl->refresh_started = true;
  return cl;
fail:
  {
    struct tc_error_saved saved;
    tc_error_save(&saved);
    tc_cluster_free(cl);
    tc_error_restore(&saved);
  }
  return NULL;
}

/* On the loop: fail what waits, close every connection, stop. */
static void
shutdown_cb(struct tc_evloop *loop, void *arg)
{
  struct tc_cluster *cl = arg;
  cl->stopping = true;
  cluster_window_stop(cl);
  if (cl->retry_timer) {
    tc_evloop_timer_cancel(loop, cl->retry_timer);
    cl->retry_timer = NULL;
  }
  cluster_replay_cancel(cl);        /* held writes, draining replays */
  cluster_dispatch_waiting(cl);     /* each fails with ECANCELED */
  tc_msgr_free(cl->msgr);   /* in-flight requests complete with errors */
  cl->msgr = NULL;
  tc_evloop_stop(loop);
}

void
tc_cluster_free(struct tc_cluster *cl)
{
  if (!cl)
    return;
  for (int i = 0; i < 3; i++)
    if (cl->watches[i])
      tc_kv_watch_cancel(cl->watches[i]);
  if (cl->refresh_started) {
    pthread_mutex_lock(&cl->refresh_lock);
    cl->refresh_stop = true;
    pthread_cond_signal(&cl->refresh_cond);
    pthread_mutex_unlock(&cl->refresh_lock);
    pthread_join(cl->refresh_thread, NULL);
  }
  if (cl->io_started) {
    uint64_t peak, waits;
    cluster_window_figures(cl, &peak, &waits);
    tc_info("cluster: write window: fullest %" PRIu64 " of %" PRIu64 " bytes, %" PRIu64 " writes waited for room",
            peak, cl->max_dirty, waits);
    cluster_window_stop(cl);
    if (tc_evloop_submit(cl->loop, shutdown_cb, cl) < 0)
      tc_evloop_stop(cl->loop);
    pthread_join(cl->io_thread, NULL);
  }
  if (cl->msgr)
    tc_msgr_free(cl->msgr);
  if (cl->loop)
    tc_evloop_free(cl->loop);
  cluster_links_free(cl);
  tc_map_unref(cl->map);
  tc_map_unref(cl->shared_map);
  free(cl->dirty);
  tc_ulog_clear(&cl->log);
  free(cl->prefix);
  pthread_mutex_destroy(&cl->map_lock);
  pthread_mutex_destroy(&cl->refresh_lock);
  pthread_cond_destroy(&cl->refresh_cond);
  pthread_mutex_destroy(&cl->stats_lock);
  cluster_window_destroy(cl);
  free(cl);
}
