/* The Prometheus series of a front end (the nbdkit plugin, tromcho-fuse),
 * served on metrics_address:metrics_port (metrics_http.c) when the option
 * metrics_port is set. Per operation (label op): requests, bytes, errors
 * and a latency histogram; open handles (NBD connections, open files) as a
 * gauge and a counter. The series, with NS the caller's prefix
 * (tromcho_nbd, tromcho_fuse):
 *   NS_requests_total{op}               requests finished
 *   NS_bytes_total{op}                  bytes they carried (read, write, trim, zero)
 *   NS_errors_total{op}                 requests that failed
 *   NS_request_latency_seconds{op}      histogram, 50 µs to 10 s
 *   NS_handles                          gauge: connections / open files now
 *   NS_handles_opened_total             counter
 * Updates are lock-free and safe from every worker thread. */
#ifndef TROMCHO_METRICS_FRONTEND_H
#define TROMCHO_METRICS_FRONTEND_H
#include <stdbool.h>
#include <stdint.h>
#include "tc_config.h"

enum tc_fe_op { TC_FE_READ, TC_FE_WRITE, TC_FE_FLUSH, TC_FE_TRIM, TC_FE_ZERO, TC_FE_EXTENTS, TC_FE_NOPS };

struct tc_fe_metrics;

/* Register the series and, with metrics_port > 0, start the endpoint (log
 * line "metrics on http://ADDR:PORT/metrics"). *out = NULL and 0 when
 * metrics_port is 0; -1 with an error naming the option or the address. */
int tc_fe_metrics_start(const struct tc_config *cfg, const char *ns, struct tc_fe_metrics **out);
void tc_fe_metrics_stop(struct tc_fe_metrics *m);
/* One finished request (t0 from tc_metrics_now() when it began). */
void tc_fe_metrics_op(struct tc_fe_metrics *m, enum tc_fe_op op, uint64_t bytes, double t0, bool failed);
/* A handle opened (+1) or closed (-1). */
void tc_fe_metrics_handle(struct tc_fe_metrics *m, int delta);

#endif
