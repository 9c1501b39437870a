/* The cluster client: objstore.h over the messenger (see cluster.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "cluster.h"
#include "error.h"
#include "image_meta.h"
#include "log.h"
#include "msgr.h"
#include "osd_proto.h"

/* A connection to one OSD, kept while the cluster lives. */
struct osd_link {
  uint64_t id;
  char *host;
  int port;
  struct tc_msgr_conn *conn;   /* NULL: not connected */
  uint64_t last_connect;       /* ms: reconnect at most every RECONNECT_MS */
  struct osd_link *next;
};

#define RECONNECT_MS 500

enum sreq_kind { SR_DATA, SR_SYNC, SR_LIST };

struct cop;

/* One message to one OSD: a part of an operation. */
struct sreq {
  struct tc_msgr_req req;      /* reinitialised before each send */
  struct cop *cop;
  enum sreq_kind kind;
  uint64_t off;                /* DATA: byte offset in the inode */
  uint32_t len;                /* DATA: bytes */
  uint64_t osd;                /* SYNC: the target; else where it was last sent */
  uint32_t pg;                 /* LIST: the PG */
  int last_err;                /* why it was last retried */
  void *rbuf;                  /* READ: where the data goes; BITMAP: scratch (owned) */
  struct iovec iov;            /* WRITE: the data */
  struct iovec iov_if[2];      /* WRITE_IF: the condition, then the data */
  struct tc_osd_write_if cond;
  struct sreq *wnext;          /* the wait list */
};

/* One acknowledged WRITE (data) or DELETE (data NULL) awaiting a SYNC.
 * A partial one (WRITE_PARTIAL: any bytes) is replayed as such. */
struct unsynced {
  uint64_t seq, inode, offset;
  uint32_t len;
  bool partial;
  uint8_t *data;
  struct unsynced *next, *prev;
};

/* One operation of the object store, or a listing. */
struct cop {
  struct tc_cluster *cl;
  struct tc_objop *op;         /* NULL: a listing */
  uint64_t deadline;
  int pending;
  int error;
  bool resync;                 /* SYNC: a target was lost, sync everything again */
  uint64_t sync_seq;           /* SYNC: the log entries it covers (seq <= this) */
  int replay_pending;          /* SYNC: replayed writes still in flight */
  bool internal;               /* a replay: op is ours, free it when done */
  int nparts;
  struct sreq *parts;
  /* listing */
  uint64_t first, last;
  struct tc_osd_list_entry *ents;
  size_t nents, cap;
  pthread_mutex_t *wlock;      /* blocking waiter (listing) */
  pthread_cond_t *wcond;
  bool *wdone;
};

struct tc_cluster {
  const struct tc_config *cfg;
  struct tc_kv *kv;
  char *prefix;
  uint64_t op_timeout_ms, retry_ms;

  struct tc_evloop *loop;
  pthread_t io_thread;
  bool io_started;
  struct tc_msgr *msgr;

  /* loop thread only */
  struct tc_map *map;
  struct osd_link *links;
  struct sreq *wait_head, *wait_tail;
  struct tc_timer *retry_timer;
  uint64_t *dirty;             /* OSDs written since the last SYNC */
  size_t ndirty, dirty_cap;
  /* Acknowledged writes not yet covered by a SYNC, oldest first: replayed
   * when an OSD that took some of them is lost before the SYNC. */
  struct unsynced *log_head, *log_tail;
  uint64_t log_seq, log_bytes, max_dirty;
  bool auto_syncing;
  bool stopping;

  /* the map for other threads */
  pthread_mutex_t map_lock;
  struct tc_map *shared_map;

  /* refresh thread */
  pthread_t refresh_thread;
  bool refresh_started;
  pthread_mutex_t refresh_lock;
  pthread_cond_t refresh_cond;
  bool refresh_wanted, refresh_stop;
  struct tc_kv_watch *watches[3];

  pthread_mutex_t stats_lock;
  struct tc_cluster_stats stats;
};

static void sreq_dispatch(struct sreq *sr);
static void cop_start_sync(struct cop *cop, bool all);

#define STAT_INC(cl, f) do { pthread_mutex_lock(&(cl)->stats_lock); (cl)->stats.f++; \
                             pthread_mutex_unlock(&(cl)->stats_lock); } while (0)

/* --- the map --- */

static struct tc_map *
load_map(struct tc_cluster *cl)
{
  struct tc_kv_result pools = { 0 }, pgcfg = { 0 }, osds = { 0 };
  char key[512];
  struct tc_map *m = NULL;
  uint64_t *ids = NULL;
  const char **jsons = NULL;
  size_t *lens = NULL, n = 0;
  snprintf(key, sizeof key, "%s/config/pools", cl->prefix);
  if (tc_kv_get(cl->kv, key, 0, &pools) < 0)
    goto out;
  snprintf(key, sizeof key, "%s/pg/config", cl->prefix);
  if (tc_kv_get(cl->kv, key, 0, &pgcfg) < 0)
    goto out;
  snprintf(key, sizeof key, "%s/osd/state/", cl->prefix);
  size_t plen = strlen(key);
  if (tc_kv_get_prefix(cl->kv, key, 0, &osds) < 0)
    goto out;
  if (osds.n_kvs) {
    ids = calloc(osds.n_kvs, sizeof *ids);
    jsons = calloc(osds.n_kvs, sizeof *jsons);
    lens = calloc(osds.n_kvs, sizeof *lens);
    if (!ids || !jsons || !lens) {
      tc_error(ENOMEM, "cluster map: out of memory");
      goto out;
    }
  }
  for (size_t i = 0; i < osds.n_kvs; i++) {
    const char *k = (const char *) osds.kvs[i].key + plen;
    char *end;
    unsigned long long id = strtoull(k, &end, 10);
    if (!*k || *end || !id)
      continue;
    ids[n] = id;
    jsons[n] = (const char *) osds.kvs[i].value;
    lens[n] = osds.kvs[i].value_len;
    n++;
  }
  m = tc_map_build(pools.n_kvs ? (const char *) pools.kvs[0].value : NULL, pools.n_kvs ? pools.kvs[0].value_len : 0,
                   pgcfg.n_kvs ? (const char *) pgcfg.kvs[0].value : NULL, pgcfg.n_kvs ? pgcfg.kvs[0].value_len : 0,
                   ids, jsons, lens, n);
out:
  free(ids);
  free(jsons);
  free(lens);
  tc_kv_result_free(&pools);
  tc_kv_result_free(&pgcfg);
  tc_kv_result_free(&osds);
  return m;
}

