/* libtromcho's client API (DESIGN.md section 7): images by name over the
 * cluster, for the nbdkit plugin, FUSE and the CLI.
 *
 * A tc_client holds the KV client, the cluster client (OSD connections, the
 * cluster map) and the caller's identity (the CN of `cert` and its
 * /config/user record when use_perms is on). Everything is thread-safe.
 * Images opened from it are tc_image handles of image.h (read, write,
 * flush, trim, zero, extents, size); close them with tc_image_free()
 * before tc_client_free().
 *
 * Errors: -1/NULL with errno and tc_last_error() naming the image: ENOENT
 * (no such image, or one the user may not read), EEXIST, EACCES (permission
 * denied), EROFS (read-only), ENOSPC, EBUSY (has children). */
#ifndef TROMCHO_CLIENT_H
#define TROMCHO_CLIENT_H
#include <stdbool.h>
#include <stdint.h>
#include "image.h"
#include "image_meta.h"
#include "tc_config.h"

struct tc_client;
struct tc_kv;
struct tc_cluster;
struct tc_identity;

struct tc_client *tc_client_new(const struct tc_config *cfg);   /* KV + cluster; cfg outlives it */
void tc_client_free(struct tc_client *cl);
/* "NAME" or "NAME@SNAP"; read-only if asked, if a snapshot, or if the user may only read (use_perms); ENOENT if absent or unreadable. Close with tc_image_free(). */
struct tc_image *tc_client_open(struct tc_client *cl, const char *name, bool readonly);
typedef int (*tc_client_list_cb)(void *opaque, const struct tc_image_meta *m, bool writable);
/* every image the user may read, name order; stops at and returns cb's first non-zero */
int tc_client_list(struct tc_client *cl, tc_client_list_cb cb, void *opaque);
int tc_client_stat(struct tc_client *cl, const char *name, struct tc_image_meta *m, bool *writable);
int tc_client_resize(struct tc_client *cl, const char *name, uint64_t size);   /* owner only */

/* --- for image_admin.c, the CLI and tests --- */
const struct tc_config *tc_client_config(const struct tc_client *cl);
struct tc_kv *tc_client_kv(struct tc_client *cl);
struct tc_cluster *tc_client_cluster(struct tc_client *cl);
/* The caller's identity for the rights checks (role ANON without use_perms). */
const struct tc_identity *tc_client_identity(const struct tc_client *cl);
bool tc_client_use_perms(const struct tc_client *cl);
/* "<etcd_prefix><suffix>" into buf. */
const char *tc_client_key(const struct tc_client *cl, char *buf, size_t len, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
/* Look an image up: its record and the mod_revisions of its index and
 * inode keys (for compare-and-swap). ENOENT if absent or unreadable. */
int tc_client_lookup(struct tc_client *cl, const char *name, struct tc_image_meta *m,
                     int64_t *index_rev, int64_t *inode_rev);
/* Read the record of inode (pool, id) and its mod_revision (may be NULL);
 * ENOENT if absent. No rights check. */
int tc_client_read_inode(struct tc_client *cl, uint64_t pool, uint64_t id, struct tc_image_meta *m, int64_t *rev);
/* Put m as the record of inode (m->pool, m->id) if that key's
 * mod_revision is still rev (one compare-and-swap): 1 done, 0 it changed
 * meanwhile, -1 error ("image NAME: WHAT: reason"). *newrev (may be NULL)
 * gets the KV's revision after the transaction, either way. */
int tc_client_put_record(struct tc_client *cl, const struct tc_image_meta *m, int64_t rev, int64_t *newrev,
                         const char *what);
/* Whether the caller may read / modify an image with this record. */
bool tc_client_may_read(const struct tc_client *cl, const struct tc_image_meta *m);
bool tc_client_may_write(const struct tc_client *cl, const struct tc_image_meta *m);
/* Every image record in the KV (readable or not), sorted by name; free
 * each with tc_image_meta_clear and the array with free. */
int tc_client_all_images(struct tc_client *cl, struct tc_image_meta **out, size_t *n);
/* Open an image without the rights check (for admin operations that
 * already checked): all_layers = false opens layer 0 alone. */
struct tc_image *tc_client_open_meta(struct tc_client *cl, const struct tc_image_meta *m, bool readonly,
                                     bool all_layers);
/* An image's enc_key (128 hex digits, or vault:ID fetched from Vault with
 * this client's certificate and cached token) as the 64-byte XTS key. */
int tc_client_key_resolve(struct tc_client *cl, const char *image, const char *enc_key,
                          uint8_t key[TC_XTS_KEY_SIZE]);
/* The fence of common/README.md ("Layer switch and re-key"): a READ at KV
 * revision rev on one object of every PG of inode's pool: once it returns,
 * every PG primary refuses writes to each layer fenced (read-only) at rev. */
int tc_client_fence(struct tc_client *cl, uint64_t inode, int64_t rev);
/* Block size of a pool (from the cluster map). */
int tc_client_block_size(struct tc_client *cl, uint64_t pool, uint32_t *bs);

#endif
