/* Image records in the KV (DESIGN.md sections 3 and 6), Vitastor's layout:
 *
 *   /index/image/<name>            {"id": ID, "pool_id": POOL}
 *   /config/inode/<pool>/<id>      {"name": .., "size": BYTES, "parent_pool": P, "parent_id": I,
 *                                   "readonly": bool, "enc_key": "<128 hex>" | "vault:<ID>" | "shredded",
 *                                   "owner": .., "owner_group": .., "reader_group": ..,
 *                                   "integrity": bool (tromcho's: authenticated sectors),
 *                                   tromcho's layer switch and re-key (common/README.md):
 *                                   "next_pool": P, "next_id": I (the layer that replaced this
 *                                   one as the image's top: open handles move there),
 *                                   "hidden": bool (a re-key's old layer: not listed),
 *                                   "retired": bool (its data is deleted: OSDs refuse reads),
 *                                   "rekey_from": ID, "rekey_done": BYTES (a re-key of this
 *                                   layer from inode ID of its pool: while ID is its parent, copied
 *                                   up to BYTES; then ID's data is being deleted)}
 *   /index/maxid/<pool>            the largest id allocated in the pool
 *
 * The inode number used on the data path carries the pool in its top 16
 * bits: inode = pool << 48 | id. This file parses and writes those records
 * and resolves an image's key; it does no I/O itself except through the
 * key sources (Vault keys: the image layer, vault.h). */
#ifndef TROMCHO_IMAGE_META_H
#define TROMCHO_IMAGE_META_H
#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>
#include "crypto.h"
#include "tc_config.h"

#define TC_POOL_SHIFT 48
#define TC_INODE(pool, id) (((uint64_t) (pool) << TC_POOL_SHIFT) | (id))
#define TC_INODE_POOL(inode) ((inode) >> TC_POOL_SHIFT)
#define TC_INODE_ID(inode) ((inode) & ((1ULL << TC_POOL_SHIFT) - 1))

/* enc_key of an image whose KV-held key `rm --shred` destroyed before its
 * data: it opens no more (EKEYREVOKED). */
#define TC_KEY_SHREDDED "shredded"

struct tc_image_meta {
  char *name;
  uint64_t pool, id;           /* this layer's inode */
  uint64_t size;
  uint64_t parent_pool, parent_id;   /* 0, 0: no parent */
  bool readonly;
  bool integrity;              /* authenticated: per-sector tags (image_integrity.h) */
  char *enc_key;               /* as stored: NULL, 128 hex digits, vault:<ID> or TC_KEY_SHREDDED */
  char *owner, *owner_group, *reader_group;
  uint64_t next_pool, next_id; /* 0, 0: none; else the layer that replaced this one on top */
  bool hidden;                 /* not listed (a re-key's old layer) */
  bool retired;                /* data deleted; kept as the fence of its inode */
  uint64_t rekey_from;         /* 0: none; else being re-keyed from inode id rekey_from (same pool) */
  uint64_t rekey_done;         /* bytes of the image re-keyed so far */
};

/* Parse a /config/inode value. pool and id come from the key. Returns 0, or
 * -1 with a message naming the image and the field that is wrong. */
int tc_image_meta_parse(struct tc_image_meta *m, uint64_t pool, uint64_t id, const char *json, size_t len);
/* The JSON value to store (caller frees). */
char *tc_image_meta_json(const struct tc_image_meta *m);
void tc_image_meta_clear(struct tc_image_meta *m);

/* Parse a /index/image value. */
int tc_image_index_parse(const char *json, size_t len, uint64_t *pool, uint64_t *id);

/* Turn an enc_key into the 64-byte XTS key. "HEX" (128 hex digits) is the
 * key itself; "vault:ID" fails with ENOTSUP here: it needs a Vault login,
 * which tc_client_key_resolve (image layer, client.h) does. Refuses
 * malformed keys and keys with equal halves. */
int tc_image_key_resolve(const struct tc_config *cfg, const char *image, const char *enc_key,
                         uint8_t key[TC_XTS_KEY_SIZE]);
/* A new random key as 128 hex digits (+NUL) for `create --enc_key auto`. */
int tc_image_key_generate(char hex[2 * TC_XTS_KEY_SIZE + 1]);

#endif