static void
request_refresh(struct tc_cluster *cl)
{
  pthread_mutex_lock(&cl->refresh_lock);
  cl->refresh_wanted = true;
  pthread_cond_signal(&cl->refresh_cond);
  pthread_mutex_unlock(&cl->refresh_lock);
}

static void
dispatch_waiting(struct tc_cluster *cl)
{
  struct sreq *sr = cl->wait_head;
  cl->wait_head = cl->wait_tail = NULL;
  while (sr) {
    struct sreq *next = sr->wnext;
    sr->wnext = NULL;
    sreq_dispatch(sr);
    sr = next;
  }
}

struct map_msg {
  struct tc_cluster *cl;
  struct tc_map *map;
};

/* On the loop: adopt a new map and retry whatever waited for one. */
static void
map_apply(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct map_msg *mm = arg;
  struct tc_cluster *cl = mm->cl;
  tc_map_unref(cl->map);
  cl->map = mm->map;
  free(mm);
  STAT_INC(cl, map_updates);
  /* An OSD that moved, or that left the map (its lease ran out: dead,
   * hung or cut off): its old connection goes and the requests on it retry
   * on the PGs' new primaries, instead of waiting on a silent socket. */
  for (struct osd_link *l = cl->links; l; l = l->next) {
    const struct tc_osd_addr *a = tc_map_osd(cl->map, l->id);
    if (l->conn && (!a || a->port != l->port || strcmp(a->addr, l->host) != 0)) {
      tc_msgr_close(l->conn);
      l->conn = NULL;
    }
  }
  if (!cl->stopping)
    dispatch_waiting(cl);
}

static void
publish_map(struct tc_cluster *cl, struct tc_map *m)
{
  pthread_mutex_lock(&cl->map_lock);
  tc_map_unref(cl->shared_map);
  cl->shared_map = tc_map_ref(m);
  pthread_mutex_unlock(&cl->map_lock);
  struct map_msg *mm = malloc(sizeof *mm);
  if (mm) {
    mm->cl = cl;
    mm->map = m;
  }
  if (!mm || tc_evloop_submit(cl->loop, map_apply, mm) < 0) {
    free(mm);
    tc_map_unref(m);
    tc_warn("cluster: could not hand the new map to the I/O thread (out of memory)");
  }
}

