/* The client API: images by name over the cluster (see client.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <json-c/json.h>
#include "certs.h"
#include "client.h"
#include "inode_key.h"
#include "cluster.h"
#include "error.h"
#include "kv_client.h"
#include "log.h"
#include "perms.h"
#include "vault.h"

#define MAX_LAYERS 64

/* An image opened through this client (so resize and the watch reach it). */
struct open_image {
  struct tc_client *cl;
  struct tc_image *img;
  uint64_t pool, id;           /* the top layer (changes at a layer switch) */
  uint64_t chain[MAX_LAYERS];  /* the chain's inodes, top first */
  int nchain;
  bool writable;
  struct open_image *next;
};

static int read_inode(struct tc_client *cl, uint64_t pool, uint64_t id, struct tc_image_meta *m, int64_t *rev);

struct tc_client {
  const struct tc_config *cfg;
  struct tc_kv *kv;
  struct tc_cluster *cluster;
  bool use_perms;
  /* identity */
  char *user_name;
  char **groups;               /* NULL-terminated */
  struct tc_user user;
  struct tc_identity id;
  pthread_mutex_t lock;        /* the open list */
  struct open_image *open;
  struct tc_kv_watch *inode_watch;   /* records of open images changing */
  struct tc_vault *vault;      /* keys kept in Vault; its token cache */
  /* Test hook (TROMCHO_CLIENT_CHAIN_WAIT=PATH): the first chain walk
   * creates PATH.waiting between a layer's record and its parent's and
   * waits there until PATH exists (at most 60 s), so a test can land a
   * re-key's finish in between (tests/test-image-rekey-reopen.sh). */
  char *chain_wait;
};

/* A record of an open image changed (KV thread). Its top layer got a
 * successor (next_id: a snapshot or a re-key put a new top above it), or a
 * layer of its chain was retired or relinked (a re-key finished): the
 * handle reloads its chain before its next I/O (switch_layers). Its top
 * became read-only with no successor, or went away: writing on through
 * this handle would write into nothing, so it turns read-only and says
 * why. Its key was shredded: I/O fails. */
static void
inode_watch_cb(void *arg, const struct tc_kv_watch_update *u)
{
  struct tc_client *cl = arg;
  char prefix[256];
  tc_client_key(cl, prefix, sizeof prefix, "/config/inode/");
  size_t plen = strlen(prefix);
  for (size_t i = 0; i < u->n_events; i++) {
    const struct tc_kv_event *e = &u->events[i];
    uint64_t pool, id;
    if (e->kv.key_len <= plen || tc_inode_key_parse((const char *) e->kv.key + plen, e->kv.key_len - plen,
                                                    &pool, &id) < 0)
      continue;
    bool gone = e->type == TC_KV_EVENT_DELETE, ro = false, shredded = false, moved = false, retired = false;
    uint64_t parent = 0;
    char name[256] = "";
    if (!gone) {
      struct tc_image_meta m;
      if (tc_image_meta_parse(&m, pool, id, (const char *) e->kv.value, e->kv.value_len) < 0)
        continue;
      ro = m.readonly;
      shredded = m.enc_key && !strcmp(m.enc_key, TC_KEY_SHREDDED);
      moved = m.next_id != 0;
      retired = m.retired;
      parent = m.parent_id ? TC_INODE(m.parent_pool, m.parent_id) : 0;
      snprintf(name, sizeof name, "%s", m.name);
      tc_image_meta_clear(&m);
    }
    uint64_t inode = TC_INODE(pool, id);
    pthread_mutex_lock(&cl->lock);
    for (struct open_image *o = cl->open; o; o = o->next) {
      int at = -1;
      for (int k = 0; k < o->nchain && at < 0; k++)
        if (o->chain[k] == inode)
          at = k;
      if (at < 0)
        continue;
      if (shredded && at == 0) {
        char why[300];
        snprintf(why, sizeof why, "image %s: its key was shredded (rm --shred)", name);
        tc_warn("client: %s; I/O now fails", why);
        tc_image_set_revoked(o->img, why);
        continue;
      }
      if (moved || retired || (!gone && (at + 1 < o->nchain ? o->chain[at + 1] : 0) != parent)) {
        tc_image_mark_stale(o->img);
        continue;
      }
      if (at == 0 && (gone || ro) && o->writable && !tc_image_readonly(o->img)) {
        char why[220];
        if (gone)
          snprintf(why, sizeof why, "its inode %" PRIu64 "/%" PRIu64 " was deleted", pool, id);
        else
          snprintf(why, sizeof why, "its inode became %s (read-only): open the image again", name);
        tc_warn("client: image inode %" PRIu64 "/%" PRIu64 ": %s; writes now fail", pool, id, why);
        tc_image_set_readonly(o->img, why);
      }
    }
    pthread_mutex_unlock(&cl->lock);
  }
}

