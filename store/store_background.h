/* The store's background jobs, each on a thread of its own started at its
 * first kick: a write kicks one and returns at once, the job runs with the
 * writer's thread (the OSD's event loop) free to go on; kicks that arrive
 * while it runs ask for one more run. Two jobs (store.md): starting the
 * page cache's writeback of the data file every TC_STORE_WRITEBACK_BYTES
 * written, and the checkpoint of a full batch. Internal to the store. */
#ifndef TROMCHO_STORE_BACKGROUND_H
#define TROMCHO_STORE_BACKGROUND_H
#include <pthread.h>
#include <stdint.h>

struct tc_store_bg {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t th;
  const char *what;          /* for messages: "starting writeback" */
  const char *path;          /* for messages: the data file */
  /* The job: 0, or -errno that the runner logs (a job that logs its own
   * failures returns 0). */
  int (*action)(struct tc_store_bg *bg);
  void *arg;                 /* for the action */
  int running;               /* the thread is started */
  int failed;                /* it could not be: kicks return 0 */
  int wanted;                /* a kick not yet served */
  int stop;
  uint64_t count;            /* runs finished */
};

void tc_store_bg_init(struct tc_store_bg *bg, const char *what, int (*action)(struct tc_store_bg *), void *arg);
/* Ask for a run; never waits for one. 1, or 0 if no thread could be
 * started: the caller then does the job itself. */
int tc_store_bg_kick(struct tc_store_bg *bg);
/* Runs finished so far. */
uint64_t tc_store_bg_count(struct tc_store_bg *bg);
/* Stop and join the thread (a run in progress ends first). */
void tc_store_bg_destroy(struct tc_store_bg *bg);

#endif
