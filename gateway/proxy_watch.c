/* Watch streams through the proxy (see proxy_watch.h). The KV client's
 * loop thread queues events (on_update); the stream's content reader, on an
 * MHD worker, filters and sends them, and parks the connection when there
 * is nothing to send. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include "proxy_watch.h"
#include "kvfilter.h"
#include "kv_json.h"
#include "error.h"
#include "evloop.h"
#include "log.h"
#include "watch_out.h"
#include "watch_park.h"

/* One event as queued: the JSON sent to a watcher allowed to see it, and
 * what the filter judges it by (a delete: the value it deleted). */
struct pev {
  json_object *json;
  uint8_t *key, *judge;
  size_t klen, jlen;
  bool has_judge, is_delete;
};

/* One batch of the etcd watch: whole revisions. */
struct pbatch {
  struct pbatch *next;
  int64_t rev;
  size_t n, bytes;
  struct pev *ev;
};

struct proxy_watch {
  struct kvproxy *px;
  struct kv_watch_req req;
  pthread_mutex_t mu;
  struct tc_kv_watch *kw;
  struct pbatch *head, *tail;     /* under mu */
  size_t bytes;                   /* queued, under mu */
  bool paused;                    /* over the cap: events dropped from resume_rev on */
  int64_t resume_rev;
  int64_t compact_rev;            /* etcd compacted what the watch needed */
  int64_t known_rev;              /* last revision the etcd watch reported */
  int64_t start_rev;
  int fd;
  struct watch_park *park;
  struct park_entry pe;
  const volatile bool *stopping;
  bool created, ending;
  int64_t progress_ms, retry_ms, restarted_ms;
  struct watch_out out;
  struct gw_identity gid;
  struct caller who;
  bool filtered;
  void (*on_free)(void *arg);
  void *on_free_arg;
};

/* Bytes queued by every proxy watch together (PROXY_WATCHES_MAX_BYTES). */
static _Atomic size_t queued_total;

static void
batch_free(struct pbatch *b)
{
  if (!b)
    return;
  for (size_t i = 0; i < b->n; i++) {
    json_object_put(b->ev[i].json);
    free(b->ev[i].key);
    free(b->ev[i].judge);
  }
  free(b->ev);
  free(b);
}

static uint8_t *
dup_bytes(const uint8_t *p, size_t n)
{
  uint8_t *c = malloc(n + 1);
  if (c) {
    if (n)
      memcpy(c, p, n);
    c[n] = 0;
  }
  return c;
}

static json_object *
kv_json(const struct tc_kv_kv *k)
{
  struct kv_rec r = { k->key, k->key_len, k->value, k->value_len, k->create_revision, k->mod_revision,
                      k->version, k->lease, 0 };
  return kvx_kv(&r, false);
}

/* The etcd watch's events, copied for the reader (the KV client's loop). */
static struct pbatch *
batch_new(struct proxy_watch *w, const struct tc_kv_watch_update *u)
{
  struct pbatch *b = calloc(1, sizeof *b);
  if (!b || !(b->ev = calloc(u->n_events, sizeof *b->ev))) {
    free(b);
    return NULL;
  }
  b->rev = u->revision;
  for (size_t i = 0; i < u->n_events; i++) {
    const struct tc_kv_event *e = &u->events[i];
    struct pev *p = &b->ev[b->n];
    p->is_delete = e->type == TC_KV_EVENT_DELETE;
    p->json = json_object_new_object();
    if (!p->json || !(p->key = dup_bytes(e->kv.key, e->kv.key_len))) {
      json_object_put(p->json);
      batch_free(b);
      return NULL;
    }
    b->n++;
    p->klen = e->kv.key_len;
    const struct tc_kv_kv *judged = p->is_delete ? &e->prev_kv : &e->kv;
    if (judged->key) {
      if (!(p->judge = dup_bytes(judged->value, judged->value_len))) {
        batch_free(b);
        return NULL;
      }
      p->jlen = judged->value_len;
      p->has_judge = true;
    }
    if (p->is_delete)
      json_object_object_add(p->json, "type", json_object_new_string("DELETE"));
    json_object_object_add(p->json, "kv", kv_json(&e->kv));
    if (w->req.prev_kv && e->prev_kv.key)
      json_object_object_add(p->json, "prev_kv", kv_json(&e->prev_kv));
    b->bytes += e->kv.key_len + e->kv.value_len + e->prev_kv.value_len + 256;
  }
  return b;
}

