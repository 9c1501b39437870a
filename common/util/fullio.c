/* Whole reads and writes (fullio.h). */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include "fullio.h"

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
