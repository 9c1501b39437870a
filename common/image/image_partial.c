/* Writes that cover part of a sector (DESIGN.md section 6).
 *
 * In this process, the caller holds the sector lock shared by every handle
 * of the image (sector_lock.h). Other processes and hosts may write the
 * same sector at the same time, so the read-modify-write of a partial
 * sector goes through the OSD, the one place every writer of the sector
 * meets (objstore.h):
 *   - unencrypted single-layer images: TC_OBJ_WRITE_PARTIAL sends just the
 *     bytes; the primary patches the stored sector itself (one round trip,
 *     no read by the client);
 *   - encrypted or layered images, whose sector only the client can
 *     rebuild: read the sector (and what layer 0 stores of it), patch,
 *     encrypt, and TC_OBJ_WRITE_IF: written only if layer 0 still stores
 *     what was read (presence and XXH3-64), else -ESTALE, and the client
 *     reads again and retries.
 * Whole sectors in the middle of the range are ordinary writes. */
#include <config.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "crypto.h"
#include "error.h"
#include "image_int.h"

/* How long a WRITE_IF may keep meeting a changed sector before giving up. */
#define RETRY_SECONDS 60

static uint64_t
now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* Put len bytes of data (NULL: zeros) at byte `at` of the sector at s_off,
 * as a conditional write of the whole sector. */
static int
write_sector_if(struct tc_image *img, uint64_t s_off, uint64_t at, const uint8_t *data, uint64_t len,
                unsigned flags)
{
  struct layer *l0 = &img->layers[0];
  uint8_t *raw = aligned_alloc(SECTOR, SECTOR), *plain = aligned_alloc(SECTOR, SECTOR);
  uint8_t *out = aligned_alloc(SECTOR, SECTOR);
  int r = -1;
  if (!raw || !plain || !out) {
    tc_error(ENOMEM, "image write: out of memory");
    goto done;
  }
  uint64_t deadline = now_ms() + RETRY_SECONDS * 1000;
  unsigned seed = (unsigned) (deadline ^ s_off ^ (uintptr_t) raw);   /* backoff jitter */
  for (unsigned attempt = 0;; attempt++) {
    uint8_t bm = 0;
    struct tc_objop rd = { .code = TC_OBJ_READ, .inode = l0->inode, .offset = s_off, .len = SECTOR, .buf = raw,
                           .bitmap = &bm };
    if (image_run_ops(img, &rd, 1, "read before a partial write") < 0)
      goto done;
    bool present = bm & 1;
    uint64_t hash = present ? tc_xxh3_64(raw, SECTOR) : 0;
    if (present) {
      if (l0->encrypted) {
        if (image_layer_crypt(l0, false, s_off / SECTOR, raw, plain, SECTOR) < 0)
          goto done;
      }
      else
        memcpy(plain, raw, SECTOR);
    }
    else if (img->nlayers > 1) {
      /* From the parents (a write landing in layer 0 meanwhile fails the
       * condition below). */
      if (image_read_sectors(img, plain, s_off, SECTOR) < 0)
        goto done;
    }
    else
      memset(plain, 0, SECTOR);
    if (data)
      memcpy(plain + at, data, len);
    else
      memset(plain + at, 0, len);
    if (l0->encrypted) {
      if (image_layer_crypt(l0, true, s_off / SECTOR, plain, out, SECTOR) < 0)
        goto done;
    }
    else
      memcpy(out, plain, SECTOR);
    struct tc_objop wr = { .code = TC_OBJ_WRITE_IF, .inode = l0->inode, .offset = s_off, .len = SECTOR, .buf = out,
                           .if_hash = hash, .if_present = present, .flags = flags };
    if (image_run_ops(img, &wr, 1, "partial write") == 0) {
      r = 0;
      goto done;
    }
    if (errno != ESTALE)
      goto done;
    /* Another writer changed the sector between our read and our write. */
    if (now_ms() > deadline) {
      tc_error(EAGAIN, "image: sector at %llu kept changing under a partial write for %d s",
               (unsigned long long) s_off, RETRY_SECONDS);
      goto done;
    }
    if (attempt < 4)
      sched_yield();
    else
      usleep((useconds_t) (rand_r(&seed) % (attempt < 64 ? attempt * 50 : 3200)));
  }
done:
  tc_wipe(plain, SECTOR);
  free(raw);
  free(plain);
  free(out);
  return r;
}

