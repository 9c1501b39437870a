/* The seed document's rights tables (see perms.h). */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "osd_ops.h"
#include "perms.h"
#include "inode_key.h"

const char *
tc_osd_op_name(int op)
{
  switch (op) {
  case TC_OP_READ: return "READ";
  case TC_OP_WRITE: return "WRITE";
  case TC_OP_DELETE: return "DELETE";
  case TC_OP_WRITE_PARTIAL: return "WRITE_PARTIAL";
  case TC_OP_WRITE_IF: return "WRITE_IF";
  case TC_OP_SYNC: return "SYNC";
  case TC_OP_SCRUB: return "SCRUB";
  case TC_OP_DESCRIBE: return "DESCRIBE";
  case TC_OP_PING: return "PING";
  case TC_OP_SHOW_CONFIG: return "SHOW_CONFIG";
  case TC_OP_SEC_LIST: return "SEC_LIST";
  case TC_OP_SEC_READ: return "SEC_READ";
  case TC_OP_SEC_WRITE: return "SEC_WRITE";
  case TC_OP_SEC_WRITE_STABLE: return "SEC_WRITE_STABLE";
  case TC_OP_SEC_SYNC: return "SEC_SYNC";
  case TC_OP_SEC_STABILIZE: return "SEC_STABILIZE";
  case TC_OP_SEC_ROLLBACK: return "SEC_ROLLBACK";
  case TC_OP_SEC_DELETE: return "SEC_DELETE";
  case TC_OP_SEC_READ_BMP: return "SEC_READ_BMP";
  case TC_OP_SEC_LOCK: return "SEC_LOCK";
  }
  return NULL;
}

static bool
in_group(const struct tc_identity *id, const char *group)
{
  if (!group || !*group || !id->user || !id->user->groups)
    return false;
  for (const char *const *g = id->user->groups; *g; g++)
    if (strcmp(*g, group) == 0)
      return true;
  return false;
}

bool
tc_perm_is_admin(const struct tc_identity *id)
{
  return id->role == TC_ROLE_USER && id->user && id->user->admin;
}

static bool
is_owner(const struct tc_identity *id, const struct tc_image_acl *img)
{
  return id->role == TC_ROLE_USER && id->name && img->owner && strcmp(img->owner, id->name) == 0;
}

bool
tc_perm_image_read(const struct tc_identity *id, const struct tc_image_acl *img)
{
  if (tc_perm_is_admin(id))
    return true;
  if (id->role != TC_ROLE_USER || !img)
    return false;
  return is_owner(id, img) || in_group(id, img->owner_group) || in_group(id, img->reader_group);
}

bool
tc_perm_image_write(const struct tc_identity *id, const struct tc_image_acl *img)
{
  if (tc_perm_is_admin(id))
    return true;
  if (id->role != TC_ROLE_USER || !img)
    return false;
  return is_owner(id, img) || in_group(id, img->owner_group);
}

bool
tc_perm_pool_create(const struct tc_identity *id, const char *creator_group)
{
  return tc_perm_is_admin(id) || (id->role == TC_ROLE_USER && in_group(id, creator_group));
}

/* --- OSD data rights --- */

static bool
is_sec_op(int op)
{
  return op >= TC_OP_SEC_READ && op <= TC_OP_SEC_LOCK;
}

bool
tc_perm_osd_op(const struct tc_identity *id, int op, const struct tc_image_acl *img)
{
  if (!tc_osd_op_name(op))
    return false;
  /* Not tied to an image: always allowed. SHOW_CONFIG's "I am an OSD" claim
   * is checked by its handler against the proved role. */
  if (op == TC_OP_SYNC || op == TC_OP_PING || op == TC_OP_SHOW_CONFIG)
    return true;
  if (id->role == TC_ROLE_OSD)
    return is_sec_op(op) || op == TC_OP_SEC_LIST;
  if (id->role != TC_ROLE_USER)   /* monitors and anonymous peers: nothing else */
    return false;
  if (is_sec_op(op))              /* cluster operations: only other OSDs */
    return false;
  switch (op) {
  case TC_OP_READ:
    return tc_perm_image_read(id, img);
  case TC_OP_WRITE:
  case TC_OP_WRITE_PARTIAL:
  case TC_OP_WRITE_IF:
  case TC_OP_DELETE:
  case TC_OP_SCRUB:
    return tc_perm_image_write(id, img);
  case TC_OP_DESCRIBE:
    return tc_perm_is_admin(id);
  case TC_OP_SEC_LIST:
    /* Admins list anything; clients only a listing limited to an image
     * they can read. */
    return tc_perm_is_admin(id) || (img && tc_perm_image_read(id, img));
  }
  return false;
}

/* --- KV data rights --- */

/* A rule: a key that matches exactly, or a prefix ending in '/'. */
static bool
key_matches(const char *key, const char *pattern)
{
  size_t n = strlen(pattern);
  if (pattern[n - 1] == '/')
    return strncmp(key, pattern, n) == 0;
  return strcmp(key, pattern) == 0;
}