static void *
refresh_main(void *arg)
{
  struct tc_cluster *cl = arg;
  pthread_mutex_lock(&cl->refresh_lock);
  while (!cl->refresh_stop) {
    if (!cl->refresh_wanted) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 30;   /* a periodic re-read too, in case a watch missed something */
      if (pthread_cond_timedwait(&cl->refresh_cond, &cl->refresh_lock, &ts) == ETIMEDOUT)
        cl->refresh_wanted = true;
      continue;
    }
    cl->refresh_wanted = false;
    pthread_mutex_unlock(&cl->refresh_lock);
    struct tc_map *m = load_map(cl);
    if (m)
      publish_map(cl, m);
    else
      tc_warn("cluster: cannot read the cluster map: %s", tc_last_error());
    pthread_mutex_lock(&cl->refresh_lock);
    if (!m)
      cl->refresh_wanted = true;
    /* Coalesce bursts of requests: at most one read per 100 ms (1 s after a failure). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = m ? 100000000L : 999999999L;
    ts.tv_nsec += ns;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    bool wanted = cl->refresh_wanted;
    while (!cl->refresh_stop && pthread_cond_timedwait(&cl->refresh_cond, &cl->refresh_lock, &ts) != ETIMEDOUT)
      ;
    cl->refresh_wanted |= wanted;
  }
  pthread_mutex_unlock(&cl->refresh_lock);
  return NULL;
}

static void
watch_cb(void *arg, const struct tc_kv_watch_update *u)
{
  (void) u;
  request_refresh(arg);
}

struct tc_map *
tc_cluster_map(struct tc_cluster *cl)
{
  pthread_mutex_lock(&cl->map_lock);
  struct tc_map *m = tc_map_ref(cl->shared_map);
  pthread_mutex_unlock(&cl->map_lock);
  return m;
}

int
tc_cluster_refresh(struct tc_cluster *cl)
{
  struct tc_map *m = load_map(cl);
  if (!m)
    return -1;
  publish_map(cl, m);
  return 0;
}

/* --- connections --- */

static void
link_cb(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  struct osd_link *l = arg;
  if (event == TC_MSGR_UP) {
    tc_debug("cluster: connected to OSD %" PRIu64 " (%s, mode %s)", l->id, tc_msgr_conn_peername(c),
             tc_msgr_mode_name(tc_msgr_conn_mode(c)));
    return;
  }
  if (l->conn == c) {
    l->conn = NULL;
    tc_debug("cluster: connection to OSD %" PRIu64 " closed: %s", l->id, err ? strerror(-err) : "closed");
  }
}

/* The connection to OSD id, connecting if needed; NULL if its address is unknown. */
static struct tc_msgr_conn *
link_get(struct tc_cluster *cl, uint64_t id)
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

/* --- operations --- */

static void
retry_timer_cb(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct tc_cluster *cl = arg;
  cl->retry_timer = NULL;
  dispatch_waiting(cl);
}

/* Park sr until the next map or the retry timer. */
static void
sreq_wait(struct sreq *sr, int err)
{
  struct tc_cluster *cl = sr->cop->cl;
  sr->last_err = err;
  sr->wnext = NULL;
  if (cl->wait_tail)
    cl->wait_tail->wnext = sr;
  else
    cl->wait_head = sr;
  cl->wait_tail = sr;
  if (!cl->retry_timer)
    cl->retry_timer = tc_evloop_timer_add(cl->loop, cl->retry_ms, retry_timer_cb, cl);
}

static void
dirty_add(struct tc_cluster *cl, uint64_t osd)
{
  for (size_t i = 0; i < cl->ndirty; i++)
    if (cl->dirty[i] == osd)
      return;
  if (cl->ndirty == cl->dirty_cap) {
    size_t ncap = cl->dirty_cap ? cl->dirty_cap * 2 : 16;
    uint64_t *nd = realloc(cl->dirty, ncap * sizeof *nd);
    if (!nd) {
      tc_err("cluster: out of memory recording a written OSD; the next flush syncs them all");
      return;
    }
    cl->dirty = nd;
    cl->dirty_cap = ncap;
  }
  cl->dirty[cl->ndirty++] = osd;
}


/* --- the unsynced-write log --- */

static void
log_unlink(struct tc_cluster *cl, struct unsynced *u)
{
  if (u->prev)
    u->prev->next = u->next;
  else
    cl->log_head = u->next;
  if (u->next)
    u->next->prev = u->prev;
  else
    cl->log_tail = u->prev;
  cl->log_bytes -= u->len;
  free(u->data);
  free(u);
}

static struct unsynced *
log_piece(struct tc_cluster *cl, const struct unsynced *from, uint64_t off, uint64_t end)
{
  struct unsynced *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->seq = from->seq;
  p->partial = from->partial;
  p->inode = from->inode;
  p->offset = off;
  p->len = (uint32_t) (end - off);
  if (from->data) {
    if (!(p->data = malloc(p->len))) {
      free(p);
      return NULL;
    }
    memcpy(p->data, from->data + (off - from->offset), p->len);
  }
  cl->log_bytes += p->len;
  return p;
}

/* A partial write was acknowledged over the bytes of an older whole-sector
 * entry u: put its bytes into u's data and make u as young as the write
 * (so u is kept until a SYNC covers it). u and the partial entry then
 * overlap with the same bytes, which replay in either order. */
static void
log_patch(struct tc_cluster *cl, struct unsynced *u, uint64_t off, uint64_t end, const uint8_t *data)
{
  uint64_t ue = u->offset + u->len, from = off > u->offset ? off : u->offset, to = end < ue ? end : ue;
  memcpy(u->data + (from - u->offset), data + (from - off), to - from);
  u->seq = cl->log_seq + 1;   /* the partial entry's */
  if (u == cl->log_tail)
    return;
  if (u->prev)
    u->prev->next = u->next;
  else
    cl->log_head = u->next;
  u->next->prev = u->prev;
  u->prev = cl->log_tail;
  u->next = NULL;
  cl->log_tail->next = u;
  cl->log_tail = u;
}

/* Record an acknowledged write; older entries it covers are dropped (or cut
 * to what it does not cover), so a replay never brings back old data.
 * Whole-sector entries stay whole sectors: a partial write patches them. */
static void
log_add(struct tc_cluster *cl, uint64_t inode, uint64_t off, uint32_t len, const void *data, bool partial)
{
  uint64_t end = off + len;
  struct unsynced *stop = cl->log_tail;   /* entries moved to the tail are not seen twice */
  for (struct unsynced *u = cl->log_head, *next; u; u = next) {
    next = u == stop ? NULL : u->next;
    uint64_t ue = u->offset + u->len;
    if (u->inode != inode || ue <= off || end <= u->offset)
      continue;
    if (partial && !u->partial) {
      /* A DELETE becomes a write of zeros (what its sectors read as), so
       * that it can carry the partial write's bytes. */
      if (!u->data && !(u->data = calloc(1, u->len))) {
        tc_err("cluster: out of memory keeping an unsynced write for replay");
        continue;
      }
      log_patch(cl, u, off, end, data);
      continue;
    }
    struct unsynced *head = u->offset < off ? log_piece(cl, u, u->offset, off) : NULL;
    struct unsynced *tail = ue > end ? log_piece(cl, u, end, ue) : NULL;
    /* Put the pieces where u was (same age), then drop u. */
    struct unsynced *pieces[2] = { head, tail };
    for (int i = 0; i < 2; i++) {
      struct unsynced *p = pieces[i];
      if (!p)
        continue;
      p->prev = u->prev;
      p->next = u;
      if (u->prev)
        u->prev->next = p;
      else
        cl->log_head = p;
      u->prev = p;
    }
    log_unlink(cl, u);
  }
  struct unsynced *n = calloc(1, sizeof *n);
  if (!n || (data && !(n->data = malloc(len)))) {
    free(n);
    tc_err("cluster: out of memory keeping an unsynced write for replay");
    return;
  }
  if (data)
    memcpy(n->data, data, len);
  n->seq = ++cl->log_seq;
  n->partial = partial;
  n->inode = inode;
  n->offset = off;
  n->len = len;
  n->prev = cl->log_tail;
  if (cl->log_tail)
    cl->log_tail->next = n;
  else
    cl->log_head = n;
  cl->log_tail = n;
  cl->log_bytes += len;
}

/* A SYNC covering seq <= upto succeeded: forget those. */
static void
log_trim(struct tc_cluster *cl, uint64_t upto)
{
  while (cl->log_head && cl->log_head->seq <= upto)
    log_unlink(cl, cl->log_head);
}

static void cop_start(struct tc_evloop *loop, void *arg);
static void cop_free(struct cop *cop);

static void
replay_put(struct cop *sync, int result)
{
  if (result < 0 && !sync->error) {
    tc_warn("cluster: replaying an unsynced write failed: %s", strerror(-result));
    sync->error = result;
  }
  if (--sync->replay_pending == 0) {
    if (sync->error) {
      struct tc_objop *sop = sync->op;
      sop->result = sync->error;
      cop_free(sync);
      sop->done(sop);
    }
    else
      cop_start_sync(sync, true);
  }
}

static void
replay_done(struct tc_objop *op)
{
  struct cop *sync = op->opaque;
  int r = op->result;
  free(op->buf);
  free(op);
  replay_put(sync, r);
}

/* An OSD was lost before the SYNC: write again everything the SYNC was to
 * make durable (routed to the PGs' current primaries), then sync all. */
static void
replay_then_sync(struct cop *sync)
{
  struct tc_cluster *cl = sync->cl;
  sync->replay_pending = 1;   /* ours, dropped at the end */
  uint64_t n = 0;
  for (struct unsynced *u = cl->log_head; u && u->seq <= sync->sync_seq; u = u->next) {
    struct tc_objop *op = calloc(1, sizeof *op);
    struct cop *c = calloc(1, sizeof *c);
    struct sreq *part = calloc(1, sizeof *part);
    uint8_t *buf = u->data ? malloc(u->len) : NULL;
    if (!op || !c || !part || (u->data && !buf)) {
      free(op);
      free(c);
      free(part);
      free(buf);
      sync->error = -ENOMEM;
      break;
    }
    if (buf)
      memcpy(buf, u->data, u->len);
    *op = (struct tc_objop) { .code = u->partial ? TC_OBJ_WRITE_PARTIAL : buf ? TC_OBJ_WRITE : TC_OBJ_DELETE,
                              .inode = u->inode, .offset = u->offset,
                              .len = u->len, .buf = buf, .done = replay_done, .opaque = sync };
    c->cl = cl;
    c->op = op;
    c->internal = true;
    c->deadline = sync->deadline;
    c->nparts = 1;
    c->parts = part;
    part->cop = c;
    part->kind = SR_DATA;
    part->off = u->offset;
    part->len = u->len;
    sync->replay_pending++;
    n++;
    cop_start(cl->loop, c);
  }
  if (n)
    tc_info("cluster: an OSD was lost before a flush: replaying %" PRIu64 " unsynced writes", n);
  replay_put(sync, 0);
}

static void
auto_sync_done(struct tc_objop *op)
{
  struct tc_cluster *cl = op->opaque;
  cl->auto_syncing = false;
  if (op->result < 0)
    tc_warn("cluster: background sync failed: %s", strerror(-op->result));
  free(op);
}

/* Too many unsynced bytes kept for replay: sync in the background. */
static void
auto_sync(struct tc_cluster *cl)
{
  if (cl->auto_syncing || cl->stopping)
    return;
  struct tc_objop *op = calloc(1, sizeof *op);
  struct cop *c = calloc(1, sizeof *c);
  if (!op || !c) {
    free(op);
    free(c);
    return;
  }
  *op = (struct tc_objop) { .code = TC_OBJ_SYNC, .done = auto_sync_done, .opaque = cl };
  c->cl = cl;
  c->op = op;
  c->internal = true;
  c->deadline = tc_now_ms() + cl->op_timeout_ms;
  cl->auto_syncing = true;
  STAT_INC(cl, ops);
  cop_start_sync(c, false);
}

static void
cop_free(struct cop *cop)
{
  if (cop->op && cop->op->code == TC_OBJ_BITMAP)
    for (int i = 0; i < cop->nparts; i++)
      free(cop->parts[i].rbuf);
  free(cop->parts);
  free(cop->ents);
  free(cop);
}

static void
cop_complete(struct cop *cop)
{
  struct tc_cluster *cl = cop->cl;
  if (cop->op && cop->op->code == TC_OBJ_SYNC && cop->resync && !cop->error && !cl->stopping &&
      tc_now_ms() < cop->deadline) {
    replay_then_sync(cop);
    return;
  }
  if (cop->op && cop->op->code == TC_OBJ_SYNC && !cop->error && !cop->resync)
    log_trim(cl, cop->sync_seq);
  if (!cop->op) {
    pthread_mutex_lock(cop->wlock);
    *cop->wdone = true;
    pthread_cond_signal(cop->wcond);
    pthread_mutex_unlock(cop->wlock);
    return;   /* the waiter reads the result and frees */
  }
  struct tc_objop *op = cop->op;
  op->result = cop->error;
  cop_free(cop);
  op->done(op);
}

static void
part_finish(struct sreq *sr, int err)
{
  struct cop *cop = sr->cop;
  if (err < 0 && !cop->error)
    cop->error = err;
  if (--cop->pending == 0)
    cop_complete(cop);
}

static void
set_bits(uint8_t *bm, uint64_t first, uint64_t reply_bits, uint32_t nsec)
{
  for (uint32_t i = 0; i < nsec; i++)
    if (reply_bits >> i & 1)
      bm[(first + i) / 8] |= (uint8_t) (1u << ((first + i) % 8));
}

static void
sreq_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct sreq *sr = arg;
  struct cop *cop = sr->cop;
  struct tc_cluster *cl = cop->cl;
  void *payload = err == 0 ? req->reply_payload : NULL;
  bool own_payload = payload && payload != req->rbuf;
  tc_debug("cluster: reply to sreq %p: err %d status %d", (void *) sr, err, err ? 0 : req->reply.status);
  if (err == 0 && req->reply.status == -EAGAIN)
    err = -EAGAIN;
  if (err < 0) {
    if (own_payload)
      free(payload);
    if (cl->stopping) {
      part_finish(sr, -ECANCELED);
      return;
    }
    STAT_INC(cl, retries);
    tc_debug("cluster: %s to OSD %" PRIu64 " failed (%s), retrying", tc_osd_op_name(req->hdr.opcode), sr->osd,
             strerror(-err));
    request_refresh(cl);
    if (sr->kind == SR_SYNC) {
      /* The OSD may have taken our unsynced writes with it: sync every OSD. */
      cop->resync = true;
      part_finish(sr, 0);
      return;
    }
    sreq_wait(sr, err);
    return;
  }
  int status = req->reply.status;
  /* An OSD that cannot get a write to pg_minsize replicas (a member just
   * died, the PG is not complete yet) answers -EIO: the PG may serve it
   * again soon, so writes and syncs retry until the deadline. */
  if (status == -EIO && sr->kind != SR_LIST && (sr->kind == SR_SYNC || cop->op->code == TC_OBJ_WRITE ||
                                                cop->op->code == TC_OBJ_DELETE ||
                                                cop->op->code == TC_OBJ_WRITE_PARTIAL ||
                                                cop->op->code == TC_OBJ_WRITE_IF) && !cl->stopping) {
    if (own_payload)
      free(payload);
    STAT_INC(cl, retries);
    request_refresh(cl);
    if (sr->kind == SR_SYNC) {
      cop->resync = true;
      part_finish(sr, 0);
    }
    else
      sreq_wait(sr, -EIO);
    return;
  }
  if (status < 0) {
    if (own_payload)
      free(payload);
    part_finish(sr, status);
    return;
  }
  int r = 0;
  struct tc_objop *op = cop->op;
  switch (sr->kind) {
  case SR_DATA:
    if (op->code == TC_OBJ_READ || op->code == TC_OBJ_BITMAP) {
      if (req->reply.len != sr->len) {
        tc_warn("cluster: OSD %" PRIu64 " answered a %u-byte read with %u bytes", sr->osd, sr->len, req->reply.len);
        r = -EIO;
      }
      else if (own_payload && op->code == TC_OBJ_READ)
        memcpy(req->rbuf, payload, sr->len);
      if (r == 0 && op->bitmap)
        set_bits(op->bitmap, (sr->off - op->offset) / TC_SECTOR, tc_osd_hdr_of(&req->reply).reply.bitmap,
                 sr->len / TC_SECTOR);
    }
    else {
      dirty_add(cl, sr->osd);
      log_add(cl, op->inode, sr->off, sr->len,
              op->code != TC_OBJ_DELETE ? (const uint8_t *) op->buf + (sr->off - op->offset) : NULL,
              op->code == TC_OBJ_WRITE_PARTIAL);
      if (cl->log_bytes > cl->max_dirty)
        auto_sync(cl);
    }
    break;
  case SR_LIST: {
    size_t k = req->reply.len / sizeof(struct tc_osd_list_entry);
    if (k && cop->nents + k > cop->cap) {
      size_t ncap = (cop->nents + k) * 2;
      struct tc_osd_list_entry *ne = realloc(cop->ents, ncap * sizeof *ne);
      if (!ne)
        r = -ENOMEM;
      else {
        cop->ents = ne;
        cop->cap = ncap;
      }
    }
    if (r == 0 && k) {
      memcpy(cop->ents + cop->nents, payload, k * sizeof *cop->ents);
      cop->nents += k;
    }
    break;
  }
  case SR_SYNC:
    break;
  }
  if (own_payload)
    free(payload);
  part_finish(sr, r);
}