const char *
tc_client_key(const struct tc_client *cl, char *buf, size_t len, const char *fmt, ...)
{
  size_t n = (size_t) snprintf(buf, len, "%s", tc_kv_prefix(cl->kv));
  va_list ap;
  va_start(ap, fmt);
  if (n < len)
    vsnprintf(buf + n, len - n, fmt, ap);
  va_end(ap);
  return buf;
}

const struct tc_config *tc_client_config(const struct tc_client *cl) { return cl->cfg; }
struct tc_kv *tc_client_kv(struct tc_client *cl) { return cl->kv; }
struct tc_cluster *tc_client_cluster(struct tc_client *cl) { return cl->cluster; }
const struct tc_identity *tc_client_identity(const struct tc_client *cl) { return &cl->id; }
bool tc_client_use_perms(const struct tc_client *cl) { return cl->use_perms; }

/* Who we are: the CN of our certificate and its /config/user record. */
static int
load_identity(struct tc_client *cl)
{
  cl->id.role = TC_ROLE_ANON;
  if (!cl->use_perms)
    return 0;
  const char *cert = tc_config_str(cl->cfg, "cert"), *pkey = tc_config_str(cl->cfg, "pkey");
  if (!cert || !pkey)
    return tc_error(EINVAL, "use_perms is on but this client has no certificate (options cert and pkey)");
  struct tc_cert_identity *ci = tc_cert_identity_load(cert, pkey, 0);
  if (!ci)
    return -1;
  cl->user_name = strdup(tc_cert_identity_cn(ci));
  tc_cert_identity_free(ci);
  if (!cl->user_name)
    return tc_error(ENOMEM, "client: out of memory");
  cl->id.role = TC_ROLE_USER;
  cl->id.name = cl->user_name;
  cl->user.name = cl->user_name;
  char key[512];
  struct tc_kv_result res = { 0 };
  if (tc_kv_get(cl->kv, tc_client_key(cl, key, sizeof key, "/config/user/%s", cl->user_name), 0, &res) < 0)
    return -1;
  if (res.n_kvs == 0) {    /* no record: a client in no group */
    tc_kv_result_free(&res);
    return 0;
  }
  json_object *o = json_tokener_parse((const char *) res.kvs[0].value), *f;
  tc_kv_result_free(&res);
  if (!o || !json_object_is_type(o, json_type_object)) {
    json_object_put(o);
    return tc_error(EINVAL, "user record /config/user/%s: not a JSON object", cl->user_name);
  }
  if (json_object_object_get_ex(o, "type", &f) && json_object_is_type(f, json_type_string))
    cl->user.admin = strcmp(json_object_get_string(f), "admin") == 0;
  if (json_object_object_get_ex(o, "groups", &f) && json_object_is_type(f, json_type_array)) {
    size_t n = json_object_array_length(f);
    if (!(cl->groups = calloc(n + 1, sizeof *cl->groups))) {
      json_object_put(o);
      return tc_error(ENOMEM, "client: out of memory");
    }
    for (size_t i = 0, k = 0; i < n; i++) {
      json_object *g = json_object_array_get_idx(f, i);
      if (json_object_is_type(g, json_type_string) && (cl->groups[k] = strdup(json_object_get_string(g))))
        k++;
    }
    cl->user.groups = (const char *const *) cl->groups;
  }
  json_object_put(o);
  cl->id.user = &cl->user;
  return 0;
}

struct tc_client *
tc_client_new(const struct tc_config *cfg)
{
  struct tc_client *cl = calloc(1, sizeof *cl);
  if (!cl) {
    tc_error(ENOMEM, "client: out of memory");
    return NULL;
  }
  cl->cfg = cfg;
  cl->use_perms = tc_config_bool(cfg, "use_perms");
  const char *wait = getenv("TROMCHO_CLIENT_CHAIN_WAIT");
  if (wait && !(cl->chain_wait = strdup(wait))) {
    free(cl);
    tc_error(ENOMEM, "client: out of memory");
    return NULL;
  }
  pthread_mutex_init(&cl->lock, NULL);
  char wkey[256];
  if (!(cl->vault = tc_vault_new(cfg)) || !(cl->kv = tc_kv_new_from_config(cfg)) || load_identity(cl) < 0 ||
      !(cl->cluster = tc_cluster_new(cfg, cl->kv))) {
    int e = errno;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    tc_client_free(cl);
    tc_error(e, "%s", msg);
    return NULL;
  }
  /* Not fatal: without it a snapshot taken elsewhere is only noticed on reopen. */
  if (!(cl->inode_watch = tc_kv_watch(cl->kv, tc_client_key(cl, wkey, sizeof wkey, "/config/inode/"), 0, true, 0,
                                      inode_watch_cb, cl)))
    tc_warn("client: cannot watch image records (%s): snapshots taken elsewhere are not noticed", tc_last_error());
  return cl;
}

