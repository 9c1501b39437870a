/* The KV client's watches: a stream per watch on the loop, events decoded
 * and delivered in order, reconnection from the last delivered revision. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cleanup.h"
#include "error.h"
#include "kv_int.h"
#include "log.h"

static void
watch_deliver(struct tc_kv_watch *w, json_object *result)
{
  json_object *evs;
  if (!json_object_object_get_ex(result, "events", &evs) || !json_object_is_type(evs, json_type_array))
    return;
  size_t n = json_object_array_length(evs), k = 0;
  if (!n)
    return;
  struct tc_kv_event *out = calloc(n, sizeof *out);
  if (!out) {
    /* Cannot deliver: reconnect and get them again. */
    w->reconnect_now = true;
    return;
  }
  int64_t last = w->last_rev;
  for (size_t i = 0; i < n; i++) {
    json_object *e = json_object_array_get_idx(evs, i), *kvo, *t;
    struct tc_kv_kv kv;
    if (!json_object_object_get_ex(e, "kv", &kvo) || tc_kv_decode_kv(kvo, &kv) < 0)
      continue;
    /* A resumed stream never repeats what was delivered; be sure anyway. */
    if (w->have_last && kv.mod_revision <= w->last_rev) {
      tc_kv_kv_free(&kv);
      continue;
    }
    json_object *pko;
    if (w->prev_kv && json_object_object_get_ex(e, "prev_kv", &pko) && tc_kv_decode_kv(pko, &out[k].prev_kv) < 0)
      memset(&out[k].prev_kv, 0, sizeof out[k].prev_kv);
    out[k].type = json_object_object_get_ex(e, "type", &t) &&
                  !strcmp(json_object_get_string(t), "DELETE") ? TC_KV_EVENT_DELETE : TC_KV_EVENT_PUT;
    out[k++].kv = kv;
    if (kv.mod_revision > last)
      last = kv.mod_revision;
  }
  if (k) {
    w->last_rev = last;
    w->have_last = true;
    struct tc_kv_watch_update u = { .events = out, .n_events = k, .revision = last };
    w->cb(w->arg, &u);
  }
  for (size_t i = 0; i < k; i++) {
    tc_kv_kv_free(&out[i].kv);
    tc_kv_kv_free(&out[i].prev_kv);
  }
  free(out);
}

/* One message of the stream; false: drop the stream. */
static bool
watch_message(struct tc_kv_watch *w, json_object *msg)
{
  json_object *result, *v;
  if (json_object_object_get_ex(msg, "error", &v)) {
    char text[512];
    tc_kv_error_errno(msg, 200, text, sizeof text);
    tc_warn("kv: watch on %s: %s", w->kv->urls[w->ep], text);
    return false;
  }
  if (!json_object_object_get_ex(msg, "result", &result))
    result = msg;
  int64_t hdr_rev = tc_json_i64(json_object_object_get_ex(result, "header", &v) ? v : NULL, "revision");
  int64_t compact = tc_json_i64(result, "compact_revision");
  if (compact > 0) {
    tc_warn("kv: watch of %s: revisions before %" PRId64 " were compacted; resuming there", w->key, compact);
    w->last_rev = compact - 1;
    w->have_last = true;
    struct tc_kv_watch_update u = { .revision = compact - 1, .compact_revision = compact };
    w->cb(w->arg, &u);
    w->reconnect_now = true;
    return false;
  }
  if (json_object_object_get_ex(result, "created", &v) && json_object_get_boolean(v)) {
    w->backoff_ms = 100;
    if (!w->have_last && w->start_rev == 0) {
      /* "From now": events after the revision the watch was created at. */
      w->last_rev = hdr_rev;
      w->have_last = true;
    }
  }
  watch_deliver(w, result);
  if (json_object_object_get_ex(result, "canceled", &v) && json_object_get_boolean(v)) {
    tc_warn("kv: watch of %s canceled by the server; reconnecting", w->key);
    return false;
  }
  if (w->cancel)
    return false;
  return true;
}

static struct tc_kv_watch *watch_new(struct tc_kv *kv, const void *key, size_t key_len, bool prefix,
                                     const void *range_end, size_t end_len, int64_t start_revision, bool prev_kv,
                                     tc_kv_watch_fn cb, void *arg);

size_t
kv_watch_write(char *data, size_t size, size_t nmemb, void *userdata)
{
  struct tc_kv_watch *w = userdata;
  size_t n = size * nmemb, off = 0;
  while (off < n) {
    json_object *o = json_tokener_parse_ex(w->tok, data + off, (int) (n - off));
    enum json_tokener_error jerr = json_tokener_get_error(w->tok);
    if (jerr == json_tokener_continue)
      return n;
    if (!o || jerr != json_tokener_success) {
      tc_warn("kv: watch stream from %s: bad JSON: %s", w->kv->urls[w->ep], json_tokener_error_desc(jerr));
      json_object_put(o);
      return 0;
    }
    off += json_tokener_get_parse_end(w->tok);
    json_tokener_reset(w->tok);
    bool keep = watch_message(w, o);
    json_object_put(o);
    if (!keep)
      return 0;
    while (off < n && (data[off] == '\n' || data[off] == '\r' || data[off] == ' '))
      off++;
  }
  return n;
}

