/* The gateway's store without HTTP, next to the floor of any WAL: how long
 * a durable put takes in LMDB (kvs_write, group commit) against a bare
 * 4 KiB append + fdatasync in the same folder.
 *
 *   kvstore-bench DIR [OPS] [THREADS]     (defaults 5000 ops, 1 and 16 threads) */
#include <config.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "kvstore.h"
#include "error.h"

static double
now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static void
report(const char *what, int threads, double *lat, int n, double elapsed)
{
  qsort(lat, (size_t) n, sizeof *lat, cmp_double);
  printf("%-28s %3d threads %9.0f ops/s   p50 %7.3f ms   p99 %7.3f ms\n", what, threads, n / elapsed,
         lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3);
}

struct job {
  struct kvs *s;
  int id, n;
  double *lat;
};

static int
put_fn(struct kvs_txn *tx, void *arg, struct kv_err *err)
{
  char key[64];
  static const uint8_t val[100];
  struct job *j = arg;
  snprintf(key, sizeof key, "/bench/%d/%08d", j->id, j->n);
  return kvs_put(tx, (const uint8_t *) key, strlen(key), val, sizeof val, 0, err);
}

static void *
putter(void *arg)
{
  struct job *j = arg;
  int count = j->n;
  for (int i = 0; i < count; i++) {
    struct kv_err err;
    double t = now();
    j->n = i;
    if (kvs_write(j->s, put_fn, NULL, j, &err) < 0) {
      fprintf(stderr, "put: %s\n", err.msg);
      exit(1);
    }
    j->lat[i] = now() - t;
  }
  return NULL;
}

int
main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: kvstore-bench DIR [OPS] [THREADS]\n");
    return 1;
  }
  int ops = argc > 2 ? atoi(argv[2]) : 5000;
  int maxthreads = argc > 3 ? atoi(argv[3]) : 16;
  double *lat = calloc((size_t) ops, sizeof *lat);
  char path[4096];

  /* A WAL's floor: append 4 KiB and fdatasync, one record per commit. */
  snprintf(path, sizeof path, "%s/wal-floor", argv[1]);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror(path);
    return 1;
  }
  static char rec[4096];
  double t0 = now();
  for (int i = 0; i < ops; i++) {
    double t = now();
    if (pwrite(fd, rec, sizeof rec, (off_t) i * 4096) != (ssize_t) sizeof rec || fdatasync(fd) < 0) {
      perror("wal");
      return 1;
    }
    lat[i] = now() - t;
  }
  report("append 4 KiB + fdatasync", 1, lat, ops, now() - t0);
  close(fd);
  unlink(path);

  snprintf(path, sizeof path, "%s/store", argv[1]);
  struct kvs *s = kvs_open(path, 1LL << 32);
  if (!s) {
    fprintf(stderr, "%s\n", tc_last_error());
    return 1;
  }
  for (int threads = 1; threads <= maxthreads; threads *= 16) {
    pthread_t th[64];
    struct job jobs[64];
    int per = ops / threads;
    t0 = now();
    for (int i = 0; i < threads; i++) {
      jobs[i] = (struct job) { s, threads * 100 + i, per, lat + (size_t) i * per };
      pthread_create(&th[i], NULL, putter, &jobs[i]);
    }
    for (int i = 0; i < threads; i++)
      pthread_join(th[i], NULL);
    report("LMDB store put (kvs_write)", threads, lat, per * threads, now() - t0);
  }
  kvs_close(s);
  free(lat);
  return 0;
}
