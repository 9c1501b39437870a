/* The utility layer: the growth rule and typed vectors (vector.h), whole
 * reads and writes (fullio.h) over a pipe that returns short counts and a
 * file that ends early; calls submitted to an event loop from several
 * threads at once all run, none stranded without a wake-up. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cleanup.h"
#include "error.h"
#include "evloop.h"
#include "fullio.h"
#include "tap.h"
#include "vector.h"

TC_VECTOR(u64_vec, uint64_t);

static void
test_grow(void)
{
  u64_vec v = { 0 };
  for (uint64_t i = 0; i < 10000; i++)
    CHECK(u64_vec_append(&v, i * 3) == 0, "append %llu", (unsigned long long) i);
  CHECK(v.len == 10000 && v.cap >= 10000 && v.cap < 20000, "len %zu cap %zu", v.len, v.cap);
  int ok = 1;
  for (size_t i = 0; i < v.len; i++)
    ok &= v.ptr[i] == i * 3;
  CHECK(ok, "the elements survive growing");
  size_t cap = v.cap;
  CHECK(u64_vec_reserve(&v, 0) == 0 && v.cap == cap, "reserving nothing changes nothing");
  errno = 0;
  CHECK(u64_vec_reserve(&v, SIZE_MAX) < 0 && errno == EOVERFLOW && v.cap == cap && v.ptr,
        "a reservation that overflows fails with EOVERFLOW and keeps the vector (errno %d)", errno);
  errno = 0;
  CHECK(u64_vec_reserve(&v, SIZE_MAX / 16) < 0 && (errno == EOVERFLOW || errno == ENOMEM) && v.len == 10000,
        "an impossible reservation fails and keeps the elements");
  u64_vec_reset(&v);
  CHECK(!v.ptr && !v.len && !v.cap, "reset empties");

  char *b = NULL;
  size_t bcap = 0;
  CHECK(tc_grow(&b, &bcap, 1, 1, 4096) == 0 && bcap == 4096, "min_cap honoured (%zu)", bcap);
  CHECK(tc_grow(&b, &bcap, 4097, 1, 4096) == 0 && bcap == 8192, "doubles (%zu)", bcap);
  CHECK(tc_grow(&b, &bcap, 100000, 1, 4096) == 0 && bcap >= 100000 && bcap <= 131072, "doubles to fit (%zu)", bcap);
  free(b);
}

struct trickle {
  int fd;
  const uint8_t *data;
  size_t len;
};

/* Writes to a pipe in 7-byte pieces, so reads come back short. */
static void *
trickle_writer(void *arg)
{
  struct trickle *t = arg;
  for (size_t off = 0; off < t->len; off += 7) {
    size_t n = t->len - off < 7 ? t->len - off : 7;
    if (write(t->fd, t->data + off, n) != (ssize_t) n)
      break;
  }
  close(t->fd);
  return NULL;
}

static void
test_fullio(void)
{
  uint8_t data[5000], back[6000];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t) (i * 7 + 1);
  int p[2];
  CHECK(pipe(p) == 0, "pipe");
  struct trickle t = { p[1], data, sizeof data };
  pthread_t th;
  CHECK(pthread_create(&th, NULL, trickle_writer, &t) == 0, "thread");
  ssize_t n = tc_read_full(p[0], back, 3000, -1);
  CHECK(n == 3000 && !memcmp(back, data, 3000), "a whole read from short pieces (%zd)", n);
  n = tc_read_full(p[0], back, sizeof back, -1);
  CHECK(n == 2000 && !memcmp(back, data + 3000, 2000), "short only at the end (%zd)", n);
  pthread_join(th, NULL);
  close(p[0]);

  char path[] = "/tmp/tromcho-test-util.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  unlink(path);
  CHECK(tc_write_full(fd, data, sizeof data, 100) == 0, "positional write");
  memset(back, 0, sizeof back);
  n = tc_read_full(fd, back, sizeof back, 100);
  CHECK(n == (ssize_t) sizeof data && !memcmp(back, data, sizeof data), "positional read back (%zd)", n);
  CHECK(tc_read_full(fd, back, 10, 1 << 20) == 0, "a read past the end reads nothing");
  CHECK(tc_write_full(fd, data, 10, -1) == 0 && lseek(fd, 0, SEEK_CUR) == 10, "a write at the file position moves it");
  close(fd);
  errno = 0;
  CHECK(tc_write_full(fd, data, 10, 0) < 0 && errno == EBADF, "a closed descriptor fails with its errno");
  CHECK(tc_read_full(fd, back, 10, -1) < 0 && errno == EBADF, "a read from a closed descriptor fails");
}