void
tc_client_free(struct tc_client *cl)
{
  if (!cl)
    return;
  pthread_mutex_lock(&cl->lock);
  int n = 0;
  for (struct open_image *o = cl->open; o; o = o->next)
    n++;
  pthread_mutex_unlock(&cl->lock);
  if (cl->inode_watch)
    tc_kv_watch_cancel(cl->inode_watch);
  if (n)
    tc_warn("client: freed with %d image(s) still open; closing them", n);
  while (cl->open)
    tc_image_free(cl->open->img);   /* the close hook unlinks it */
  tc_cluster_free(cl->cluster);
  tc_kv_free(cl->kv);
  tc_vault_free(cl->vault);
  if (cl->groups)
    for (char **g = cl->groups; *g; g++)
      free(*g);
  free(cl->groups);
  free(cl->user_name);
  free(cl->chain_wait);
  pthread_mutex_destroy(&cl->lock);
  free(cl);
}

int
tc_client_key_resolve(struct tc_client *cl, const char *image, const char *enc_key, uint8_t key[TC_XTS_KEY_SIZE])
{
  if (strncmp(enc_key, "vault:", 6) == 0)
    return tc_vault_get_key(cl->vault, image, enc_key + 6, key);
  return tc_image_key_resolve(cl->cfg, image, enc_key, key);
}

static struct tc_image_acl
acl_of(const struct tc_image_meta *m)
{
  return (struct tc_image_acl) { m->owner, m->owner_group, m->reader_group };
}

bool
tc_client_may_read(const struct tc_client *cl, const struct tc_image_meta *m)
{
  struct tc_image_acl a = acl_of(m);
  return !cl->use_perms || tc_perm_image_read(&cl->id, &a);
}

bool
tc_client_may_write(const struct tc_client *cl, const struct tc_image_meta *m)
{
  struct tc_image_acl a = acl_of(m);
  return !cl->use_perms || tc_perm_image_write(&cl->id, &a);
}

/* Read /config/inode/<pool>/<id>; ENOENT if absent. */
static int
read_inode(struct tc_client *cl, uint64_t pool, uint64_t id, struct tc_image_meta *m, int64_t *rev)
{
  char key[256];
  struct tc_kv_result res = { 0 };
  tc_client_key(cl, key, sizeof key, "/config/inode/%" PRIu64 "/%" PRIu64, pool, id);
  if (tc_kv_get(cl->kv, key, 0, &res) < 0)
    return -1;
  if (res.n_kvs == 0) {
    tc_kv_result_free(&res);
    return tc_error(ENOENT, "inode %" PRIu64 "/%" PRIu64 ": no record", pool, id);
  }
  int r = tc_image_meta_parse(m, pool, id, (const char *) res.kvs[0].value, res.kvs[0].value_len);
  if (rev)
    *rev = res.kvs[0].mod_revision;
  tc_kv_result_free(&res);
  return r;
}

int
tc_client_read_inode(struct tc_client *cl, uint64_t pool, uint64_t id, struct tc_image_meta *m, int64_t *rev)
{
  return read_inode(cl, pool, id, m, rev);
}

int
tc_client_put_record(struct tc_client *cl, const struct tc_image_meta *m, int64_t rev, int64_t *newrev,
                     const char *what)
{
  char key[256];
  tc_client_key(cl, key, sizeof key, "/config/inode/%" PRIu64 "/%" PRIu64, m->pool, m->id);
  char *json = tc_image_meta_json(m);
  if (!json)
    return -1;
  struct tc_kv_cmp cmp = { .key = key, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = rev };
  struct tc_kv_op put = { .type = TC_KV_PUT, .key = key, .value = json };
  struct tc_kv_txn txn = { &cmp, 1, &put, 1, NULL, 0 };
  struct tc_kv_result res = { 0 };
  int r = tc_kv_txn(cl->kv, &txn, &res);
  free(json);
  if (r < 0)
    return tc_error(errno, "image %s: %s: %s", m->name, what, tc_last_error());
  r = res.succeeded ? 1 : 0;
  if (newrev)
    *newrev = res.revision;
  tc_kv_result_free(&res);
  return r;
}

