/* Watch streams (see watch.h). */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include "watch.h"
#include "kvfilter.h"
#include "log.h"
#include "evloop.h"
#include "watch_out.h"
#include "watch_park.h"

#define BATCH_EVENTS 1000          /* events per message, whole revisions */
#define BATCH_BYTES (4 << 20)

struct watch_stream {
  struct kvs *s;
  struct kv_watch_req req;
  int64_t next_rev;
  int fd;
  struct watch_park *park;
  struct park_entry pe;      /* while waiting for the store, parked there */
  void (*on_free)(void *arg);
  void *on_free_arg;
  const volatile bool *stopping;
  bool created, ending;
  int64_t progress_ms;
  struct watch_out out;
  /* use_perms: the watcher's identity (a copy) and the filter */
  struct gw_identity gid;
  struct caller who;
};

struct watch_stream *
watch_new(struct kvs *s, const struct caller *who, struct kv_watch_req *req, struct MHD_Connection *conn,
          struct watch_park *park, const volatile bool *stopping, int64_t progress_ms)
{
  struct watch_stream *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  /* Events are filtered one by one against the rights at the time of each
   * batch (the user record is read again for every batch). */
  if (who && who->gid && who->filter) {
    w->gid = *who->gid;
    if (w->gid.id.role == TC_ROLE_USER)
      w->gid.id.name = w->gid.cn;
    w->who.identity = w->gid.desc;
    w->who.peer = "watch";
    w->who.gid = &w->gid;
    w->who.filter = who->filter;
  }
  w->s = s;
  w->req = *req;
  memset(req, 0, sizeof *req);
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  w->fd = ci ? ci->connect_fd : -1;
  w->park = park;
  w->pe.conn = conn;
  w->pe.fd = w->fd;
  w->stopping = stopping;
  w->progress_ms = progress_ms;
  w->out.sent_ms = (int64_t) tc_now_ms();
  return w;
}

void
watch_free(void *cls)
{
  struct watch_stream *w = cls;
  if (!w)
    return;
  watch_park_forget(w->park, &w->pe);
  if (w->on_free)
    w->on_free(w->on_free_arg);
  free(w->req.key.p);
  free(w->req.end.p);
  watch_out_free(&w->out);
  free(w);
}

void
watch_on_free(struct watch_stream *w, void (*fn)(void *arg), void *arg)
{
  w->on_free = fn;
  w->on_free_arg = arg;
}

static json_object *
result_new(struct watch_stream *w, int64_t rev)
{
  json_object *r = json_object_new_object();
  if (!r)
    return NULL;
  json_object_object_add(r, "header", kvx_header(w->s, rev));
  if (w->req.watch_id)
    json_object_object_add(r, "watch_id", kvx_int64(w->req.watch_id));
  return r;
}

/* The last message (the stream ends after it): 0, or -1 out of memory. */
static int
emit_canceled(struct watch_stream *w, int64_t compact_rev)
{
  json_object *r = result_new(w, 0);
  if (r) {
    json_object_object_add(r, "canceled", json_object_new_boolean(1));
    json_object_object_add(r, "compact_revision", kvx_int64(compact_rev));
  }
  w->ending = true;
  return watch_out_emit(&w->out, r);
}

struct scan {
  struct watch_stream *w;
  struct kvs_txn *tx;
  struct kvfilter_req *rq;
  json_object *events;
  size_t count, bytes;
  int64_t last_rev, stopped_at;
  struct kv_err *err;
  bool failed;
};

static int
event_cb(void *opaque, int type, const struct kv_rec *r)
{
  struct scan *sc = opaque;
  struct watch_stream *w = sc->w;
  if (r->mod_rev != sc->last_rev && (sc->count >= BATCH_EVENTS || sc->bytes >= BATCH_BYTES)) {
    sc->stopped_at = r->mod_rev;
    return 1;
  }
  sc->last_rev = r->mod_rev;
  if (!kv_in_range(r->key, r->klen, w->req.key.p, w->req.key.n, w->req.end.p, w->req.end.n))
    return 0;
  if ((type == KV_EV_PUT && w->req.noput) || (type == KV_EV_DELETE && w->req.nodelete))
    return 0;
  if (sc->rq) {
    /* A delete is judged by the value it deleted. */
    const uint8_t *val = r->val;
    size_t vlen = r->vlen;
    struct kv_rec prev;
    if (type == KV_EV_DELETE) {
      int rc = kvs_prev_version(sc->tx, r->key, r->klen, r->mod_rev, r->sub, &prev, sc->err);
      if (rc < 0) {
        sc->failed = true;
        return 1;
      }
      val = rc ? prev.val : NULL;
      vlen = rc ? prev.vlen : 0;
    }
    if (!kvfilter_may_read(sc->rq, r->key, r->klen, val, vlen))
      return 0;
  }
  json_object *ev = json_object_new_object();
  if (type == KV_EV_DELETE)
    json_object_object_add(ev, "type", json_object_new_string("DELETE"));
  json_object_object_add(ev, "kv", kvx_kv(r, false));
  if (w->req.prev_kv) {
    struct kv_rec prev;
    int rc = kvs_prev_version(sc->tx, r->key, r->klen, r->mod_rev, r->sub, &prev, sc->err);
    if (rc < 0) {
      json_object_put(ev);
      sc->failed = true;
      return 1;
    }
    if (rc)
      json_object_object_add(ev, "prev_kv", kvx_kv(&prev, false));
  }
  json_object_array_add(sc->events, ev);
  sc->count++;
  sc->bytes += r->klen + r->vlen + 64;
  return 0;
}

