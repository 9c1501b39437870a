/* Placeholder monitor: a handle that does nothing. The real monitor
 * (KV client, OSD states, placement) is written on another branch and
 * replaces this file when the branches merge. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include "monitor.h"
#include "error.h"

struct tc_monitor {
  struct tc_config *cfg;
};

struct tc_monitor *
tc_monitor_start(struct tc_config *cfg)
{
  struct tc_monitor *m = calloc(1, sizeof *m);
  if (!m) {
    tc_error(ENOMEM, "monitor: out of memory");
    return NULL;
  }
  m->cfg = cfg;
  return m;
}

void
tc_monitor_stop(struct tc_monitor *m)
{
  free(m);
}
