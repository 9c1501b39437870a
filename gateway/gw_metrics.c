/* The KV API's metrics (see gw_metrics.h). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gw_metrics.h"
#include "error.h"

#define NEP (KV_EP_NONE + 1)

static const char *const ep_names[NEP] = {
  [KV_EP_RANGE] = "range", [KV_EP_PUT] = "put", [KV_EP_DELETE] = "deleterange", [KV_EP_TXN] = "txn",
  [KV_EP_COMPACT] = "compaction", [KV_EP_WATCH] = "watch", [KV_EP_LEASE_GRANT] = "lease_grant",
  [KV_EP_LEASE_REVOKE] = "lease_revoke", [KV_EP_LEASE_KEEPALIVE] = "lease_keepalive",
  [KV_EP_LEASE_TTL] = "lease_timetolive", [KV_EP_LEASE_LEASES] = "lease_leases", [KV_EP_NONE] = "other",
};

struct gw_metrics {
  struct tc_metrics *m;
  struct conn_guard *guard;
  struct watch_park *park;
  struct tc_counter *requests[NEP], *bytes_in[NEP], *bytes_out[NEP];
  struct tc_histogram *latency[NEP];
  struct tc_counter *unauthenticated, *denied;
  struct tc_gauge *watches, *parked, *open, *authenticated;
  /* conn_guard's totals, added to the counters at each rendering */
  struct tc_counter *accepted, *refused, *evicted, *idle_closed, *request_closed;
  struct conn_guard_stats last;
};

static void
on_render(void *arg)
{
  struct gw_metrics *g = arg;
  struct conn_guard_stats st;
  conn_guard_get_stats(g->guard, &st);
  tc_gauge_set(g->open, st.open);
  tc_gauge_set(g->authenticated, st.authenticated);
  tc_gauge_set(g->parked, watch_park_count(g->park));
  tc_counter_add(g->accepted, st.accepted - g->last.accepted);
  tc_counter_add(g->refused, st.refused - g->last.refused);
  tc_counter_add(g->evicted, st.evicted - g->last.evicted);
  tc_counter_add(g->idle_closed, st.idle_closed - g->last.idle_closed);
  tc_counter_add(g->request_closed, st.request_closed - g->last.request_closed);
  g->last = st;
}

struct gw_metrics *
gw_metrics_new(struct conn_guard *guard, struct watch_park *park)
{
  struct gw_metrics *g = calloc(1, sizeof *g);
  if (!g || !(g->m = tc_metrics_new())) {
    free(g);
    tc_error(ENOMEM, "gateway: metrics: out of memory");
    return NULL;
  }
  g->guard = guard;
  g->park = park;
  struct tc_metrics *m = g->m;
  bool ok = true;
  for (int i = 0; i < NEP; i++) {
    char l[64];
    snprintf(l, sizeof l, "op=\"%s\"", ep_names[i]);
    ok &= !!(g->requests[i] = tc_metrics_counter(m, "tromcho_gateway_requests_total",
                                                 "KV API requests answered, by operation", l));
    ok &= !!(g->bytes_in[i] = tc_metrics_counter(m, "tromcho_gateway_request_bytes_total",
                                                 "request body bytes received, by operation", l));
    ok &= !!(g->bytes_out[i] = tc_metrics_counter(m, "tromcho_gateway_response_bytes_total",
                                                  "reply bytes sent (a watch's first reply only), by operation", l));
    ok &= !!(g->latency[i] = tc_metrics_histogram(m, "tromcho_gateway_request_seconds",
                                                  "time from a request's headers to its reply, by operation", l,
                                                  NULL, 0));
  }
  ok &= !!(g->unauthenticated = tc_metrics_counter(m, "tromcho_gateway_auth_failures_total",
                                                   "requests refused for want of a valid client certificate (401)", NULL));
  ok &= !!(g->denied = tc_metrics_counter(m, "tromcho_gateway_permission_denied_total",
                                          "requests refused by the access filter (403)", NULL));
  ok &= !!(g->watches = tc_metrics_gauge(m, "tromcho_gateway_watches", "watch streams open", NULL));
  ok &= !!(g->parked = tc_metrics_gauge(m, "tromcho_gateway_watches_waiting",
                                        "watch streams waiting for the store (suspended, no thread)", NULL));
  ok &= !!(g->open = tc_metrics_gauge(m, "tromcho_gateway_connections", "KV API connections open", NULL));
  ok &= !!(g->authenticated = tc_metrics_gauge(m, "tromcho_gateway_connections_authenticated",
                                               "KV API connections that presented a valid certificate", NULL));
  ok &= !!(g->accepted = tc_metrics_counter(m, "tromcho_gateway_connections_accepted_total",
                                            "KV API connections accepted", NULL));
  ok &= !!(g->refused = tc_metrics_counter(m, "tromcho_gateway_connections_refused_total",
                                           "connections closed at once: a cap reached and none could make room", NULL));
  ok &= !!(g->evicted = tc_metrics_counter(m, "tromcho_gateway_connections_evicted_total",
                                           "idle unauthenticated connections closed to make room at a cap", NULL));
  ok &= !!(g->idle_closed = tc_metrics_counter(m, "tromcho_gateway_connections_idle_timeout_total",
                                               "connections closed after gateway_idle_timeout without a request", NULL));
  ok &= !!(g->request_closed = tc_metrics_counter(m, "tromcho_gateway_connections_request_timeout_total",
                                                  "connections closed after gateway_request_timeout in a request", NULL));
  if (!ok || tc_metrics_on_render(m, on_render, g) < 0) {
    gw_metrics_free(g);
    return NULL;
  }
  return g;
}

void
gw_metrics_free(struct gw_metrics *g)
{
  if (!g)
    return;
  tc_metrics_free(g->m);
  free(g);
}

void
gw_metrics_request(struct gw_metrics *g, enum kv_endpoint ep, int status, size_t in, size_t out, double start)
{
  if (!g)
    return;
  if (ep < 0 || ep > KV_EP_NONE)
    ep = KV_EP_NONE;
  tc_counter_inc(g->requests[ep]);
  tc_counter_add(g->bytes_in[ep], in);
  tc_counter_add(g->bytes_out[ep], out);
  tc_histogram_since(g->latency[ep], start);
  if (status == 401)
    tc_counter_inc(g->unauthenticated);
  else if (status == 403)
    tc_counter_inc(g->denied);
  if (status >= 400) {
    /* Error series appear as errors happen: one per operation and status. */
    char l[64];
    snprintf(l, sizeof l, "op=\"%s\",code=\"%d\"", ep_names[ep], status);
    tc_counter_inc(tc_metrics_counter(g->m, "tromcho_gateway_errors_total",
                                      "requests answered with an error, by operation and HTTP status", l));
  }
}

void
gw_metrics_watches(struct gw_metrics *g, int delta)
{
  if (g)
    tc_gauge_add(g->watches, delta);
}

char *
gw_metrics_render(struct gw_metrics *g, size_t *len)
{
  char *out;
  if (tc_metrics_render(g->m, &out, len) < 0)
    return NULL;
  return out;
}
