/* Image administration: create, snapshot, clone, flatten, delete, modify
 * (see image_admin.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cluster.h"
#include "error.h"
#include "image_admin.h"
#include "image_admin_int.h"
#include "kv_client.h"
#include "log.h"
#include "perms.h"


int
tc_admin_check_name(const char *name, bool snapshot)
{
  if (!name || !*name)
    return tc_error(EINVAL, "image name is empty");
  if (strlen(name) > 200)
    return tc_error(EINVAL, "image name %.40s...: longer than 200 characters", name);
  for (const char *p = name; *p; p++)
    if (*p == '/' || (unsigned char) *p < 0x20 || *p == 0x7f)
      return tc_error(EINVAL, "image name %s: may not contain '/' or control characters", name);
  const char *at = strchr(name, '@');
  if (snapshot) {
    if (!at || at == name || !at[1] || strchr(at + 1, '@'))
      return tc_error(EINVAL, "%s: a snapshot is named IMAGE@SNAPSHOT", name);
  }
  else if (at)
    return tc_error(EINVAL, "image name %s: '@' separates an image from a snapshot name", name);
  return 0;
}

/* The pool by name or number. */
static int
find_pool(struct tc_client *cl, const char *spec, uint64_t *pool, char **creator_group)
{
  struct tc_map *m = tc_cluster_map(tc_client_cluster(cl));
  const struct tc_pool_info *p = NULL;
  int r = 0;
  if (spec) {
    char *end;
    unsigned long long id = strtoull(spec, &end, 10);
    p = *spec && !*end ? tc_map_pool(m, id) : NULL;
    if (!p)
      p = tc_map_pool_by_name(m, spec);
    if (!p)
      r = tc_error(ENOENT, "pool %s: no such pool", spec);
  }
  else if (m->n_pools == 1)
    p = &m->pools[0];
  else if (m->n_pools == 0)
    r = tc_error(ENOENT, "there is no pool yet (tromcho pool-create)");
  else
    r = tc_error(EINVAL, "there are %zu pools: say which with --pool", m->n_pools);
  if (p) {
    *pool = p->id;
    if (creator_group)
      *creator_group = p->creator_group ? strdup(p->creator_group) : NULL;
  }
  tc_map_unref(m);
  return r;
}

int
tc_admin_make_key(struct tc_client *cl, const char *name, const char *spec, char **out)
{
  *out = NULL;
  if (!spec || !strcmp(spec, "none"))
    return 0;
  if (!strcmp(spec, "auto")) {
    char hex[2 * TC_XTS_KEY_SIZE + 1];
    if (tc_image_key_generate(hex) < 0)
      return -1;
    *out = strdup(hex);
    tc_wipe(hex, sizeof hex);
  }
  else if (!strncmp(spec, "vault:", 6)) {
    if (!spec[6])
      return tc_error(EINVAL, "image %s: --enc_key vault:ID needs an ID", name);
    *out = strdup(spec);
  }
  else {
    uint8_t key[TC_XTS_KEY_SIZE];
    if (tc_image_key_resolve(tc_client_config(cl), name, spec, key) < 0)
      return tc_error(EINVAL, "image %s: --enc_key must be auto, none, 128 hex digits or vault:ID (%s)", name,
                      tc_last_error());
    tc_wipe(key, sizeof key);
    *out = strdup(spec);
  }
  if (!*out)
    return tc_error(ENOMEM, "image %s: out of memory", name);
  return 0;
}

static void
kv_text(struct tc_kv_result *res, char *buf, size_t len)
{
  snprintf(buf, len, "%.*s", res->n_kvs ? (int) res->kvs[0].value_len : 0,
           res->n_kvs ? (const char *) res->kvs[0].value : "");
}

/* Allocate an inode number for m in m->pool and, in one transaction, put
 * m's record, /index/image/<m->name> -> it, the new maxid, and the extra
 * operations, if the extra compares hold. Returns 1 when done, 0 when an
 * extra compare failed, -1 on error. */
static int
alloc_txn(struct tc_client *cl, struct tc_image_meta *m, const struct tc_kv_cmp *xcmp, size_t nx,
          const struct tc_kv_op *xops, size_t nxo)
{
  return tc_admin_alloc_txn_succ(cl, m, xcmp, nx, xops, nxo, NULL);
}

