#include <config.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "error.h"

static _Thread_local char last_error[1024];

int
tc_error(int err, const char *fmt, ...)
{
  /* Format into a copy first: callers may pass tc_last_error() itself as an
   * argument to wrap the previous message. */
  char buf[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  memcpy(last_error, buf, sizeof buf);
  errno = err;
  return -1;
}

const char *
tc_last_error(void)
{
  return last_error;
}

void
tc_error_save(struct tc_error_saved *e)
{
  e->err = errno;
  _Static_assert(sizeof e->msg == sizeof last_error, "one message size");
  memcpy(e->msg, last_error, sizeof e->msg);
}

int
tc_error_restore(const struct tc_error_saved *e)
{
  memcpy(last_error, e->msg, sizeof last_error);
  errno = e->err;
  return -1;
}