/* The request of a WRITE_PARTIAL (the bytes) or a WRITE_IF (its condition,
 * then the sector): osd_proto.h. */
static void
sreq_fill_partial(struct sreq *sr, struct tc_frame_hdr *h)
{
  struct tc_objop *op = sr->cop->op;
  sr->iov.iov_base = op->buf;
  sr->iov.iov_len = op->len;
  sr->req.iov = &sr->iov;
  sr->req.iovcnt = 1;
  *h = tc_osd_rw_hdr(op->code == TC_OBJ_WRITE_IF ? TC_OP_WRITE_IF : TC_OP_WRITE_PARTIAL, op->inode, op->offset,
                     op->len, 0);
  if (op->code == TC_OBJ_WRITE_IF) {
    sr->cond = (struct tc_osd_write_if) { .hash = op->if_hash, .present = op->if_present };
    sr->iov_if[0] = (struct iovec) { &sr->cond, sizeof sr->cond };
    sr->iov_if[1] = sr->iov;
    sr->req.iov = sr->iov_if;
    sr->req.iovcnt = 2;
  }
}

/* Send sr to where it belongs now, or park it. Loop thread. */
static void
sreq_dispatch(struct sreq *sr)
{
  struct cop *cop = sr->cop;
  struct tc_cluster *cl = cop->cl;
  if (cl->stopping) {
    part_finish(sr, -ECANCELED);
    return;
  }
  if (tc_now_ms() > cop->deadline) {
    int e = sr->last_err ? sr->last_err : -ETIMEDOUT;
    if (!cop->error)
      tc_warn("cluster: giving up on %s of inode 0x%" PRIx64 ": the cluster could not serve it in time (%s)",
              sr->kind == SR_LIST ? "a listing" : sr->kind == SR_SYNC ? "a sync" : tc_osd_op_name(
                cop->op->code == TC_OBJ_WRITE ? TC_OP_WRITE : cop->op->code == TC_OBJ_DELETE ? TC_OP_DELETE :
                cop->op->code == TC_OBJ_WRITE_PARTIAL ? TC_OP_WRITE_PARTIAL :
                cop->op->code == TC_OBJ_WRITE_IF ? TC_OP_WRITE_IF : TC_OP_READ),
              cop->op ? cop->op->inode : cop->first, strerror(-e));
    part_finish(sr, e == -EAGAIN || e == -ECONNRESET || e == -ECONNREFUSED ? -ETIMEDOUT : e);
    return;
  }
  uint64_t inode = cop->op ? cop->op->inode : cop->first;
  uint64_t osd = sr->osd;
  if (sr->kind == SR_SYNC && !tc_map_osd(cl->map, osd)) {
    /* The OSD left the cluster: sync every OSD of the map instead. */
    cop->resync = true;
    part_finish(sr, 0);
    return;
  }
  if (sr->kind != SR_SYNC) {
    uint64_t pool = TC_INODE_POOL(inode);
    const struct tc_pool_info *p = tc_map_pool(cl->map, pool);
    if (!p) {
      sreq_wait(sr, -ENXIO);
      return;
    }
    uint32_t pg = sr->kind == SR_LIST ? sr->pg : tc_map_pg_of(p, inode, sr->off);
    const struct tc_pg_info *pgi = tc_map_pg(cl->map, pool, pg);
    if (!pgi || !pgi->primary) {
      sreq_wait(sr, -EAGAIN);
      return;
    }
    osd = pgi->primary;
  }
  struct tc_msgr_conn *conn = link_get(cl, osd);
  if (!conn) {
    request_refresh(cl);
    sreq_wait(sr, -ECONNREFUSED);
    return;
  }
  sr->osd = osd;
  memset(&sr->req, 0, sizeof sr->req);
  struct tc_frame_hdr *h = &sr->req.hdr;
  static struct iovec noiov;
  sr->req.iov = &noiov;
  sr->req.iovcnt = 0;
  sr->req.done = sreq_done;
  sr->req.arg = sr;
  if (sr->kind == SR_SYNC)
    h->opcode = TC_OP_SYNC;
  else if (sr->kind == SR_LIST) {
    const struct tc_pool_info *p = tc_map_pool(cl->map, TC_INODE_POOL(inode));
    *h = tc_osd_list_hdr(cop->first, cop->last, sr->pg, p->pg_count);
  }
  else {
    struct tc_objop *op = cop->op;
    switch (op->code) {
    case TC_OBJ_READ:
    case TC_OBJ_BITMAP:
      *h = tc_osd_rw_hdr(TC_OP_READ, op->inode, sr->off, sr->len, 0);
      sr->req.rbuf = sr->rbuf;
      sr->req.rbuf_len = sr->len;
      break;
    case TC_OBJ_WRITE:
      *h = tc_osd_rw_hdr(TC_OP_WRITE, op->inode, sr->off, sr->len, 0);
      sr->iov.iov_base = (uint8_t *) op->buf + (sr->off - op->offset);
      sr->iov.iov_len = sr->len;
      sr->req.iov = &sr->iov;
      sr->req.iovcnt = 1;
      break;
    case TC_OBJ_DELETE:
      *h = tc_osd_rw_hdr(TC_OP_DELETE, op->inode, sr->off, sr->len, 0);
      break;
    case TC_OBJ_WRITE_PARTIAL:
    case TC_OBJ_WRITE_IF:
      sreq_fill_partial(sr, h);
      break;
    case TC_OBJ_SYNC:
      break;
    }
  }
  tc_debug("cluster: send %s inode 0x%" PRIx64 " offset %" PRIu64 " len %u to OSD %" PRIu64 " (sreq %p)",
           tc_osd_op_name(h->opcode), inode, sr->off, sr->len, osd, (void *) sr);
  if (tc_msgr_call(conn, &sr->req) < 0) {
    request_refresh(cl);
    sreq_wait(sr, -ECONNRESET);
  }
}

