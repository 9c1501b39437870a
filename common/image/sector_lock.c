/* Sector locks shared by every handle of one image (see sector_lock.h). */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include "cleanup.h"
#include "error.h"
#include "sector_lock.h"

struct tc_sector_locks {
  const void *store;
  uint64_t inode;
  int refs;                      /* under registry_lock */
  pthread_mutex_t lock;          /* the held ranges */
  pthread_cond_t released;
  struct tc_sector_range *held;
  struct tc_sector_locks *next;  /* in the registry */
};

/* Global by necessity: the handles of one image are opened independently
 * (one per NBD connection, one per FUSE open) and must find one another. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tc_sector_locks *registry;

struct tc_sector_locks *
tc_sector_locks_get(const void *store, uint64_t inode)
{
  SCOPED_LOCK(&registry_lock);
  for (struct tc_sector_locks *l = registry; l; l = l->next)
    if (l->store == store && l->inode == inode) {
      l->refs++;
      return l;
    }
  struct tc_sector_locks *l = calloc(1, sizeof *l);
  if (!l) {
    tc_error(ENOMEM, "image inode %#llx: out of memory for its sector locks", (unsigned long long) inode);
    return NULL;
  }
  l->store = store;
  l->inode = inode;
  l->refs = 1;
  pthread_mutex_init(&l->lock, NULL);
  pthread_cond_init(&l->released, NULL);
  l->next = registry;
  registry = l;
  return l;
}

void
tc_sector_locks_put(struct tc_sector_locks *l)
{
  if (!l)
    return;
  pthread_mutex_lock(&registry_lock);
  if (--l->refs > 0) {
    pthread_mutex_unlock(&registry_lock);
    return;
  }
  for (struct tc_sector_locks **p = &registry; *p; p = &(*p)->next)
    if (*p == l) {
      *p = l->next;
      break;
    }
  pthread_mutex_unlock(&registry_lock);
  pthread_mutex_destroy(&l->lock);
  pthread_cond_destroy(&l->released);
  free(l);
}

void
tc_sector_lock(struct tc_sector_locks *l, struct tc_sector_range *r, uint64_t start, uint64_t end)
{
  r->start = start;
  r->end = end;
  SCOPED_LOCK(&l->lock);
  for (;;) {
    bool busy = false;
    for (struct tc_sector_range *h = l->held; h && !busy; h = h->next)
      busy = h->start < end && start < h->end;
    if (!busy)
      break;
    pthread_cond_wait(&l->released, &l->lock);
  }
  r->next = l->held;
  l->held = r;
}

void
tc_sector_unlock(struct tc_sector_locks *l, struct tc_sector_range *r)
{
  SCOPED_LOCK(&l->lock);
  for (struct tc_sector_range **p = &l->held; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  pthread_cond_broadcast(&l->released);
}

int
tc_sector_locks_count(void)
{
  SCOPED_LOCK(&registry_lock);
  int n = 0;
  for (struct tc_sector_locks *l = registry; l; l = l->next)
    n++;
  return n;
}
