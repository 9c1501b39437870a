/* The KV client (see kv_client.h): construction and teardown. Blocking
 * calls on pooled curl easy handles (kv_call.c); non-blocking calls and
 * watches on one curl multi handle run by a background thread or by the
 * caller's event loop (kv_multi.c, kv_watch.c); kv_int.h has the rest. */
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

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void
curl_init_once(void)
{
  curl_init_rc = curl_global_init(CURL_GLOBAL_ALL);
}


/* ---- construction ---- */

struct tc_kv *
tc_kv_new(const struct tc_kv_options *o)
{
  pthread_once(&curl_once, curl_init_once);
  if (curl_init_rc != CURLE_OK) {
    tc_error(EIO, "kv: curl_global_init: %s", curl_easy_strerror(curl_init_rc));
    return NULL;
  }
  if (o->n_urls < 1) {
    tc_error(EINVAL, "kv: no endpoint (etcd_address is empty)");
    return NULL;
  }
  struct tc_kv *kv = calloc(1, sizeof *kv);
  if (!kv)
    goto nomem;
  pthread_mutex_init(&kv->lock, NULL);
  pthread_cond_init(&kv->cond, NULL);
  pthread_cond_init(&kv->pool_cond, NULL);
  kv->urls = calloc((size_t) o->n_urls, sizeof *kv->urls);
  kv->n_active_ep = calloc((size_t) o->n_urls, sizeof *kv->n_active_ep);
  if (!kv->urls || !kv->n_active_ep)
    goto nomem;
  for (int i = 0; i < o->n_urls; i++) {
    const char *u = o->urls[i];
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)) {
      /* Like etcdctl, a bare host:port means http. */
      if (strstr(u, "://")) {
        tc_error(EINVAL, "kv: endpoint '%s' is neither http:// nor https://", u);
        tc_kv_free(kv);
        return NULL;
      }
      if (asprintf(&kv->urls[i], "http://%s", u) < 0)
        kv->urls[i] = NULL;
    }
    else
      kv->urls[i] = strdup(u);
    if (!kv->urls[i])
      goto nomem;
    size_t l = strlen(kv->urls[i]);
    while (l > 0 && kv->urls[i][l - 1] == '/')
      kv->urls[i][--l] = 0;
    kv->n_urls++;
  }
  if ((o->ca && !(kv->ca = strdup(o->ca))) || (o->cert && !(kv->cert = strdup(o->cert))) ||
      (o->key && !(kv->key = strdup(o->key))) ||
      !(kv->prefix = strdup(o->prefix ? o->prefix : "/tromcho")))
    goto nomem;
  kv->connect_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 1000;
  kv->request_ms = o->request_timeout_ms > 0 ? o->request_timeout_ms : 5000;
  return kv;
nomem:
  tc_kv_free(kv);
  tc_error(ENOMEM, "kv: out of memory");
  return NULL;
}

struct tc_kv *
tc_kv_new_from_config(const struct tc_config *cfg)
{
  int n = tc_config_list_len(cfg, "etcd_address");
  const char *urls[16];
  if (n > 16) {
    tc_error(EINVAL, "kv: etcd_address lists %d endpoints, at most 16 are supported", n);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    urls[i] = tc_config_list_get(cfg, "etcd_address", i);
  struct tc_kv_options o = {
    .urls = urls, .n_urls = n,
    .ca = tc_config_str(cfg, "etcd_ca"),
    .cert = tc_config_str(cfg, "etcd_client_cert"),
    .key = tc_config_str(cfg, "etcd_client_key"),
    .connect_timeout_ms = tc_config_int(cfg, "etcd_quick_timeout"),
    .request_timeout_ms = tc_config_int(cfg, "etcd_slow_timeout"),
    .prefix = tc_config_str(cfg, "etcd_prefix"),
  };
  if (!o.cert) {
    o.cert = tc_config_str(cfg, "cert");
    o.key = tc_config_str(cfg, "pkey");
  }
  if (o.cert && !o.key) {
    tc_error(EINVAL, "kv: a client certificate (%s) without its key (etcd_client_key or pkey)", o.cert);
    return NULL;
  }
  return tc_kv_new(&o);
}

const char *
tc_kv_prefix(const struct tc_kv *kv)
{
  return kv->prefix;
}

const char *
tc_kv_current_url(struct tc_kv *kv)
{
  SCOPED_LOCK(&kv->lock);
  return kv->urls[kv->cur];
}

/* ---- teardown ---- */

void
tc_kv_free(struct tc_kv *kv)
{
  if (!kv)
    return;
  if (kv->loop_ready && !kv->external) {
    {
      SCOPED_LOCK(&kv->lock);
      kv->stop = true;
    }
    curl_multi_wakeup(kv->multi);
    pthread_join(kv->thread, NULL);
  }
  /* Whatever is left: queued and active requests fail, watches go. */
  kv_tl_loop = kv;
  while (kv->watches) {
    kv->watches->free_on_reap = true;
    kv_watch_reap(kv, kv->watches);
  }
  struct xfer *lists[2] = { kv->queue, kv->active };
  kv->queue = kv->queue_tail = kv->active = NULL;
  for (int i = 0; i < 2; i++)
    while (lists[i]) {
      struct xfer *x = lists[i];
      lists[i] = x->next;
      if (i == 1)
        curl_multi_remove_handle(kv->multi, x->easy);
      kv_complete_req(x, ECANCELED, "kv: the client was closed", NULL);
      kv_xfer_free(x);
    }
  kv_tl_loop = NULL;
  if (kv->multi)
    curl_multi_cleanup(kv->multi);
  for (int i = 0; i < kv->n_pool; i++)
    curl_easy_cleanup(kv->pool[i]);
  free(kv->n_active_ep);
  for (int i = 0; i < kv->n_urls; i++)
    free(kv->urls[i]);
  free(kv->urls);
  free(kv->ca);
  free(kv->cert);
  free(kv->key);
  free(kv->prefix);
  pthread_mutex_destroy(&kv->lock);
  pthread_cond_destroy(&kv->cond);
  pthread_cond_destroy(&kv->pool_cond);
  free(kv);
}