int
tc_admin_alloc_txn_succ(struct tc_client *cl, struct tc_image_meta *m, const struct tc_kv_cmp *xcmp, size_t nx,
               const struct tc_kv_op *xops0, size_t nxo, struct tc_image_meta *succ)
{
  struct tc_kv_op xops[8];
  for (size_t i = 0; i < nxo && i < 8; i++)
    xops[i] = xops0[i];
  struct tc_kv *kv = tc_client_kv(cl);
  char kmax[256], kidx[512], kino[256];
  tc_client_key(cl, kmax, sizeof kmax, "/index/maxid/%" PRIu64, m->pool);
  tc_client_key(cl, kidx, sizeof kidx, "/index/image/%s", m->name);
  uint64_t skip = 0;
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    struct tc_kv_result res = { 0 };
    if (tc_kv_get(kv, kmax, 0, &res) < 0)
      return tc_error(errno, "image %s: %s", m->name, tc_last_error());
    char text[64];
    kv_text(&res, text, sizeof text);
    int64_t maxrev = res.n_kvs ? res.kvs[0].mod_revision : 0;
    tc_kv_result_free(&res);
    char *end;
    unsigned long long max = strtoull(text, &end, 10);
    if (*text && *end)
      return tc_error(EINVAL, "%s: not a number: %s", kmax, text);
    if (skip > max)
      max = skip;
    m->id = max + 1;
    if (m->id >= 1ULL << TC_POOL_SHIFT)
      return tc_error(ENOSPC, "pool %" PRIu64 ": no inode numbers left", m->pool);
    tc_client_key(cl, kino, sizeof kino, "/config/inode/%" PRIu64 "/%" PRIu64, m->pool, m->id);
    char *json = tc_image_meta_json(m), *sjson = NULL;
    if (!json)
      return -1;
    if (succ) {
      succ->next_pool = m->pool;
      succ->next_id = m->id;
      if (!(sjson = tc_image_meta_json(succ))) {
        free(json);
        return -1;
      }
      xops[0].value = sjson;
    }
    char idx[96], nmax[32];
    snprintf(idx, sizeof idx, "{\"id\":%" PRIu64 ",\"pool_id\":%" PRIu64 "}", m->id, m->pool);
    snprintf(nmax, sizeof nmax, "%" PRIu64, m->id);
    struct tc_kv_cmp cmp[8];
    struct tc_kv_op ops[8];
    size_t nc = 0, no = 0;
    cmp[nc++] = (struct tc_kv_cmp) { .key = kmax, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = maxrev };
    cmp[nc++] = (struct tc_kv_cmp) { .key = kino, .target = TC_KV_CMP_VERSION, .result = TC_KV_EQUAL, .number = 0 };
    for (size_t i = 0; i < nx && nc < 8; i++)
      cmp[nc++] = xcmp[i];
    ops[no++] = (struct tc_kv_op) { .type = TC_KV_PUT, .key = kmax, .value = nmax };
    ops[no++] = (struct tc_kv_op) { .type = TC_KV_PUT, .key = kidx, .value = idx };
    ops[no++] = (struct tc_kv_op) { .type = TC_KV_PUT, .key = kino, .value = json };
    for (size_t i = 0; i < nxo && no < 8; i++)
      ops[no++] = xops[i];
    struct tc_kv_op check[2] = { { .type = TC_KV_RANGE, .key = kmax }, { .type = TC_KV_RANGE, .key = kino } };
    struct tc_kv_txn txn = { cmp, nc, ops, no, check, 2 };
    int r = tc_kv_txn(kv, &txn, &res);
    free(json);
    free(sjson);
    if (r < 0)
      return tc_error(errno, "image %s: %s", m->name, tc_last_error());
    bool ok = res.succeeded;
    bool max_same = !ok && res.n_responses == 2 &&
                    (res.responses[0].n_kvs ? res.responses[0].kvs[0].mod_revision : 0) == maxrev;
    bool id_taken = !ok && res.n_responses == 2 && res.responses[1].n_kvs;
    tc_kv_result_free(&res);
    if (ok)
      return 1;
    if (id_taken)
      skip = m->id;      /* maxid lags behind a record written without it */
    else if (max_same)
      return 0;          /* an extra compare failed */
  }
  return tc_error(EAGAIN, "image %s: the pool's records kept changing, try again", m->name);
}

static int
create_record(struct tc_client *cl, struct tc_image_meta *m)
{
  char kidx[512];
  tc_client_key(cl, kidx, sizeof kidx, "/index/image/%s", m->name);
  struct tc_kv_cmp c = { .key = kidx, .target = TC_KV_CMP_VERSION, .result = TC_KV_EQUAL, .number = 0 };
  int r = alloc_txn(cl, m, &c, 1, NULL, 0);
  if (r == 0)
    return tc_error(EEXIST, "image %s: image exists", m->name);
  return r < 0 ? -1 : 0;
}