/* (Re)build a SYNC's parts: one per OSD written since the last SYNC, or
 * every OSD of the map when a target was lost. */
static void
cop_start_sync(struct cop *cop, bool all)
{
  struct tc_cluster *cl = cop->cl;
  if (all)
    for (size_t i = 0; i < cl->map->n_osds; i++)
      dirty_add(cl, cl->map->osds[i].id);
  cop->resync = false;
  cop->sync_seq = cl->log_seq;
  size_t n = cl->ndirty;
  if (n > (size_t) cop->nparts) {
    struct sreq *np = realloc(cop->parts, n * sizeof *np);
    if (!np) {
      struct tc_objop *op = cop->op;
      op->result = -ENOMEM;
      cop_free(cop);
      op->done(op);
      return;
    }
    cop->parts = np;
  }
  cop->nparts = (int) n;
  if (n == 0) {
    /* Nothing written since the last SYNC: done. */
    struct tc_objop *op = cop->op;
    op->result = 0;
    cop_free(cop);
    op->done(op);
    return;
  }
  STAT_INC(cl, syncs);
  memset(cop->parts, 0, n * sizeof *cop->parts);
  cop->pending = (int) n;
  for (size_t i = 0; i < n; i++) {
    cop->parts[i].cop = cop;
    cop->parts[i].kind = SR_SYNC;
    cop->parts[i].osd = cl->dirty[i];
  }
  /* A background sync leaves the set to the next flush: a flush must not
   * return before every OSD it depends on synced. */
  if (!cop->internal)
    cl->ndirty = 0;
  /* A resync waits a little: the lost OSD may still be in the map. */
  for (size_t i = 0; i < n; i++) {
    if (all)
      sreq_wait(&cop->parts[i], -ECONNRESET);
    else
      sreq_dispatch(&cop->parts[i]);
  }
}

