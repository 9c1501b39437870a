/* Inside the image layer (image.c, image_partial.c): not an API. */
#ifndef TROMCHO_IMAGE_INT_H
#define TROMCHO_IMAGE_INT_H
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "image.h"

#define SECTOR TC_SECTOR

/* XTS contexts of one layer: a context is not thread-safe, so callers take
 * one from the pool for the duration of a call and give it back. */
struct xts_pool {
  pthread_mutex_t lock;
  uint8_t key[TC_XTS_KEY_SIZE];
  struct tc_xts **free;
  int nfree, cap;
};

struct layer {
  uint64_t inode;
  bool encrypted;
  struct xts_pool xts;
  struct tc_integrity *integ;   /* authenticated layer: tags (image_integrity.c) */
};

struct tc_image {
  struct tc_objstore os;
  uint32_t block_size;
  uint64_t size;
  bool readonly;
  int nlayers;
  struct layer *layers;
  pthread_mutex_t lock;     /* protects size and ro_why */
  struct tc_sector_locks *locks;   /* shared by every handle of the image (of its top inode) */
  /* layers, nlayers and locks change only under the write lock, which
   * tc_image_replace_layers takes once no I/O holds the read lock: every
   * read, write, zero and extents call holds it for its whole run. */
  pthread_rwlock_t layers_lock;
  bool stale;                /* the KV says the chain changed: reload it before the next I/O */
  int (*switch_fn)(void *arg, struct tc_image *img);
  void *switch_arg;
  char ro_why[200];          /* why it became read-only (or revoked) while open */
  bool revoked;              /* key shredded: no I/O at all */
  void (*close_fn)(void *arg, struct tc_image *img);
  void *close_arg;
};

/* Encrypt or decrypt whole sectors of layer l at image sector `sector`. */
int image_layer_crypt(struct layer *l, bool encrypt, uint64_t sector, const void *in, void *out, size_t len);
/* Submit n operations and wait for all; returns 0 or -1 with errno. */
int image_run_ops(struct tc_image *img, struct tc_objop *ops, int n, const char *what);
/* Read whole sectors [off, off+len) into buf, decrypted, through the layers. */
int image_read_sectors(struct tc_image *img, uint8_t *buf, uint64_t off, uint64_t len);
/* Write whole sectors [off, off+len) from buf to layer 0, encrypting;
 * flags (TC_OBJ_FUA) go on every object write. */
int image_write_sectors(struct tc_image *img, const uint8_t *buf, uint64_t off, uint64_t len, unsigned flags);
/* Write [off, off+len), not sector-aligned, with the sectors locked in this
 * process: partial sectors through the store's serialisation point
 * (image_partial.c). buf NULL writes zeros. */
int image_write_partial(struct tc_image *img, const uint8_t *buf, uint64_t len, uint64_t off, unsigned flags);

#endif