int
tc_admin_create(struct tc_client *cl, const struct tc_admin_create_opts *o)
{
  if (tc_admin_check_name(o->name, false) < 0)
    return -1;
  struct tc_image_meta m = { 0 }, parent = { 0 };
  char *creator_group = NULL;
  int r = -1;
  const struct tc_identity *id = tc_client_identity(cl);
  if (o->parent) {
    if (tc_admin_check_name(o->parent, true) < 0)
      goto out;
    if (tc_client_lookup(cl, o->parent, &parent, NULL, NULL) < 0)
      goto out;
  }
  if (o->pool || !o->parent) {
    if (find_pool(cl, o->pool, &m.pool, &creator_group) < 0)
      goto out;
  }
  else {
    m.pool = parent.pool;
    struct tc_map *map = tc_cluster_map(tc_client_cluster(cl));
    const struct tc_pool_info *p = tc_map_pool(map, m.pool);
    creator_group = p && p->creator_group ? strdup(p->creator_group) : NULL;
    tc_map_unref(map);
  }
  if (tc_client_use_perms(cl) && !tc_perm_pool_create(id, creator_group)) {
    r = tc_error(EACCES, "image %s: permission denied (you may not create images in pool %" PRIu64 ")", o->name,
                 m.pool);
    goto out;
  }
  m.size = o->size ? o->size : parent.size;
  if (!m.size || m.size % 4096) {
    r = tc_error(EINVAL, "image %s: size %" PRIu64 " must be a positive multiple of 4096 (-s SIZE)", o->name,
                 m.size);
    goto out;
  }
  if (o->parent) {
    m.parent_pool = parent.pool;
    m.parent_id = parent.id;
    uint32_t bs1, bs2;
    if (tc_client_block_size(cl, m.pool, &bs1) < 0 || tc_client_block_size(cl, parent.pool, &bs2) < 0)
      goto out;
    if (bs1 != bs2) {
      r = tc_error(EINVAL, "image %s: pool %" PRIu64 " has another block size than the parent's", o->name, m.pool);
      goto out;
    }
  }
  /* A clone keeps its parent's key unless told otherwise. */
  if (!o->enc_key && parent.enc_key) {
    if (!(m.enc_key = strdup(parent.enc_key))) {
      r = tc_error(ENOMEM, "image %s: out of memory", o->name);
      goto out;
    }
  }
  else if (tc_admin_make_key(cl, o->name, o->enc_key, &m.enc_key) < 0)
    goto out;
  if (o->integrity && !m.enc_key) {
    r = tc_error(EINVAL, "image %s: --integrity needs a key (--enc_key)", o->name);
    goto out;
  }
  m.integrity = o->integrity;
  m.name = strdup(o->name);
  const char *owner = o->owner ? o->owner : id->role == TC_ROLE_USER ? id->name : NULL;
  m.owner = owner && *owner ? strdup(owner) : NULL;
  m.owner_group = o->owner_group && *o->owner_group ? strdup(o->owner_group) : NULL;
  m.reader_group = o->reader_group && *o->reader_group ? strdup(o->reader_group) : NULL;
  if (!m.name) {
    r = tc_error(ENOMEM, "image %s: out of memory", o->name);
    goto out;
  }
  /* The same rule as the gateway's filter and the OSDs (tc_perm_kv): a
   * client may only create an image it will itself be able to write. */
  if (tc_client_use_perms(cl) && !tc_client_may_write(cl, &m)) {
    r = tc_error(EACCES, "image %s: permission denied (only an administrator may create an image owned "
                 "by %s%s%s)", o->name, m.owner ? m.owner : "no one", m.owner_group ? " / group " : "",
                 m.owner_group ? m.owner_group : "");
    goto out;
  }
  r = create_record(cl, &m);
out:
  tc_image_meta_clear(&m);
  tc_image_meta_clear(&parent);
  free(creator_group);
  return r;
}

static int snapshot_txn(struct tc_client *cl, const char *snap, const char *name, bool set_key,
                        const char *newkey);

int
tc_admin_snapshot(struct tc_client *cl, const char *snap)
{
  return tc_admin_snapshot_key(cl, snap, NULL);
}

int
tc_admin_snapshot_key(struct tc_client *cl, const char *snap, const char *enc_key)
{
  if (tc_admin_check_name(snap, true) < 0)
    return -1;
  const char *at = strchr(snap, '@');
  char name[256];
  snprintf(name, sizeof name, "%.*s", (int) (at - snap), snap);
  /* The new top layer's key, made once: a retry must not change it. */
  char *newkey = NULL;
  if (enc_key && tc_admin_make_key(cl, name, enc_key, &newkey) < 0)
    return -1;
  int result = snapshot_txn(cl, snap, name, enc_key != NULL, newkey);
  if (result == 0) {
    /* Once every PG primary has the snapshot's record, it takes no write:
     * from the moment this returns, the snapshot never changes. */
    struct tc_image_meta sm;
    int64_t srev;
    if (tc_client_lookup(cl, snap, &sm, NULL, &srev) < 0 ||
        (result = tc_client_fence(cl, TC_INODE(sm.pool, sm.id), srev)) < 0)
      result = tc_error(errno, "snapshot %s: taken, but %s", snap, tc_last_error());
    tc_image_meta_clear(&sm);
  }
  if (newkey) {
    tc_wipe(newkey, strlen(newkey));
    free(newkey);
  }
  return result;
}