/* On the loop: start an operation. */
static void
cop_start(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct cop *cop = arg;
  if (cop->op && cop->op->code == TC_OBJ_SYNC) {
    cop_start_sync(cop, false);
    return;
  }
  int n = cop->nparts;
  cop->pending = n;
  for (int i = 0; i < n; i++)
    sreq_dispatch(&cop->parts[i]);
}

static int
cluster_submit(void *ctx, struct tc_objop *op)
{
  struct tc_cluster *cl = ctx;
  if (op->code != TC_OBJ_SYNC && op->code != TC_OBJ_WRITE_PARTIAL &&
      (op->offset % TC_SECTOR || op->len % TC_SECTOR || op->len == 0))
    return -EINVAL;
  if ((op->code == TC_OBJ_WRITE_PARTIAL && (op->len == 0 || op->len > TC_OSD_MAX_OP_BYTES)) ||
      (op->code == TC_OBJ_WRITE_IF && op->len != TC_SECTOR))
    return -EINVAL;
  struct cop *cop = calloc(1, sizeof *cop);
  if (!cop)
    return -ENOMEM;
  cop->cl = cl;
  cop->op = op;
  cop->deadline = tc_now_ms() + cl->op_timeout_ms;
  if (op->code != TC_OBJ_SYNC) {
    bool split = op->code == TC_OBJ_READ || op->code == TC_OBJ_BITMAP;
    uint32_t step = split ? TC_OSD_MAX_OP_BYTES : op->len;
    int n = (int) ((op->len + step - 1) / step);
    if (!(cop->parts = calloc(n, sizeof *cop->parts))) {
      free(cop);
      return -ENOMEM;
    }
    cop->nparts = n;
    for (int i = 0; i < n; i++) {
      struct sreq *sr = &cop->parts[i];
      sr->cop = cop;
      sr->kind = SR_DATA;
      sr->off = op->offset + (uint64_t) i * step;
      sr->len = op->len - (uint32_t) i * step < step ? op->len - (uint32_t) i * step : step;
      if (op->code == TC_OBJ_READ)
        sr->rbuf = (uint8_t *) op->buf + (sr->off - op->offset);
      else if (op->code == TC_OBJ_BITMAP && !(sr->rbuf = malloc(sr->len))) {
        cop_free(cop);
        return -ENOMEM;
      }
    }
  }
  if (tc_evloop_submit(cl->loop, cop_start, cop) < 0) {
    cop_free(cop);
    return -ENOMEM;
  }
  STAT_INC(cl, ops);
  return 0;
}