static void
on_update(void *arg, const struct tc_kv_watch_update *u)
{
  struct proxy_watch *w = arg;
  struct pbatch *b = u->n_events ? batch_new(w, u) : NULL;
  pthread_mutex_lock(&w->mu);
  if (u->revision > w->known_rev)
    w->known_rev = u->revision;
  if (u->compact_revision > 0 && !w->compact_rev)
    w->compact_rev = u->compact_revision;
  else if (u->n_events && !w->paused && !w->compact_rev) {
    /* A batch is always taken into an empty queue (etcd's catch-up
     * messages hold many revisions at once: refusing one that alone is
     * over the cap would never make progress). */
    bool room = b && (!w->head || w->bytes + b->bytes <= PROXY_WATCH_MAX_BYTES);
    if (room) {
      size_t total = atomic_fetch_add(&queued_total, b->bytes) + b->bytes;
      if (w->head && total > PROXY_WATCHES_MAX_BYTES) {
        atomic_fetch_sub(&queued_total, b->bytes);
        room = false;
      }
    }
    if (!room) {
      /* The watcher is behind (or memory is short): drop from here on and
       * read them again from etcd once it has caught up. */
      w->paused = true;
      w->resume_rev = u->events[0].kv.mod_revision;
      batch_free(b);
    } else {
      if (w->tail)
        w->tail->next = b;
      else
        w->head = b;
      w->tail = b;
      w->bytes += b->bytes;
    }
    b = NULL;
  }
  pthread_mutex_unlock(&w->mu);
  batch_free(b);
  watch_park_wake(w->park, &w->pe);
}

struct proxy_watch *
kvproxy_watch_new(struct kvproxy *px, const struct caller *who, struct kv_watch_req *req,
                  struct MHD_Connection *conn, struct watch_park *park, const volatile bool *stopping,
                  int64_t progress_ms, struct kv_err *err)
{
  struct proxy_watch *w = calloc(1, sizeof *w);
  if (!w) {
    kv_err_set(err, KV_INTERNAL, "gateway: out of memory");
    return NULL;
  }
  if (who && who->gid && who->filter && who->filter->use_perms) {
    w->gid = *who->gid;
    if (w->gid.id.role == TC_ROLE_USER)
      w->gid.id.name = w->gid.cn;
    w->who.identity = w->gid.desc;
    w->who.peer = "watch";
    w->who.gid = &w->gid;
    w->who.filter = who->filter;
    w->filtered = true;
  }
  w->px = px;
  w->req = *req;
  memset(req, 0, sizeof *req);
  pthread_mutex_init(&w->mu, NULL);
  w->start_rev = w->req.start_revision;
  if (w->start_rev <= 0) {
    /* "From now": the revision etcd is at. */
    json_object *q = json_object_new_object();
    if (q) {
      json_object_object_add(q, "key", proxy_b64(w->req.key.p, w->req.key.n));
      json_object_object_add(q, "count_only", json_object_new_boolean(1));
    }
    json_object *r = kvproxy_forward(px, "/v3/kv/range", q, true, err), *h;
    if (!r) {
      kvproxy_watch_free(w);
      return NULL;
    }
    w->start_rev = (json_object_object_get_ex(r, "header", &h) ? tc_json_i64(h, "revision") : 0) + 1;
    json_object_put(r);
  }
  w->known_rev = w->start_rev - 1;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  w->fd = ci ? ci->connect_fd : -1;
  w->park = park;
  w->pe.conn = conn;
  w->pe.fd = w->fd;
  w->stopping = stopping;
  w->progress_ms = progress_ms;
  w->out.sent_ms = (int64_t) tc_now_ms();
  /* A one-key watch has no range_end; etcd's "AA==" (every key from key on)
   * is one zero byte. */
  w->kw = tc_kv_watch_range(kvproxy_kv(px), w->req.key.p, w->req.key.n, w->req.end.n ? w->req.end.p : NULL,
                            w->req.end.n, w->start_rev, true, on_update, w);
  if (!w->kw) {
    kv_err_set(err, KV_UNAVAILABLE, "etcd_proxy: watch: %s", tc_last_error());
    kvproxy_watch_free(w);
    return NULL;
  }
  return w;
}