/* The snapshot's transaction (retried); set_key: the new top layer gets
 * newkey (NULL: unencrypted) instead of the image's key. */
static int
snapshot_txn(struct tc_client *cl, const char *snap, const char *name, bool set_key, const char *newkey)
{
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    struct tc_image_meta m;
    int64_t irev, nrev;
    if (tc_client_lookup(cl, name, &m, &nrev, &irev) < 0)
      return -1;
    if (!tc_client_may_write(cl, &m)) {
      tc_image_meta_clear(&m);
      return tc_error(EACCES, "image %s: permission denied (snapshots need write access)", name);
    }
    if (m.rekey_from) {
      tc_image_meta_clear(&m);
      return tc_error(EBUSY, "image %s: a re-key is in progress (tromcho modify %s --rekey resume)", name, name);
    }
    /* The old inode becomes NAME@SNAP, read-only, with NAME's new inode as
     * its successor (open handles of NAME move there: client.c) ... */
    struct tc_image_meta snapm = m;
    snapm.name = (char *) snap;
    snapm.readonly = true;
    /* ... and NAME a new inode on top of it. */
    struct tc_image_meta live = m;
    live.parent_pool = m.pool;
    live.parent_id = m.id;
    if (set_key)
      live.enc_key = (char *) newkey;   /* borrowed; m keeps (and clears) its own */
    if (!live.enc_key)
      live.integrity = false;           /* tags need a key */
    char kidx[512], ksnap[512], kold[256], sidx[96];
    tc_client_key(cl, kidx, sizeof kidx, "/index/image/%s", name);
    tc_client_key(cl, ksnap, sizeof ksnap, "/index/image/%s", snap);
    tc_client_key(cl, kold, sizeof kold, "/config/inode/%" PRIu64 "/%" PRIu64, m.pool, m.id);
    snprintf(sidx, sizeof sidx, "{\"id\":%" PRIu64 ",\"pool_id\":%" PRIu64 "}", m.id, m.pool);
    struct tc_kv_cmp cmp[3] = {
      { .key = kidx, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = nrev },
      { .key = kold, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = irev },
      { .key = ksnap, .target = TC_KV_CMP_VERSION, .result = TC_KV_EQUAL, .number = 0 },
    };
    struct tc_kv_op ops[2] = {
      { .type = TC_KV_PUT, .key = kold },
      { .type = TC_KV_PUT, .key = ksnap, .value = sidx },
    };
    int r = tc_admin_alloc_txn_succ(cl, &live, cmp, 3, ops, 2, &snapm);
    tc_image_meta_clear(&m);
    if (r < 0)
      return -1;
    if (r == 1)
      return 0;
    /* A compare failed: the snapshot exists, or the image changed meanwhile. */
    struct tc_image_meta x;
    if (tc_client_lookup(cl, snap, &x, NULL, NULL) == 0) {
      tc_image_meta_clear(&x);
      return tc_error(EEXIST, "snapshot %s: image exists", snap);
    }
  }
  return tc_error(EAGAIN, "image %s: kept changing during the snapshot, try again", name);
}

/* Every image whose parent is (pool, id): their names, comma-separated
 * (caller frees), or NULL with *n = 0. */
static char *
children_of(struct tc_client *cl, uint64_t pool, uint64_t id, int *n)
{
  struct tc_image_meta *v;
  size_t nv;
  *n = 0;
  if (tc_client_all_images(cl, &v, &nv) < 0)
    return NULL;
  size_t len = 1;
  char *names = NULL;
  for (size_t i = 0; i < nv; i++) {
    if (v[i].parent_id == id && v[i].parent_pool == pool && !v[i].retired) {
      size_t l = strlen(v[i].name);
      char *nn = realloc(names, len + l + 2);
      if (nn) {
        if (!names)
          *nn = 0;
        names = nn;
        if (*names)
          strcat(names, ", ");
        strcat(names, v[i].name);
        len += l + 2;
      }
      (*n)++;
    }
    tc_image_meta_clear(&v[i]);
  }
  free(v);
  return names;
}

struct progress {
  tc_admin_progress_fn fn;
  void *arg;
  uint32_t len;
};

static void
run_progress(void *arg, size_t i, size_t n)
{
  struct progress *p = arg;
  p->fn(p->arg, (uint64_t) i * p->len, (uint64_t) n * p->len);
}

