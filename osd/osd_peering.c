/* Peering: for each PG this OSD leads (primary in /pg/config), whenever its
 * set or the set's availability changes: wait for the PG's operations in
 * flight, lock the PG on every member (SEC_LOCK), then list its objects
 * on every reachable member (SEC_LIST, and the local store), take the
 * newest version of each object, and mark the members whose copy is
 * older or missing as stale for it. The PG
 * answers -EAGAIN until then; afterwards it serves I/O while recovery
 * (osd_recovery.c) brings the stale copies up to date. A PG with fewer
 * than pg_minsize reachable members stays incomplete (-EAGAIN). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "image_meta.h"
#include "log.h"
#include "osd.h"
#include "vector.h"

static void
pg_clear(struct osd_pg *pg)
{
  osd_objmap_free(&pg->objs);
  pg->n_inconsistent = 0;   /* the objects' flags went with the table */
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    free(pg->lists[s]);
    pg->lists[s] = NULL;
    pg->nlist[s] = 0;
  }
  pg->n_stale = 0;
  pg->recovery_pos = 0;
  pg->listed = 0;
  pg->listing_failed = 0;
  pg->listings = 0;
}

/* What peering depends on: the set, its sizes, and each member's
 * availability (registered, not marked down, which registration). */
static uint64_t
pg_sig(struct osd *o, const struct tc_pool_info *p, const struct tc_pg_info *pi)
{
  uint64_t h = 0xcbf29ce484222325ull;
#define MIX(x) (h = (h ^ (uint64_t) (x)) * 0x100000001b3ull)
  MIX(p->pg_size);
  MIX(p->pg_minsize);
  for (uint32_t s = 0; s < p->pg_size && s < TC_MAX_PG_SIZE; s++) {
    MIX(pi->osd_set[s]);
    MIX(osd_peer_usable(o, pi->osd_set[s]));
    MIX(osd_state_rev(o, pi->osd_set[s]));
  }
#undef MIX
  return h;
}

static void
merge_listings(struct osd *o, struct osd_pg *pg)
{
  /* The newest version of each object, then who holds it. */
  for (int s = 0; s < TC_MAX_PG_SIZE; s++)
    for (size_t i = 0; i < pg->nlist[s]; i++) {
      struct tc_osd_list_entry *e = &pg->lists[s][i];
      struct osd_obj *ob = osd_objmap_add(&pg->objs, e->inode, e->offset);
      if (!ob) {
        tc_err("osd %" PRIu64 ": peering: out of memory", o->osd_num);
        pg->state = PG_INCOMPLETE;
        return;
      }
      if (e->version > ob->version)
        ob->version = e->version;
    }
  for (size_t i = 0; i < pg->objs.cap; i++)
    if (pg->objs.v[i].used)
      pg->objs.v[i].stale = pg->up;
  for (int s = 0; s < TC_MAX_PG_SIZE; s++)
    for (size_t i = 0; i < pg->nlist[s]; i++) {
      struct tc_osd_list_entry *e = &pg->lists[s][i];
      struct osd_obj *ob = osd_objmap_get(&pg->objs, e->inode, e->offset);
      if (ob && e->version == ob->version)
        ob->stale &= (uint8_t) ~(1u << s);
    }
  pg->n_stale = 0;
  for (size_t i = 0; i < pg->objs.cap; i++)
    if (pg->objs.v[i].used && pg->objs.v[i].stale)
      pg->n_stale++;
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    free(pg->lists[s]);
    pg->lists[s] = NULL;
    pg->nlist[s] = 0;
  }
}

/* A member of pg that is usable now but took no part in its peering (0: none). */
static uint64_t
member_left_out(struct osd *o, const struct osd_pg *pg)
{
  for (uint32_t s = 0; s < pg->size && s < TC_MAX_PG_SIZE; s++)
    if ((int) s != pg->my_slot && pg->osd_set[s] && !(pg->up >> s & 1) && osd_peer_usable(o, pg->osd_set[s]))
      return pg->osd_set[s];
  return 0;
}

struct peer_op {
  struct osd *o;
  uint64_t pool, instance, epoch;
  uint32_t pgn;
  int slot;
  struct tc_msgr_req req;
};

