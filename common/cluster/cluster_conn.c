/* The cluster client's connections: one per OSD, reconnected on demand. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cluster_int.h"
#include "error.h"
#include "log.h"

/* --- connections --- */

static void
link_cb(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  struct osd_link *l = arg;
  if (event == TC_MSGR_UP) {
    tc_debug("cluster: connected to OSD %" PRIu64 " (%s, mode %s)", l->id, tc_msgr_conn_peername(c),
             tc_msgr_mode_name(tc_msgr_conn_mode(c)));
    l->timed_out = false;
    return;
  }
  if (l->conn == c) {
    l->conn = NULL;
    struct tc_cluster *cl = l->cl;
    for (size_t i = 0; i < cl->ndirty && !cl->unsynced_lost; i++)
      if (cl->dirty[i] == l->id) {
        tc_debug("cluster: lost the connection to OSD %" PRIu64 ", which took unsynced writes: the next sync "
                 "writes them again first", l->id);
        cl->unsynced_lost = true;
      }
    /* Our call timeout or the handshake's: the OSD is silent to us. */
    l->timed_out = err == -ETIMEDOUT;
    tc_debug("cluster: connection to OSD %" PRIu64 " closed: %s", l->id, err ? strerror(-err) : "closed");
  }
}

/* The connection to OSD id, connecting if needed; NULL if its address is unknown. */
struct tc_msgr_conn *
cluster_link_get(struct tc_cluster *cl, uint64_t id)
{
  const struct tc_osd_addr *a = tc_map_osd(cl->map, id);
  struct osd_link *l;
  for (l = cl->links; l; l = l->next)
    if (l->id == id)
      break;
  if (l && l->conn)
    return l->conn;
  if (!a)
    return NULL;
  if (!l) {
    if (!(l = calloc(1, sizeof *l)))
      return NULL;
    l->id = id;
    l->cl = cl;
    l->next = cl->links;
    cl->links = l;
  }
  if (!l->host || strcmp(l->host, a->addr) != 0) {
    char *h = strdup(a->addr);
    if (!h)
      return NULL;
    free(l->host);
    l->host = h;
  }
  bool moved = l->port != a->port;
  l->port = a->port;
  uint64_t now = tc_now_ms();
  if (!moved && l->last_connect && now - l->last_connect < RECONNECT_MS)
    return NULL;   /* it refused a moment ago: wait for the next retry or map */
  l->last_connect = now;
  l->conn = tc_msgr_connect(cl->msgr, l->host, l->port, link_cb, l);
  if (!l->conn)
    tc_debug("cluster: cannot connect to OSD %" PRIu64 " at %s:%d: %s", id, l->host, l->port, tc_last_error());
  else
    STAT_INC(cl, reconnects);
  return l->conn;
}

/* Whether the last connection to OSD id closed on a timeout (it left our
 * requests or its handshake unanswered) and none came up since. */
bool
cluster_link_timed_out(const struct tc_cluster *cl, uint64_t id)
{
  for (const struct osd_link *l = cl->links; l; l = l->next)
    if (l->id == id)
      return l->timed_out;
  return false;
}

/* A new map: an OSD that moved, or that left the map (its lease ran out:
 * dead, hung or cut off), loses its old connection and the requests on it
 * retry on the PGs' new primaries, instead of waiting on a silent socket. */
void
cluster_links_update(struct tc_cluster *cl)
{
  for (struct osd_link *l = cl->links; l; l = l->next) {
    const struct tc_osd_addr *a = tc_map_osd(cl->map, l->id);
    if (l->conn && (!a || a->port != l->port || strcmp(a->addr, l->host) != 0)) {
      tc_msgr_close(l->conn);
      l->conn = NULL;
    }
  }
}

void
cluster_links_free(struct tc_cluster *cl)
{
  while (cl->links) {
    struct osd_link *l = cl->links;
    cl->links = l->next;
    free(l->host);
    free(l);
  }
}