/* Run ops concurrently (at most 32 in flight); 0 or -1 with the first error. */
static int
run_many(struct tc_client *cl, struct tc_objop *ops, size_t n, tc_admin_progress_fn fn, void *arg)
{
  struct tc_objstore os = tc_cluster_objstore(tc_client_cluster(cl));
  struct progress p = { fn, arg, n ? ops[0].len : 0 };
  int r = tc_objstore_run(&os, ops, n, 32, fn ? run_progress : NULL, &p);
  if (r < 0)
    return tc_error(-r, "%s", strerror(-r));
  return 0;
}

int
tc_admin_delete_objects(struct tc_client *cl, uint64_t inode, tc_admin_progress_fn fn, void *arg)
{
  uint32_t bs;
  if (tc_client_block_size(cl, TC_INODE_POOL(inode), &bs) < 0)
    return -1;
  struct tc_osd_list_entry *e;
  size_t ne;
  if (tc_cluster_list(tc_client_cluster(cl), inode, inode, 0, &e, &ne) < 0)
    return -1;
  struct tc_objop *ops = calloc(ne ? ne : 1, sizeof *ops);
  if (!ops) {
    free(e);
    return tc_error(ENOMEM, "out of memory");
  }
  size_t n = 0;
  for (size_t i = 0; i < ne; i++)
    if (e[i].inode == inode && e[i].bitmap)
      ops[n++] = (struct tc_objop) { .code = TC_OBJ_DELETE, .inode = inode, .offset = e[i].offset, .len = bs };
  free(e);
  int r = run_many(cl, ops, n, fn, arg);
  free(ops);
  return r;
}

/* Destroy m's KV-held key: its record says TC_KEY_SHREDDED from now on (and
 * read-only), in one compare-and-swap on the record's revision, which is
 * updated; *at = the KV revision of that write. */
static int
shred_key(struct tc_client *cl, const char *name, struct tc_image_meta *m, int64_t *irev, int64_t *at)
{
  if (!m->enc_key)
    return tc_error(EINVAL, "image %s: not encrypted: --shred cannot make its data unreadable first "
                    "(rm without --shred deletes it)", name);
  if (!strncmp(m->enc_key, "vault:", 6))
    return tc_error(EINVAL, "image %s: its key is in Vault (%s), not in the KV: destroy that secret in Vault, "
                    "then rm without --shred", name, m->enc_key);
  if (!strcmp(m->enc_key, TC_KEY_SHREDDED))
    return 0;   /* a second try after the data deletion failed */
  char *old = m->enc_key;
  bool oldro = m->readonly;
  m->enc_key = (char *) TC_KEY_SHREDDED;
  m->readonly = true;
  m->retired = true;   /* the OSDs delete its data only now (and refuse reads) */
  int r = tc_client_put_record(cl, m, *irev, at, "shredding its key");
  m->enc_key = old;
  m->readonly = oldro;
  if (r < 0)
    return -1;
  if (r == 0)
    return tc_error(EAGAIN, "image %s: its record changed while shredding its key; run rm --shred again", name);
  *irev = *at;
  return 0;
}

/* Other images whose record holds the same key (snapshots, clones that
 * kept it): a warning each, since shredding one record leaves theirs. */
static int
tc_all_images_or_warn(struct tc_client *cl, struct tc_image_meta **v, size_t *nv)
{
  if (tc_client_all_images(cl, v, nv) < 0) {
    tc_warn("shred: cannot list the images to look for others with the same key: %s", tc_last_error());
    return -1;
  }
  return 0;
}

static void
warn_shared_key(struct tc_client *cl, const struct tc_image_meta *m)
{
  struct tc_image_meta *v;
  size_t nv;
  if (tc_all_images_or_warn(cl, &v, &nv) < 0)
    return;
  for (size_t i = 0; i < nv; i++) {
    if (!(v[i].pool == m->pool && v[i].id == m->id) && v[i].enc_key && !strcmp(v[i].enc_key, m->enc_key))
      tc_warn("image %s: %s holds the same key; its data (and what it shares with %s) stays readable until it is "
              "shredded too", m->name, v[i].name, m->name);
    tc_image_meta_clear(&v[i]);
  }
  free(v);
}

/* Mark m's record retired (and read-only) in one compare-and-swap on irev,
 * which is updated, unless it is already, then fence at that revision. */
static int
retire_record(struct tc_client *cl, const char *name, struct tc_image_meta *m, int64_t *irev)
{
  int64_t at = *irev;
  if (!m->retired) {
    bool oldro = m->readonly;
    m->readonly = m->retired = true;
    int r = tc_client_put_record(cl, m, *irev, &at, "retiring its record");
    m->readonly = oldro;
    m->retired = false;
    if (r < 0)
      return -1;
    if (r == 0)
      return tc_error(EAGAIN, "image %s: its record changed while deleting it; run rm again", name);
    *irev = at;
  }
  if (tc_client_fence(cl, TC_INODE(m->pool, m->id), at) < 0)
    return tc_error(errno, "image %s: %s", name, tc_last_error());
  return 0;
}

