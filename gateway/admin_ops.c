/* The admin API's calls: rights first (tc_perm_api for the caller), then
 * the work through image_admin.c, the KV or the cluster map. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "admin_ops.h"
#include "cluster.h"
#include "cluster_map.h"
#include "error.h"
#include "image_admin.h"
#include "kv_client.h"
#include "log.h"

int
admin_status_of_errno(int err)
{
  switch (err) {
  case ENOENT: return 404;
  case EEXIST: case EBUSY: return 409;
  case EACCES: case EPERM: case EROFS: return 403;
  case EINVAL: case ENAMETOOLONG: case ERANGE: return 400;
  case ENOSPC: return 507;
  case EAGAIN: case ETIMEDOUT: case ECONNREFUSED: case EHOSTUNREACH: return 503;
  default: return 500;
  }
}

/* The failed library call's message as the call's error. */
static json_object *
lib_fail(const struct admin_req *r, struct admin_err *e)
{
  int err = errno;
  admin_err_set(e, admin_status_of_errno(err), "%s: %s", r->call_name, tc_last_error());
  return NULL;
}

void
admin_caller_anonymous(struct admin_caller *c)
{
  memset(c, 0, sizeof *c);
  c->id.role = TC_ROLE_ANON;
}

void
admin_caller_free(struct admin_caller *c)
{
  if (c->groups)
    for (char **g = c->groups; *g; g++)
      free(*g);
  free(c->groups);
  free(c->name);
  memset(c, 0, sizeof *c);
}

int
admin_caller_load(struct tc_client *cl, const char *cn, struct admin_caller *c, struct admin_err *e)
{
  memset(c, 0, sizeof *c);
  if (!(c->name = strdup(cn))) {
    admin_err_set(e, 500, "user %s: out of memory", cn);
    return -1;
  }
  c->id.role = TC_ROLE_USER;
  c->id.name = c->name;
  c->user.name = c->name;
  c->id.user = &c->user;
  char key[512];
  struct tc_kv_result res;
  if (tc_kv_get(tc_client_kv(cl), tc_client_key(cl, key, sizeof key, "/config/user/%s", cn), 0, &res) < 0) {
    admin_err_set(e, 503, "user %s: cannot read its record %s: %s", cn, key, tc_last_error());
    admin_caller_free(c);
    return -1;
  }
  if (res.n_kvs) {
    json_object *o = json_tokener_parse((const char *) res.kvs[0].value), *f;
    if (o && json_object_is_type(o, json_type_object)) {
      if (json_object_object_get_ex(o, "type", &f) && json_object_is_type(f, json_type_string))
        c->user.admin = strcmp(json_object_get_string(f), "admin") == 0;
      if (json_object_object_get_ex(o, "groups", &f) && json_object_is_type(f, json_type_array)) {
        size_t n = json_object_array_length(f), k = 0;
        if (!(c->groups = calloc(n + 1, sizeof *c->groups))) {
          json_object_put(o);
          tc_kv_result_free(&res);
          admin_err_set(e, 500, "user %s: out of memory", cn);
          admin_caller_free(c);
          return -1;
        }
        for (size_t i = 0; i < n; i++) {
          json_object *g = json_object_array_get_idx(f, i);
          if (json_object_is_type(g, json_type_string) && (c->groups[k] = strdup(json_object_get_string(g))))
            k++;
        }
        c->user.groups = (const char *const *) c->groups;
      }
    }
    else
      tc_warn("user record %s is not a JSON object: %s is a client in no group", key, cn);
    json_object_put(o);
  }
  tc_kv_result_free(&res);
  return 0;
}

static struct tc_image_acl
acl_of(const struct tc_image_meta *m)
{
  struct tc_image_acl a = { m->owner, m->owner_group, m->reader_group };
  return a;
}

static json_object *
denied(const struct admin_req *r, const struct tc_identity *who, const char *what, struct admin_err *e)
{
  char idbuf[160];
  tc_identity_str(who, idbuf, sizeof idbuf);
  admin_err_set(e, 403, "%s: permission denied for %s: %s", r->call_name, idbuf, what);
  tc_warn("admin API: %s", e->msg);
  return NULL;
}

static json_object *
ok_reply(void)
{
  json_object *o = json_object_new_object();
  json_object_object_add(o, "ok", json_object_new_boolean(1));
  return o;
}

