/* osd-store: figures for the OSD store on this machine (never pass/fail).
 *
 *   osd-store [--dir DIR] [--objects N] [--seconds S] [--objects-only]
 *
 * Prints the machine's fdatasync cost, checksum speeds (XXH3-64 vs CRC32C),
 * then the store: 4 KiB random writes (sync every 1, every 32, never),
 * 4 KiB random reads (page cache and cold), 128 KiB and 1 MiB sequential
 * writes and reads, and the rate of writes to new objects and of lookups
 * when the store holds 10^4 and N (default 10^6) objects. Files go to DIR
 * (default /var/tmp) and are removed at the end. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nmmintrin.h>
#include "crypto.h"
#include "error.h"
#include "store.h"

#define SEC TC_STORE_SECTOR
#define BS TC_STORE_DEFAULT_BLOCK_SIZE

static double
now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t
rnd(void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void
row(const char *name, long ops, double secs, size_t bytes_per_op)
{
  printf("%-44s %9ld %11.0f %10.1f %10.1f\n", name, ops, ops / secs, secs * 1e6 / ops,
         bytes_per_op ? (double) ops * bytes_per_op / secs / 1048576.0 : 0.0);
  fflush(stdout);
}

static void die(const char *what) __attribute__((noreturn));
static void
die(const char *what)
{
  fprintf(stderr, "osd-store: %s: %s\n", what, tc_last_error());
  exit(1);
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c(const void *data, size_t len)
{
  const uint8_t *p = data;
  uint64_t c = ~0u;
  for (size_t i = 0; i + 8 <= len; i += 8) {
    uint64_t x;
    memcpy(&x, p + i, 8);
    c = _mm_crc32_u64(c, x);
  }
  return (uint32_t) ~c;
}

static void
bench_machine(const char *dir, double secs)
{
  char path[512];
  snprintf(path, sizeof path, "%s/osd-store-bench.sync", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror(path);
    exit(1);
  }
  static uint8_t buf[SEC] __attribute__((aligned(4096)));
  memset(buf, 1, sizeof buf);
  if (ftruncate(fd, 64 << 20) < 0)
    perror("ftruncate");
  long n = 0;
  double t0 = now(), t;
  do {
    if (pwrite(fd, buf, SEC, (off_t) (rnd() % 16384) * SEC) != SEC || fdatasync(fd) < 0)
      perror("pwrite/fdatasync");
    n++;
  } while ((t = now()) - t0 < secs);
  row("machine: 4 KiB pwrite + fdatasync", n, t - t0, SEC);
  n = 0;
  t0 = now();
  do {
    for (int i = 0; i < 64; i++, n++)
      if (pwrite(fd, buf, SEC, (off_t) (rnd() % 16384) * SEC) != SEC)
        perror("pwrite");
  } while ((t = now()) - t0 < secs / 2);
  row("machine: 4 KiB pwrite (page cache, no sync)", n, t - t0, SEC);
  close(fd);
  unlink(path);

  volatile uint64_t sink = 0;
  tc_random(buf, sizeof buf);
  n = 0;
  t0 = now();
  do {
    for (int i = 0; i < 10000; i++)
      sink += tc_xxh3_64_seed(buf, SEC, (uint64_t) i);
    n += 10000;
  } while ((t = now()) - t0 < secs / 2);
  char name[64];
  snprintf(name, sizeof name, "checksum: XXH3-64 (%s) of 4 KiB", tc_xxh3_impl());
  row(name, n, t - t0, SEC);
  n = 0;
  t0 = now();
  do {
    for (int i = 0; i < 10000; i++)
      sink += crc32c(buf, SEC);
    n += 10000;
  } while ((t = now()) - t0 < secs / 2);
  row("checksum: CRC32C (SSE4.2, one stream) of 4 KiB", n, t - t0, SEC);
  (void) sink;
}

static struct tc_store *
make_store(const char *path, uint64_t size)
{
  struct tc_store_format_opts o = { .data_path = path, .size = size, .osd_num = 1, .force = true };
  struct tc_store *st;
  if (tc_store_format(&o) < 0 || tc_store_open(&st, path, NULL) < 0)
    die(path);
  return st;
}

static void
drop_cache(const char *path)
{
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    if (fdatasync(fd) < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
      perror("fadvise");
    close(fd);
  }
}

/* 4 KiB random writes over `span` bytes of one inode, sync every `every` (0 = never). */
static void
rand_write(struct tc_store *st, uint64_t span, int every, double secs, const char *name)
{
  static uint8_t buf[SEC];
  long n = 0;
  uint64_t v = 1000000;
  double t0 = now(), t;
  do {
    for (int i = 0; i < 32; i++) {
      memset(buf, (int) n, 64);
      if (tc_store_write(st, 1, (rnd() % (span / SEC)) * SEC, SEC, buf, v++) < 0)
        die("write");
      n++;
      if (every && n % every == 0 && tc_store_sync(st) < 0)
        die("sync");
    }
  } while ((t = now()) - t0 < secs);
  if (tc_store_sync(st) < 0)
    die("sync");
  t = now();
  row(name, n, t - t0, SEC);
}