void
kvproxy_watch_on_free(struct proxy_watch *w, void (*fn)(void *arg), void *arg)
{
  w->on_free = fn;
  w->on_free_arg = arg;
}

void
kvproxy_watch_free(void *cls)
{
  struct proxy_watch *w = cls;
  if (!w)
    return;
  /* After this, on_update neither runs nor will. */
  tc_kv_watch_cancel(w->kw);
  if (w->park)
    watch_park_forget(w->park, &w->pe);
  if (w->on_free)
    w->on_free(w->on_free_arg);
  while (w->head) {
    struct pbatch *b = w->head;
    w->head = b->next;
    atomic_fetch_sub(&queued_total, b->bytes);
    batch_free(b);
  }
  pthread_mutex_destroy(&w->mu);
  free(w->req.key.p);
  free(w->req.end.p);
  watch_out_free(&w->out);
  free(w);
}

static json_object *
result_new(struct proxy_watch *w, int64_t rev)
{
  json_object *r = json_object_new_object();
  if (!r)
    return NULL;
  json_object_object_add(r, "header", kvproxy_header(w->px, rev));
  if (w->req.watch_id)
    json_object_object_add(r, "watch_id", kvx_int64(w->req.watch_id));
  return r;
}

/* The next batch for the watcher: 1 queued a reply, 0 nothing to send now,
 * 2 a batch with nothing for this watcher (look again), -1 error. */
static int
next_batch(struct proxy_watch *w)
{
  pthread_mutex_lock(&w->mu);
  int64_t compact = w->compact_rev;
  struct pbatch *b = w->head;
  bool restart = !b && w->paused;
  pthread_mutex_unlock(&w->mu);
  if (compact && !b) {
    json_object *r = result_new(w, 0);
    if (r) {
      json_object_object_add(r, "canceled", json_object_new_boolean(1));
      json_object_object_add(r, "compact_revision", kvx_int64(compact));
    }
    w->ending = true;
    return watch_out_emit(&w->out, r) < 0 ? -1 : 1;
  }
  if (restart) {
    /* Caught up with what was queued: read the rest again from etcd (at
     * most once a second: under the global budget a watch may pause with
     * nothing queued). */
    if ((int64_t) tc_now_ms() - w->restarted_ms < 1000) {
      w->retry_ms = w->restarted_ms + 1000;
      return 0;
    }
    w->restarted_ms = (int64_t) tc_now_ms();
    tc_kv_watch_cancel(w->kw);
    w->kw = NULL;
    pthread_mutex_lock(&w->mu);
    w->paused = false;
    int64_t from = w->resume_rev;
    pthread_mutex_unlock(&w->mu);
    tc_info("etcd_proxy: watch of %s caught up: resuming from revision %" PRId64, w->who.identity ?
             w->who.identity : "anyone", from);
    w->kw = tc_kv_watch_range(kvproxy_kv(w->px), w->req.key.p, w->req.key.n, w->req.end.n ? w->req.end.p : NULL,
                              w->req.end.n, from, true, on_update, w);
    if (!w->kw) {
      tc_warn("etcd_proxy: watch: %s", tc_last_error());
      return -1;
    }
    return 0;
  }
  if (!b)
    return 0;
  struct proxy_src *ps = NULL;
  struct kvfilter_req rq;
  int f = 0;
  struct kv_err err;
  if (w->filtered) {
    /* Each batch judged by the rights of now, read from etcd. */
    if (!(ps = proxy_src_new(w->px, 0)))
      return -1;
    proxy_src_reads_only(ps);
    f = proxy_filter_begin(ps, &w->who, &rq, &err);
  }
  json_object *events = f >= 0 ? json_object_new_array() : NULL;
  for (size_t i = 0; events && i < b->n; i++) {
    const struct pev *e = &b->ev[i];
    if ((e->is_delete && w->req.nodelete) || (!e->is_delete && w->req.noput))
      continue;
    if (f > 0 && !kvfilter_may_read(&rq, e->key, e->klen, e->has_judge ? e->judge : NULL, e->jlen))
      continue;
    json_object_array_add(events, json_object_get(e->json));
  }
  if (f > 0)
    kvfilter_end(&rq);
  bool failed = f < 0 || (ps && proxy_src_failed(ps, &err));
  proxy_src_free(ps);
  if (failed || !events) {
    /* Rights unreadable now (etcd failing over): keep the batch, try
     * again shortly rather than drop what the watcher may see. */
    json_object_put(events);
    tc_warn("etcd_proxy: watch of %s: %s; retrying", w->who.identity ? w->who.identity : "anyone",
            failed ? err.msg : "out of memory");
    w->retry_ms = (int64_t) tc_now_ms() + 500;
    return 0;
  }
  pthread_mutex_lock(&w->mu);
  w->head = b->next;
  if (!w->head)
    w->tail = NULL;
  w->bytes -= b->bytes;
  pthread_mutex_unlock(&w->mu);
  atomic_fetch_sub(&queued_total, b->bytes);
  int64_t rev = b->rev;
  batch_free(b);
  if (!json_object_array_length(events)) {
    json_object_put(events);
    return 2;
  }
  json_object *r = result_new(w, rev);
  if (!r) {
    json_object_put(events);
    return -1;
  }
  json_object_object_add(r, "events", events);
  return watch_out_emit(&w->out, r) < 0 ? -1 : 1;
}