int
tc_client_lookup(struct tc_client *cl, const char *name, struct tc_image_meta *m, int64_t *index_rev,
                 int64_t *inode_rev)
{
  char key[512];
  struct tc_kv_result res = { 0 };
  memset(m, 0, sizeof *m);
  if (!name || !*name)
    return tc_error(EINVAL, "image name is empty");
  if (tc_kv_get(cl->kv, tc_client_key(cl, key, sizeof key, "/index/image/%s", name), 0, &res) < 0)
    return tc_error(errno, "image %s: %s", name, tc_last_error());
  if (res.n_kvs == 0) {
    tc_kv_result_free(&res);
    return tc_error(ENOENT, "image %s: no such image", name);
  }
  uint64_t pool, id;
  int r = tc_image_index_parse((const char *) res.kvs[0].value, res.kvs[0].value_len, &pool, &id);
  if (index_rev)
    *index_rev = res.kvs[0].mod_revision;
  tc_kv_result_free(&res);
  if (r < 0)
    return tc_error(EINVAL, "image %s: %s", name, tc_last_error());
  if (pool == 0 || pool > TC_POOL_MAX || id == 0 || id > TC_INODE_ID_MAX)
    return tc_error(EINVAL, "image %s: its index names inode %" PRIu64 "/%" PRIu64 ", outside pool 1..%llu, "
                    "id 1..%llu", name, pool, id, TC_POOL_MAX, TC_INODE_ID_MAX);
  if (read_inode(cl, pool, id, m, inode_rev) < 0) {
    if (errno == ENOENT)
      return tc_error(ENOENT, "image %s: no such image (its index names inode %" PRIu64 "/%" PRIu64
                      ", which has no record)", name, pool, id);
    return tc_error(errno, "image %s: %s", name, tc_last_error());
  }
  if (!tc_client_may_read(cl, m)) {
    tc_image_meta_clear(m);
    return tc_error(ENOENT, "image %s: no such image (or permission denied)", name);
  }
  return 0;
}

int
tc_client_stat(struct tc_client *cl, const char *name, struct tc_image_meta *m, bool *writable)
{
  if (tc_client_lookup(cl, name, m, NULL, NULL) < 0)
    return -1;
  if (writable)
    *writable = !m->readonly && tc_client_may_write(cl, m);
  return 0;
}

int
tc_client_block_size(struct tc_client *cl, uint64_t pool, uint32_t *bs)
{
  struct tc_map *map = tc_cluster_map(cl->cluster);
  const struct tc_pool_info *p = tc_map_pool(map, pool);
  if (p)
    *bs = p->block_size;
  tc_map_unref(map);
  if (!p)
    return tc_error(ENXIO, "pool %" PRIu64 ": not in /config/pools", pool);
  return 0;
}

static void
image_closed(void *arg, struct tc_image *img)
{
  struct open_image *o = arg;
  struct tc_client *cl = o->cl;
  (void) img;
  pthread_mutex_lock(&cl->lock);
  for (struct open_image **p = &cl->open; *p; p = &(*p)->next)
    if (*p == o) {
      *p = o->next;
      break;
    }
  pthread_mutex_unlock(&cl->lock);
  free(o);
}

/* The test hook's wait: say so (PATH.waiting), then wait for PATH. */
static void
chain_wait(char *path)
{
  char mark[4096];
  snprintf(mark, sizeof mark, "%s.waiting", path);
  FILE *f = fopen(mark, "w");
  if (f)
    fclose(f);
  for (int i = 0; i < 600 && access(path, F_OK) < 0; i++)
    usleep(100 * 1000);
  free(path);
}

/* The layer descriptions of m's chain (m alone unless all_layers), keys
 * resolved, into layers/names (MAX_LAYERS each); *bs = the block size.
 * *fence_rev = the KV revision from which m's parent has m as successor
 * (0: it has not): writes to m may start only once the parent is fenced. */
