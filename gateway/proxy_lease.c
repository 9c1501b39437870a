/* Leases through the proxy: granted, renewed and revoked on etcd, each
 * one's owner recorded in etcd beside it (see proxy.h). */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "proxy.h"
#include "lease.h"
#include "gw_identity.h"
#include "kv_json.h"
#include "log.h"

static int
owner_key(struct kvproxy *px, int64_t id, char *buf, size_t n)
{
  int k = snprintf(buf, n, "%s/gateway/lease/%" PRId64, kvproxy_prefix(px), id);
  return k < 0 || (size_t) k >= n ? -1 : k;
}

static json_object *
key_query(const char *key, size_t klen)
{
  json_object *q = json_object_new_object();
  if (q)
    json_object_object_add(q, "key", proxy_b64((const uint8_t *) key, klen));
  return q;
}

/* The owner recorded for lease id: 1 with owner set, 0 none, -1 err. */
static int
read_owner(struct kvproxy *px, int64_t id, char *owner, size_t n, struct kv_err *err)
{
  char key[256];
  int klen = owner_key(px, id, key, sizeof key);
  if (klen < 0)
    return kv_err_set(err, KV_INTERNAL, "etcd_prefix too long");
  json_object *r = kvproxy_forward(px, "/v3/kv/range", key_query(key, (size_t) klen), true, err), *kvs, *v;
  if (!r)
    return -1;
  int found = 0;
  if (json_object_object_get_ex(r, "kvs", &kvs) && json_object_array_length(kvs) > 0 &&
      json_object_object_get_ex(json_object_array_get_idx(kvs, 0), "value", &v)) {
    struct kv_bytes b;
    if (kv_b64_decode(json_object_get_string(v), (size_t) json_object_get_string_len(v), &b) == 0) {
      snprintf(owner, n, "%.*s", (int) b.n, b.p ? (const char *) b.p : "");
      free(b.p);
      found = 1;
    }
  }
  json_object_put(r);
  return found;
}

/* May who act on lease id? 0, or -1 with err. */
static int
check_owner(struct kvproxy *px, const struct caller *who, int64_t id, const char *what, struct kv_err *err)
{
  char me[TC_CN_MAX + 8], owner[TC_CN_MAX + 8];
  if (!lease_owner_tag(who, me, sizeof me))
    return 0;
  int rc = read_owner(px, id, owner, sizeof owner, err);
  if (rc < 0)
    return -1;
  if (rc == 0) {
    kv_err_set(err, KV_NOT_FOUND, "etcdserver: requested lease not found (no lease %" PRId64 " was granted "
               "through the gateway)", id);
    return -1;
  }
  if (strcmp(owner, me) != 0) {
    kv_err_set(err, KV_PERMISSION_DENIED, "etcdserver: permission denied: %s may not %s lease %" PRId64
               ": it was granted to someone else", who->gid->desc, what, id);
    tc_warn("access filter: %s", err->msg);
    return -1;
  }
  return 0;
}

static json_object *
id_query(int64_t id)
{
  json_object *q = json_object_new_object();
  if (q)
    json_object_object_add(q, "ID", kvx_int64(id));
  return q;
}

json_object *
kvproxy_lease_grant(struct kvproxy *px, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err)
{
  char me[TC_CN_MAX + 8];
  bool owned = lease_owner_tag(who, me, sizeof me);
  int64_t id = r->id;
  if (owned && !id) {
    /* etcd's IDs follow a counter: an unguessable one instead. */
    uint64_t x;
    if (getrandom(&x, sizeof x, 0) != sizeof x)
      return kv_err_set(err, KV_INTERNAL, "lease grant: getrandom failed"), NULL;
    id = (int64_t) (x >> 1) | 1;
  }
  json_object *q = json_object_new_object();
  if (q) {
    json_object_object_add(q, "TTL", kvx_int64(r->ttl));
    if (id)
      json_object_object_add(q, "ID", kvx_int64(id));
  }
  json_object *g = kvproxy_forward(px, "/v3/lease/grant", q, !id, err);
  if (!g || !owned)
    return g;
  id = tc_json_i64(g, "ID");
  char key[256];
  int klen = owner_key(px, id, key, sizeof key);
  json_object *put = klen > 0 ? key_query(key, (size_t) klen) : NULL;
  if (put) {
    json_object_object_add(put, "value", proxy_b64((const uint8_t *) me, strlen(me)));
    json_object_object_add(put, "lease", kvx_int64(id));
  }
  json_object *p = kvproxy_forward(px, "/v3/kv/put", put, true, err);
  if (!p) {
    /* A lease nobody may renew is no use: give it back. */
    struct kv_err e2;
    json_object_put(kvproxy_forward(px, "/v3/lease/revoke", id_query(id), true, &e2));
    json_object_put(g);
    return NULL;
  }
  json_object_put(p);
  return g;
}

