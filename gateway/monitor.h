/* The monitor: computes PG placement for the cluster and keeps /stats.
 * It runs in a thread of its own (tromcho-gateway starts it; so does the
 * test driver tests/monitor-run) and talks to the KV through the KV client
 * (etcd_address; mon_etcd_client_cert/key when given, else like any client).
 *
 * One monitor is active at a time: it holds /mon/master, written with a
 * lease of etcd_mon_ttl seconds that it renews every TTL/3. The others poll
 * (4 times a second) and take over once the key is gone: a monitor that
 * stops cleanly revokes its lease (immediate takeover); one that dies is
 * replaced within a TTL (plus etcd's expiry check). Value of /mon/master:
 *   {"id": "<host>:<pid>:<n>", "host": "<hostname>", "pid": <pid>}
 *
 * The active monitor watches /config/pools and /osd/state/ (and recomputes
 * every 10 s anyway), and on any change:
 *  - reads the pools (/config/pools, see common/cluster/pools.h),
 *  - reads the live OSDs: a key /osd/state/<n> exists while OSD n keeps its
 *    lease; value {"addr": "..", "port": n, "host": ".."} (host: the failure
 *    domain; missing: addr; optional "weight", default 1),
 *  - computes every pool's placement from the previous /pg/config with
 *    common/cluster/placement.h (balanced, host failure domain, minimal movement),
 *  - writes /pg/config (shape in common/cluster/pools.h) when it changed (never
 *    while no OSD at all is up, nor when /config/pools is not valid JSON:
 *    the last placement stays), and
 *    /stats when it changed:
 *      {"osd_up": U, "osd_down": D, "osds": {"<n>": "up" | "down"},
 *       "pools": P, "pg_count": total PGs, "pgs_active": PGs with a primary,
 *       "pgs_degraded": PGs with fewer than pg_size OSDs,
 *       "pgs_inactive": PGs without a primary}
 *    ("osds" remembers every OSD seen, so one that stops counts as down).
 * Both writes are transactions that also check /mon/master still carries
 * this monitor's lease, so a monitor that lost the election never writes.
 * All keys are under etcd_prefix. */
#ifndef TROMCHO_MONITOR_H
#define TROMCHO_MONITOR_H
#include <stdbool.h>
#include "tc_config.h"

struct tc_monitor;

/* Start a monitor with cfg (which must outlive it). NULL on error. */
struct tc_monitor *tc_monitor_start(struct tc_config *cfg);
/* Stop it: resign (revoke the lease) if active, join its thread, free. */
void tc_monitor_stop(struct tc_monitor *m);
/* Whether it is the active monitor now (for status and tests). */
bool tc_monitor_is_master(struct tc_monitor *m);

#endif