static int
chain_once(struct tc_client *cl, const struct tc_image_meta *m, bool all_layers, struct tc_layer_desc *layers,
           char (*names)[256], int *nout, uint32_t *bs, int64_t *fence_rev)
{
  int n = 0;
  *nout = 0;
  *fence_rev = 0;
  if (tc_client_block_size(cl, m->pool, bs) < 0)
    return tc_error(errno, "image %s: %s", m->name, tc_last_error());
  struct tc_image_meta cur = { 0 };
  const struct tc_image_meta *lm = m;
  int r = -1;
  for (;;) {
    struct tc_layer_desc *d = &layers[n];
    d->inode = TC_INODE(lm->pool, lm->id);
    snprintf(names[n], sizeof names[n], "%s", lm->name);
    d->name = names[n];
    d->integrity = lm->integrity;
    if (lm->enc_key) {
      if (tc_client_key_resolve(cl, lm->name, lm->enc_key, d->key) < 0)
        goto out;
      d->encrypted = true;
    }
    if (lm->retired) {
      tc_error(ESTALE, "image %s: its layer %s is retired (being deleted, or re-keyed meanwhile)", m->name,
               lm->name);
      goto out;
    }
    n++;
    uint32_t lbs = 0;
    if (tc_client_block_size(cl, lm->pool, &lbs) < 0 || lbs != *bs) {
      tc_error(EINVAL, "image %s: layer %s is in a pool with another block size", m->name, lm->name);
      goto out;
    }
    if (!all_layers || !lm->parent_id)
      break;
    if (n == MAX_LAYERS) {
      tc_error(ELOOP, "image %s: more than %d layers (a parent loop?)", m->name, MAX_LAYERS);
      goto out;
    }
    uint64_t pp = lm->parent_pool, pi = lm->parent_id;
    char *wait = __atomic_exchange_n(&cl->chain_wait, NULL, __ATOMIC_ACQ_REL);
    if (wait)
      chain_wait(wait);
    tc_image_meta_clear(&cur);
    int64_t prev = 0;
    if (read_inode(cl, pp, pi, &cur, &prev) < 0) {
      tc_error(errno, "image %s: its parent %" PRIu64 "/%" PRIu64 ": %s", m->name, pp, pi, tc_last_error());
      goto out;
    }
    if (n == 1 && cur.next_id == m->id && cur.next_pool == m->pool)
      *fence_rev = prev;
    lm = &cur;
  }
  *nout = n;
  r = 0;
out:
  tc_image_meta_clear(&cur);
  if (r < 0)
    tc_wipe(layers, MAX_LAYERS * sizeof *layers);
  return r;
}

/* chain_once, again from a fresh read of the top when it met a retired
 * layer: a re-key's finish retires the old layer and relinks the layer
 * above it in one transaction, but the walk reads the records one by one
 * and can see the layer above from before that transaction and the old
 * layer from after it. A layer still retired under a fresh read is a real
 * error (an image being deleted). */
static int
build_chain(struct tc_client *cl, const struct tc_image_meta *m, bool all_layers, struct tc_layer_desc *layers,
            char (*names)[256], int *nout, uint32_t *bs, int64_t *fence_rev)
{
  int r = chain_once(cl, m, all_layers, layers, names, nout, bs, fence_rev);
  for (int attempt = 0; r < 0 && errno == ESTALE && attempt < 3; attempt++) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    struct tc_image_meta top = { 0 };
    if (read_inode(cl, m->pool, m->id, &top, NULL) < 0)
      return tc_error(ESTALE, "%s", msg);
    r = chain_once(cl, &top, all_layers, layers, names, nout, bs, fence_rev);
    tc_image_meta_clear(&top);
  }
  return r;
}

/* The fence (common/README.md, "Layer switch and re-key"): a READ at KV
 * revision rev on one object of every PG of inode's pool, so that every PG
 * primary has read the image records at rev or later and refuses writes to
 * every layer fenced by then. Only then may writes go to the layer above a
 * fenced one: else a late write to the old layer, taken by an OSD that had
 * not heard, would end up under a newer sector of the new one. */