/* The PG of op p if its peering is still the one p belongs to. */
static struct osd_pg *
peer_op_pg(const struct peer_op *p)
{
  struct osd_pg *pg = osd_pg_find(p->o, p->pool, p->pgn);
  return pg && pg->instance == p->instance && pg->epoch == p->epoch ? pg : NULL;
}

/* Send one peering request (hdr) to the member in slot s; done(req) gets
 * a struct peer_op. 0 sent, -1 not (no connection, no memory). */
static int
peer_call(struct osd *o, struct osd_pg *pg, int s, struct tc_frame_hdr hdr,
          void (*done)(struct tc_msgr_req *, int, void *))
{
  uint64_t pool = pg->pool, epoch = pg->epoch, instance = pg->instance;
  uint32_t pgn = pg->pg;
  struct tc_msgr_conn *c = osd_peer_conn(o, pg->osd_set[s]);   /* may move o->pgs */
  struct peer_op *l = c ? calloc(1, sizeof *l) : NULL;
  if (!l)
    return -1;
  *l = (struct peer_op) { .o = o, .pool = pool, .pgn = pgn, .instance = instance, .epoch = epoch, .slot = s };
  l->req.hdr = hdr;
  l->req.done = done;
  l->req.arg = l;
  if (tc_msgr_call(c, &l->req) < 0) {
    free(l);
    return -1;
  }
  return 0;
}

/* Send hdr to every other member of the PG, each call counted first in
 * its listings (listing) or locks_pending: the replies come on the loop
 * and count down. false: the PG's peering moved on meanwhile. */
static bool
peer_fan_out(struct osd *o, uint64_t pool, uint32_t pgn, uint64_t epoch, struct tc_frame_hdr hdr,
             void (*done)(struct tc_msgr_req *, int, void *), bool listing)
{
  for (int s = 0; s < TC_MAX_PG_SIZE; s++) {
    struct osd_pg *pg = osd_pg_find(o, pool, pgn);
    if (!pg || pg->epoch != epoch)
      return false;   /* a peer went down while we sent: peering restarted */
    if ((uint32_t) s >= pg->size || s == pg->my_slot || !pg->osd_set[s])
      continue;
    ++*(listing ? &pg->listings : &pg->locks_pending);
    if (peer_call(o, pg, s, hdr, done) < 0 && (pg = osd_pg_find(o, pool, pgn)) && pg->epoch == epoch)
      --*(listing ? &pg->listings : &pg->locks_pending);
  }
  return true;
}

/* Listings merged: serve I/O if enough members took part (listed and
 * locked). */
static void
peering_finish(struct osd *o, struct osd_pg *pg)
{
  pg->up = pg->listed;
  merge_listings(o, pg);
  if (pg->state == PG_INCOMPLETE)
    return;
  pg->up &= (uint8_t) (pg->locked | 1u << pg->my_slot);
  int up = __builtin_popcount(pg->up);
  if ((uint32_t) up < pg->minsize) {
    pg->state = PG_INCOMPLETE;
    tc_warn("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 " incomplete: %d of %" PRIu32
            " members reachable, pg_minsize %" PRIu32, o->osd_num, pg->pool, pg->pg, up, pg->size, pg->minsize);
    return;
  }
  pg->state = PG_ACTIVE;
  if (!member_left_out(o, pg))
    pg->retry_wait = pg->retry_at = 0;   /* everyone in: the next loss retries at once */
  tc_info("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 " active: %zu objects, %zu degraded, %d of %" PRIu32 " members",
          o->osd_num, pg->pool, pg->pg, pg->objs.n, pg->n_stale, up, pg->size);
  if (pg->n_stale)
    osd_recovery_kick(o);
}

static void
list_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct peer_op *l = arg;
  struct osd *o = l->o;
  struct osd_pg *pg = peer_op_pg(l);
  int st = err ? err : req->reply.status;
  if (!pg) {
    free(req->reply_payload);
    free(l);
    return;
  }
  pg->listings--;
  if (st < 0) {
    tc_warn("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 ": listing osd %" PRIu64 " failed: %s",
            o->osd_num, pg->pool, pg->pg, pg->osd_set[l->slot], strerror(-st));
    free(req->reply_payload);
  }
  else {
    pg->lists[l->slot] = req->reply_payload;
    pg->nlist[l->slot] = req->reply.len / sizeof(struct tc_osd_list_entry);
    pg->listed |= (uint8_t) (1u << l->slot);
  }
  free(l);
  if (pg->listings == 0)
    peering_finish(o, pg);
}