static bool
key_in(const char *key, const char *const *patterns)
{
  for (; *patterns; patterns++)
    if (key_matches(key, *patterns))
      return true;
  return false;
}

static const char *const client_read_always[] = {
  "/config/global", "/config/node_placement", "/config/pools", "/pg/config",
  "/osd/state/", "/pg/state/", "/index/maxid/", NULL
};
static const char *const admin_read[] = {
  "/stats", "/mon/", "/pg/", "/pgstats/", "/inode/stats/", "/pool/stats/", NULL
};
static const char *const admin_write[] = { "/config/", "/osd/", "/index/", "/pg/history/", NULL };
static const char *const osd_read[] = { "/pg/config", "/config/", "/osd/", "/pg/state/", "/pg/history/", "/pgstats/", NULL };
/* Narrower than the seed's table (which gives every OSD /osd/..., /pg/state/...,
 * /pg/history/..., /pgstats/...): an OSD writes its own state and stats and the
 * state of the PGs it leads, nothing more. Which OSD is "its own" the
 * gateway's filter decides from the registration lease (kvfilter.c). */
static const char *const osd_write[] = { "/osd/state/", "/osd/stats/", "/pg/state/", "/pgstats/", NULL };
static const char *const mon_read[] = { "/config/", "/osd/", "/pgstats/", NULL };
static const char *const mon_write[] = {
  "/pg/config", "/stats", "/history/last_clean_pgs", "/mon/", "/pg/history/",
  "/inode/stats/", "/pool/stats/", NULL
};

/* "<pool>/<id>" ending the key, canonical only (inode_key.h): a second
 * spelling of an inode would alias another user's image. */
static bool
parse_pool_inode(const char *s, uint64_t *pool, uint64_t *inode)
{
  return tc_inode_key_parse(s, strlen(s), pool, inode) == 0;
}

static bool
parse_pool_id(const char *s, uint64_t *v)
{
  return tc_parse_canonical_u64(s, strlen(s), TC_POOL_MAX, v) == 0 && *v > 0;
}

static bool
client_kv(const struct tc_identity *id, const char *key, enum tc_kv_access access,
          const struct tc_kv_lookup *lk, const struct tc_image_acl *new_img)
{
  uint64_t pool, inode;
  const struct tc_image_acl *img = NULL;
  const char *rest;

  if (access == TC_KV_READ && key_in(key, client_read_always))
    return true;
  /* Not in the seed's table: a client reads its own user record, and only
   * that one, to learn its type and groups (DESIGN.md section 3). */
  if (access == TC_KV_READ && strncmp(key, "/config/user/", 13) == 0 && id->name && strcmp(key + 13, id->name) == 0)
    return true;
  if (strncmp(key, "/config/inode/", 14) == 0) {
    if (!parse_pool_inode(key + 14, &pool, &inode))
      return false;
    img = lk && lk->by_inode ? lk->by_inode(lk->ctx, pool, inode) : NULL;
    if (access == TC_KV_READ)
      return tc_perm_image_read(id, img);
    if (img)   /* modify or delete an existing image: must own it, and keep owning it */
      return tc_perm_image_write(id, img) && (!new_img || tc_perm_image_write(id, new_img));
    /* create: an image the user will own, in a pool it may create in */
    if (!new_img || !tc_perm_image_write(id, new_img) || !lk || !lk->pool_creator_group)
      return false;
    bool exists = false;
    const char *cg = lk->pool_creator_group(lk->ctx, pool, &exists);
    return exists && tc_perm_pool_create(id, cg);
  }
  if (strncmp(key, "/index/image/", 13) == 0) {
    rest = key + 13;
    if (!*rest)
      return false;
    img = lk && lk->by_name ? lk->by_name(lk->ctx, rest) : NULL;
    if (access == TC_KV_READ)
      return tc_perm_image_read(id, img);
    if (img)
      return tc_perm_image_write(id, img) && (!new_img || tc_perm_image_write(id, new_img));
    return new_img && tc_perm_image_write(id, new_img);
  }
  if (strncmp(key, "/inode/stats/", 13) == 0) {
    if (access != TC_KV_READ || !parse_pool_inode(key + 13, &pool, &inode))
      return false;
    img = lk && lk->by_inode ? lk->by_inode(lk->ctx, pool, inode) : NULL;
    return tc_perm_image_read(id, img);
  }
  if (strncmp(key, "/index/maxid/", 13) == 0 && access == TC_KV_WRITE) {
    bool exists = false;
    if (!parse_pool_id(key + 13, &pool) || !lk || !lk->pool_creator_group)
      return false;
    const char *cg = lk->pool_creator_group(lk->ctx, pool, &exists);
    return exists && tc_perm_pool_create(id, cg);
  }
  return false;
}

