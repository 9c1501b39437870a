/* The KV API's Prometheus metrics, served on GET /metrics of the KV API
 * itself (as etcd serves its own), through the shared registry
 * (common/util/metrics.h). Names and labels: gateway/README.md, "Metrics". */
#ifndef TROMCHO_GW_METRICS_H
#define TROMCHO_GW_METRICS_H
#include <stddef.h>
#include "kvrequest.h"
#include "metrics.h"
#include "conn_guard.h"
#include "watch_park.h"

struct gw_metrics;

/* NULL with an error on out of memory. guard and park: read at each
 * rendering for the connection and watch gauges. */
struct gw_metrics *gw_metrics_new(struct conn_guard *guard, struct watch_park *park);
void gw_metrics_free(struct gw_metrics *g);

/* One request answered: endpoint, HTTP status, body bytes in and out,
 * start time (tc_metrics_now()). 401 and 403 also count as authentication
 * failures and permission refusals. */
void gw_metrics_request(struct gw_metrics *g, enum kv_endpoint ep, int status, size_t in, size_t out,
                        double start);
/* Watch streams open now: +1 when one starts, -1 when it ends. */
void gw_metrics_watches(struct gw_metrics *g, int delta);
/* The text of GET /metrics (caller frees); NULL on out of memory. */
char *gw_metrics_render(struct gw_metrics *g, size_t *len);

#endif