int
tc_client_fence(struct tc_client *cl, uint64_t inode, int64_t rev)
{
  struct tc_map *map = tc_cluster_map(cl->cluster);
  const struct tc_pool_info *p = tc_map_pool(map, TC_INODE_POOL(inode));
  uint32_t npg = p ? p->pg_count : 0, stripe = p ? p->pg_stripe_size : 0;
  tc_map_unref(map);
  if (!npg || !stripe)
    return tc_error(ENXIO, "inode %" PRIu64 "/%" PRIu64 ": its pool is not in /config/pools",
                    (uint64_t) TC_INODE_POOL(inode), (uint64_t) TC_INODE_ID(inode));
  struct tc_objop *ops = calloc(npg, sizeof *ops);
  uint8_t *buf = aligned_alloc(TC_SECTOR, (size_t) npg * TC_SECTOR), *bm = calloc(npg, 1);
  int r = -1;
  if (!ops || !buf || !bm) {
    tc_error(ENOMEM, "fence: out of memory");
    goto out;
  }
  /* (inode + offset / stripe) % npg: offsets k * stripe cover every PG. */
  for (uint32_t k = 0; k < npg; k++)
    ops[k] = (struct tc_objop) { .code = TC_OBJ_READ, .inode = inode, .offset = (uint64_t) k * stripe,
                                 .len = TC_SECTOR, .buf = buf + (size_t) k * TC_SECTOR, .bitmap = bm + k,
                                 .min_rev = (uint64_t) rev };
  /* -ESTALE (a retired inode) comes only once the primary reached rev: it
   * counts as an answer; submitting stops at the first error, so go on with
   * what was not submitted. */
  struct tc_objstore os = tc_cluster_objstore(cl->cluster);
  for (uint32_t k = 0; k < npg; k++)
    ops[k].result = 1;
  uint32_t first = 0;
  while (first < npg) {
    tc_objstore_run(&os, ops + first, npg - first, 32, NULL, NULL);
    uint32_t next = npg;
    for (uint32_t k = first; k < npg; k++) {
      if (ops[k].result == 1) {
        if (next == npg)
          next = k;
      }
      else if (ops[k].result < 0 && ops[k].result != -ESTALE) {
        tc_error(-ops[k].result, "fence of inode %" PRIu64 "/%" PRIu64 " at KV revision %" PRId64 ": %s",
                 (uint64_t) TC_INODE_POOL(inode), (uint64_t) TC_INODE_ID(inode), rev, strerror(-ops[k].result));
        goto out;
      }
    }
    first = next;
  }
  r = 0;
out:
  free(ops);
  free(buf);
  free(bm);
  return r;
}

/* Note the chain of the handle (under cl->lock). */
static void
set_chain(struct open_image *o, const struct tc_layer_desc *layers, int n)
{
  o->pool = TC_INODE_POOL(layers[0].inode);
  o->id = TC_INODE_ID(layers[0].inode);
  for (int k = 0; k < n; k++)
    o->chain[k] = layers[k].inode;
  o->nchain = n;
}

/* The switch hook of every handle (image.h): follow the top layer's
 * successors (next_id) to the image's current top, fence, and swap the
 * handle's chain for that top's. 1 moved, 0 nothing to move to. */
static int
switch_layers(void *arg, struct tc_image *img)
{
  struct open_image *o = arg;
  struct tc_client *cl = o->cl;
  uint64_t cur[MAX_LAYERS];
  int ncur = tc_image_layer_inodes(img, cur, MAX_LAYERS);
  struct tc_image_meta m;
  int64_t rev = 0;
  uint64_t pool = TC_INODE_POOL(cur[0]), id = TC_INODE_ID(cur[0]);
  if (read_inode(cl, pool, id, &m, &rev) < 0)
    return tc_error(errno, "image inode %" PRIu64 "/%" PRIu64 ": reloading its layers: %s", pool, id,
                    tc_last_error());
  for (int hops = 0; m.next_id; hops++) {
    uint64_t np = m.next_pool, ni = m.next_id;
    char old[256];
    snprintf(old, sizeof old, "%s", m.name);
    tc_image_meta_clear(&m);
    if (hops == MAX_LAYERS) {
      tc_error(ELOOP, "image %s: more than %d successors (a loop?)", old, MAX_LAYERS);
      return -1;
    }
    if (read_inode(cl, np, ni, &m, NULL) < 0)
      return tc_error(errno, "image %s: its successor %" PRIu64 "/%" PRIu64 ": %s", old, np, ni, tc_last_error());
  }
  struct tc_layer_desc *layers = calloc(MAX_LAYERS, sizeof *layers);
  char (*names)[256] = calloc(MAX_LAYERS, sizeof *names);
  int n = 0, r = -1;
  uint32_t bs;
  int64_t fence_rev = 0;
  if (!layers || !names) {
    tc_error(ENOMEM, "image %s: out of memory", m.name);
    goto out;
  }
  if (build_chain(cl, &m, true, layers, names, &n, &bs, &fence_rev) < 0)
    goto out;
  bool same = n == ncur;
  for (int k = 0; k < n && same; k++)
    same = layers[k].inode == cur[k];
  if (same) {
    r = 0;   /* nothing to move to: the error the I/O met stands */
    goto out;
  }
  if (layers[0].inode != cur[0] || fence_rev) {
    /* Writes go to a new top from now on: fence the layers it replaced. */
    if (tc_client_fence(cl, layers[0].inode, fence_rev > rev ? fence_rev : rev) < 0)
      goto out;
  }
  int sw = tc_image_replace_layers(img, cur[0], layers, n);
  if (sw < 0)
    goto out;
  if (sw == 0) {   /* another thread of this handle moved it meanwhile */
    r = 1;
    goto out;
  }
  pthread_mutex_lock(&cl->lock);
  set_chain(o, layers, n);
  pthread_mutex_unlock(&cl->lock);
  tc_info("client: image %s: now on inode %" PRIu64 "/%" PRIu64 " (%d layers, was %" PRIu64 "/%" PRIu64 ")",
          m.name, (uint64_t) TC_INODE_POOL(layers[0].inode), (uint64_t) TC_INODE_ID(layers[0].inode), n, pool, id);
  r = 1;
out:
  if (layers) {
    tc_wipe(layers, MAX_LAYERS * sizeof *layers);
    free(layers);
  }
  free(names);
  tc_image_meta_clear(&m);
  return r;
}