json_object *
kvproxy_lease_revoke(struct kvproxy *px, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err)
{
  if (check_owner(px, who, r->id, "revoke", err) < 0)
    return NULL;
  return kvproxy_forward(px, "/v3/lease/revoke", id_query(r->id), true, err);
}

json_object *
kvproxy_lease_keepalive(struct kvproxy *px, const struct caller *who, const struct kv_lease_req *r,
                        struct kv_err *err)
{
  if (check_owner(px, who, r->id, "keep alive", err) < 0)
    return NULL;
  json_object *k = kvproxy_forward(px, "/v3/lease/keepalive", id_query(r->id), true, err), *res;
  if (!k)
    return NULL;
  json_object *out = json_object_object_get_ex(k, "result", &res) ? json_object_get(res) : json_object_get(k);
  json_object_put(k);
  return out;
}

json_object *
kvproxy_lease_timetolive(struct kvproxy *px, const struct caller *who, const struct kv_lease_req *r,
                         struct kv_err *err)
{
  if (check_owner(px, who, r->id, "read", err) < 0)
    return NULL;
  json_object *q = id_query(r->id);
  if (q && r->keys)
    json_object_object_add(q, "keys", json_object_new_boolean(1));
  return kvproxy_forward(px, "/v3/lease/timetolive", q, true, err);
}

json_object *
kvproxy_lease_list(struct kvproxy *px, const struct caller *who, struct kv_err *err)
{
  char me[TC_CN_MAX + 8];
  bool filtered = lease_owner_tag(who, me, sizeof me) && !tc_perm_is_admin(&who->gid->id);
  json_object *l = kvproxy_forward(px, "/v3/lease/leases", json_object_new_object(), true, err);
  if (!l || !filtered)
    return l;
  /* One's own: the owner records under <prefix>/gateway/lease/. */
  char key[256], end[256];
  int klen = snprintf(key, sizeof key, "%s/gateway/lease/", kvproxy_prefix(px));
  snprintf(end, sizeof end, "%s/gateway/lease0", kvproxy_prefix(px));
  json_object *q = key_query(key, (size_t) klen);
  if (q)
    json_object_object_add(q, "range_end", proxy_b64((const uint8_t *) end, strlen(end)));
  json_object *own = kvproxy_forward(px, "/v3/kv/range", q, true, err), *kvs;
  if (!own) {
    json_object_put(l);
    return NULL;
  }
  json_object *mine = json_object_new_array();
  if (mine && json_object_object_get_ex(own, "kvs", &kvs))
    for (size_t i = 0; i < json_object_array_length(kvs); i++) {
      json_object *kv = json_object_array_get_idx(kvs, i), *v;
      struct kv_bytes b = { 0 }, k = { 0 };
      bool ok = json_object_object_get_ex(kv, "value", &v) &&
                kv_b64_decode(json_object_get_string(v), (size_t) json_object_get_string_len(v), &b) == 0 &&
                b.n == strlen(me) && !memcmp(b.p, me, b.n) && json_object_object_get_ex(kv, "key", &v) &&
                kv_b64_decode(json_object_get_string(v), (size_t) json_object_get_string_len(v), &k) == 0 &&
                k.n > (size_t) klen;
      if (ok) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "ID", json_object_new_string_len((const char *) k.p + klen, (int) (k.n - klen)));
        json_object_array_add(mine, e);
      }
      free(b.p);
      free(k.p);
    }
  json_object_put(own);
  json_object_object_del(l, "leases");
  if (mine && json_object_array_length(mine))
    json_object_object_add(l, "leases", mine);
  else
    json_object_put(mine);
  return l;
}
