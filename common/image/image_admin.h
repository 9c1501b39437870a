/* Image administration (Vitastor's model): create, snapshot, clone,
 * flatten, delete, rename and modify, over a tc_client. Used by the CLI
 * now and by the gateway's admin API later.
 *
 * Every change of the KV is one compare-and-swap transaction, retried when
 * a record changed in between. A snapshot renames the image's current inode
 * to NAME@SNAP (read-only) and gives NAME a new inode whose parent it is.
 * Deleting an image deletes its objects on the OSDs first (SEC_LIST limited
 * to its inode, then DELETE per object) and refuses an image with children.
 * Rights (use_perms): create and clone need the pool's creator_group (or
 * admin); snapshot, flatten, delete and modify need write access.
 *
 * Return 0, or -1 with errno and tc_last_error() naming the image:
 * ENOENT, EEXIST, EACCES, EBUSY (has children), EINVAL (bad name, size, key). */
#ifndef TROMCHO_IMAGE_ADMIN_H
#define TROMCHO_IMAGE_ADMIN_H
#include <stdint.h>
#include "client.h"

struct tc_admin_create_opts {
  const char *name;
  uint64_t size;              /* bytes, multiple of 4096; 0 with a parent: the parent's size */
  const char *pool;           /* name or id; NULL: the parent's pool, else the only pool */
  const char *enc_key;        /* NULL: none (or the parent's key for a clone); "auto": a new
                               * random key; "none"; 128 hex digits; "vault:ID" */
  const char *owner;          /* NULL: the caller (use_perms) */
  const char *owner_group, *reader_group;
  const char *parent;         /* "NAME@SNAP": a clone of that snapshot */
  bool integrity;             /* authenticated sectors (needs a key) */
};
int tc_admin_create(struct tc_client *cl, const struct tc_admin_create_opts *o);

/* "NAME@SNAP": snapshot NAME. */
int tc_admin_snapshot(struct tc_client *cl, const char *snap);
/* The same, giving NAME's new top layer its own key (enc_key as for
 * create: "auto", "none", 128 hex digits, "vault:ID"; NULL: keep NAME's
 * key) while NAME@SNAP keeps the old one. */
int tc_admin_snapshot_key(struct tc_client *cl, const char *snap, const char *enc_key);

/* Progress of a long operation: `done` of `total` bytes (flatten: bytes of
 * the image scanned; delete: bytes of objects deleted). Called from the
 * caller's thread. */
typedef void (*tc_admin_progress_fn)(void *arg, uint64_t done, uint64_t total);

/* Copy every sector NAME sees through its parents into NAME itself,
 * encrypted with NAME's key, then drop the parent link. */
int tc_admin_flatten(struct tc_client *cl, const char *name);
/* The same, reporting progress to fn (may be NULL). */
int tc_admin_flatten_progress(struct tc_client *cl, const char *name, tc_admin_progress_fn fn, void *arg);

/* Delete NAME (or NAME@SNAP): its objects, then its records. */
int tc_admin_delete(struct tc_client *cl, const char *name);
/* The same; with shred, first destroy its KV-held key (the record's
 * enc_key becomes "shredded" in one compare-and-swap, so the data is
 * unreadable at once and open handles fail with EKEYREVOKED), then delete
 * the data and the records. *shred_rev (may be NULL) = the KV revision of
 * that write: the KV's history keeps the old value until it is compacted
 * at or after it. Refused (EINVAL) for an unencrypted image and for a key
 * in Vault. Another image holding the same key (a snapshot) is warned of. */
int tc_admin_delete_shred(struct tc_client *cl, const char *name, bool shred, int64_t *shred_rev);
/* Delete NAME, reporting progress to fn (may be NULL). */
int tc_admin_delete_progress(struct tc_client *cl, const char *name, tc_admin_progress_fn fn, void *arg);
/* Delete with optional shredding, reporting progress to fn (may be NULL). */
int tc_admin_delete_shred_progress(struct tc_client *cl, const char *name, bool shred, int64_t *shred_rev,
                                   tc_admin_progress_fn fn, void *arg);

/* Re-key NAME online (common/README.md, "Layer switch and re-key"): a new
 * top layer with the new key (enc_key: "auto", 128 hex digits or
 * "vault:ID") above NAME's current one, which is fenced (read-only,
 * hidden) and copied into it in the background, sector by sector where the
 * new layer has nothing yet, re-encrypted; then the old layer is retired
 * (its record keeps no key) and its data deleted. Reads and writes go on
 * through open handles, which move to the new layer. Resumable at any
 * point: with enc_key NULL (or when a re-key of NAME is in progress) it
 * continues the one in progress. fn reports bytes of the image copied.
 * EINVAL (bad key, no re-key to resume), ENOTSUP (authenticated image),
 * EROFS (read-only image). */
int tc_admin_rekey(struct tc_client *cl, const char *name, const char *enc_key, tc_admin_progress_fn fn, void *arg);

struct tc_admin_modify_opts {
  uint64_t resize;            /* 0: keep */
  const char *rename;         /* NULL: keep */
  int readonly;               /* -1 keep, 0 read-write, 1 read-only */
  const char *owner, *owner_group, *reader_group;   /* NULL keep, "" clear */
};
int tc_admin_modify(struct tc_client *cl, const char *name, const struct tc_admin_modify_opts *o);

/* Bytes stored per inode of one pool (sum over objects of present sectors
 * x 4096), by SEC_LIST. cb(opaque, inode, bytes) for each inode found. */
int tc_admin_usage(struct tc_client *cl, uint64_t pool, int timeout_ms,
                   void (*cb)(void *opaque, uint64_t inode, uint64_t bytes), void *opaque);

/* The same for inodes [first, last] of one pool (a user who is not an
 * admin may only list one image's inode: first == last). */
int tc_admin_usage_range(struct tc_client *cl, uint64_t first, uint64_t last, int timeout_ms,
                         void (*cb)(void *opaque, uint64_t inode, uint64_t bytes), void *opaque);

/* Whether a name may be an image name (snapshot: exactly one '@'). */
int tc_admin_check_name(const char *name, bool snapshot);

#endif