static json_object *
image_json(const struct tc_image_meta *m, bool writable)
{
  json_object *o = json_object_new_object();
  json_object_object_add(o, "name", json_object_new_string(m->name ? m->name : ""));
  json_object_object_add(o, "pool", json_object_new_int64((int64_t) m->pool));
  json_object_object_add(o, "id", json_object_new_int64((int64_t) m->id));
  json_object_object_add(o, "size", json_object_new_int64((int64_t) m->size));
  if (m->parent_id) {
    json_object_object_add(o, "parent_pool", json_object_new_int64((int64_t) m->parent_pool));
    json_object_object_add(o, "parent_id", json_object_new_int64((int64_t) m->parent_id));
  }
  json_object_object_add(o, "readonly", json_object_new_boolean(m->readonly));
  /* Never the key itself: only where it lives. */
  json_object_object_add(o, "encryption", json_object_new_string(
    !m->enc_key ? "none" : strncmp(m->enc_key, "vault:", 6) == 0 ? "vault" : "kv"));
  if (m->owner)
    json_object_object_add(o, "owner", json_object_new_string(m->owner));
  if (m->owner_group)
    json_object_object_add(o, "owner_group", json_object_new_string(m->owner_group));
  if (m->reader_group)
    json_object_object_add(o, "reader_group", json_object_new_string(m->reader_group));
  json_object_object_add(o, "writable", json_object_new_boolean(writable));
  return o;
}

static json_object *
image_list(struct tc_client *cl, bool use_perms, const struct tc_identity *who, const struct admin_req *r,
           struct admin_err *e)
{
  struct tc_image_meta *all;
  size_t n;
  if (tc_client_all_images(cl, &all, &n) < 0)
    return lib_fail(r, e);
  json_object *arr = json_object_new_array();
  for (size_t i = 0; i < n; i++) {
    struct tc_image_acl a = acl_of(&all[i]);
    if (!all[i].hidden && (!use_perms || tc_perm_api(who, "image/list", &a, NULL)))   /* hidden: a re-key's old layer */
      json_object_array_add(arr, image_json(&all[i], !use_perms || tc_perm_image_write(who, &a)));
    tc_image_meta_clear(&all[i]);
  }
  free(all);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "images", arr);
  return o;
}

/* The image's record for a rights check: ENOENT (404) also when the caller
 * may not even read it, so that names of others' images do not leak. */
static int
lookup_visible(struct tc_client *cl, bool use_perms, const struct tc_identity *who, const struct admin_req *r,
               const char *name, struct tc_image_meta *m, struct admin_err *e)
{
  memset(m, 0, sizeof *m);
  if (tc_client_lookup(cl, name, m, NULL, NULL) < 0) {
    lib_fail(r, e);
    return -1;
  }
  struct tc_image_acl a = acl_of(m);
  if (use_perms && !tc_perm_image_read(who, &a)) {
    tc_image_meta_clear(m);
    admin_err_set(e, 404, "%s: image %s: no such image", r->call_name, name);
    return -1;
  }
  return 0;
}

/* The pool a new image goes to, as image_admin.c chooses it: by id or
 * name, else the parent's, else the only one. 0 if it cannot say (the
 * create then fails with image_admin's own message). */
static uint64_t
target_pool(struct tc_client *cl, const char *spec, uint64_t parent_pool, char **creator_group)
{
  struct tc_map *m = tc_cluster_map(tc_client_cluster(cl));
  const struct tc_pool_info *p = NULL;
  *creator_group = NULL;
  if (spec) {
    char *end;
    unsigned long long id = strtoull(spec, &end, 10);
    p = *spec && !*end ? tc_map_pool(m, id) : NULL;
    if (!p)
      p = tc_map_pool_by_name(m, spec);
  }
  else if (parent_pool)
    p = tc_map_pool(m, parent_pool);
  else if (m->n_pools == 1)
    p = &m->pools[0];
  uint64_t id = 0;
  if (p) {
    id = p->id;
    if (p->creator_group)
      *creator_group = strdup(p->creator_group);
  }
  tc_map_unref(m);
  return id;
}