int
tc_admin_delete(struct tc_client *cl, const char *name)
{
  return tc_admin_delete_shred_progress(cl, name, false, NULL, NULL, NULL);
}

int
tc_admin_delete_progress(struct tc_client *cl, const char *name, tc_admin_progress_fn fn, void *arg)
{
  return tc_admin_delete_shred_progress(cl, name, false, NULL, fn, arg);
}

int
tc_admin_delete_shred(struct tc_client *cl, const char *name, bool shred, int64_t *shred_rev)
{
  return tc_admin_delete_shred_progress(cl, name, shred, shred_rev, NULL, NULL);
}

int
tc_admin_delete_shred_progress(struct tc_client *cl, const char *name, bool shred, int64_t *shred_rev,
                               tc_admin_progress_fn fn, void *arg)
{
  struct tc_image_meta m;
  int64_t nrev, irev;
  if (tc_client_lookup(cl, name, &m, &nrev, &irev) < 0)
    return -1;
  int r = -1, nchild;
  char *kids = NULL;
  if (!tc_client_may_write(cl, &m)) {
    r = tc_error(EACCES, "image %s: permission denied (delete needs write access)", name);
    goto out;
  }
  if (m.rekey_from) {
    r = tc_error(EBUSY, "image %s: a re-key is in progress: let it finish first (tromcho modify %s --rekey resume)",
                 name, name);
    goto out;
  }
  kids = children_of(cl, m.pool, m.id, &nchild);
  if (nchild) {
    r = tc_error(EBUSY, "image %s: has children (%s): delete or flatten them first", name, kids ? kids : "?");
    goto out;
  }
  if (shred) {
    int64_t at = 0;
    if (m.enc_key && strcmp(m.enc_key, TC_KEY_SHREDDED) && strncmp(m.enc_key, "vault:", 6))
      warn_shared_key(cl, &m);
    if (shred_key(cl, name, &m, &irev, &at) < 0)
      goto out;
    if (shred_rev)
      *shred_rev = at;
  }
  /* The OSDs refuse to delete a read-only inode's data (the fence: a trim
   * from a handle still on a snapshotted layer) until its record says
   * retired, and they know it (the fence at that revision). */
  if ((m.readonly || shred) && retire_record(cl, name, &m, &irev) < 0)
    goto out;
  if (tc_admin_delete_objects(cl, TC_INODE(m.pool, m.id), fn, arg) < 0) {
    r = tc_error(errno, "image %s: deleting its data: %s", name, tc_last_error());
    goto out;
  }
  char kidx[512], kino[256];
  tc_client_key(cl, kidx, sizeof kidx, "/index/image/%s", name);
  tc_client_key(cl, kino, sizeof kino, "/config/inode/%" PRIu64 "/%" PRIu64, m.pool, m.id);
  struct tc_kv_cmp cmp[2] = {
    { .key = kidx, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = nrev },
    { .key = kino, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = irev },
  };
  struct tc_kv_op ops[2] = { { .type = TC_KV_DELETE, .key = kidx }, { .type = TC_KV_DELETE, .key = kino } };
  struct tc_kv_txn txn = { cmp, 2, ops, 2, NULL, 0 };
  struct tc_kv_result res = { 0 };
  if (tc_kv_txn(tc_client_kv(cl), &txn, &res) < 0) {
    r = tc_error(errno, "image %s: %s", name, tc_last_error());
    goto out;
  }
  bool ok = res.succeeded;
  tc_kv_result_free(&res);
  if (!ok)
    r = tc_error(EAGAIN, "image %s: its records changed while deleting it (its data is gone); run rm again", name);
  else
    r = 0;
out:
  free(kids);
  tc_image_meta_clear(&m);
  return r;
}

/* Per-sector presence over a window, from extent callbacks. */
struct presence {
  uint8_t *map;      /* 1 byte per sector */
  uint64_t base;
};

static int
presence_cb(void *opaque, uint64_t off, uint64_t len, bool allocated)
{
  struct presence *p = opaque;
  if (allocated)
    memset(p->map + (off - p->base) / TC_SECTOR, 1, len / TC_SECTOR);
  return 0;
}

int
tc_admin_flatten(struct tc_client *cl, const char *name)
{
  return tc_admin_flatten_progress(cl, name, NULL, NULL);
}

