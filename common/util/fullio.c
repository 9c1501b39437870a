/* Whole reads and writes (fullio.h). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdint.h>
#include <unistd.h>
#include "cleanup.h"
#include "fullio.h"
#include "vector.h"

ssize_t
tc_read_full(int fd, void *buf, size_t len, off_t off)
{
  uint8_t *p = buf;
  size_t got = 0;
  while (got < len) {
    ssize_t r = off < 0 ? read(fd, p + got, len - got) : pread(fd, p + got, len - got, off + (off_t) got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -1;
    if (r == 0)
      break;
    got += (size_t) r;
  }
  return (ssize_t) got;
}

int
tc_write_full(int fd, const void *buf, size_t len, off_t off)
{
  const uint8_t *p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t r = off < 0 ? write(fd, p + done, len - done) : pwrite(fd, p + done, len - done, off + (off_t) done);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -1;
    if (r == 0) {
      errno = EIO;
      return -1;
    }
    done += (size_t) r;
  }
  return 0;
}

char *
tc_read_file(const char *path, size_t max, size_t *len)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (tc_grow(&buf, &cap, n + 4096 + 1, 1, 8192) < 0)
      goto fail;
    size_t want = cap - n - 1;
    ssize_t r = tc_read_full(fd, buf + n, want, -1);
    if (r < 0)
      goto fail;
    n += (size_t) r;
    if (n > max) {
      errno = EFBIG;
      goto fail;
    }
    if ((size_t) r < want)   /* short: the end of the file */
      break;
  }
  close(fd);
  buf[n] = 0;
  if (len)
    *len = n;
  return buf;
fail: {
    KEEP_ERRNO;
    free(buf);
    close(fd);
  }
  return NULL;
}