struct tc_image *
tc_client_open_meta(struct tc_client *cl, const struct tc_image_meta *m, bool readonly, bool all_layers)
{
  struct tc_layer_desc *layers = calloc(MAX_LAYERS, sizeof *layers);
  char (*names)[256] = calloc(MAX_LAYERS, sizeof *names);
  struct open_image *o = calloc(1, sizeof *o);
  struct tc_image *img = NULL;
  uint32_t bs = 0;
  int n = 0;
  int64_t fence_rev = 0;
  if (!layers || !names || !o) {
    tc_error(ENOMEM, "image %s: out of memory", m->name);
    goto out;
  }
  if (build_chain(cl, m, all_layers, layers, names, &n, &bs, &fence_rev) < 0)
    goto out;
  /* The image's parent was its top until a snapshot or a re-key: a writer
   * of the old top may not have heard yet (see tc_client_fence). */
  if (!readonly && fence_rev && tc_client_fence(cl, layers[0].inode, fence_rev) < 0) {
    tc_error(errno, "image %s: %s", m->name, tc_last_error());
    goto out;
  }
  struct tc_objstore os = tc_cluster_objstore(cl->cluster);
  if (!(img = tc_image_new(&os, bs, m->size, layers, n, readonly)))
    goto out;
  o->cl = cl;
  o->img = img;
  set_chain(o, layers, n);
  o->writable = !readonly;
  tc_image_set_close_hook(img, image_closed, o);
  /* A handle of the image follows it to a new top; one of a snapshot (a
   * layer that already has a successor) stays on it. */
  if (all_layers && !m->next_id)
    tc_image_set_switch_hook(img, switch_layers, o);
  pthread_mutex_lock(&cl->lock);
  o->next = cl->open;
  cl->open = o;
  pthread_mutex_unlock(&cl->lock);
  o = NULL;
out:
  if (layers) {
    tc_wipe(layers, MAX_LAYERS * sizeof *layers);
    free(layers);
  }
  free(names);
  free(o);
  return img;
}

struct tc_image *
tc_client_open(struct tc_client *cl, const char *name, bool readonly)
{
  struct tc_image_meta m;
  bool writable;
  if (tc_client_stat(cl, name, &m, &writable) < 0)
    return NULL;
  struct tc_image *img = tc_client_open_meta(cl, &m, readonly || !writable || strchr(name, '@'), true);
  tc_image_meta_clear(&m);
  return img;
}

static int
cmp_meta(const void *a, const void *b)
{
  return strcmp(((const struct tc_image_meta *) a)->name, ((const struct tc_image_meta *) b)->name);
}

int
tc_client_all_images(struct tc_client *cl, struct tc_image_meta **out, size_t *nout)
{
  char key[256];
  struct tc_kv_result res = { 0 };
  *out = NULL;
  *nout = 0;
  tc_client_key(cl, key, sizeof key, "/config/inode/");
  size_t plen = strlen(key);
  if (tc_kv_get_prefix(cl->kv, key, 0, &res) < 0)
    return -1;
  struct tc_image_meta *v = calloc(res.n_kvs ? res.n_kvs : 1, sizeof *v);
  if (!v) {
    tc_kv_result_free(&res);
    return tc_error(ENOMEM, "image list: out of memory");
  }
  size_t n = 0;
  for (size_t i = 0; i < res.n_kvs; i++) {
    uint64_t pool, id;
    if (res.kvs[i].key_len < plen ||
        tc_inode_key_parse((const char *) res.kvs[i].key + plen, res.kvs[i].key_len - plen, &pool, &id) < 0) {
      tc_warn("image list: ignoring the key %s: %s", (const char *) res.kvs[i].key, tc_last_error());
      continue;
    }
    if (tc_image_meta_parse(&v[n], pool, id, (const char *) res.kvs[i].value, res.kvs[i].value_len) < 0) {
      tc_warn("image list: %s", tc_last_error());
      continue;
    }
    n++;
  }
  tc_kv_result_free(&res);
  qsort(v, n, sizeof *v, cmp_meta);
  *out = v;
  *nout = n;
  return 0;
}