int
tc_perm_osd_key(const char *key, uint64_t *osd, uint64_t *pool, uint32_t *pg)
{
  uint64_t a, b;
  const char *rest, *slash;
  if (!strncmp(key, "/osd/state/", 11) || !strncmp(key, "/osd/stats/", 11)) {
    rest = key + 11;
    if (tc_parse_canonical_u64(rest, strlen(rest), UINT64_MAX, &a) < 0 || a == 0)
      return 0;
    if (osd)
      *osd = a;
    return key[9] == 'e' ? TC_OSD_KEY_STATE : TC_OSD_KEY_STATS;
  }
  int kind = TC_OSD_KEY_PG_STATE;
  if (!strncmp(key, "/pg/state/", 10))
    rest = key + 10;
  else if (!strncmp(key, "/pgstats/", 9)) {
    rest = key + 9;
    kind = TC_OSD_KEY_PG_STATS;
  }
  else
    return 0;
  if (!(slash = strchr(rest, '/')))
    return 0;
  if (tc_parse_canonical_u64(rest, (size_t) (slash - rest), TC_POOL_MAX, &a) < 0 || a == 0 ||
      tc_parse_canonical_u64(slash + 1, strlen(slash + 1), UINT32_MAX, &b) < 0)
    return 0;
  if (pool)
    *pool = a;
  if (pg)
    *pg = (uint32_t) b;
  return kind;
}

bool
tc_perm_kv(const struct tc_identity *id, const char *key, enum tc_kv_access access,
           const struct tc_kv_lookup *lk, const struct tc_image_acl *new_img)
{
  if (!key || key[0] != '/')
    return false;
  switch (id->role) {
  case TC_ROLE_ANON:
    return false;   /* with use_perms every KV client proves who it is */
  case TC_ROLE_OSD:
    if (access == TC_KV_READ)
      return key_in(key, osd_read) || key_in(key, osd_write);
    return tc_perm_osd_key(key, NULL, NULL, NULL) != 0;
  case TC_ROLE_MON:
    return key_in(key, mon_write) || (access == TC_KV_READ && key_in(key, mon_read));
  case TC_ROLE_USER:
    if (tc_perm_is_admin(id))
      return key_in(key, admin_write) || (access == TC_KV_READ && key_in(key, admin_read));
    return client_kv(id, key, access, lk, new_img);
  }
  return false;
}

/* Can a key under `prefix` match `pattern`? */
static bool
prefix_overlaps(const char *prefix, const char *pattern)
{
  size_t np = strlen(prefix), nt = strlen(pattern);
  if (strncmp(pattern, prefix, np < nt ? np : nt) != 0)
    return false;
  /* pattern longer: it lies under the prefix. Prefix longer: only a
   * prefix pattern (ending '/') covers keys under it. */
  return np <= nt || pattern[nt - 1] == '/';
}

static bool
prefix_in(const char *prefix, const char *const *patterns)
{
  for (; *patterns; patterns++)
    if (prefix_overlaps(prefix, *patterns))
      return true;
  return false;
}

bool
tc_perm_kv_prefix_visible(const struct tc_identity *id, const char *prefix)
{
  static const char *const client_image_keys[] = { "/config/inode/", "/index/image/", "/inode/stats/", NULL };
  switch (id->role) {
  case TC_ROLE_ANON:
    return false;
  case TC_ROLE_OSD:
    return prefix_in(prefix, osd_read) || prefix_in(prefix, osd_write);
  case TC_ROLE_MON:
    return prefix_in(prefix, mon_read) || prefix_in(prefix, mon_write);
  case TC_ROLE_USER:
    if (tc_perm_is_admin(id))
      return prefix_in(prefix, admin_read) || prefix_in(prefix, admin_write);
    return prefix_in(prefix, client_read_always) || prefix_in(prefix, client_image_keys);
  }
  return false;
}

/* --- API rights --- */

bool
tc_perm_api(const struct tc_identity *id, const char *call,
            const struct tc_image_acl *img, const char *pool_creator_group)
{
  if (tc_perm_is_admin(id))
    return true;
  if (id->role != TC_ROLE_USER)
    return false;
  if (strcmp(call, "image/list") == 0)
    return !img || tc_perm_image_read(id, img);   /* the list is filtered per image */
  if (strcmp(call, "image/create") == 0)
    /* a new image in a pool, or a snapshot of an image the user owns (img) */
    return img ? tc_perm_image_write(id, img) : tc_perm_pool_create(id, pool_creator_group);
  if (!strcmp(call, "image/delete") || !strcmp(call, "image/flatten") || !strcmp(call, "image/modify"))
    return tc_perm_image_write(id, img);
  return false;
}

const char *
tc_identity_str(const struct tc_identity *id, char *buf, unsigned len)
{
  switch (id->role) {
  case TC_ROLE_OSD: snprintf(buf, len, "osd"); break;
  case TC_ROLE_MON: snprintf(buf, len, "mon"); break;
  case TC_ROLE_USER:
    snprintf(buf, len, "%s %s", tc_perm_is_admin(id) ? "admin" : "user", id->name ? id->name : "?");
    break;
  default: snprintf(buf, len, "anyone"); break;
  }
  return buf;
}