int
tc_admin_flatten_progress(struct tc_client *cl, const char *name, tc_admin_progress_fn fn, void *arg)
{
  struct tc_image_meta m;
  int64_t irev;
  if (tc_client_lookup(cl, name, &m, NULL, &irev) < 0)
    return -1;
  struct tc_image *full = NULL, *own = NULL;
  uint8_t *all = NULL, *mine = NULL, *buf = NULL;
  int r = -1;
  const uint64_t window = 64ULL << 20, step = 1 << 20;
  if (!tc_client_may_write(cl, &m)) {
    r = tc_error(EACCES, "image %s: permission denied (flatten needs write access)", name);
    goto out;
  }
  if (m.readonly) {
    r = tc_error(EROFS, "image %s: read-only (a snapshot?), cannot flatten", name);
    goto out;
  }
  if (m.rekey_from) {
    r = tc_error(EBUSY, "image %s: a re-key is in progress: let it finish first (tromcho modify %s --rekey resume)",
                 name, name);
    goto out;
  }
  if (!m.parent_id) {
    r = 0;   /* nothing to do */
    goto out;
  }
  if (!(full = tc_client_open_meta(cl, &m, false, true)) || !(own = tc_client_open_meta(cl, &m, true, false)))
    goto out;
  all = malloc(window / TC_SECTOR);
  mine = malloc(window / TC_SECTOR);
  buf = aligned_alloc(TC_SECTOR, step);
  if (!all || !mine || !buf) {
    r = tc_error(ENOMEM, "image %s: flatten: out of memory", name);
    goto out;
  }
  for (uint64_t pos = 0; pos < m.size; pos += window) {
    uint64_t n = m.size - pos < window ? m.size - pos : window;
    memset(all, 0, n / TC_SECTOR);
    memset(mine, 0, n / TC_SECTOR);
    struct presence pa = { all, pos }, pm = { mine, pos };
    if (tc_image_extents(full, n, pos, presence_cb, &pa) < 0 || tc_image_extents(own, n, pos, presence_cb, &pm) < 0)
      goto out;
    /* Copy the runs a parent shows through, re-encrypted with NAME's key. */
    for (uint64_t s = 0; s < n / TC_SECTOR;) {
      if (!all[s] || mine[s]) {
        s++;
        continue;
      }
      uint64_t e = s;
      while (e < n / TC_SECTOR && all[e] && !mine[e] && (e - s) * TC_SECTOR < step)
        e++;
      uint64_t off = pos + s * TC_SECTOR, len = (e - s) * TC_SECTOR;
      if (tc_image_read(full, buf, len, off) < 0 || tc_image_write(full, buf, len, off) < 0)
        goto out;
      s = e;
      if (fn)
        fn(arg, off + len, m.size);
    }
  }
  if (fn)
    fn(arg, m.size, m.size);
  if (tc_image_flush(full) < 0)
    goto out;
  /* Drop the parent link. */
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    m.parent_id = m.parent_pool = 0;
    int t = tc_client_put_record(cl, &m, irev, NULL, "dropping the parent link");
    if (t < 0)
      goto out;
    if (t == 1) {
      r = 0;
      goto out;
    }
    /* The record changed (renamed, resized): read it again and retry. */
    tc_image_meta_clear(&m);
    if (tc_client_lookup(cl, name, &m, NULL, &irev) < 0)
      goto out;
  }
  r = tc_error(EAGAIN, "image %s: its record kept changing during flatten, try again", name);
out:
  tc_image_free(own);
  tc_image_free(full);
  free(all);
  free(mine);
  free(buf);
  tc_image_meta_clear(&m);
  return r;
}

static int
set_str(char **field, const char *v)
{
  if (!v)
    return 0;
  free(*field);
  *field = NULL;
  if (*v && !(*field = strdup(v)))
    return tc_error(ENOMEM, "out of memory");
  return 0;
}