/* Read the next batch of events into w->out. 1: queued something, 0:
 * nothing new yet, -1: error. */
static int
poll_events(struct watch_stream *w)
{
  struct kvs_txn tx;
  struct kv_err err;
  if (kvs_read_begin(w->s, &tx, &err) < 0) {
    tc_warn("watch: %s", err.msg);
    return -1;
  }
  if (!w->created) {
    w->created = true;
    json_object *r = result_new(w, tx.rev);
    if (r)
      json_object_object_add(r, "created", json_object_new_boolean(1));
    w->next_rev = w->req.start_revision > 0 ? w->req.start_revision : tx.rev + 1;
    kvs_read_end(&tx);
    return watch_out_emit(&w->out, r) < 0 ? -1 : 1;
  }
  if (w->next_rev < tx.compact_rev) {
    int64_t compact_rev = tx.compact_rev;
    kvs_read_end(&tx);
    return emit_canceled(w, compact_rev) < 0 ? -1 : 1;
  }
  if (w->next_rev > tx.rev) {
    kvs_read_end(&tx);
    return 0;
  }
  struct kvfilter_req rq;
  int f = kvx_filter_begin(&tx, &w->who, &rq, &err);
  if (f < 0) {
    tc_warn("watch of %s: %s", w->gid.desc, err.msg);
    kvs_read_end(&tx);
    return -1;
  }
  struct scan sc = { .w = w, .tx = &tx, .rq = f ? &rq : NULL, .events = json_object_new_array(), .err = &err };
  int rc = kvs_events(&tx, w->next_rev, event_cb, &sc, &err);
  if (f)
    kvfilter_end(&rq);
  if (rc < 0 || sc.failed) {
    tc_warn("watch: %s", err.msg);
    json_object_put(sc.events);
    kvs_read_end(&tx);
    return -1;
  }
  w->next_rev = sc.stopped_at ? sc.stopped_at : tx.rev + 1;
  int ret = 0;
  if (json_object_array_length(sc.events)) {
    json_object *r = result_new(w, tx.rev);
    if (r)
      json_object_object_add(r, "events", sc.events);
    else
      json_object_put(sc.events);
    ret = watch_out_emit(&w->out, r) < 0 ? -1 : 1;
  } else
    json_object_put(sc.events);
  kvs_read_end(&tx);
  return ret;
}


ssize_t
watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
  struct watch_stream *w = cls;
  (void) pos;
  while (watch_out_empty(&w->out)) {
    if (w->ending || *w->stopping)
      return MHD_CONTENT_READER_END_OF_STREAM;
    int rc = poll_events(w);
    if (rc < 0)
      return MHD_CONTENT_READER_END_WITH_ERROR;
    if (rc > 0)
      break;
    if (watch_peer_gone(w->fd))
      return MHD_CONTENT_READER_END_WITH_ERROR;
    bool progress = w->req.progress_notify && w->progress_ms > 0;
    if (progress && (int64_t) tc_now_ms() - w->out.sent_ms >= w->progress_ms) {
      /* Nothing new: tell the client how far the watch has got. */
      if (watch_out_emit(&w->out, result_new(w, w->next_rev - 1)) < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
      break;
    }
    /* Nothing to send: give the worker thread back until the store moves,
     * the client hangs up or the progress reply is due. */
    w->pe.rev = w->next_rev;
    w->pe.wake_ms = progress ? w->out.sent_ms + w->progress_ms : 0;
    if (!watch_park_suspend(w->park, &w->pe))
      return MHD_CONTENT_READER_END_OF_STREAM;
    return 0;
  }
  return (ssize_t) watch_out_take(&w->out, buf, max);
}