static void
rand_read(struct tc_store *st, uint64_t span, double secs, const char *name)
{
  static uint8_t buf[SEC];
  long n = 0;
  double t0 = now(), t;
  do {
    for (int i = 0; i < 32; i++, n++)
      if (tc_store_read(st, 2, (rnd() % (span / SEC)) * SEC, SEC, buf, NULL, NULL) < 0)
        die("read");
  } while ((t = now()) - t0 < secs);
  row(name, n, t - t0, SEC);
}

/* Sequential I/O of `io` bytes per call (as object-sized store calls). */
static void
seq(struct tc_store *st, uint64_t inode, uint64_t total, size_t io, int write, const char *name)
{
  static uint8_t *buf;
  if (!buf && !(buf = aligned_alloc(4096, 1 << 20)))
    exit(1);
  memset(buf, 0x77, 1 << 20);
  long n = 0;
  double t0 = now();
  for (uint64_t off = 0; off + io <= total; off += io, n++)
    for (size_t part = 0; part < io; part += BS < io ? BS : io) {
      uint32_t len = (uint32_t) (BS < io ? BS : io);
      int r = write ? tc_store_write(st, inode, off + part, len, buf + part, 1)
                    : tc_store_read(st, inode, off + part, len, buf + part, NULL, NULL);
      if (r < 0)
        die(write ? "write" : "read");
    }
  if (write && tc_store_sync(st) < 0)
    die("sync");
  row(name, n, now() - t0, io);
}

/* Fill up to `target` objects (one 4 KiB sector each, inode 3), then time
 * 10^4 writes to new objects (+ one sync) and 10^4 random lookups. */
static long filled;
static void
objects_at(struct tc_store *st, long target)
{
  static uint8_t buf[SEC];
  double t0 = now();
  for (; filled < target; filled++) {
    memcpy(buf, &filled, sizeof filled);
    if (tc_store_write(st, 3, (uint64_t) filled * BS, SEC, buf, 1) < 0)
      die("fill");
  }
  if (tc_store_sync(st) < 0)
    die("sync");
  fprintf(stderr, "  (filled to %ld objects in %.1f s)\n", target, now() - t0);
  /* Best of 3 rounds each: the machine is shared, and the first pass also
   * faults the metadata's pages into this process. */
  char name[80];
  long n = 10000;
  double best = 1e9, sync_t = 0;
  for (int round = 0; round < 3; round++) {
    t0 = now();
    for (long i = 0; i < n; i++) {
      long key = round * n + i;
      memcpy(buf, &key, sizeof key);
      if (tc_store_write(st, 4, ((uint64_t) filled + (uint64_t) key) * BS, SEC, buf, 1) < 0)
        die("insert");
    }
    double t = now() - t0;
    best = t < best ? t : best;
    t0 = now();
    if (tc_store_sync(st) < 0)
      die("sync");
    sync_t += (now() - t0) / 3;
  }
  snprintf(name, sizeof name, "insert new object (4 KiB) at %ld objects", target);
  row(name, n, best, SEC);
  snprintf(name, sizeof name, "  then sync (10^4 inserts, 40 MiB; mean of 3)");
  row(name, 1, sync_t, 0);
  /* A sector the object does not have: the metadata lookup alone. */
  long m = 100000;
  best = 1e9;
  for (int round = 0; round < 3; round++) {
    t0 = now();
    for (long i = 0; i < m; i++) {
      uint64_t k = rnd() % (uint64_t) filled, v;
      if (tc_store_read(st, 3, k * BS + SEC, SEC, buf, NULL, &v) != 0 || v != 1)
        die("lookup");
    }
    double t = now() - t0;
    best = t < best ? t : best;
  }
  snprintf(name, sizeof name, "lookup (metadata only) at %ld objects", target);
  row(name, m, best, 0);
  best = 1e9;
  for (int round = 0; round < 3; round++) {
    t0 = now();
    for (long i = 0; i < n; i++) {
      uint64_t k = rnd() % (uint64_t) filled, v;
      if (tc_store_read(st, 3, k * BS, SEC, buf, NULL, &v) != 1 || memcmp(buf, &k, sizeof k) != 0)
        die("lookup");
    }
    double t = now() - t0;
    best = t < best ? t : best;
  }
  snprintf(name, sizeof name, "lookup + 4 KiB read (warm) at %ld objects", target);
  row(name, n, best, SEC);
  /* Keep inode 4 out of the next round's count. */
  for (long i = 0; i < 3 * n; i++)
    if (tc_store_delete_object(st, 4, ((uint64_t) filled + (uint64_t) i) * BS) < 0)
      die("delete");
  if (tc_store_sync(st) < 0)
    die("sync");
}