int
tc_admin_modify(struct tc_client *cl, const char *name, const struct tc_admin_modify_opts *o)
{
  if (o->rename && tc_admin_check_name(o->rename, strchr(name, '@') != NULL) < 0)
    return -1;
  if (o->resize) {
    if (tc_client_resize(cl, name, o->resize) < 0)
      return -1;
  }
  if (!o->rename && o->readonly < 0 && !o->owner && !o->owner_group && !o->reader_group)
    return 0;
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    struct tc_image_meta m;
    int64_t nrev, irev;
    if (tc_client_lookup(cl, name, &m, &nrev, &irev) < 0)
      return -1;
    if (!tc_client_may_write(cl, &m)) {
      tc_image_meta_clear(&m);
      return tc_error(EACCES, "image %s: permission denied (modify needs write access)", name);
    }
    if (o->readonly >= 0)
      m.readonly = o->readonly;
    if (set_str(&m.owner, o->owner) < 0 || set_str(&m.owner_group, o->owner_group) < 0 ||
        set_str(&m.reader_group, o->reader_group) < 0 || set_str(&m.name, o->rename) < 0) {
      tc_image_meta_clear(&m);
      return -1;
    }
    /* As the filter and the OSDs: a client may not give an image away. */
    if (!tc_client_may_write(cl, &m)) {
      tc_image_meta_clear(&m);
      return tc_error(EACCES, "image %s: permission denied (only an administrator may change the owner "
                      "or owner_group so that you no longer own the image)", name);
    }
    char *json = tc_image_meta_json(&m);
    char kidx[512], knew[512], kino[256], idx[96];
    tc_client_key(cl, kidx, sizeof kidx, "/index/image/%s", name);
    tc_client_key(cl, knew, sizeof knew, "/index/image/%s", o->rename ? o->rename : name);
    tc_client_key(cl, kino, sizeof kino, "/config/inode/%" PRIu64 "/%" PRIu64, m.pool, m.id);
    snprintf(idx, sizeof idx, "{\"id\":%" PRIu64 ",\"pool_id\":%" PRIu64 "}", m.id, m.pool);
    tc_image_meta_clear(&m);
    if (!json)
      return -1;
    bool rename = o->rename && strcmp(o->rename, name) != 0;
    struct tc_kv_cmp cmp[3] = {
      { .key = kidx, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = nrev },
      { .key = kino, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = irev },
      { .key = knew, .target = TC_KV_CMP_VERSION, .result = TC_KV_EQUAL, .number = 0 },
    };
    struct tc_kv_op ops[3] = {
      { .type = TC_KV_PUT, .key = kino, .value = json },
      { .type = TC_KV_DELETE, .key = kidx },
      { .type = TC_KV_PUT, .key = knew, .value = idx },
    };
    struct tc_kv_op check = { .type = TC_KV_RANGE, .key = knew };
    struct tc_kv_txn txn = { cmp, rename ? 3 : 2, ops, rename ? 3 : 1, &check, 1 };
    struct tc_kv_result res = { 0 };
    int r = tc_kv_txn(tc_client_kv(cl), &txn, &res);
    free(json);
    if (r < 0)
      return tc_error(errno, "image %s: %s", name, tc_last_error());
    bool ok = res.succeeded, exists = !ok && rename && res.n_responses && res.responses[0].n_kvs;
    tc_kv_result_free(&res);
    if (ok)
      return 0;
    if (exists)
      return tc_error(EEXIST, "image %s: cannot rename to %s: image exists", name, o->rename);
  }
  return tc_error(EAGAIN, "image %s: its record kept changing, try again", name);
}

static int
cmp_entry(const void *a, const void *b)
{
  uint64_t x = ((const struct tc_osd_list_entry *) a)->inode, y = ((const struct tc_osd_list_entry *) b)->inode;
  return x < y ? -1 : x > y;
}

int
tc_admin_usage(struct tc_client *cl, uint64_t pool, int timeout_ms,
               void (*cb)(void *opaque, uint64_t inode, uint64_t bytes), void *opaque)
{
  return tc_admin_usage_range(cl, TC_INODE(pool, 1), TC_INODE(pool, (1ULL << TC_POOL_SHIFT) - 1), timeout_ms, cb,
                              opaque);
}

int
tc_admin_usage_range(struct tc_client *cl, uint64_t first, uint64_t last, int timeout_ms,
                     void (*cb)(void *opaque, uint64_t inode, uint64_t bytes), void *opaque)
{
  uint64_t pool = TC_INODE_POOL(first);
  /* Without a live primary for every PG there is nothing to wait for. */
  struct tc_map *map = tc_cluster_map(tc_client_cluster(cl));
  const struct tc_pool_info *p = tc_map_pool(map, pool);
  bool ready = p != NULL;
  for (uint32_t g = 0; p && g < p->pg_count && ready; g++) {
    const struct tc_pg_info *pg = tc_map_pg(map, pool, g);
    ready = pg && pg->primary && tc_map_osd(map, pg->primary);
  }
  tc_map_unref(map);
  if (!ready)
    return tc_error(EAGAIN, "pool %" PRIu64 ": some PG has no live primary", pool);
  struct tc_osd_list_entry *e;
  size_t n;
  if (tc_cluster_list(tc_client_cluster(cl), first, last, timeout_ms, &e, &n) < 0)
    return -1;
  /* Entries come per PG; add them up per inode. */
  if (n)
    qsort(e, n, sizeof *e, cmp_entry);
  uint64_t cur = 0, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && e[i].inode != cur) {
      cb(opaque, cur, bytes);
      bytes = 0;
    }
    cur = e[i].inode;
    bytes += (uint64_t) __builtin_popcountll(e[i].bitmap) * TC_SECTOR;
  }
  if (n)
    cb(opaque, cur, bytes);
  free(e);
  return 0;
}