ssize_t
kvproxy_watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
  struct proxy_watch *w = cls;
  (void) pos;
  while (watch_out_empty(&w->out)) {
    if (w->ending || *w->stopping)
      return MHD_CONTENT_READER_END_OF_STREAM;
    if (!w->created) {
      w->created = true;
      json_object *r = result_new(w, w->start_rev - 1);
      if (r)
        json_object_object_add(r, "created", json_object_new_boolean(1));
      if (watch_out_emit(&w->out, r) < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
      break;
    }
    int rc = 0;
    if (!w->retry_ms || (int64_t) tc_now_ms() >= w->retry_ms) {
      w->retry_ms = 0;
      rc = next_batch(w);
    }
    if (rc < 0)
      return MHD_CONTENT_READER_END_WITH_ERROR;
    if (rc == 1)
      break;
    if (rc == 2)
      continue;
    if (watch_peer_gone(w->fd))
      return MHD_CONTENT_READER_END_WITH_ERROR;
    bool progress = w->req.progress_notify && w->progress_ms > 0;
    if (progress && (int64_t) tc_now_ms() - w->out.sent_ms >= w->progress_ms) {
      pthread_mutex_lock(&w->mu);
      int64_t rev = w->head ? w->head->rev - 1 : w->known_rev;
      pthread_mutex_unlock(&w->mu);
      if (watch_out_emit(&w->out, result_new(w, rev)) < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
      break;
    }
    /* Nothing to send: park until on_update wakes it, the client hangs
     * up, a retry or the progress reply is due. */
    w->pe.rev = INT64_MAX;
    int64_t wake = progress ? w->out.sent_ms + w->progress_ms : 0;
    if (w->retry_ms && (!wake || w->retry_ms < wake))
      wake = w->retry_ms;
    w->pe.wake_ms = wake;
    if (!watch_park_suspend(w->park, &w->pe))
      return MHD_CONTENT_READER_END_OF_STREAM;
    return 0;
  }
  return (ssize_t) watch_out_take(&w->out, buf, max);
}