static json_object *
image_create(struct tc_client *cl, bool use_perms, const struct tc_identity *who, const struct admin_req *r,
             struct admin_err *e)
{
  bool admin = !use_perms || tc_perm_is_admin(who);
  const char *at = strchr(r->name, '@');
  if (at && !r->size && !r->parent) {
    /* A snapshot: needs write access to the image. */
    if (r->pool || r->enc_key || r->owner || r->owner_group || r->reader_group) {
      admin_err_set(e, 400, "%s: snapshot %s takes no pool, enc_key, owner or groups", r->call_name, r->name);
      return NULL;
    }
    char *base = strndup(r->name, (size_t) (at - r->name));
    if (!base) {
      admin_err_set(e, 500, "%s: out of memory", r->call_name);
      return NULL;
    }
    struct tc_image_meta m;
    int rc = lookup_visible(cl, use_perms, who, r, base, &m, e);
    free(base);
    if (rc < 0)
      return NULL;
    struct tc_image_acl a = acl_of(&m);
    bool may = !use_perms || tc_perm_api(who, "image/create", &a, NULL);
    tc_image_meta_clear(&m);
    if (!may)
      return denied(r, who, "snapshots need write access to the image", e);
    if (tc_admin_snapshot(cl, r->name) < 0)
      return lib_fail(r, e);
    return ok_reply();
  }
  uint64_t parent_pool = 0;
  if (r->parent) {
    /* A clone: the caller must be able to read the snapshot. */
    struct tc_image_meta pm;
    if (lookup_visible(cl, use_perms, who, r, r->parent, &pm, e) < 0)
      return NULL;
    parent_pool = pm.pool;
    tc_image_meta_clear(&pm);
  }
  char *creator_group = NULL;
  uint64_t pool = target_pool(cl, r->pool, parent_pool, &creator_group);
  bool may = !use_perms || !pool || tc_perm_api(who, "image/create", NULL, creator_group);
  free(creator_group);
  if (!may) {
    char what[120];
    snprintf(what, sizeof what, "you may not create images in pool %" PRIu64, pool);
    return denied(r, who, what, e);
  }
  if (!admin && r->owner && (!who->name || strcmp(r->owner, who->name)))
    return denied(r, who, "only an administrator may create an image owned by someone else", e);
  struct tc_admin_create_opts o = {
    .name = r->name, .size = r->size, .pool = r->pool, .enc_key = r->enc_key,
    .owner = r->owner ? r->owner : (who->role == TC_ROLE_USER ? who->name : NULL),
    .owner_group = r->owner_group, .reader_group = r->reader_group, .parent = r->parent,
  };
  if (tc_admin_create(cl, &o) < 0)
    return lib_fail(r, e);
  return ok_reply();
}

/* delete, flatten, modify: the caller needs write access to the image. */
static json_object *
image_change(struct tc_client *cl, bool use_perms, const struct tc_identity *who, const struct admin_req *r,
             struct admin_err *e)
{
  struct tc_image_meta m;
  if (lookup_visible(cl, use_perms, who, r, r->name, &m, e) < 0)
    return NULL;
  struct tc_image_acl a = acl_of(&m);
  bool may = !use_perms || tc_perm_api(who, r->call_name, &a, NULL);
  tc_image_meta_clear(&m);
  if (!may)
    return denied(r, who, "the image is not yours to change", e);
  int rc;
  switch (r->call) {
  case AC_IMAGE_DELETE: rc = tc_admin_delete(cl, r->name); break;
  case AC_IMAGE_FLATTEN: rc = tc_admin_flatten(cl, r->name); break;
  default: {
    if (use_perms && !tc_perm_is_admin(who) && r->owner && (!who->name || strcmp(r->owner, who->name)))
      return denied(r, who, "only an administrator may give an image away", e);
    struct tc_admin_modify_opts o = {
      .resize = r->resize, .rename = r->rename, .readonly = r->readonly,
      .owner = r->owner, .owner_group = r->owner_group, .reader_group = r->reader_group,
    };
    rc = tc_admin_modify(cl, r->name, &o);
    break;
  }
  }
  if (rc < 0)
    return lib_fail(r, e);
  return ok_reply();
}

static json_object *
pool_list(struct tc_client *cl)
{
  struct tc_map *m = tc_cluster_map(tc_client_cluster(cl));
  json_object *arr = json_object_new_array();
  for (size_t i = 0; i < m->n_pools; i++) {
    const struct tc_pool_info *p = &m->pools[i];
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_int64((int64_t) p->id));
    json_object_object_add(o, "name", json_object_new_string(p->name ? p->name : ""));
    json_object_object_add(o, "pg_size", json_object_new_int64(p->pg_size));
    json_object_object_add(o, "pg_minsize", json_object_new_int64(p->pg_minsize));
    json_object_object_add(o, "pg_count", json_object_new_int64(p->pg_count));
    json_object_object_add(o, "block_size", json_object_new_int64(p->block_size));
    if (p->creator_group)
      json_object_object_add(o, "creator_group", json_object_new_string(p->creator_group));
    json_object_array_add(arr, o);
  }
  tc_map_unref(m);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "pools", arr);
  return o;
}