struct tc_objstore
tc_cluster_objstore(struct tc_cluster *cl)
{
  return (struct tc_objstore) { .submit = cluster_submit, .ctx = cl };
}

struct run_wait {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool done;
};

static void
run_done(struct tc_objop *op)
{
  struct run_wait *w = op->opaque;
  pthread_mutex_lock(&w->lock);
  w->done = true;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

int
tc_cluster_run(struct tc_cluster *cl, struct tc_objop *op)
{
  struct run_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
  op->done = run_done;
  op->opaque = &w;
  int r = cluster_submit(cl, op);
  if (r < 0)
    return tc_error(-r, "cluster: cannot submit the operation: %s", strerror(-r));
  pthread_mutex_lock(&w.lock);
  while (!w.done)
    pthread_cond_wait(&w.cond, &w.lock);
  pthread_mutex_unlock(&w.lock);
  if (op->result < 0)
    return tc_error(-op->result, "cluster: inode 0x%" PRIx64 " offset %" PRIu64 ": %s", op->inode, op->offset,
                    strerror(-op->result));
  return 0;
}

int
tc_cluster_list(struct tc_cluster *cl, uint64_t first, uint64_t last, int timeout_ms,
                struct tc_osd_list_entry **out, size_t *nout)
{
  *out = NULL;
  *nout = 0;
  uint64_t pool = TC_INODE_POOL(first);
  if (TC_INODE_POOL(last) != pool || last < first)
    return tc_error(EINVAL, "cluster list: inodes 0x%" PRIx64 "..0x%" PRIx64 " are not one pool's range", first, last);
  struct tc_map *m = tc_cluster_map(cl);
  const struct tc_pool_info *p = tc_map_pool(m, pool);
  uint32_t pg_count = p ? p->pg_count : 0;
  tc_map_unref(m);
  if (!pg_count)
    return tc_error(ENXIO, "cluster list: pool %" PRIu64 " is not in the cluster map", pool);
  struct cop *cop = calloc(1, sizeof *cop);
  if (!cop || !(cop->parts = calloc(pg_count, sizeof *cop->parts))) {
    free(cop);
    return tc_error(ENOMEM, "cluster list: out of memory");
  }
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  bool done = false;
  cop->cl = cl;
  cop->first = first;
  cop->last = last;
  cop->wlock = &lock;
  cop->wcond = &cond;
  cop->wdone = &done;
  cop->deadline = tc_now_ms() + (timeout_ms > 0 ? (uint64_t) timeout_ms : cl->op_timeout_ms);
  cop->nparts = (int) pg_count;
  for (uint32_t i = 0; i < pg_count; i++) {
    cop->parts[i].cop = cop;
    cop->parts[i].kind = SR_LIST;
    cop->parts[i].pg = i;
  }
  if (tc_evloop_submit(cl->loop, cop_start, cop) < 0) {
    cop_free(cop);
    return -1;
  }
  pthread_mutex_lock(&lock);
  while (!done)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  int err = cop->error;
  if (err == 0) {
    *out = cop->ents;
    *nout = cop->nents;
    cop->ents = NULL;
  }
  cop_free(cop);
  if (err < 0)
    return tc_error(-err, "cluster list of inodes 0x%" PRIx64 "..0x%" PRIx64 ": %s", first, last, strerror(-err));
  return 0;
}

void
tc_cluster_stats(struct tc_cluster *cl, struct tc_cluster_stats *st)
{
  pthread_mutex_lock(&cl->stats_lock);
  *st = cl->stats;
  pthread_mutex_unlock(&cl->stats_lock);
}

/* --- life --- */

static void *
io_main(void *arg)
{
  struct tc_cluster *cl = arg;
  if (tc_evloop_run(cl->loop) < 0)
    tc_err("cluster: the I/O loop failed: %s", tc_last_error());
  return NULL;
}

struct tc_cluster *
tc_cluster_new(const struct tc_config *cfg, struct tc_kv *kv)
{
  struct tc_cluster *cl = calloc(1, sizeof *cl);
  if (!cl) {
    tc_error(ENOMEM, "cluster: out of memory");
    return NULL;
  }
  cl->cfg = cfg;
  cl->kv = kv;
  pthread_mutex_init(&cl->map_lock, NULL);
  pthread_mutex_init(&cl->refresh_lock, NULL);
  pthread_cond_init(&cl->refresh_cond, NULL);
  pthread_mutex_init(&cl->stats_lock, NULL);
  int64_t to = tc_config_int(cfg, "client_op_timeout"), ri = tc_config_int(cfg, "client_retry_interval");
  if (to < 1 || ri < 1 || ri > 60000) {
    tc_error(EINVAL, "options client_op_timeout (>= 1 s) or client_retry_interval (1..60000 ms) out of range");
    goto fail;
  }
  cl->op_timeout_ms = (uint64_t) to * 1000;
  int64_t md = tc_config_int(cfg, "client_max_dirty_bytes");
  if (md < (1 << 20)) {
    tc_error(EINVAL, "option client_max_dirty_bytes: at least 1M");
    goto fail;
  }
  cl->max_dirty = (uint64_t) md;
  cl->retry_ms = (uint64_t) ri;
  if (!(cl->prefix = strdup(tc_kv_prefix(kv)))) {
    tc_error(ENOMEM, "cluster: out of memory");
    goto fail;
  }
  /* Watches first, so no change between the read and the watch is missed. */
  const char *keys[3] = { "/pg/config", "/osd/state/", "/config/pools" };
  for (int i = 0; i < 3; i++) {
    char key[512];
    snprintf(key, sizeof key, "%s%s", cl->prefix, keys[i]);
    if (!(cl->watches[i] = tc_kv_watch(kv, key, 0, i == 1, 0, watch_cb, cl)))
      goto fail;
  }
  if (!(cl->map = load_map(cl)))
    goto fail;
  cl->shared_map = tc_map_ref(cl->map);
  if (!(cl->loop = tc_evloop_new()))
    goto fail;
  if (!(cl->msgr = tc_msgr_new_from_config(cl->loop, cfg, 0)))
    goto fail;
  int e = pthread_create(&cl->io_thread, NULL, io_main, cl);
  if (e) {
    tc_error(e, "cluster: cannot start the I/O thread: %s", strerror(e));
    goto fail;
  }
  cl->io_started = true;
  if ((e = pthread_create(&cl->refresh_thread, NULL, refresh_main, cl))) {
    tc_error(e, "cluster: cannot start the map thread: %s", strerror(e));
    goto fail;
  }
  cl->refresh_started = true;
  return cl;
fail:
  {
    int err = errno;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    tc_cluster_free(cl);
    tc_error(err, "%s", msg);
  }
  return NULL;
}

/* On the loop: fail what waits, close every connection, stop. */
static void
shutdown_cb(struct tc_evloop *loop, void *arg)
{
  struct tc_cluster *cl = arg;
  cl->stopping = true;
  if (cl->retry_timer) {
    tc_evloop_timer_cancel(loop, cl->retry_timer);
    cl->retry_timer = NULL;
  }
  dispatch_waiting(cl);     /* each fails with ECANCELED */
  tc_msgr_free(cl->msgr);   /* in-flight requests complete with errors */
  cl->msgr = NULL;
  tc_evloop_stop(loop);
}

void
tc_cluster_free(struct tc_cluster *cl)
{
  if (!cl)
    return;
  for (int i = 0; i < 3; i++)
    if (cl->watches[i])
      tc_kv_watch_cancel(cl->watches[i]);
  if (cl->refresh_started) {
    pthread_mutex_lock(&cl->refresh_lock);
    cl->refresh_stop = true;
    pthread_cond_signal(&cl->refresh_cond);
    pthread_mutex_unlock(&cl->refresh_lock);
    pthread_join(cl->refresh_thread, NULL);
  }
  if (cl->io_started) {
    if (tc_evloop_submit(cl->loop, shutdown_cb, cl) < 0)
      tc_evloop_stop(cl->loop);
    pthread_join(cl->io_thread, NULL);
  }
  if (cl->msgr)
    tc_msgr_free(cl->msgr);
  if (cl->loop)
    tc_evloop_free(cl->loop);
  while (cl->links) {
    struct osd_link *l = cl->links;
    cl->links = l->next;
    free(l->host);
    free(l);
  }
  tc_map_unref(cl->map);
  tc_map_unref(cl->shared_map);
  free(cl->dirty);
  while (cl->log_head)
    log_unlink(cl, cl->log_head);
  free(cl->prefix);
  pthread_mutex_destroy(&cl->map_lock);
  pthread_mutex_destroy(&cl->refresh_lock);
  pthread_cond_destroy(&cl->refresh_cond);
  pthread_mutex_destroy(&cl->stats_lock);
  free(cl);
}