int
tc_client_list(struct tc_client *cl, tc_client_list_cb cb, void *opaque)
{
  struct tc_image_meta *v;
  size_t n;
  if (tc_client_all_images(cl, &v, &n) < 0)
    return -1;
  int r = 0;
  for (size_t i = 0; i < n; i++) {
    if (r == 0 && !v[i].hidden && tc_client_may_read(cl, &v[i]))
      r = cb(opaque, &v[i], !v[i].readonly && tc_client_may_write(cl, &v[i]));
    tc_image_meta_clear(&v[i]);
  }
  free(v);
  return r;
}

int
tc_client_resize(struct tc_client *cl, const char *name, uint64_t size)
{
  for (int attempt = 0; attempt < 16; attempt++) {
    struct tc_image_meta m;
    int64_t irev;
    if (tc_client_lookup(cl, name, &m, NULL, &irev) < 0)
      return -1;
    if (!tc_client_may_write(cl, &m)) {
      tc_image_meta_clear(&m);
      return tc_error(EACCES, "image %s: permission denied (resize needs write access)", name);
    }
    if (m.readonly) {
      tc_image_meta_clear(&m);
      return tc_error(EROFS, "image %s: read-only, cannot resize", name);
    }
    if (size % TC_SECTOR || size == 0) {
      tc_image_meta_clear(&m);
      return tc_error(EINVAL, "image %s: size %" PRIu64 " is not a positive multiple of 4096", name, size);
    }
    uint64_t old = m.size;
    if (m.rekey_from && size < old) {
      tc_image_meta_clear(&m);
      /* The copy would bring back the dropped sectors from the old layer. */
      return tc_error(EBUSY, "image %s: a re-key is in progress: shrink it after the re-key", name);
    }
    if (m.integrity && size < old) {
      tc_image_meta_clear(&m);
      /* Its tags would outlive the dropped sectors and fail them on regrowth. */
      return tc_error(EINVAL, "image %s: an authenticated image cannot shrink", name);
    }
    m.size = size;
    uint64_t pool = m.pool, id = m.id;
    int r = tc_client_put_record(cl, &m, irev, NULL, "resize");
    tc_image_meta_clear(&m);
    if (r < 0)
      return -1;
    if (r == 0)
      continue;   /* changed meanwhile: read again */
    r = 0;
    pthread_mutex_lock(&cl->lock);
    for (struct open_image *o = cl->open; o; o = o->next)
      if (o->pool == pool && o->id == id)
        tc_image_set_size(o->img, size);
    pthread_mutex_unlock(&cl->lock);
    if (size < old) {
      /* Shrinking drops the data beyond the end, so growing again reads zeros. */
      struct tc_osd_list_entry *e;
      size_t ne;
      uint64_t inode = TC_INODE(pool, id);
      uint32_t bs;
      if (tc_client_block_size(cl, pool, &bs) < 0 || tc_cluster_list(cl->cluster, inode, inode, 0, &e, &ne) < 0)
        return tc_error(errno, "image %s: resized, but dropping the data beyond the end failed: %s", name,
                        tc_last_error());
      for (size_t i = 0; i < ne && r == 0; i++) {
        if (e[i].inode != inode || e[i].offset + bs <= size)
          continue;
        uint64_t from = e[i].offset < size ? size : e[i].offset;
        struct tc_objop op = { .code = TC_OBJ_DELETE, .inode = inode, .offset = from,
                               .len = (uint32_t) (e[i].offset + bs - from) };
        r = tc_cluster_run(cl->cluster, &op);
      }
      free(e);
      if (r < 0)
        return tc_error(errno, "image %s: resized, but dropping the data beyond the end failed: %s", name,
                        tc_last_error());
    }
    return 0;
  }
  return tc_error(EAGAIN, "image %s: resize: the record kept changing, try again", name);
}
