/* The image layer (DESIGN.md section 6): byte-granular reads and writes of
 * a layered, optionally AES-256-XTS encrypted image over an object store.
 *
 * An image is a chain of layers: layer 0 is the image's own inode, layer i+1
 * the parent of layer i (a snapshot). Each layer has its own XTS key or none.
 * A sector is read from the first layer that has it and decrypted with that
 * layer's key; a sector no layer has reads as zeros. Writes always go to
 * layer 0, encrypted with its key; sector tweak = image byte offset / 4096.
 *
 * Writes that do not cover whole sectors are read-modify-write. Every write
 * holds a lock on the sectors it touches, shared by every handle of the
 * image in this process (sector_lock.h), and across processes the partial
 * sectors go through the OSD (image_partial.c: WRITE_PARTIAL, WRITE_IF), so
 * no write to other bytes of a sector is lost, concurrent overlapping writes
 * leave each sector equal to one writer's version and no reader sees a torn
 * sector. All calls are thread-safe: XTS contexts are pooled per layer. */
#ifndef TROMCHO_IMAGE_H
#define TROMCHO_IMAGE_H
#include <stdbool.h>
#include <stdint.h>
#include "crypto.h"
#include "objstore.h"

struct tc_layer_desc {
  uint64_t inode;
  bool encrypted;
  uint8_t key[TC_XTS_KEY_SIZE];   /* when encrypted; copied, wiped on close */
  bool integrity;                 /* authenticated (needs a key): image_integrity.h */
  const char *name;               /* the layer's image name, for messages (copied) */
};

struct tc_image;

/* layers[0] is the image, layers[1..] its ancestors, nearest first.
 * size must be a multiple of 4096; block_size a power of two >= 4096. */
struct tc_image *tc_image_new(const struct tc_objstore *os, uint32_t block_size, uint64_t size,
                              const struct tc_layer_desc *layers, int nlayers, bool readonly);
void tc_image_free(struct tc_image *img);
/* Run fn(arg, img) at the start of tc_image_free, once: whoever opened the
 * image (e.g. the cluster client) releases what it holds for it there. */
void tc_image_set_close_hook(struct tc_image *img, void (*fn)(void *arg, struct tc_image *img), void *arg);

/* The layer switch (common/README.md, "Layer switch and re-key"): when the
 * image's chain changed under an open handle (a snapshot or a re-key put a
 * new top layer above it, a re-key finished), fn(arg, img) reloads it and
 * calls tc_image_replace_layers. It runs on the I/O caller's thread, with
 * no lock of the image held: before the next read or write once
 * tc_image_mark_stale was called, and when the OSD refused a write to the
 * top layer (EROFS: fenced) or a read of a layer (ESTALE: retired), after
 * which the I/O is retried on the new chain. fn returns 1 when the chain
 * changed, 0 when there is nothing to move to (the error stands), -1 on
 * error. */
void tc_image_set_switch_hook(struct tc_image *img, int (*fn)(void *arg, struct tc_image *img), void *arg);
/* The chain may have changed: reload it before the next I/O. Thread-safe. */
void tc_image_mark_stale(struct tc_image *img);
/* Swap in a new chain if the top layer is still expect_top; waits until no
 * I/O of this handle is running. 1 swapped, 0 the top was not expect_top,
 * -1 on error (the old chain stays). */
int tc_image_replace_layers(struct tc_image *img, uint64_t expect_top, const struct tc_layer_desc *layers,
                            int nlayers);
/* The inodes of the chain, top first, into out[0..max): their number. */
int tc_image_layer_inodes(struct tc_image *img, uint64_t *out, int max);

uint64_t tc_image_size(const struct tc_image *img);
void tc_image_set_size(struct tc_image *img, uint64_t size);
bool tc_image_readonly(const struct tc_image *img);
/* From now on writes fail with EROFS and why in the message (e.g. the image
 * was snapshotted or deleted while open). Thread-safe. */
void tc_image_set_readonly(struct tc_image *img, const char *why);
/* From now on reads and writes fail with EKEYREVOKED and why (the image's
 * key was shredded). Thread-safe. */
void tc_image_set_revoked(struct tc_image *img, const char *why);

/* Return 0, or -1 with errno and tc_last_error(). Ranges beyond the end of
 * the image fail with EINVAL (ENOSPC for writes). */
int tc_image_read(struct tc_image *img, void *buf, uint64_t len, uint64_t offset);
int tc_image_write(struct tc_image *img, const void *buf, uint64_t len, uint64_t offset);
/* tc_image_write with flags: TC_IMAGE_FUA returns only once the bytes
 * written (and on an authenticated image their tags) are durable, as if a
 * flush followed, without flushing any other write (objstore.h, TC_OBJ_FUA). */
#define TC_IMAGE_FUA TC_OBJ_FUA
int tc_image_write_flags(struct tc_image *img, const void *buf, uint64_t len, uint64_t offset, unsigned flags);
/* Make every completed write durable. */
int tc_image_flush(struct tc_image *img);
/* Make the range read as zeros. Whole sectors are deallocated when no parent
 * layer could show through; partial sectors are zero-written. */
int tc_image_zero(struct tc_image *img, uint64_t len, uint64_t offset, bool may_trim);
/* Whether tc_image_zero over whole sectors is a metadata-only operation
 * (no data written): true when it may trim and no parent can show through. */
bool tc_image_zero_fast(const struct tc_image *img, bool may_trim);
/* Trim = zero that may deallocate (reads return zeros afterwards). */
int tc_image_trim(struct tc_image *img, uint64_t len, uint64_t offset);

/* Extents: calls cb for consecutive runs of [offset, offset+len) that hold
 * data in some layer (allocated=true) or in none (false), 4096 granularity. */
typedef int (*tc_extent_cb)(void *opaque, uint64_t offset, uint64_t len, bool allocated);
int tc_image_extents(struct tc_image *img, uint64_t len, uint64_t offset, tc_extent_cb cb, void *opaque);

#endif
