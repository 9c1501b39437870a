/* client-load: a small load generator over libtromcho's client API (prints
 * figures; never pass/fail).
 *
 *   client-load IMAGE randwrite|randread|write|read BS IODEPTH SECONDS [tromcho options]
 *
 * IODEPTH threads each keep one operation of BS bytes in flight against the
 * image (random offsets aligned to BS, or one sequential stream cut into
 * BS pieces taken in turn), for SECONDS; writes are flushed at the end and
 * the flush is counted. Prints one line:
 *   "<op> bs=<BS> qd=<N>: <iops> IOPS, <MB/s> MB/s, avg <usec> us" */
#include <config.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "client.h"
#include "crypto.h"
#include "error.h"
#include "log.h"

struct load {
  struct tc_image *img;
  uint64_t size, bs;
  bool write, random;
  double seconds;
  pthread_mutex_t lock;
  uint64_t next_seq;      /* sequential: next block */
  uint64_t ops;
  double lat_sum;
  int failed;
};

static double
now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static void *
worker(void *arg)
{
  struct load *l = arg;
  uint64_t seed = (uint64_t) (uintptr_t) &seed ^ (uint64_t) time(NULL);
  uint8_t *buf = aligned_alloc(4096, l->bs);
  if (!buf)
    return NULL;
  for (uint64_t i = 0; i < l->bs; i++)
    buf[i] = (uint8_t) (i * 131 + 7);
  uint64_t nblocks = l->size / l->bs, ops = 0;
  double lat = 0, end = now_s() + l->seconds;
  for (double t0 = now_s(); t0 < end; t0 = now_s()) {
    uint64_t blk;
    if (l->random) {
      seed ^= seed << 13;
      seed ^= seed >> 7;
      seed ^= seed << 17;
      blk = seed % nblocks;
    }
    else {
      pthread_mutex_lock(&l->lock);
      blk = l->next_seq++ % nblocks;
      pthread_mutex_unlock(&l->lock);
    }
    int r = l->write ? tc_image_write(l->img, buf, l->bs, blk * l->bs) : tc_image_read(l->img, buf, l->bs, blk * l->bs);
    if (r < 0) {
      fprintf(stderr, "client-load: %s\n", tc_last_error());
      l->failed = 1;
      break;
    }
    lat += now_s() - t0;
    ops++;
  }
  pthread_mutex_lock(&l->lock);
  l->ops += ops;
  l->lat_sum += lat;
  pthread_mutex_unlock(&l->lock);
  free(buf);
  return NULL;
}

int
main(int argc, char **argv)
{
  tc_log_open("client-load", 0);
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg || argc != 6) {
    fprintf(stderr, "usage: client-load IMAGE randwrite|randread|write|read BS IODEPTH SECONDS [options] %s\n",
            cfg ? "" : tc_last_error());
    return 1;
  }
  if (tc_log_configure(cfg, NULL) < 0) {
    fprintf(stderr, "client-load: %s\n", tc_last_error());
    return 1;
  }
  if (tc_crypto_init() < 0)
    return 1;
  struct load l = { .lock = PTHREAD_MUTEX_INITIALIZER };
  const char *mode = argv[2];
  l.write = strstr(mode, "write") != NULL;
  l.random = !strncmp(mode, "rand", 4);
  l.bs = (uint64_t) tc_parse_size(argv[3]);
  int qd = atoi(argv[4]);
  l.seconds = atof(argv[5]);
  if (l.bs == 0 || l.bs % 4096 || qd < 1 || qd > 256 || l.seconds <= 0) {
    fprintf(stderr, "client-load: bad BS, IODEPTH or SECONDS\n");
    return 1;
  }
  struct tc_client *cl = tc_client_new(cfg);
  if (!cl || !(l.img = tc_client_open(cl, argv[1], !l.write))) {
    fprintf(stderr, "client-load: %s\n", tc_last_error());
    tc_client_free(cl);
    return 1;
  }
  l.size = tc_image_size(l.img) / l.bs * l.bs;
  pthread_t th[256];
  double t0 = now_s();
  for (int i = 0; i < qd; i++)
    pthread_create(&th[i], NULL, worker, &l);
  for (int i = 0; i < qd; i++)
    pthread_join(th[i], NULL);
  if (l.write && tc_image_flush(l.img) < 0) {
    fprintf(stderr, "client-load: flush: %s\n", tc_last_error());
    l.failed = 1;
  }
  double el = now_s() - t0;
  printf("%s bs=%s qd=%d: %.0f IOPS, %.1f MB/s, avg %.0f us\n", mode, argv[3], qd, (double) l.ops / el,
         (double) l.ops * (double) l.bs / el / 1e6, l.ops ? l.lat_sum / (double) l.ops * 1e6 : 0.0);
  tc_image_free(l.img);
  tc_client_free(cl);
  tc_config_free(cfg);
  return l.failed;
}
