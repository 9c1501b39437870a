/* A front end's series and endpoint (see metrics_frontend.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "log.h"
#include "metrics.h"
#include "metrics_frontend.h"

static const char *const op_names[TC_FE_NOPS] = { "read", "write", "flush", "trim", "zero", "extents" };

struct tc_fe_metrics {
  struct tc_metrics *reg;
  struct tc_metrics_http *http;
  struct tc_counter *requests[TC_FE_NOPS], *bytes[TC_FE_NOPS], *errors[TC_FE_NOPS], *opened;
  struct tc_histogram *latency[TC_FE_NOPS];
  struct tc_gauge *handles;
};

int
tc_fe_metrics_start(const struct tc_config *cfg, const char *ns, struct tc_fe_metrics **out)
{
  *out = NULL;
  int64_t port = tc_config_int(cfg, "metrics_port");
  if (port == 0)
    return 0;
  if (port < 0 || port > 65535)
    return tc_error(EINVAL, "option metrics_port: %" PRId64 " is not a TCP port", port);
  struct tc_fe_metrics *m = calloc(1, sizeof *m);
  if (!m || !(m->reg = tc_metrics_new())) {
    free(m);
    return tc_error(ENOMEM, "metrics: out of memory");
  }
  char name[4][128], labels[64];
  snprintf(name[0], sizeof name[0], "%s_requests_total", ns);
  snprintf(name[1], sizeof name[1], "%s_bytes_total", ns);
  snprintf(name[2], sizeof name[2], "%s_errors_total", ns);
  snprintf(name[3], sizeof name[3], "%s_request_latency_seconds", ns);
  bool ok = true;
  for (int i = 0; i < TC_FE_NOPS; i++) {
    snprintf(labels, sizeof labels, "op=\"%s\"", op_names[i]);
    ok &= (m->requests[i] = tc_metrics_counter(m->reg, name[0], "Requests finished, by operation", labels)) != NULL;
    ok &= (m->bytes[i] = tc_metrics_counter(m->reg, name[1], "Bytes the finished requests carried, by operation",
                                            labels)) != NULL;
    ok &= (m->errors[i] = tc_metrics_counter(m->reg, name[2], "Requests that failed, by operation", labels)) != NULL;
    ok &= (m->latency[i] = tc_metrics_histogram(m->reg, name[3], "Time from a request's start to its end, by operation",
                                                labels, NULL, 0)) != NULL;
  }
  char hname[128], oname[128];
  snprintf(hname, sizeof hname, "%s_handles", ns);
  snprintf(oname, sizeof oname, "%s_handles_opened_total", ns);
  ok &= (m->handles = tc_metrics_gauge(m->reg, hname, "Open handles: NBD connections or open files", NULL)) != NULL;
  ok &= (m->opened = tc_metrics_counter(m->reg, oname, "Handles opened since start", NULL)) != NULL;
  const char *addr = tc_config_str(cfg, "metrics_address");
  if (!ok || !(m->http = tc_metrics_http_start(m->reg, addr, (int) port))) {
    tc_metrics_free(m->reg);
    free(m);
    return -1;
  }
  tc_info("metrics on http://%s:%d/metrics", addr ? addr : "127.0.0.1", tc_metrics_http_port(m->http));
  *out = m;
  return 0;
}

void
tc_fe_metrics_stop(struct tc_fe_metrics *m)
{
  if (!m)
    return;
  tc_metrics_http_stop(m->http);
  tc_metrics_free(m->reg);
  free(m);
}

void
tc_fe_metrics_op(struct tc_fe_metrics *m, enum tc_fe_op op, uint64_t bytes, double t0, bool failed)
{
  if (!m || (unsigned) op >= TC_FE_NOPS)
    return;
  tc_counter_inc(m->requests[op]);
  if (failed)
    tc_counter_inc(m->errors[op]);
  else
    tc_counter_add(m->bytes[op], bytes);
  tc_histogram_since(m->latency[op], t0);
}

void
tc_fe_metrics_handle(struct tc_fe_metrics *m, int delta)
{
  if (!m)
    return;
  tc_gauge_add(m->handles, delta);
  if (delta > 0)
    tc_counter_add(m->opened, (uint64_t) delta);
}
