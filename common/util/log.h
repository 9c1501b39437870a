/* Logging: one line per message, to stderr or syslog, filtered by level. */
#ifndef TROMCHO_LOG_H
#define TROMCHO_LOG_H

enum tc_log_level { TC_LOG_ERROR = 0, TC_LOG_WARN = 1, TC_LOG_INFO = 2, TC_LOG_DEBUG = 3 };

/* Set the program name shown in each line and whether to use syslog. */
void tc_log_open(const char *ident, int use_syslog);
void tc_log_set_level(enum tc_log_level level);
/* Parse "error", "warn", "info", "debug"; -1 if unknown. */
int tc_log_level_parse(const char *name);
int tc_log_enabled(enum tc_log_level level);
struct tc_config;
/* A program's logging from its configuration: the log_level option, and
 * (ident not NULL) the program name on stderr. 0, or -1 with an error
 * naming the option and its bad value. */
int tc_log_configure(const struct tc_config *cfg, const char *ident);
void tc_log(enum tc_log_level level, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));

#define tc_err(...)   tc_log(TC_LOG_ERROR, __VA_ARGS__)
#define tc_warn(...)  tc_log(TC_LOG_WARN, __VA_ARGS__)
#define tc_info(...)  tc_log(TC_LOG_INFO, __VA_ARGS__)
#define tc_debug(...) do { if (tc_log_enabled(TC_LOG_DEBUG)) tc_log(TC_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