/* An authenticated layer 0 (image_integrity.c): its data sectors sit among
 * tag sectors and each write must update a tag, so partial sectors are a
 * read (verified) - patch - write of whole sectors under the in-process
 * sector lock the caller holds. Authenticated images have one writer
 * process (common/README.md). */
static int
write_partial_integrity(struct tc_image *img, const uint8_t *buf, uint64_t len, uint64_t off, unsigned flags)
{
  uint64_t a0 = off / SECTOR * SECTOR, a1 = (off + len + SECTOR - 1) / SECTOR * SECTOR;
  uint8_t *tmp = aligned_alloc(SECTOR, a1 - a0);
  if (!tmp)
    return tc_error(ENOMEM, "image write: out of memory");
  int r = image_read_sectors(img, tmp, a0, a1 - a0);
  if (r == 0) {
    if (buf)
      memcpy(tmp + (off - a0), buf, len);
    else
      memset(tmp + (off - a0), 0, len);
    r = image_write_sectors(img, tmp, a0, a1 - a0, flags);
  }
  tc_wipe(tmp, a1 - a0);
  free(tmp);
  return r;
}

int
image_write_partial(struct tc_image *img, const uint8_t *buf, uint64_t len, uint64_t off, unsigned flags)
{
  if (img->layers[0].integ)
    return write_partial_integrity(img, buf, len, off, flags);
  uint64_t end = off + len;
  uint64_t w0 = (off + SECTOR - 1) / SECTOR * SECTOR, w1 = end / SECTOR * SECTOR;
  /* The partial pieces: at most one at each end (one if it is all inside
   * one sector). */
  uint64_t poff[2], plen[2];
  int np = 0;
  if (w0 > w1) {   /* inside one sector */
    poff[np] = off;
    plen[np++] = len;
  }
  else {
    if (off < w0) {
      poff[np] = off;
      plen[np++] = w0 - off;
    }
    if (w1 < end) {
      poff[np] = w1;
      plen[np++] = end - w1;
    }
  }
  if (w0 < w1) {   /* whole sectors in the middle */
    int r;
    if (buf)
      r = image_write_sectors(img, buf + (w0 - off), w0, w1 - w0, flags);
    else {
      uint8_t *zeros = aligned_alloc(SECTOR, w1 - w0);
      if (!zeros)
        return tc_error(ENOMEM, "image write: out of memory");
      memset(zeros, 0, w1 - w0);
      r = image_write_sectors(img, zeros, w0, w1 - w0, flags);
      free(zeros);
    }
    if (r < 0)
      return -1;
  }
  if (!img->layers[0].encrypted && img->nlayers == 1) {
    struct tc_objop ops[2];
    uint8_t *zeros = NULL;
    if (!buf && !(zeros = calloc(1, 2 * SECTOR)))
      return tc_error(ENOMEM, "image write: out of memory");
    for (int i = 0; i < np; i++)
      ops[i] = (struct tc_objop) { .code = TC_OBJ_WRITE_PARTIAL, .inode = img->layers[0].inode, .offset = poff[i],
                                   .len = (uint32_t) plen[i],
                                   .buf = buf ? (uint8_t *) buf + (poff[i] - off) : zeros, .flags = flags };
    int r = image_run_ops(img, ops, np, "partial write");
    free(zeros);
    return r;
  }
  for (int i = 0; i < np; i++) {
    uint64_t s_off = poff[i] / SECTOR * SECTOR;
    if (write_sector_if(img, s_off, poff[i] - s_off, buf ? buf + (poff[i] - off) : NULL, plen[i], flags) < 0)
      return -1;
  }
  return 0;
}