/* Second step: list the objects of the PG on every reachable member and
 * in the local store. Every member that took the lock lists after it, so
 * a write a deposed primary got in before the lock is in the listing, and
 * none gets in after it. */
static void
peering_list(struct osd *o, struct osd_pg *pg)
{
  struct osd_req r = {
    .op = TC_OP_SEC_LIST, .inode = TC_INODE(pg->pool, 0), .inode_last = TC_INODE(pg->pool + 1, 0) - 1,
    .pg_count = pg->pg_count, .pg = pg->pg,
  };
  struct tc_osd_list_entry *v;
  size_t n;
  if (osd_list_local(o, &r, &v, &n) < 0) {
    tc_err("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 ": listing local objects: %s", o->osd_num, pg->pool,
           pg->pg, tc_last_error());
    pg->state = PG_INCOMPLETE;
    return;
  }
  pg->lists[pg->my_slot] = v;
  pg->nlist[pg->my_slot] = n;
  pg->listed = (uint8_t) (1u << pg->my_slot);
  pg->listings = 1;   /* ours, dropped below */
  uint64_t epoch = pg->epoch, pool = pg->pool;
  uint32_t pgn = pg->pg;
  if (!peer_fan_out(o, pool, pgn, epoch, tc_osd_list_hdr(r.inode, r.inode_last, pgn, pg->pg_count), list_done, true))
    return;
  pg = osd_pg_find(o, pool, pgn);
  if (pg && pg->epoch == epoch && --pg->listings == 0)
    peering_finish(o, pg);
}

/* The test hook's timer: list every PG whose pause is over (one at a
 * time: peering_list may move o->pgs). */
static void
pause_done(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct osd *o = arg;
  for (;;) {
    uint64_t now = tc_now_ms() + 5;
    struct osd_pg *due = NULL;
    for (size_t i = 0; i < o->n_pgs && !due; i++)
      if (o->pgs[i].pause_until_ms && now >= o->pgs[i].pause_until_ms)
        due = &o->pgs[i];
    if (!due)
      return;
    due->pause_until_ms = 0;
    if (due->state == PG_PEERING)
      peering_list(o, due);
  }
}

/* Every lock answered: list. TROMCHO_OSD_PEERING_PAUSE_MS (a test hook)
 * holds the PG between the two steps, so a test can write through a
 * deposed primary in between. */
static void
peering_locked(struct osd *o, struct osd_pg *pg)
{
  /* The deadline before the timer, and a few ms of slack at its call: a
   * timer never finds its PG not yet due. */
  pg->pause_until_ms = tc_now_ms() + o->peering_pause_ms;
  if (o->peering_pause_ms && tc_evloop_timer_add(o->loop, o->peering_pause_ms, pause_done, o)) {
    tc_info("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 " locked; listing in %" PRIu64
            " ms (TROMCHO_OSD_PEERING_PAUSE_MS)", o->osd_num, pg->pool, pg->pg, o->peering_pause_ms);
    return;
  }
  pg->pause_until_ms = 0;
  peering_list(o, pg);
}

static void
lock_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct peer_op *l = arg;
  struct osd *o = l->o;
  struct osd_pg *pg = peer_op_pg(l);
  int st = err ? err : req->reply.status;
  free(req->reply_payload);
  if (pg) {
    if (st < 0)
      tc_warn("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 ": SEC_LOCK on osd %" PRIu64 " failed: %s", o->osd_num,
              pg->pool, pg->pg, pg->osd_set[l->slot], strerror(-st));
    else
      pg->locked |= (uint8_t) (1u << l->slot);
    if (--pg->locks_pending == 0)
      peering_locked(o, pg);
  }
  free(l);
}

/* First step: take the write lock of the PG on every member, so that a
 * deposed primary's SEC_WRITEs are refused there from now on. The lock
 * carries the revision of the PG configuration this peering uses: a
 * member refuses it if a primary of a newer configuration holds the PG
 * (that one's SEC_LOCK may arrive before ours), and one whose KV view is
 * older reads the KV again first (so an old primary that is a member
 * learns it was deposed and stops writing). A member whose lock failed
 * counts as down until the next peering (a map change, or
 * osd_peering_retry's backoff while it stays usable). */
