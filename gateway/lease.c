/* Leases (see lease.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include "lease.h"
#include "kvfilter.h"
#include "error.h"
#include "log.h"
#include "vector.h"

#define MIN_TTL 2              /* etcd's minimum with default election settings */
#define MAX_TTL 9000000000LL   /* etcd's MaxLeaseTTL */

struct lease {
  int64_t id, ttl;
  int64_t deadline_ms;   /* monotonic */
  bool revoking;
  /* use_perms: who granted it ("osd:CN", "user:alice"); only they keep it
   * alive or revoke it. Kept in memory: a lease loaded from the store at
   * start has none until its first keepalive claims it (logged). */
  char owner[TC_CN_MAX + 8];
};

struct leases {
  struct kvs *s;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct lease *v;
  size_t n, cap;
  bool stop;
  pthread_t thread;
  bool started;
};

static int64_t
now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Under l->mu. */
static struct lease *
find(struct leases *l, int64_t id)
{
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i].id == id)
      return &l->v[i];
  return NULL;
}

static int
add(struct leases *l, int64_t id, int64_t ttl)
{
  if (tc_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v, 16) < 0)
    return -1;
  l->v[l->n++] = (struct lease) { id, ttl, now_ms() + ttl * 1000, false, "" };
  return 0;
}

static void
drop(struct leases *l, int64_t id)
{
  struct lease *e = find(l, id);
  if (e)
    *e = l->v[--l->n];
}

struct revoke_job {
  struct leases *l;
  int64_t id, rev;
};

static int
revoke_fn(struct kvs_txn *tx, void *arg, struct kv_err *err)
{
  struct revoke_job *j = arg;
  int ex = kvs_lease_exists(tx, j->id);
  if (ex < 0)
    return kv_err_set(err, KV_INTERNAL, "store: lease lookup failed");
  if (!ex)
    return kv_err_set(err, KV_NOT_FOUND, "etcdserver: requested lease not found");
  if (kvs_lease_delete(tx, j->id, err) < 0)
    return -1;
  j->rev = tx->rev;
  return 0;
}

static void
revoke_post(void *arg)
{
  struct revoke_job *j = arg;
  pthread_mutex_lock(&j->l->mu);
  drop(j->l, j->id);
  pthread_mutex_unlock(&j->l->mu);
}

