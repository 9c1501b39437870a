/* Logging. The level and sink are set once at start-up by main(), before
 * threads exist; after that they are only read (atomics keep TSan quiet). */
#include <config.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <stdatomic.h>
#include "error.h"
#include "log.h"
#include "tc_config.h"

static atomic_int log_level = TC_LOG_INFO;
static atomic_int log_syslog = 0;
static const char *log_ident = "tromcho";

void
tc_log_open(const char *ident, int use_syslog)
{
  log_ident = ident;
  atomic_store(&log_syslog, use_syslog);
  if (use_syslog)
    openlog(ident, LOG_PID, LOG_DAEMON);
}

void
tc_log_set_level(enum tc_log_level level)
{
  atomic_store(&log_level, level);
}

int
tc_log_level_parse(const char *name)
{
  static const char *names[] = { "error", "warn", "info", "debug" };
  for (int i = 0; i < 4; i++)
    if (strcasecmp(name, names[i]) == 0)
      return i;
  return -1;
}

int
tc_log_enabled(enum tc_log_level level)
{
  return (int) level <= atomic_load(&log_level);
}

void
tc_log(enum tc_log_level level, const char *fmt, ...)
{
  static const char *tags[] = { "error", "warning", "info", "debug" };
  static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
  char msg[2048];
  va_list ap;

  if (!tc_log_enabled(level))
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (atomic_load(&log_syslog)) {
    syslog(prio[level], "%s", msg);
    return;
  }
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  /* One fprintf per line: stdio locks the stream, so lines never interleave. */
  fprintf(stderr, "%02d:%02d:%02d.%03ld %s: %s: %s\n", tm.tm_hour, tm.tm_min,
          tm.tm_sec, ts.tv_nsec / 1000000, log_ident, tags[level], msg);
}

int
tc_log_configure(const struct tc_config *cfg, const char *ident)
{
  const char *name = tc_config_str(cfg, "log_level");
  int lvl = tc_log_level_parse(name);
  if (lvl < 0)
    return tc_error(EINVAL, "option log_level: '%s' is not one of error, warn, info, debug", name ? name : "");
  if (ident)
    tc_log_open(ident, 0);
  tc_log_set_level((enum tc_log_level) lvl);
  return 0;
}