static json_object *
status(struct tc_client *cl, const struct admin_req *r, struct admin_err *e)
{
  if (tc_cluster_refresh(tc_client_cluster(cl)) < 0)
    return lib_fail(r, e);
  struct tc_map *m = tc_cluster_map(tc_client_cluster(cl));
  json_object *osds = json_object_new_array();
  for (size_t i = 0; i < m->n_osds; i++)
    json_object_array_add(osds, json_object_new_int64((int64_t) m->osds[i].id));
  int64_t pgs = 0, active = 0;
  for (size_t i = 0; i < m->n_pools; i++)
    for (uint32_t pg = 0; pg < m->pools[i].pg_count; pg++) {
      const struct tc_pg_info *g = tc_map_pg(m, m->pools[i].id, pg);
      pgs++;
      if (g && g->primary)
        active++;
    }
  json_object *o = json_object_new_object();
  json_object_object_add(o, "osds_up", osds);
  json_object_object_add(o, "pools", json_object_new_int64((int64_t) m->n_pools));
  json_object_object_add(o, "pgs", json_object_new_int64(pgs));
  json_object_object_add(o, "pgs_active", json_object_new_int64(active));
  tc_map_unref(m);
  return o;
}

static bool
user_name_ok(const char *n)
{
  if (!*n || strlen(n) > 128)
    return false;
  for (const char *p = n; *p; p++)
    if (*p == '/' || (unsigned char) *p < 0x20 || *p == 0x7f)
      return false;
  return true;
}

static json_object *
user_call(struct tc_client *cl, const struct admin_req *r, struct admin_err *e)
{
  struct tc_kv *kv = tc_client_kv(cl);
  char key[512];
  struct tc_kv_result res;
  if (r->call == AC_USER_LIST) {
    tc_client_key(cl, key, sizeof key, "/config/user/");
    if (tc_kv_get_prefix(kv, key, 0, &res) < 0)
      return lib_fail(r, e);
    size_t plen = strlen(key);
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < res.n_kvs; i++) {
      json_object *u = json_tokener_parse((const char *) res.kvs[i].value);
      if (!u || !json_object_is_type(u, json_type_object)) {
        json_object_put(u);
        u = json_object_new_object();
      }
      json_object_object_add(u, "name", json_object_new_string((const char *) res.kvs[i].key + plen));
      json_object_array_add(arr, u);
    }
    tc_kv_result_free(&res);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "users", arr);
    return o;
  }
  if (!user_name_ok(r->name)) {
    admin_err_set(e, 400, "%s: user name '%.100s' is empty, too long or has '/' or control characters",
                  r->call_name, r->name);
    return NULL;
  }
  tc_client_key(cl, key, sizeof key, "/config/user/%s", r->name);
  if (r->call == AC_USER_DELETE) {
    if (tc_kv_delete(kv, key, 0, false, &res) < 0)
      return lib_fail(r, e);
    int64_t n = res.deleted;
    tc_kv_result_free(&res);
    if (!n) {
      admin_err_set(e, 404, "%s: user %s: no such user", r->call_name, r->name);
      return NULL;
    }
    return ok_reply();
  }
  json_object *u = json_object_new_object(), *g = json_object_new_array();
  json_object_object_add(u, "type", json_object_new_string(r->type ? r->type : "client"));
  if (r->groups)
    for (char **p = r->groups; *p; p++)
      json_object_array_add(g, json_object_new_string(*p));
  json_object_object_add(u, "groups", g);
  const char *text = json_object_to_json_string_ext(u, JSON_C_TO_STRING_PLAIN);
  int rc = tc_kv_put(kv, key, 0, text, 0, 0, &res);
  json_object_put(u);
  if (rc < 0)
    return lib_fail(r, e);
  tc_kv_result_free(&res);
  return ok_reply();
}

json_object *
admin_exec(struct tc_client *cl, bool use_perms, const struct tc_identity *who, const struct admin_req *r,
           struct admin_err *e)
{
  switch (r->call) {
  case AC_IMAGE_LIST: return image_list(cl, use_perms, who, r, e);
  case AC_IMAGE_CREATE: return image_create(cl, use_perms, who, r, e);
  case AC_IMAGE_DELETE: case AC_IMAGE_FLATTEN: case AC_IMAGE_MODIFY:
    return image_change(cl, use_perms, who, r, e);
  default:
    break;
  }
  if (use_perms && !tc_perm_api(who, r->call_name, NULL, NULL))
    return denied(r, who, "this call is for administrators", e);
  switch (r->call) {
  case AC_POOL_LIST: return pool_list(cl);
  case AC_STATUS: return status(cl, r, e);
  case AC_USER_LIST: case AC_USER_SET: case AC_USER_DELETE: return user_call(cl, r, e);
  default:
    admin_err_set(e, 404, "%s: unknown call", r->call_name ? r->call_name : "?");
    return NULL;
  }
}
