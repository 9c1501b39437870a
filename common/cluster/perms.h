/* Access rights: the seed document's three tables (KV data rights, OSD data
 * rights, API rights) as pure functions. The gateway (KV filter, admin API)
 * and every OSD call these with the identity the TLS or messenger handshake
 * proved and the user/image/pool records they hold from the KV; nothing here
 * does I/O, so the tables are unit-tested exhaustively (tests/test-perms.c).
 *
 * Rights only apply with use_perms; without it callers skip the checks. */
#ifndef TROMCHO_PERMS_H
#define TROMCHO_PERMS_H
#include <stdbool.h>
#include <stdint.h>
#include "identity.h"


/* A user's record, /config/user/<name>. NULL user = no record: a user
 * without a record is a client that belongs to no group. */
struct tc_user {
  const char *name;
  bool admin;                 /* type=admin */
  const char *const *groups;  /* NULL-terminated, may be NULL */
};

struct tc_identity {
  enum tc_peer_role role;
  const char *name;           /* user name (CN) for TC_ROLE_USER */
  const struct tc_user *user; /* its record, or NULL */
};

/* The access fields of an image (/config/inode/<pool>/<inode>). */
struct tc_image_acl {
  const char *owner;
  const char *owner_group;
  const char *reader_group;
};

/* What the caller may do with one image. */
bool tc_perm_image_read(const struct tc_identity *id, const struct tc_image_acl *img);
bool tc_perm_image_write(const struct tc_identity *id, const struct tc_image_acl *img);
/* May create images in a pool whose creator_group is given (NULL: none). */
bool tc_perm_pool_create(const struct tc_identity *id, const char *creator_group);
bool tc_perm_is_admin(const struct tc_identity *id);

/* --- OSD data rights ---
 * img is the ACL of the image the operation addresses (NULL if the inode has
 * no image record). For SEC_LIST, img is the image the listing is limited
 * to, or NULL for an unlimited listing. Returns true if allowed. */
bool tc_perm_osd_op(const struct tc_identity *id, int opcode, const struct tc_image_acl *img);

/* --- KV data rights ---
 * Keys are given without the etcd_prefix. The caller resolves image keys
 * through this lookup so the rules can ask about the image a key belongs to. */
struct tc_kv_lookup {
  void *ctx;
  /* ACL of the image with this inode in this pool, or NULL. */
  const struct tc_image_acl *(*by_inode)(void *ctx, uint64_t pool, uint64_t inode);
  /* ACL of the image with this name, or NULL. */
  const struct tc_image_acl *(*by_name)(void *ctx, const char *name);
  /* creator_group of a pool; *exists = false if there is no such pool. */
  const char *(*pool_creator_group)(void *ctx, uint64_t pool, bool *exists);
};

enum tc_kv_access { TC_KV_READ, TC_KV_WRITE };

/* May the identity read (or write) this key? For a write that creates or
 * replaces an image record, new_img is the ACL in the new value (NULL for a
 * delete): a client may only write an image it owns, and may create one it
 * will own in a pool it may create in. */
bool tc_perm_kv(const struct tc_identity *id, const char *key, enum tc_kv_access access,
                const struct tc_kv_lookup *lk, const struct tc_image_acl *new_img);

/* The keys an OSD may write, by shape (canonical decimal numbers only):
 * /osd/state/<n> (TC_OSD_KEY_STATE), /osd/stats/<n> (TC_OSD_KEY_STATS),
 * /pg/state/<pool>/<pg> (TC_OSD_KEY_PG_STATE), /pgstats/<pool>/<pg>
 * (TC_OSD_KEY_PG_STATS: the same report, for the monitors, whose rights
 * in the seed's table cover /pgstats/ and not /pg/state/); 0 for any other
 * key. The numbers go to the non-NULL pointers. Whether the writing OSD is
 * n (or the PG's primary) is the KV filter's to prove (gateway/kvfilter.c). */
enum { TC_OSD_KEY_STATE = 1, TC_OSD_KEY_STATS = 2, TC_OSD_KEY_PG_STATE = 3, TC_OSD_KEY_PG_STATS = 4 };
int tc_perm_osd_key(const char *key, uint64_t *osd, uint64_t *pool, uint32_t *pg);

/* May the identity read some key under this prefix range at all (used to
 * decide whether a range request needs per-key filtering or a refusal). */
bool tc_perm_kv_prefix_visible(const struct tc_identity *id, const char *prefix);

/* --- API rights (admin HTTPS API) ---
 * "image/list" for readable images, "image/create" in pools the user may
 * create in (or snapshots of images the user owns), "image/delete",
 * "image/flatten", "image/modify" for owned images; anything else: admin. */
bool tc_perm_api(const struct tc_identity *id, const char *call,
                 const struct tc_image_acl *img, const char *pool_creator_group);

/* Human-readable role: "osd", "mon", "user alice", "anyone". buf >= 80. */
const char *tc_identity_str(const struct tc_identity *id, char *buf, unsigned len);

#endif
