/* The OSD's Prometheus series (doc/metrics.md lists them) and its /metrics
 * endpoint, served on metrics_address:metrics_port by libmicrohttpd's own
 * thread. Counters are bumped on the loop thread where things happen;
 * gauges of loop-owned state (PGs, connections, the store) are sampled on
 * the loop's tick (osd_stats_tick), never read from the HTTP thread. */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "log.h"
#include "osd.h"

struct osd *osd_metrics_current;

static int
reg_op(struct osd_metrics *m, int op)
{
  const char *name = tc_osd_op_name(op);
  char lbl[64];
  if (!name)
    return 0;
  snprintf(lbl, sizeof lbl, "op=\"%s\"", name);
  m->ops[op] = tc_metrics_counter(m->reg, "tromcho_osd_ops_total", "Requests received, by operation", lbl);
  m->errors[op] = tc_metrics_counter(m->reg, "tromcho_osd_op_errors_total",
                                     "Requests answered with an error (negative status), by operation", lbl);
  m->latency[op] = tc_metrics_histogram(m->reg, "tromcho_osd_op_latency_seconds",
                                        "Time from a request to its reply, by operation", lbl, NULL, 0);
  return m->ops[op] && m->errors[op] && m->latency[op] ? 0 : -1;
}

int
osd_metrics_start(struct osd *o)
{
  struct osd_metrics *m = calloc(1, sizeof *m);
  if (!m)
    return tc_error(ENOMEM, "osd metrics: out of memory");
  o->m = m;
  osd_metrics_current = o;
  if (!(m->reg = tc_metrics_new()))
    return -1;
  for (int op = 0; op < OSD_OP_SLOTS; op++)
    if (reg_op(m, op) < 0)
      return -1;
  struct tc_metrics *r = m->reg;
  static const char *const pg_states[4] = { "peering", "active", "incomplete", "degraded" };
  for (int i = 0; i < 4; i++) {
    char lbl[64];
    snprintf(lbl, sizeof lbl, "state=\"%s\"", pg_states[i]);
    if (!(m->pgs[i] = tc_metrics_gauge(r, "tromcho_osd_pgs", "PGs this OSD leads, by state (degraded: active with stale copies or missing members)", lbl)))
      return -1;
  }
  m->read_bytes = tc_metrics_counter(r, "tromcho_osd_read_bytes_total", "Bytes asked for by READ requests", NULL);
  m->write_bytes = tc_metrics_counter(r, "tromcho_osd_write_bytes_total", "Bytes carried by WRITE and WRITE_PARTIAL requests", NULL);
  m->eperm = tc_metrics_counter(r, "tromcho_osd_permission_refusals_total", "Requests refused by the rights check (EPERM)", NULL);
  m->decode_errors = tc_metrics_counter(r, "tromcho_osd_malformed_requests_total", "Requests refused by the decoder (EINVAL, ENOTSUP)", NULL);
  m->recovered = tc_metrics_counter(r, "tromcho_osd_recovered_objects_total", "Objects copied to stale members by recovery", NULL);
  m->scrubbed = tc_metrics_counter(r, "tromcho_osd_scrubbed_objects_total", "Objects scrubbed (on demand and scheduled)", NULL);
  m->scrub_bad = tc_metrics_counter(r, "tromcho_osd_scrub_bad_sectors_total", "Sectors found bad by scrubs", NULL);
  m->scrub_repaired = tc_metrics_counter(r, "tromcho_osd_scrub_repaired_sectors_total", "Sectors repaired by scrubs", NULL);
  m->lease_refused = tc_metrics_counter(r, "tromcho_osd_lease_refusals_total", "Requests refused while this OSD held no lease of the KV (-EAGAIN, self-fencing)", NULL);
  m->sec_forwarded = tc_metrics_counter(r, "tromcho_osd_sec_writes_forwarded_total", "SEC_WRITEs that carried a client's payload as it was sealed under its own key (mode gcm: not sealed again)", NULL);
  m->lease_held = tc_metrics_gauge(r, "tromcho_osd_lease_held", "1 while this OSD holds its /osd/state lease and serves; 0 while it fences itself (cut off from the KV)", NULL);
  m->degraded_objects = tc_metrics_gauge(r, "tromcho_osd_degraded_objects", "Objects of led PGs with a stale copy (recovery still to do)", NULL);
  m->recovery_inflight = tc_metrics_gauge(r, "tromcho_osd_recovery_inflight", "Object recoveries in flight", NULL);
  m->connections = tc_metrics_gauge(r, "tromcho_osd_peer_connections", "Connections to other OSDs", NULL);
  m->peers_down = tc_metrics_gauge(r, "tromcho_osd_peers_down", "Other OSDs marked down by this one", NULL);
  m->store_used = tc_metrics_gauge(r, "tromcho_osd_store_used_bytes", "Bytes of data the store holds", NULL);
  m->store_objects = tc_metrics_gauge(r, "tromcho_osd_store_objects", "Objects in the store", NULL);
  m->store_checksum_errors = tc_metrics_gauge(r, "tromcho_osd_store_checksum_errors", "Sector checksum failures the store has seen since it opened", NULL);
  m->store_sync = tc_metrics_histogram(r, "tromcho_osd_store_sync_seconds",
                                       "One commit of the store on the sync thread (journal batch and fdatasync), answering every SYNC and SEC_SYNC asked meanwhile",
                                       NULL, NULL, 0);
  if (!m->read_bytes || !m->write_bytes || !m->eperm || !m->decode_errors || !m->recovered || !m->scrubbed ||
      !m->scrub_bad || !m->scrub_repaired || !m->degraded_objects || !m->recovery_inflight || !m->connections ||
      !m->peers_down || !m->store_used || !m->store_objects || !m->store_checksum_errors || !m->lease_refused || !m->sec_forwarded ||
      !m->lease_held)
    return -1;
  int64_t port = tc_config_int(o->cfg, "metrics_port");
  if (port <= 0)
    return 0;
  if (port > 65535)
    return tc_error(EINVAL, "option metrics_port: %" PRId64 " is not a TCP port", port);
  if (!(m->http = tc_metrics_http_start(m->reg, tc_config_str(o->cfg, "metrics_address"), (int) port)))
    return -1;
  tc_info("osd %" PRIu64 ": metrics on http://%s:%d/metrics", o->osd_num, tc_config_str(o->cfg, "metrics_address"),
          tc_metrics_http_port(m->http));
  return 0;
}

void
osd_metrics_stop(struct osd *o)
{
  if (!o->m)
    return;
  tc_metrics_http_stop(o->m->http);
  osd_metrics_current = NULL;
  tc_metrics_free(o->m->reg);
  free(o->m);
  o->m = NULL;
}

void
osd_metrics_request(struct osd *o, int op, uint64_t bytes_in, uint64_t bytes_out)
{
  if (!o->m || op < 0 || op >= OSD_OP_SLOTS)
    return;
  tc_counter_inc(o->m->ops[op]);
  tc_counter_add(o->m->write_bytes, bytes_in);
  tc_counter_add(o->m->read_bytes, bytes_out);
}

void
osd_metrics_reply(struct osd *o, int op, int status, double t0)
{
  if (!o->m || op < 0 || op >= OSD_OP_SLOTS)
    return;
  if (status < 0)
    tc_counter_inc(o->m->errors[op]);
  if (t0 > 0)
    tc_histogram_since(o->m->latency[op], t0);
}
