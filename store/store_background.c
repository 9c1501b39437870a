/* The store's background jobs (store_background.h). Why a thread: both
 * jobs sleep on the disk. sync_file_range(SYNC_FILE_RANGE_WRITE) does not
 * wait for the data to reach the disk, but it submits the I/O itself and
 * sleeps whenever the device's queue is full: on the OSD's event loop,
 * under 4 KiB random writes at QD32, 7-8 ms a call on average, up to 200
 * ms. A checkpoint flushes the data file and commits LMDB: 50-200 ms
 * under the same load, and it also waits for a journal flush in progress
 * (bench/README.md, 2026-12-05). */
#include <config.h>
#include <string.h>
#include "log.h"
#include "store_background.h"

void
tc_store_bg_init(struct tc_store_bg *bg, const char *what, int (*action)(struct tc_store_bg *), void *arg)
{
  memset(bg, 0, sizeof *bg);
  bg->what = what;
  bg->action = action;
  bg->arg = arg;
  pthread_mutex_init(&bg->lock, NULL);
  pthread_cond_init(&bg->cond, NULL);
}

/* Run the action once, counting it, with the lock released meanwhile. */
static void
run_once(struct tc_store_bg *bg)
{
  int r = bg->action(bg);
  pthread_mutex_lock(&bg->lock);
  bg->count++;
  pthread_mutex_unlock(&bg->lock);
  if (r < 0)
    tc_warn("store %s: %s: %s", bg->path ? bg->path : "?", bg->what, strerror(-r));
}

static void *
bg_thread(void *arg)
{
  struct tc_store_bg *bg = arg;
  pthread_mutex_lock(&bg->lock);
  for (;;) {
    while (!bg->wanted && !bg->stop)
      pthread_cond_wait(&bg->cond, &bg->lock);
    if (bg->stop)
      break;
    bg->wanted = 0;   /* kicks from now on ask for one more run */
    pthread_mutex_unlock(&bg->lock);
    run_once(bg);
    pthread_mutex_lock(&bg->lock);
  }
  pthread_mutex_unlock(&bg->lock);
  return NULL;
}

int
tc_store_bg_kick(struct tc_store_bg *bg)
{
  pthread_mutex_lock(&bg->lock);
  if (!bg->running && !bg->failed) {
    int rc = pthread_create(&bg->th, NULL, bg_thread, bg);
    if (rc == 0)
      bg->running = 1;
    else {
      bg->failed = 1;
      tc_warn("store %s: no thread for %s (%s): the writes do it themselves",
              bg->path ? bg->path : "?", bg->what, strerror(rc));
    }
  }
  int running = bg->running;
  if (running) {
    bg->wanted = 1;
    pthread_cond_signal(&bg->cond);
  }
  pthread_mutex_unlock(&bg->lock);
  return running;
}

uint64_t
tc_store_bg_count(struct tc_store_bg *bg)
{
  pthread_mutex_lock(&bg->lock);
  uint64_t n = bg->count;
  pthread_mutex_unlock(&bg->lock);
  return n;
}

void
tc_store_bg_destroy(struct tc_store_bg *bg)
{
  pthread_mutex_lock(&bg->lock);
  int running = bg->running;
  bg->stop = 1;
  pthread_cond_signal(&bg->cond);
  pthread_mutex_unlock(&bg->lock);
  if (running)
    pthread_join(bg->th, NULL);
  bg->running = 0;
  pthread_mutex_destroy(&bg->lock);
  pthread_cond_destroy(&bg->cond);
}
