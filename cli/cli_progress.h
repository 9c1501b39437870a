/* Progress of a long command (dd, flatten, rm) on a terminal: bytes done,
 * rate and time left on one line of stderr, redrawn at most 4 times a
 * second; nothing at all when stderr is not a terminal, so scripts and logs
 * stay quiet. */
#ifndef TROMCHO_CLI_PROGRESS_H
#define TROMCHO_CLI_PROGRESS_H
#include <stdbool.h>
#include <stdint.h>

struct cli_progress {
  const char *what;       /* "dd", "flatten demo", ... */
  uint64_t total;         /* bytes expected, 0 if unknown */
  bool on;                /* stderr is a terminal */
  double t0, last;        /* monotonic seconds: start, last redraw */
  bool drawn;
};

/* Start: on only if stderr is a terminal. */
void cli_progress_start(struct cli_progress *p, const char *what, uint64_t total);
/* Redraw with `done` bytes if 0.25 s passed since the last redraw. */
void cli_progress_update(struct cli_progress *p, uint64_t done);
/* As a tc_admin_progress_fn: arg is the struct cli_progress. */
void cli_progress_cb(void *arg, uint64_t done, uint64_t total);
/* Erase the line (the command prints its own summary). */
void cli_progress_end(struct cli_progress *p);

#endif
