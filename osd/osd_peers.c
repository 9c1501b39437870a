/* Connections to the other OSDs: client connections from this process's
 * messenger endpoint (so they prove the OSD certificate). A peer whose
 * connection fails is "down" until it registers again in /osd/state (a
 * restart) or answers a probe; the PGs it serves re-peer both times, so a
 * replica that missed writes is never written to again before recovery. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "osd.h"
#include "vector.h"

struct osd_peer *
osd_peer_get(struct osd *o, uint64_t osd_num)
{
  for (size_t i = 0; i < o->n_peers; i++)
    if (o->peers[i].osd_num == osd_num)
      return &o->peers[i];
  if (tc_grow(&o->peers, &o->peers_cap, o->n_peers + 1, sizeof *o->peers, 8) < 0)
    return NULL;
  struct osd_peer *p = &o->peers[o->n_peers++];
  memset(p, 0, sizeof *p);
  p->osd_num = osd_num;
  return p;
}

/* The PGs that have osd_num in their set re-peer (it went down or came
 * back): peering's business, told through the events hook. */
static void
repeer_with(struct osd *o, uint64_t osd_num)
{
  if (o->events.peer_changed)
    o->events.peer_changed(o, osd_num);
}

/* The next probe of a down peer (osd_peers_probe): after 5, 10, 20, 40,
 * then every 60 s while probes fail. */
static void
probe_later(struct osd *o, struct osd_peer *p)
{
  uint32_t wait = p->down_streak >= 4 ? 60 : 5u << p->down_streak;
  p->retry_tick = o->ticks + wait;
  p->down_streak++;
}

void
osd_peer_mark_down(struct osd *o, uint64_t osd_num, int err)
{
  struct osd_peer *p = osd_peer_get(o, osd_num);
  if (!p || p->down)
    return;
  tc_warn("osd %" PRIu64 ": peer osd %" PRIu64 " is down (%s)", o->osd_num, osd_num, strerror(err > 0 ? err : -err));
  p->down = true;
  if (p->dirty) {
    /* It acknowledged writes it may not hold any more (a kill -9 loses
     * what was not synced): no SYNC may say they are durable until the
     * clients wrote them again (osd_primary_sync.c). */
    o->unsynced_lost++;
    p->dirty = false;
  }
  p->state_rev = osd_state_rev(o, osd_num);
  probe_later(o, p);
  repeer_with(o, osd_num);
}

static void
peer_conn_cb(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  struct osd *o = arg;
  uint64_t num = (uint64_t) (uintptr_t) tc_msgr_conn_get_data(c);
  struct osd_peer *p = osd_peer_get(o, num);
  if (!p)
    return;
  if (event == TC_MSGR_UP) {
    p->down_streak = 0;
    if (p->down && p->conn == c) {   /* a probe went through */
      tc_info("osd %" PRIu64 ": peer osd %" PRIu64 " answers again", o->osd_num, num);
      p->down = false;
      p->state_rev = 0;
      repeer_with(o, num);
    }
    return;
  }
  bool mine = p->conn == c;
  if (mine)
    p->conn = NULL;
  if (o->stopping)
    return;
  if (p->down) {
    if (mine) {   /* the probe failed: the next one later */
      tc_debug("osd %" PRIu64 ": probe of peer osd %" PRIu64 " failed: %s", o->osd_num, num,
               strerror(err ? err : ECONNRESET));
      probe_later(o, p);
    }
  }
  else
    osd_peer_mark_down(o, num, err ? err : ECONNRESET);
}

/* A peer marked down that is still registered (a blip, not a restart) is
 * probed when its time comes (probe_later): a connection opens, and once
 * its handshake is through the peer is usable again and its PGs peer
 * again with it. Peering itself never waits on a peer that may be hung
 * (a handshake it never answers). A down peer whose connection stayed up
 * (a failed SEC_SYNC) is simply usable again. */
void
osd_peers_probe(struct osd *o)
{
  for (size_t i = 0; i < o->n_peers; i++) {
    struct osd_peer *p = &o->peers[i];
    if (!p->down || !osd_is_up(o, p->osd_num) || o->ticks < p->retry_tick)
      continue;
    if (p->conn) {
      p->down = false;
      p->state_rev = 0;
      repeer_with(o, p->osd_num);
      continue;
    }
    const struct tc_osd_addr *a = o->ks && o->ks->map ? tc_map_osd(o->ks->map, p->osd_num) : NULL;
    if (!a || !a->addr)
      continue;
    p->conn = tc_msgr_connect(o->msgr, a->addr, a->port, peer_conn_cb, o);
    if (!p->conn) {
      probe_later(o, p);
      continue;
    }
    tc_msgr_conn_set_data(p->conn, (void *) (uintptr_t) p->osd_num);
    p->retry_tick = UINT64_MAX;   /* until this probe ends */
  }
}

bool
osd_peer_usable(struct osd *o, uint64_t osd_num)
{
  if (osd_num == o->osd_num)
    return true;
  if (!osd_is_up(o, osd_num))
    return false;
  struct osd_peer *p = osd_peer_get(o, osd_num);
  return p && !p->down;
}

struct tc_msgr_conn *
osd_peer_conn(struct osd *o, uint64_t osd_num)
{
  if (!osd_peer_usable(o, osd_num))
    return NULL;
  struct osd_peer *p = osd_peer_get(o, osd_num);
  if (p->conn)
    return p->conn;
  const struct tc_osd_addr *a = o->ks && o->ks->map ? tc_map_osd(o->ks->map, osd_num) : NULL;
  if (!a || !a->addr)
    return NULL;
  p->conn = tc_msgr_connect(o->msgr, a->addr, a->port, peer_conn_cb, o);
  if (!p->conn) {
    osd_peer_mark_down(o, osd_num, errno ? errno : ECONNREFUSED);
    return NULL;
  }
  tc_msgr_conn_set_data(p->conn, (void *) (uintptr_t) osd_num);
  return p->conn;
}

/* After a KV reload: a down peer that registered again is usable. A peer
 * whose registration went away while its connection stayed open (stopped,
 * hung, cut off: its lease ran out) has its connection closed, so the
 * operations waiting on it fail over now instead of waiting for TCP. */
void
osd_peers_check(struct osd *o)
{
  for (size_t i = 0; i < o->n_peers; i++) {
    struct osd_peer *p = &o->peers[i];
    if (p->down && osd_is_up(o, p->osd_num) && osd_state_rev(o, p->osd_num) != p->state_rev) {
      tc_info("osd %" PRIu64 ": peer osd %" PRIu64 " registered again", o->osd_num, p->osd_num);
      p->down = false;
      p->down_streak = 0;
      repeer_with(o, p->osd_num);
    }
    else if (!p->down && p->conn && !osd_is_up(o, p->osd_num)) {
      tc_warn("osd %" PRIu64 ": peer osd %" PRIu64 " lost its /osd/state lease (hung or cut off?): closing its connection",
              o->osd_num, p->osd_num);
      tc_msgr_close(p->conn);   /* its DOWN event marks it down and re-peers its PGs */
    }
  }
}

void
osd_peers_close(struct osd *o)
{
  for (size_t i = 0; i < o->n_peers; i++)
    if (o->peers[i].conn) {
      tc_msgr_close(o->peers[i].conn);
      o->peers[i].conn = NULL;
    }
}
