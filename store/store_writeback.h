/* The store's writeback starter: every TC_STORE_WRITEBACK_BYTES written,
 * a write kicks it and returns at once; its thread (started at the first
 * kick) then starts the page cache's writeback of the whole data file, so
 * that a sync finds most data on disk already and costs about one flush,
 * and no write waits for the device's queue. Kicks that arrive while it
 * runs ask for one more run. Internal to the store. */
#ifndef TROMCHO_STORE_WRITEBACK_H
#define TROMCHO_STORE_WRITEBACK_H
#include <pthread.h>
#include <stdint.h>

struct tc_store_wb {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t th;
  int fd;                    /* the data file; set before the first kick */
  const char *path;          /* for messages */
  /* What a run does: sync_file_range(fd, SYNC_FILE_RANGE_WRITE) of the
   * whole file; 0 or -errno. Tests replace it. */
  int (*action)(struct tc_store_wb *wb);
  int running;               /* the thread is started */
  int failed;                /* it could not be: kicks run the action themselves */
  int wanted;                /* a kick not yet served */
  int stop;
  uint64_t count;            /* runs finished */
};

void tc_store_wb_init(struct tc_store_wb *wb);
/* Ask for a run; never waits for one. */
void tc_store_wb_kick(struct tc_store_wb *wb);
/* Runs finished so far. */
uint64_t tc_store_wb_count(struct tc_store_wb *wb);
/* Stop and join the thread (a run in progress ends first); before the
 * data file is closed. */
void tc_store_wb_destroy(struct tc_store_wb *wb);

#endif