/* Cleanup that fails on its own and says so. */
static void
noisy_cleanup(void)
{
  close(-1);   /* EBADF */
  tc_error(EIO, "cleanup's own error");
}

static int
fail_keeping_errno(void)
{
  errno = ENOSPC;
  KEEP_ERRNO;
  noisy_cleanup();
  return -1;
}

static void
test_keep_error(void)
{
  errno = 0;
  CHECK(fail_keeping_errno() == -1 && errno == ENOSPC, "KEEP_ERRNO brings errno back (%d)", errno);
  tc_error(ENOENT, "no such image %s", "demo");
  struct tc_error_saved e;
  tc_error_save(&e);
  noisy_cleanup();
  CHECK(tc_error_restore(&e) == -1 && errno == ENOENT && !strcmp(tc_last_error(), "no such image demo"),
        "tc_error_restore brings errno and message back (%d, %s)", errno, tc_last_error());
}

static void
test_read_file(void)
{
  char path[] = "/tmp/tromcho-test-util.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  static uint8_t data[20000];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t) ('a' + i % 26);
  CHECK(tc_write_full(fd, data, sizeof data, -1) == 0, "write the file");
  close(fd);
  size_t n = 0;
  char *b = tc_read_file(path, 1 << 20, &n);
  CHECK(b && n == sizeof data && !memcmp(b, data, n) && b[n] == 0, "the whole file, NUL-terminated (%zu)", n);
  free(b);
  errno = 0;
  CHECK(!tc_read_file(path, 19999, &n) && errno == EFBIG, "past max: EFBIG (%d)", errno);
  b = tc_read_file(path, 20000, NULL);
  CHECK(b != NULL, "exactly max is read");
  free(b);
  unlink(path);
  CHECK(!tc_read_file(path, 1 << 20, &n) && errno == ENOENT, "a missing file: ENOENT");
  b = tc_read_file("/dev/null", 10, &n);
  CHECK(b && n == 0 && b[0] == 0, "an empty file");
  free(b);
}

/* --- tc_evloop_submit from threads: every call runs, none is stranded --- */

enum { SUBMITTERS = 4, CALLS = 20000 };
static unsigned long ran;   /* the loop thread's only */

static void
count_call(struct tc_evloop *l, void *arg)
{
  (void) l;
  (void) arg;
  ran++;
}

static void
stop_call(struct tc_evloop *l, void *arg)
{
  (void) arg;
  tc_evloop_stop(l);
}

static void *
loop_main(void *arg)
{
  tc_evloop_run(arg);
  return NULL;
}

static void *
submitter(void *arg)
{
  struct tc_evloop *l = arg;
  for (int i = 0; i < CALLS; i++) {
    if (tc_evloop_submit(l, count_call, NULL) < 0)
      return (void *) 1;
    if (i % 1000 == 0)
      usleep(100);   /* let the loop go idle now and then: the wake-up path again */
  }
  return NULL;
}

static void
test_evloop_submit(void)
{
  struct tc_evloop *l = tc_evloop_new();
  CHECK(l, "tc_evloop_new");
  if (!l)
    return;
  pthread_t lt, st[SUBMITTERS];
  CHECK(pthread_create(&lt, NULL, loop_main, l) == 0, "loop thread");
  for (int i = 0; i < SUBMITTERS; i++)
    CHECK(pthread_create(&st[i], NULL, submitter, l) == 0, "submitter %d", i);
  bool ok = true;
  for (int i = 0; i < SUBMITTERS; i++) {
    void *r;
    pthread_join(st[i], &r);
    ok = ok && !r;
  }
  CHECK(ok, "every submit succeeded");
  /* A stranded call (no wake-up for it) would leave the loop asleep: the
   * alarm ends the test then. */
  alarm(30);
  CHECK(tc_evloop_submit(l, stop_call, NULL) == 0, "submit the stop");
  pthread_join(lt, NULL);
  alarm(0);
  CHECK(ran == (unsigned long) SUBMITTERS * CALLS, "%lu of %d calls ran", ran, SUBMITTERS * CALLS);
  tc_evloop_free(l);
}

int
main(void)
{
  test_evloop_submit();
  test_read_file();
  test_keep_error();
  test_grow();
  test_fullio();
  return DONE();
}
