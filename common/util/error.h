/* The library's error model (after libnbd): a failing call returns -1 (or
 * NULL), sets errno, and leaves a message naming the call and the object in
 * a thread-local buffer that tc_last_error() returns. */
#ifndef TROMCHO_ERROR_H
#define TROMCHO_ERROR_H
#include <errno.h>

/* Record the error message of the current thread and set errno = err.
 * Always returns -1 so callers can write `return tc_error(EINVAL, ...)`. */
int tc_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message recorded on this thread ("" if none). */
const char *tc_last_error(void);

/* The current error (errno and message) kept across cleanup that may record
 * its own (cleanup.h's KEEP_ERRNO keeps errno alone):
 *
 *   struct tc_error_saved e;
 *   tc_error_save(&e);
 *   tc_cluster_free(cl);      // may fail and say why
 *   return tc_error_restore(&e);   // -1, errno and message as saved */
struct tc_error_saved {
  int err;
  char msg[1024];
};
void tc_error_save(struct tc_error_saved *e);
int tc_error_restore(const struct tc_error_saved *e);

#endif