static void *
expiry_thread(void *arg)
{
  struct leases *l = arg;
  pthread_mutex_lock(&l->mu);
  while (!l->stop) {
    int64_t now = now_ms(), id = 0;
    for (size_t i = 0; i < l->n; i++)
      if (!l->v[i].revoking && l->v[i].deadline_ms <= now) {
        l->v[i].revoking = true;
        id = l->v[i].id;
        break;
      }
    if (id) {
      pthread_mutex_unlock(&l->mu);
      struct revoke_job j = { l, id, 0 };
      struct kv_err err;
      if (kvs_write(l->s, revoke_fn, revoke_post, &j, &err) < 0 && err.code != KV_NOT_FOUND) {
        tc_warn("lease %" PRId64 ": expiry failed: %s", id, err.msg);
        pthread_mutex_lock(&l->mu);
        struct lease *e = find(l, id);
        if (e)
          e->revoking = false;
        pthread_mutex_unlock(&l->mu);
      } else
        tc_debug("lease %" PRId64 " expired", id);
      pthread_mutex_lock(&l->mu);
      continue;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100 * 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&l->cv, &l->mu, &ts);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static void
load_one(void *opaque, int64_t id, int64_t ttl)
{
  struct leases *l = opaque;
  if (add(l, id, ttl) < 0)
    tc_err("lease %" PRId64 ": out of memory", id);
}

struct leases *
leases_start(struct kvs *s)
{
  struct leases *l = calloc(1, sizeof *l);
  if (!l) {
    tc_error(ENOMEM, "leases: out of memory");
    return NULL;
  }
  l->s = s;
  pthread_mutex_init(&l->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&l->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (kvs_lease_list(s, load_one, l) < 0) {
    leases_stop(l);
    return NULL;
  }
  int rc = pthread_create(&l->thread, NULL, expiry_thread, l);
  if (rc) {
    leases_stop(l);
    tc_error(rc, "leases: cannot start the expiry thread: %s", strerror(rc));
    return NULL;
  }
  l->started = true;
  return l;
}

void
leases_stop(struct leases *l)
{
  if (!l)
    return;
  if (l->started) {
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
  }
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  free(l->v);
  free(l);
}

struct grant_job {
  struct leases *l;
  int64_t id, ttl;
  bool oom;
  char owner[TC_CN_MAX + 8];
};

/* The owner tag of a caller under use_perms, or false when unfiltered. */
bool
lease_owner_tag(const struct caller *who, char *buf, size_t len)
{
  if (!who || !who->gid || !who->filter || !who->filter->use_perms)
    return false;
  const struct gw_identity *g = who->gid;
  static const char *const roles[] = { "anyone", "osd", "mon", "user" };
  snprintf(buf, len, "%s:%s", roles[g->id.role & 3], g->cn);
  return true;
}

/* May who act on lease id? 0, or -1 with err (PERMISSION_DENIED). An
 * unknown lease is left to the operation (not found). */
static int
check_owner(struct leases *l, const struct caller *who, int64_t id, const char *what, struct kv_err *err)
{
  char me[TC_CN_MAX + 8];
  if (!lease_owner_tag(who, me, sizeof me))
    return 0;
  int rc = 0;
  pthread_mutex_lock(&l->mu);
  struct lease *e = find(l, id);
  if (e && !e->owner[0]) {
    snprintf(e->owner, sizeof e->owner, "%s", me);
    tc_info("lease %" PRId64 " (granted before this gateway started) claimed by %s", id, who->gid->desc);
  } else if (e && strcmp(e->owner, me) != 0) {
    kv_err_set(err, KV_PERMISSION_DENIED, "etcdserver: permission denied: %s may not %s lease %" PRId64
               ": it was granted to someone else", who->gid->desc, what, id);
    rc = -1;
  }
  pthread_mutex_unlock(&l->mu);
  if (rc < 0)
    tc_warn("access filter: %s", err->msg);
  return rc;
}

static int
grant_fn(struct kvs_txn *tx, void *arg, struct kv_err *err)
{
  struct grant_job *j = arg;
  int ex = kvs_lease_exists(tx, j->id);
  if (ex < 0)
    return kv_err_set(err, KV_INTERNAL, "store: lease lookup failed");
  if (ex)
    return kv_err_set(err, KV_FAILED_PRECONDITION, "etcdserver: lease already exists");
  return kvs_lease_put(tx, j->id, j->ttl, err);
}

static void
grant_post(void *arg)
{
  struct grant_job *j = arg;
  pthread_mutex_lock(&j->l->mu);
  if (add(j->l, j->id, j->ttl) < 0)
    j->oom = true;
  else
    snprintf(j->l->v[j->l->n - 1].owner, sizeof j->l->v[0].owner, "%s", j->owner);
  pthread_mutex_unlock(&j->l->mu);
}

json_object *
lease_grant(struct leases *l, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err)
{
  struct grant_job j = { l, r->id, r->ttl < MIN_TTL ? MIN_TTL : r->ttl, false, "" };
  lease_owner_tag(who, j.owner, sizeof j.owner);
  if (r->ttl > MAX_TTL) {
    kv_err_set(err, KV_OUT_OF_RANGE, "etcdserver: too large lease TTL");
    return NULL;
  }
  if (j.id < 0) {
    kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: lease ID must be positive");
    return NULL;
  }
  while (j.id == 0) {
    uint64_t x;
    if (getrandom(&x, sizeof x, 0) != sizeof x) {
      kv_err_set(err, KV_INTERNAL, "lease grant: getrandom failed");
      return NULL;
    }
    j.id = (int64_t) (x >> 1);
  }
  if (kvs_write(l->s, grant_fn, grant_post, &j, err) < 0)
    return NULL;
  if (j.oom) {
    kv_err_set(err, KV_INTERNAL, "lease grant: out of memory");
    return NULL;
  }
  json_object *o = json_object_new_object();
  json_object_object_add(o, "header", kvx_header(l->s, kvs_revision(l->s)));
  json_object_object_add(o, "ID", kvx_int64(j.id));
  json_object_object_add(o, "TTL", kvx_int64(j.ttl));
  return o;
}

json_object *
lease_revoke(struct leases *l, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err)
{
  if (check_owner(l, who, r->id, "revoke", err) < 0)
    return NULL;
  struct revoke_job j = { l, r->id, 0 };
  if (kvs_write(l->s, revoke_fn, revoke_post, &j, err) < 0)
    return NULL;
  json_object *o = json_object_new_object();
  json_object_object_add(o, "header", kvx_header(l->s, j.rev));
  return o;
}

json_object *
lease_keepalive(struct leases *l, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err)
{
  if (check_owner(l, who, r->id, "keep alive", err) < 0)
    return NULL;
  int64_t ttl = 0;
  pthread_mutex_lock(&l->mu);
  struct lease *e = find(l, r->id);
  if (e && !e->revoking) {
    e->deadline_ms = now_ms() + e->ttl * 1000;
    ttl = e->ttl;
  }
  pthread_mutex_unlock(&l->mu);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "header", kvx_header(l->s, kvs_revision(l->s)));
  json_object_object_add(o, "ID", kvx_int64(r->id));
  if (ttl)
    json_object_object_add(o, "TTL", kvx_int64(ttl));
  return o;
}

static int
key_cb(void *opaque, const struct kv_rec *r)
{
  size_t len;
  char *s = kv_b64_encode(r->key, r->klen, &len);
  if (!s)
    return 1;
  json_object_array_add(opaque, json_object_new_string_len(s, (int) len));
  free(s);
  return 0;
}

json_object *
lease_timetolive(struct leases *l, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err)
{
  if (check_owner(l, who, r->id, "read", err) < 0)
    return NULL;
  int64_t left = -1, granted = 0;
  pthread_mutex_lock(&l->mu);
  struct lease *e = find(l, r->id);
  if (e) {
    left = (e->deadline_ms - now_ms()) / 1000;
    if (left < 0)
      left = 0;
    granted = e->ttl;
  }
  pthread_mutex_unlock(&l->mu);
  struct kvs_txn tx;
  if (kvs_read_begin(l->s, &tx, err) < 0)
    return NULL;
  json_object *o = json_object_new_object();
  json_object_object_add(o, "header", kvx_header(l->s, tx.rev));
  json_object_object_add(o, "ID", kvx_int64(r->id));
  json_object_object_add(o, "TTL", kvx_int64(left));
  if (granted)
    json_object_object_add(o, "grantedTTL", kvx_int64(granted));
  if (r->keys && granted) {
    json_object *keys = json_object_new_array();
    if (kvs_lease_keys(&tx, r->id, key_cb, keys, err) < 0) {
      json_object_put(keys);
      json_object_put(o);
      kvs_read_end(&tx);
      return NULL;
    }
    if (json_object_array_length(keys))
      json_object_object_add(o, "keys", keys);
    else
      json_object_put(keys);
  }
  kvs_read_end(&tx);
  return o;
}

json_object *
lease_list(struct leases *l, const struct caller *who, struct kv_err *err)
{
  (void) err;
  char me[TC_CN_MAX + 8];
  bool filtered = lease_owner_tag(who, me, sizeof me) && !tc_perm_is_admin(&who->gid->id);
  json_object *arr = json_object_new_array();
  pthread_mutex_lock(&l->mu);
  for (size_t i = 0; i < l->n; i++) {
    if (filtered && strcmp(l->v[i].owner, me) != 0)
      continue;
    json_object *e = json_object_new_object();
    json_object_object_add(e, "ID", kvx_int64(l->v[i].id));
    json_object_array_add(arr, e);
  }
  pthread_mutex_unlock(&l->mu);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "header", kvx_header(l->s, kvs_revision(l->s)));
  if (json_object_array_length(arr))
    json_object_object_add(o, "leases", arr);
  else
    json_object_put(arr);
  return o;
}
