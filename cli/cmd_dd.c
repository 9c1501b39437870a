/* tromcho dd: copy between files and images, with dd's syntax:
 *   if=FILE / iimg=IMAGE, of=FILE / oimg=IMAGE, bs=, count=, skip=, seek=,
 *   iflag=direct, oflag=direct, conv=notrunc, iodepth=N (blocks in flight).
 * Without if/iimg it reads stdin, without of/oimg it writes stdout. Blocks
 * are copied by iodepth threads when both ends can seek (images and regular
 * files), so the cluster sees that many operations at once. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli_progress.h"
#include "cli_util.h"
#include "fullio.h"
#include "commands.h"
#include "error.h"
#include "image.h"

struct end {
  const char *file, *image;
  int fd;
  struct tc_image *img;
  bool positional;        /* pread/pwrite or image: any order */
  bool direct;
  uint64_t size;          /* input: bytes available (UINT64_MAX: until EOF) */
};

struct dd {
  struct end in, out;
  uint64_t bs, count, skip, seek;
  bool have_count;
  pthread_mutex_t lock;
  uint64_t next;          /* next block index */
  bool eof;
  int error;
  char errmsg[512];
  uint64_t bytes;
  uint64_t finished;      /* workers that returned */
};

/* Record the first error: "PREFIX: WHY". */
static void
dd_fail(struct dd *d, const char *prefix, const char *what, const char *why)
{
  pthread_mutex_lock(&d->lock);
  if (!d->error) {
    d->error = 1;
    snprintf(d->errmsg, sizeof d->errmsg, "%s%s: %s", prefix, what, why);
  }
  pthread_mutex_unlock(&d->lock);
}

/* Read up to len bytes in full (short only at EOF). */
static ssize_t
read_full(int fd, uint8_t *buf, size_t len, bool positional, uint64_t off)
{
  return tc_read_full(fd, buf, len, positional ? (off_t) off : -1);
}

static int
write_full(int fd, const uint8_t *buf, size_t len, bool positional, uint64_t off, bool direct)
{
  if (direct && len % 4096) {   /* O_DIRECT cannot write a partial tail */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
      fcntl(fd, F_SETFL, fl & ~O_DIRECT);
  }
  return tc_write_full(fd, buf, len, positional ? (off_t) off : -1);
}

static void *
worker(void *arg)
{
  struct dd *d = arg;
  uint8_t *buf = aligned_alloc(4096, (d->bs + 4095) / 4096 * 4096);
  if (!buf) {
    dd_fail(d, "", "dd", "out of memory");
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&d->lock);
    if (d->error || d->eof || (d->have_count && d->next >= d->count)) {
      pthread_mutex_unlock(&d->lock);
      break;
    }
    uint64_t i = d->next++;
    ssize_t n = 0;
    if (!d->in.positional) {
      /* Sequential input: read in order, under the lock. */
      n = read_full(d->in.fd, buf, d->bs, false, 0);
      if (n < (ssize_t) d->bs)
        d->eof = true;
      pthread_mutex_unlock(&d->lock);
      if (n < 0) {
        dd_fail(d, "", d->in.file ? d->in.file : "stdin", strerror(errno));
        break;
      }
      if (n == 0)
        break;
    }
    else {
      pthread_mutex_unlock(&d->lock);
      uint64_t off = (d->skip + i) * d->bs;
      if (off >= d->in.size) {
        pthread_mutex_lock(&d->lock);
        d->eof = true;
        pthread_mutex_unlock(&d->lock);
        break;
      }
      uint64_t len = d->in.size - off < d->bs ? d->in.size - off : d->bs;
      if (d->in.img) {
        if (tc_image_read(d->in.img, buf, len, off) < 0) {
          dd_fail(d, "iimg=", d->in.image, tc_last_error());
          break;
        }
        n = (ssize_t) len;
      }
      else if ((n = read_full(d->in.fd, buf, len, true, off)) < 0) {
        dd_fail(d, "", d->in.file, strerror(errno));
        break;
      }
      if ((uint64_t) n < d->bs) {
        pthread_mutex_lock(&d->lock);
        d->eof = true;
        pthread_mutex_unlock(&d->lock);
      }
      if (n == 0)
        break;
    }
    uint64_t woff = (d->seek + i) * d->bs;
    if (d->out.img) {
      if (tc_image_write(d->out.img, buf, (uint64_t) n, woff) < 0) {
        dd_fail(d, "oimg=", d->out.image,
                errno == ENOSPC ? "no space: the copy goes beyond the end of the image" : tc_last_error());
        break;
      }
    }
    else if (write_full(d->out.fd, buf, (size_t) n, d->out.positional, woff, d->out.direct) < 0) {
      dd_fail(d, "", d->out.file ? d->out.file : "stdout", strerror(errno));
      break;
    }
    pthread_mutex_lock(&d->lock);
    d->bytes += (uint64_t) n;
    pthread_mutex_unlock(&d->lock);
  }
  free(buf);
  pthread_mutex_lock(&d->lock);
  d->finished++;
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

