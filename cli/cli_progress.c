/* Progress on a terminal (see cli_progress.h). */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "cli_progress.h"
#include "cli_util.h"

static double
now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

void
cli_progress_start(struct cli_progress *p, const char *what, uint64_t total)
{
  p->what = what;
  p->total = total;
  p->on = isatty(STDERR_FILENO) == 1;
  p->t0 = p->last = now();
  p->drawn = false;
}

/* "1h02m", "3m05s", "42s" */
static void
fmt_secs(double s, char *buf, size_t len)
{
  uint64_t t = s < 0 ? 0 : (uint64_t) (s + 0.5);
  if (t >= 3600)
    snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", t / 3600, t / 60 % 60);
  else if (t >= 60)
    snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", t / 60, t % 60);
  else
    snprintf(buf, len, "%" PRIu64 "s", t);
}

void
cli_progress_update(struct cli_progress *p, uint64_t done)
{
  if (!p->on)
    return;
  double t = now();
  /* The first line as soon as something is done (a fast copy may end
   * before the first quarter second), then four a second. */
  if (p->drawn ? t - p->last < 0.25 : done == 0)
    return;
  p->last = t;
  double el = t - p->t0, rate = el > 0 ? (double) done / el : 0;
  char h[32], ht[32], r[32], left[32] = "?";
  cli_human(done, h, sizeof h);
  cli_human((uint64_t) rate, r, sizeof r);
  if (p->total) {
    if (rate > 0)
      fmt_secs((double) (p->total > done ? p->total - done : 0) / rate, left, sizeof left);
    fprintf(stderr, "\r\033[K%s: %s of %s (%.0f%%), %s/s, %s left", p->what, h, cli_human(p->total, ht, sizeof ht),
            100.0 * (double) done / (double) p->total, r, left);
  }
  else
    fprintf(stderr, "\r\033[K%s: %s, %s/s", p->what, h, r);
  fflush(stderr);
  p->drawn = true;
}

void
cli_progress_cb(void *arg, uint64_t done, uint64_t total)
{
  struct cli_progress *p = arg;
  p->total = total;
  cli_progress_update(p, done);
}

void
cli_progress_end(struct cli_progress *p)
{
  if (p->on && p->drawn) {
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
  }
}
