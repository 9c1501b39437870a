/* The monitor: runs inside the gateway once the KV service listens
 * (DESIGN.md §3: OSD states, PG placement, /stats). */
#ifndef TROMCHO_MONITOR_H
#define TROMCHO_MONITOR_H
#include "tc_config.h"

struct tc_monitor;

/* Start the monitor; NULL with tc_last_error() on failure. */
struct tc_monitor *tc_monitor_start(struct tc_config *cfg);
void tc_monitor_stop(struct tc_monitor *m);

#endif
