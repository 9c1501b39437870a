#include <config.h>
#include <stdarg.h>
#include <stdio.h>
#include "error.h"

static _Thread_local char last_error[1024];

int
tc_error(int err, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  errno = err;
  return -1;
}

const char *
tc_last_error(void)
{
  return last_error;
}