int
main(int argc, char **argv)
{
  const char *dir = "/var/tmp";
  long objects = 1000000;
  double secs = 2;
  int objects_only = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dir") && i + 1 < argc)
      dir = argv[++i];
    else if (!strcmp(argv[i], "--objects") && i + 1 < argc)
      objects = atol(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      secs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--objects-only"))
      objects_only = 1;
    else {
      fprintf(stderr, "usage: osd-store [--dir DIR] [--objects N] [--seconds S] [--objects-only]\n");
      return 2;
    }
  }
  if (tc_crypto_init() < 0)
    die("crypto");
  printf("%-44s %9s %11s %10s %10s\n", "test (QD1, one thread)", "ops", "ops/s", "us/op", "MiB/s");
  char path[512];
  if (objects_only)
    goto objects;
  bench_machine(dir, secs);

  snprintf(path, sizeof path, "%s/osd-store-bench.data", dir);
  struct tc_store *st = make_store(path, 8ull << 30);
  uint64_t span = 1ull << 30;
  rand_write(st, span, 1, secs, "store: 4 KiB random write, sync each");
  rand_write(st, span, 32, secs, "store: 4 KiB random write, sync every 32");
  rand_write(st, span, 0, secs, "store: 4 KiB random write, no sync");
  seq(st, 2, 512ull << 20, BS, 1, "store: 128 KiB sequential write (+sync)");
  seq(st, 5, 512ull << 20, 1 << 20, 1, "store: 1 MiB sequential write (+sync)");
  rand_read(st, 512ull << 20, secs, "store: 4 KiB random read (page cache)");
  drop_cache(path);
  rand_read(st, 512ull << 20, secs, "store: 4 KiB random read (cold, buffered)");
  drop_cache(path);
  seq(st, 2, 512ull << 20, BS, 0, "store: 128 KiB sequential read (cold)");
  drop_cache(path);
  seq(st, 5, 512ull << 20, 1 << 20, 0, "store: 1 MiB sequential read (cold)");
  seq(st, 5, 512ull << 20, 1 << 20, 0, "store: 1 MiB sequential read (page cache)");
  if (tc_store_close(st) < 0)
    die("close");
  unlink(path);
  snprintf(path + strlen(path), sizeof path - strlen(path), ".meta");
  unlink(path);

objects:
  snprintf(path, sizeof path, "%s/osd-store-bench.objs", dir);
  st = make_store(path, (uint64_t) objects * SEC + (1ull << 30));
  objects_at(st, 10000);
  if (objects > 10000)
    objects_at(st, objects);
  struct tc_store_stats ss;
  if (tc_store_stats(st, &ss) == 0)
    fprintf(stderr, "  (%" PRIu64 " objects, %" PRIu64 " MiB of data)\n", ss.objects, ss.used_bytes >> 20);
  if (tc_store_close(st) < 0)
    die("close");
  double t0 = now();
  if (tc_store_open(&st, path, NULL) < 0)
    die("reopen");
  row("open (scan metadata, rebuild allocator)", 1, now() - t0, 0);
  tc_store_close(st);
  char meta[600];
  snprintf(meta, sizeof meta, "%s.meta", path);
  FILE *f = fopen(meta, "rb");
  if (f) {
    fseek(f, 0, SEEK_END);
    fprintf(stderr, "  (metadata file: %ld MiB)\n", ftell(f) >> 20);
    fclose(f);
  }
  unlink(path);
  unlink(meta);
  return 0;
}