static int
parse_num(const char *what, const char *s, uint64_t *v, bool size)
{
  int64_t x = size ? tc_parse_size(s) : -1;
  if (!size) {
    char *end;
    errno = 0;
    unsigned long long u = strtoull(s, &end, 10);
    if (*s && !*end && !errno && *s != '-')
      x = (int64_t) u;
  }
  if (x < 0 || (size && x == 0)) {
    fprintf(stderr, "tromcho dd: %s=%s is not a valid %s\n", what, s, size ? "size" : "number");
    return -1;
  }
  *v = (uint64_t) x;
  return 0;
}

int
cmd_dd(int argc, char **argv, struct tc_config *cfg)
{
  struct dd d = { .bs = 1 << 20, .in.fd = -1, .out.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };
  uint64_t iodepth = 8;
  bool notrunc = false;
  for (int i = 1; i < argc; i++) {
    char *a = argv[i], *eq = strchr(a, '=');
    if (!eq) {
      fprintf(stderr, "tromcho dd: argument '%s' is not KEY=VALUE (if=, of=, iimg=, oimg=, bs=, count=, skip=, seek=, iflag=, oflag=)\n", a);
      return 1;
    }
    *eq = 0;
    const char *v = eq + 1;
    int r = 0;
    if (!strcmp(a, "if")) d.in.file = v;
    else if (!strcmp(a, "of")) d.out.file = v;
    else if (!strcmp(a, "iimg")) d.in.image = v;
    else if (!strcmp(a, "oimg")) d.out.image = v;
    else if (!strcmp(a, "bs")) r = parse_num("bs", v, &d.bs, true);
    else if (!strcmp(a, "count")) { r = parse_num("count", v, &d.count, false); d.have_count = true; }
    else if (!strcmp(a, "skip")) r = parse_num("skip", v, &d.skip, false);
    else if (!strcmp(a, "seek")) r = parse_num("seek", v, &d.seek, false);
    else if (!strcmp(a, "iodepth")) r = parse_num("iodepth", v, &iodepth, false);
    else if (!strcmp(a, "iflag") || !strcmp(a, "oflag")) {
      if (strcmp(v, "direct")) {
        fprintf(stderr, "tromcho dd: %s=%s: only %s=direct is supported\n", a, v, a);
        return 1;
      }
      if (a[0] == 'i') d.in.direct = true; else d.out.direct = true;
    }
    else if (!strcmp(a, "conv")) {
      if (strcmp(v, "notrunc")) {
        fprintf(stderr, "tromcho dd: conv=%s: only conv=notrunc is supported\n", v);
        return 1;
      }
      notrunc = true;
    }
    else {
      fprintf(stderr, "tromcho dd: unknown argument '%s=' (if=, of=, iimg=, oimg=, bs=, count=, skip=, seek=, iflag=, oflag=, conv=, iodepth=)\n", a);
      return 1;
    }
    if (r < 0)
      return 1;
  }
  if ((d.in.file && d.in.image) || (d.out.file && d.out.image)) {
    fprintf(stderr, "tromcho dd: give if= or iimg=, of= or oimg=, not both\n");
    return 1;
  }
  if (d.bs > (256u << 20) || iodepth < 1 || iodepth > 256) {
    fprintf(stderr, "tromcho dd: bs= must be at most 256M and iodepth= 1..256\n");
    return 1;
  }
  struct tc_client *cl = NULL;
  int status = 1;
  if (d.in.image || d.out.image) {
    if (!(cl = cli_client("dd", cfg)))
      return 1;
  }
  /* input */
  if (d.in.image) {
    if (!(d.in.img = tc_client_open(cl, d.in.image, true))) {
      fprintf(stderr, "tromcho dd: iimg=%s: %s\n", d.in.image, tc_last_error());
      goto out;
    }
    d.in.positional = true;
    d.in.size = tc_image_size(d.in.img);
  }
  else {
    d.in.fd = d.in.file ? open(d.in.file, O_RDONLY | (d.in.direct ? O_DIRECT : 0)) : 0;
    if (d.in.fd < 0) {
      fprintf(stderr, "tromcho dd: if=%s: %s\n", d.in.file, strerror(errno));
      goto out;
    }
    struct stat st;
    d.in.size = UINT64_MAX;
    if (fstat(d.in.fd, &st) == 0 && S_ISREG(st.st_mode)) {
      d.in.positional = true;
      d.in.size = (uint64_t) st.st_size;
    }
    else if (d.skip) {   /* skip by reading */
      uint8_t *tmp = malloc(d.bs);
      for (uint64_t k = 0; tmp && k < d.skip; k++)
        if (read_full(d.in.fd, tmp, d.bs, false, 0) <= 0)
          break;
      free(tmp);
    }
  }
  /* output */
  if (d.out.image) {
    if (!(d.out.img = tc_client_open(cl, d.out.image, false))) {
      fprintf(stderr, "tromcho dd: oimg=%s: %s\n", d.out.image, tc_last_error());
      goto out;
    }
    if (tc_image_readonly(d.out.img)) {
      fprintf(stderr, "tromcho dd: oimg=%s: read-only (a snapshot, or you may only read it)\n", d.out.image);
      goto out;
    }
    d.out.positional = true;
  }
  else {
    d.out.fd = d.out.file ? open(d.out.file, O_WRONLY | O_CREAT | (d.out.direct ? O_DIRECT : 0), 0644) : 1;
    if (d.out.fd < 0) {
      fprintf(stderr, "tromcho dd: of=%s: %s\n", d.out.file, strerror(errno));
      goto out;
    }
    struct stat st;
    if (fstat(d.out.fd, &st) == 0 && S_ISREG(st.st_mode)) {
      d.out.positional = true;
      if (!notrunc && ftruncate(d.out.fd, (off_t) (d.seek * d.bs)) < 0) {
        fprintf(stderr, "tromcho dd: of=%s: %s\n", d.out.file, strerror(errno));
        goto out;
      }
    }
    else if (d.seek) {
      fprintf(stderr, "tromcho dd: seek= needs an output that can seek (an image or a regular file)\n");
      goto out;
    }
  }
  if (!d.out.positional)
    iodepth = 1;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t th[256];
  uint64_t started = 0;
  for (; started < iodepth; started++)
    if (pthread_create(&th[started], NULL, worker, &d) != 0)
      break;
  if (!started) {
    fprintf(stderr, "tromcho dd: cannot start a thread\n");
    goto out;
  }
  /* Bytes to copy, when known: for the progress line. */
  uint64_t total = 0;
  if (d.in.positional && d.in.size != UINT64_MAX)
    total = d.in.size > d.skip * d.bs ? d.in.size - d.skip * d.bs : 0;
  if (d.have_count && (!total || d.count * d.bs < total))
    total = d.count * d.bs;
  struct cli_progress pr;
  cli_progress_start(&pr, "dd", total);
  for (;;) {
    pthread_mutex_lock(&d.lock);
    uint64_t fin = d.finished, bytes = d.bytes;
    pthread_mutex_unlock(&d.lock);
    if (fin == started || !pr.on)
      break;
    cli_progress_update(&pr, bytes);
    nanosleep(&(struct timespec) { .tv_nsec = 100 * 1000 * 1000 }, NULL);
  }
  for (uint64_t k = 0; k < started; k++)
    pthread_join(th[k], NULL);
  cli_progress_end(&pr);
  if (!d.error && d.out.img && tc_image_flush(d.out.img) < 0)
    dd_fail(&d, "oimg=", d.out.image, tc_last_error());
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (d.error) {
    fprintf(stderr, "tromcho dd: %s\n", d.errmsg);
    goto out;
  }
  char h[32];
  fprintf(stderr, "%" PRIu64 " bytes (%s) copied, %.3f s, %.1f MB/s\n", d.bytes, cli_human(d.bytes, h, sizeof h),
          secs, secs > 0 ? (double) d.bytes / secs / 1e6 : 0.0);
  status = 0;
out:
  tc_image_free(d.in.img);
  tc_image_free(d.out.img);
  if (d.in.fd > 0)
    close(d.in.fd);
  if (d.out.fd > 1 && close(d.out.fd) < 0 && status == 0) {
    fprintf(stderr, "tromcho dd: of=%s: %s\n", d.out.file, strerror(errno));
    status = 1;
  }
  tc_client_free(cl);
  return status;
}
