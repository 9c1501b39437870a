/* Listing a pool's objects in an inode range: one LIST to each PG's primary. */
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

int
tc_cluster_list(struct tc_cluster *cl, uint64_t first, uint64_t last, int timeout_ms,
                struct tc_osd_list_entry **out, size_t *nout)
{
  *out = NULL;
  *nout = 0;
  uint64_t pool = TC_INODE_POOL(first);
  if (TC_INODE_POOL(last) != pool || last < first)
    return tc_error(EINVAL, "cluster list: inodes 0x%" PRIx64 "..0x%" PRIx64 " are not one pool's range", first, last);
  struct tc_map *m = tc_cluster_map(cl);
  const struct tc_pool_info *p = tc_map_pool(m, pool);
  uint32_t pg_count = p ? p->pg_count : 0;
  tc_map_unref(m);
  if (!pg_count)
    return tc_error(ENXIO, "cluster list: pool %" PRIu64 " is not in the cluster map", pool);
  struct cop *cop = calloc(1, sizeof *cop);
  if (!cop || !(cop->parts = calloc(pg_count, sizeof *cop->parts))) {
    free(cop);
    return tc_error(ENOMEM, "cluster list: out of memory");
  }
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  bool done = false;
  cop->cl = cl;
  cop->first = first;
  cop->last = last;
  cop->wlock = &lock;
  cop->wcond = &cond;
  cop->wdone = &done;
  cop->deadline = tc_now_ms() + (timeout_ms > 0 ? (uint64_t) timeout_ms : cl->op_timeout_ms);
  cop->nparts = (int) pg_count;
  for (uint32_t i = 0; i < pg_count; i++) {
    cop->parts[i].cop = cop;
    cop->parts[i].kind = SR_LIST;
    cop->parts[i].pg = i;
  }
  if (tc_evloop_submit(cl->loop, cluster_cop_start, cop) < 0) {
    cluster_cop_free(cop);
    return -1;
  }
  pthread_mutex_lock(&lock);
  while (!done)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  int err = cop->error;
  if (err == 0) {
    *out = cop->ents;
    *nout = cop->nents;
    cop->ents = NULL;
  }
  cluster_cop_free(cop);
  if (err < 0)
    return tc_error(-err, "cluster list of inodes 0x%" PRIx64 "..0x%" PRIx64 ": %s", first, last, strerror(-err));
  return 0;
}