static void
peering_start(struct osd *o, struct osd_pg *pg)
{
  pg_clear(pg);
  pg->listing_started = true;
  pg->locked = 0;
  pg->pause_until_ms = 0;
  uint64_t epoch = pg->epoch, pool = pg->pool;
  uint64_t lock_rev = o->ks && o->ks->pgcfg_rev > 0 ? (uint64_t) o->ks->pgcfg_rev : 0;
  pg->lock_rev = lock_rev;
  uint32_t pgn = pg->pg;
  pg->locks_pending = 1;   /* ours, dropped below */
  struct tc_frame_hdr hdr = tc_osd_lock_hdr(pool, pgn, pg->pg_count, lock_rev,
                                            o->osd_num <= UINT32_MAX ? (uint32_t) o->osd_num : 0);
  if (!peer_fan_out(o, pool, pgn, epoch, hdr, lock_done, false))
    return;
  pg = osd_pg_find(o, pool, pgn);
  if (pg && pg->epoch == epoch && --pg->locks_pending == 0)
    peering_locked(o, pg);
}

void
osd_peering_pg_idle(struct osd *o, struct osd_pg *pg)
{
  if (pg->state == PG_PEERING && pg->inflight == 0 && !pg->listing_started)
    peering_start(o, pg);
}

void
osd_pg_repeer(struct osd *o, struct osd_pg *pg)
{
  const struct tc_pool_info *p = o->ks && o->ks->map ? tc_map_pool(o->ks->map, pg->pool) : NULL;
  const struct tc_pg_info *pi = p ? tc_map_pg(o->ks->map, pg->pool, pg->pg) : NULL;
  if (!pi)
    return;   /* the next map update drops it */
  pg->sig = pg_sig(o, p, pi);
  pg->size = p->pg_size < TC_MAX_PG_SIZE ? p->pg_size : TC_MAX_PG_SIZE;
  pg->minsize = p->pg_minsize ? p->pg_minsize : 1;
  pg->pg_count = p->pg_count;
  pg->my_slot = -1;
  for (uint32_t s = 0; s < TC_MAX_PG_SIZE; s++) {
    pg->osd_set[s] = s < pg->size ? pi->osd_set[s] : 0;
    if (pg->osd_set[s] == o->osd_num && pg->my_slot < 0)
      pg->my_slot = (int) s;
  }
  if (pg->my_slot < 0) {
    /* Primary but not in the set: serve as if in an extra slot is not
     * possible; refuse I/O until the map makes sense. */
    tc_warn("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 ": primary but not in osd_set", o->osd_num, pg->pool, pg->pg);
    pg->state = PG_INCOMPLETE;
    return;
  }
  pg->state = PG_PEERING;
  pg->epoch = ++o->epochs;
  pg->listing_started = false;
  pg->pause_until_ms = 0;   /* a pause of the peering this one replaces ends with it */
  tc_debug("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 " peering (epoch %" PRIu64 ")", o->osd_num, pg->pool, pg->pg,
           pg->epoch);
  if (pg->inflight == 0)
    peering_start(o, pg);
}

/* Each retry lists every object of the PG on every member and holds its
 * I/O meanwhile: a member that keeps refusing (a primary cut off from the
 * KV, a bad certificate) is tried again after 5, 10, 20, 40, then every 60
 * seconds, until a peering takes every usable member in. */
void
osd_peering_retry(struct osd *o)
{
  for (size_t i = 0; i < o->n_pgs; i++) {
    struct osd_pg *pg = &o->pgs[i];
    if (pg->state == PG_PEERING || pg->my_slot < 0 || o->ticks < pg->retry_at)
      continue;
    uint64_t m = member_left_out(o, pg);
    if (!m)
      continue;
    tc_info("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 ": osd %" PRIu64 " is usable but took no part in"
            " peering; peering again", o->osd_num, pg->pool, pg->pg, m);
    pg->retry_wait = pg->retry_wait ? (pg->retry_wait >= 30 ? 60 : pg->retry_wait * 2) : 10;
    pg->retry_at = o->ticks + pg->retry_wait;
    osd_pg_repeer(o, pg);
  }
}

void
osd_pg_lock_lost(const struct osd_op_base *b, int slot)
{
  struct osd_pg *pg = osd_op_pg(b);
  if (!pg || pg->epoch != b->epoch || pg->state != PG_ACTIVE || slot < 0 || slot >= TC_MAX_PG_SIZE)
    return;   /* peering again already */
  tc_warn("osd %" PRIu64 ": pg %" PRIu64 "/%" PRIu32 ": osd %" PRIu64 " says another primary holds its lock; peering again",
          b->o->osd_num, pg->pool, pg->pg, pg->osd_set[slot]);
  osd_pg_repeer(b->o, pg);
}

static void
pg_drop(struct osd *o, size_t i)
{
  tc_info("osd %" PRIu64 ": no longer primary of pg %" PRIu64 "/%" PRIu32, o->osd_num, o->pgs[i].pool, o->pgs[i].pg);
  pg_clear(&o->pgs[i]);
  o->pgs[i] = o->pgs[--o->n_pgs];
}

void
osd_pg_drop_all(struct osd *o)
{
  while (o->n_pgs)
    pg_drop(o, o->n_pgs - 1);
  free(o->pgs);
  o->pgs = NULL;
  o->pgs_cap = 0;
}

void
osd_peering_peer_changed(struct osd *o, uint64_t osd_num)
{
  for (size_t i = 0; i < o->n_pgs; i++)
    for (uint32_t s = 0; s < o->pgs[i].size; s++)
      if (o->pgs[i].osd_set[s] == osd_num) {
        osd_pg_repeer(o, &o->pgs[i]);
        break;
      }
}

void
osd_peering_kv_changed(struct osd *o)
{
  osd_peers_check(o);
  osd_peering_update(o);
}

void
osd_peering_update(struct osd *o)
{
  struct tc_map *m = o->ks ? o->ks->map : NULL;
  if (!m)
    return;
  for (size_t i = 0; i < o->n_pgs;) {
    const struct tc_pg_info *pi = tc_map_pg(m, o->pgs[i].pool, o->pgs[i].pg);
    const struct tc_pool_info *p = tc_map_pool(m, o->pgs[i].pool);
    if (!pi || !p || pi->primary != o->osd_num || p->pg_count != o->pgs[i].pg_count)
      pg_drop(o, i);
    else
      i++;
  }
  for (size_t k = 0; k < m->n_pools; k++) {
    const struct tc_pool_info *p = &m->pools[k];
    if (p->block_size && p->block_size != o->info.block_size) {
      tc_warn("osd %" PRIu64 ": pool %" PRIu64 " has block_size %" PRIu32 " but this store %" PRIu32
              "; not serving it", o->osd_num, p->id, p->block_size, o->info.block_size);
      continue;
    }
    for (uint32_t g = 0; g < p->pg_count; g++) {
      const struct tc_pg_info *pi = tc_map_pg(m, p->id, g);
      if (!pi || pi->primary != o->osd_num)
        continue;
      struct osd_pg *pg = osd_pg_find(o, p->id, g);
      if (!pg) {
        if (tc_grow(&o->pgs, &o->pgs_cap, o->n_pgs + 1, sizeof *o->pgs, 16) < 0) {
          tc_err("osd %" PRIu64 ": out of memory for pg %" PRIu64 "/%" PRIu32, o->osd_num, p->id, g);
          continue;
        }
        pg = &o->pgs[o->n_pgs++];
        memset(pg, 0, sizeof *pg);
        pg->pool = p->id;
        pg->pg = g;
        pg->pg_count = p->pg_count;
        pg->instance = ++o->instances;
        /* A scrub asked for long before this OSD led the PG was served by
         * its primary then (or is stale): not again at each restart. */
        pg->scrub_req_done = (int64_t) time(NULL) - OSD_SCRUB_REQUEST_GRACE;
        tc_info("osd %" PRIu64 ": primary of pg %" PRIu64 "/%" PRIu32, o->osd_num, p->id, g);
      }
      else if (pg->sig == pg_sig(o, p, pi))
        continue;   /* nothing it depends on changed */
      osd_pg_repeer(o, pg);
    }
  }
}
