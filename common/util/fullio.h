/* Whole reads and writes: the EINTR and short-count loops in one place. */
#ifndef TROMCHO_FULLIO_H
#define TROMCHO_FULLIO_H
#include <sys/types.h>

/* Read len bytes (at off, or at the file position when off < 0). Returns
 * the count read, less than len only at end of file, or -1 with errno. */
ssize_t tc_read_full(int fd, void *buf, size_t len, off_t off);
/* Write all len bytes (at off, or at the file position when off < 0).
 * Returns 0, or -1 with errno (EIO for a write that wrote nothing). */
int tc_write_full(int fd, const void *buf, size_t len, off_t off);
/* The whole file at path, NUL-terminated (caller frees), its length in
 * *len (may be NULL). NULL with errno: the open's or the read's, EFBIG past
 * max bytes. Sets no message: the caller names what the file is for. */
char *tc_read_file(const char *path, size_t max, size_t *len);

#endif