int
kv_watch_connect(struct tc_kv_watch *w)
{
  struct tc_kv *kv = w->kv;
  struct xfer *x = calloc(1, sizeof *x);
  if (!x)
    return tc_error(ENOMEM, "kv: out of memory");
  int64_t from = w->have_last ? w->last_rev + 1 : w->start_rev;
  x->kind = X_WATCH;
  x->kv = kv;
  x->w = w;
  x->ep = w->ep;
  x->path = "/v3/watch";
  x->body = tc_kv_encode_watch_range(w->key, w->key_len, w->prefix, w->range_end, w->end_len, from, w->prev_kv);
  x->hdrs = kv_http_headers();
  if (!x->body || !x->hdrs) {
    kv_xfer_free(x);
    return tc_error(ENOMEM, "kv: out of memory");
  }
  json_tokener_reset(w->tok);
  if (kv_xfer_start(kv, x) < 0) {
    kv_xfer_free(x);
    return -1;
  }
  w->x = x;
  w->connects++;
  tc_debug("kv: watch of %s from revision %" PRId64 " on %s", w->key, from, kv->urls[w->ep]);
  return 0;
}

struct tc_kv_watch *
tc_kv_watch(struct tc_kv *kv, const void *key, size_t key_len, bool prefix, int64_t start_revision,
            tc_kv_watch_fn cb, void *arg)
{
  return watch_new(kv, key, key_len, prefix, NULL, 0, start_revision, false, cb, arg);
}

struct tc_kv_watch *
tc_kv_watch_range(struct tc_kv *kv, const void *key, size_t key_len, const void *range_end, size_t end_len,
                  int64_t start_revision, bool prev_kv, tc_kv_watch_fn cb, void *arg)
{
  return watch_new(kv, key, key_len, false, range_end, end_len, start_revision, prev_kv, cb, arg);
}

static struct tc_kv_watch *
watch_new(struct tc_kv *kv, const void *key, size_t key_len, bool prefix, const void *range_end, size_t end_len,
          int64_t start_revision, bool prev_kv, tc_kv_watch_fn cb, void *arg)
{
  key_len = tc_kv_len(key, key_len);
  if (!key || !key_len) {
    tc_error(EINVAL, "kv: watch of an empty key");
    return NULL;
  }
  /* "From now" means from this call: learn the revision first, unless on
   * the loop thread, which must not block (then: from when it connects). */
  if (start_revision == 0 && kv_tl_loop != kv) {
    struct tc_kv_result r;
    struct tc_kv_request req = { .type = TC_KV_REQ_OP,
                                 .op = { .type = TC_KV_RANGE, .key = key, .key_len = key_len, .count_only = true } };
    if (tc_kv_request(kv, &req, &r) == 0) {
      start_revision = r.revision + 1;
      tc_kv_result_free(&r);
    }
  }
  if (range_end)
    end_len = tc_kv_len(range_end, end_len);
  struct tc_kv_watch *w = calloc(1, sizeof *w);
  if (!w || !(w->key = malloc(key_len + 1)) || (range_end && !(w->range_end = malloc(end_len + 1))) ||
      !(w->tok = json_tokener_new_ex(64))) {
    if (w) {
      free(w->key);
      free(w->range_end);
    }
    free(w);
    tc_error(ENOMEM, "kv: out of memory");
    return NULL;
  }
  memcpy(w->key, key, key_len);
  w->key[key_len] = 0;
  w->key_len = key_len;
  if (range_end) {
    memcpy(w->range_end, range_end, end_len);
    w->range_end[end_len] = 0;
    w->end_len = end_len;
  }
  w->prev_kv = prev_kv;
  w->kv = kv;
  w->prefix = prefix;
  w->start_rev = start_revision;
  w->cb = cb;
  w->arg = arg;
  w->backoff_ms = 100;
  {
    SCOPED_LOCK(&kv->lock);
    w->ep = kv->cur;
    w->next = kv->watches;
    kv->watches = w;
  }
  if (kv_loop_kick(kv) < 0) {
    SCOPED_LOCK(&kv->lock);
    kv->watches = w->next;
    json_tokener_free(w->tok);
    free(w->key);
    free(w->range_end);
    free(w);
    return NULL;
  }
  return w;
}

int
tc_kv_watch_connects(struct tc_kv_watch *w)
{
  SCOPED_LOCK(&w->kv->lock);
  return w->connects;
}

void
tc_kv_watch_cancel(struct tc_kv_watch *w)
{
  if (!w)
    return;
  struct tc_kv *kv = w->kv;
  if (kv_tl_loop == kv) {
    /* On the loop thread (e.g. in the callback): the loop frees it. */
    SCOPED_LOCK(&kv->lock);
    w->cancel = true;
    w->free_on_reap = true;
    return;
  }
  {
    SCOPED_LOCK(&kv->lock);
    w->cancel = true;
  }
  kv_loop_kick(kv);
  {
    SCOPED_LOCK(&kv->lock);
    while (!w->dead)
      pthread_cond_wait(&kv->cond, &kv->lock);
  }
  json_tokener_free(w->tok);
  free(w->key);
  free(w->range_end);
  free(w);
}

