/* The cluster client's map: read from the KV, re-read when a watch fires
 * (or every 30 s), handed to the I/O thread and to other threads. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cluster_int.h"
#include "error.h"
#include "log.h"

/* --- the map --- */

struct tc_map *
cluster_load_map(struct tc_cluster *cl)
{
  struct tc_kv_result pools = { 0 }, pgcfg = { 0 }, osds = { 0 };
  char key[512];
  struct tc_map *m = NULL;
  uint64_t *ids = NULL;
  const char **jsons = NULL;
  size_t *lens = NULL, n = 0;
  snprintf(key, sizeof key, "%s/config/pools", cl->prefix);
  if (tc_kv_get(cl->kv, key, 0, &pools) < 0)
    goto out;
  snprintf(key, sizeof key, "%s/pg/config", cl->prefix);
  if (tc_kv_get(cl->kv, key, 0, &pgcfg) < 0)
    goto out;
  snprintf(key, sizeof key, "%s/osd/state/", cl->prefix);
  size_t plen = strlen(key);
  if (tc_kv_get_prefix(cl->kv, key, 0, &osds) < 0)
    goto out;
  if (osds.n_kvs) {
    ids = calloc(osds.n_kvs, sizeof *ids);
    jsons = calloc(osds.n_kvs, sizeof *jsons);
    lens = calloc(osds.n_kvs, sizeof *lens);
    if (!ids || !jsons || !lens) {
      tc_error(ENOMEM, "cluster map: out of memory");
      goto out;
    }
  }
  for (size_t i = 0; i < osds.n_kvs; i++) {
    const char *k = (const char *) osds.kvs[i].key + plen;
    char *end;
    unsigned long long id = strtoull(k, &end, 10);
    if (!*k || *end || !id)
      continue;
    ids[n] = id;
    jsons[n] = (const char *) osds.kvs[i].value;
    lens[n] = osds.kvs[i].value_len;
    n++;
  }
  m = tc_map_build(pools.n_kvs ? (const char *) pools.kvs[0].value : NULL, pools.n_kvs ? pools.kvs[0].value_len : 0,
                   pgcfg.n_kvs ? (const char *) pgcfg.kvs[0].value : NULL, pgcfg.n_kvs ? pgcfg.kvs[0].value_len : 0,
                   ids, jsons, lens, n);
out:
  free(ids);
  free(jsons);
  free(lens);
  tc_kv_result_free(&pools);
  tc_kv_result_free(&pgcfg);
  tc_kv_result_free(&osds);
  return m;
}

void
cluster_request_refresh(struct tc_cluster *cl)
{
  pthread_mutex_lock(&cl->refresh_lock);
  cl->refresh_wanted = true;
  pthread_cond_signal(&cl->refresh_cond);
  pthread_mutex_unlock(&cl->refresh_lock);
}

struct map_msg {
  struct tc_cluster *cl;
  struct tc_map *map;
};

/* On the loop: adopt a new map and retry whatever waited for one. */
static void
map_apply(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct map_msg *mm = arg;
  struct tc_cluster *cl = mm->cl;
  tc_map_unref(cl->map);
  cl->map = mm->map;
  free(mm);
  STAT_INC(cl, map_updates);
  cluster_links_update(cl);
  if (!cl->stopping)
    cluster_dispatch_waiting(cl);
}

static void
publish_map(struct tc_cluster *cl, struct tc_map *m)
{
  pthread_mutex_lock(&cl->map_lock);
  tc_map_unref(cl->shared_map);
  cl->shared_map = tc_map_ref(m);
  pthread_mutex_unlock(&cl->map_lock);
  struct map_msg *mm = malloc(sizeof *mm);
  if (mm) {
    mm->cl = cl;
    mm->map = m;
  }
  if (!mm || tc_evloop_submit(cl->loop, map_apply, mm) < 0) {
    free(mm);
    tc_map_unref(m);
    tc_warn("cluster: could not hand the new map to the I/O thread (out of memory)");
  }
}

void *
cluster_refresh_main(void *arg)
{
  struct tc_cluster *cl = arg;
  pthread_mutex_lock(&cl->refresh_lock);
  while (!cl->refresh_stop) {
    if (!cl->refresh_wanted) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 30;   /* a periodic re-read too, in case a watch missed something */
      if (pthread_cond_timedwait(&cl->refresh_cond, &cl->refresh_lock, &ts) == ETIMEDOUT) {
        cl->refresh_wanted = true;
        tc_ulog_pool_idle_trim();
      }
      continue;
    }
    cl->refresh_wanted = false;
    pthread_mutex_unlock(&cl->refresh_lock);
    struct tc_map *m = cluster_load_map(cl);
    if (m)
      publish_map(cl, m);
    else
      tc_warn("cluster: cannot read the cluster map: %s", tc_last_error());
    pthread_mutex_lock(&cl->refresh_lock);
    if (!m)
      cl->refresh_wanted = true;
    /* Coalesce bursts of requests: at most one read per 100 ms (1 s after a failure). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = m ? 100000000L : 999999999L;
    ts.tv_nsec += ns;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    bool wanted = cl->refresh_wanted;
    while (!cl->refresh_stop && pthread_cond_timedwait(&cl->refresh_cond, &cl->refresh_lock, &ts) != ETIMEDOUT)
      ;
    cl->refresh_wanted |= wanted;
  }
  pthread_mutex_unlock(&cl->refresh_lock);
  return NULL;
}

void
cluster_watch_cb(void *arg, const struct tc_kv_watch_update *u)
{
  (void) u;
  cluster_request_refresh(arg);
}

struct tc_map *
tc_cluster_map(struct tc_cluster *cl)
{
  pthread_mutex_lock(&cl->map_lock);
  struct tc_map *m = tc_map_ref(cl->shared_map);
  pthread_mutex_unlock(&cl->map_lock);
  return m;
}

int
tc_cluster_refresh(struct tc_cluster *cl)
{
  struct tc_map *m = cluster_load_map(cl);
  if (!m)
    return -1;
  publish_map(cl, m);
  return 0;
}
