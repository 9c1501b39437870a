/* Authenticated images (DESIGN.md section 6): a tag per 4096-byte sector,
 * kept inside the layer's own inode, so the OSDs need no change and only a
 * client holding the image key can make a sector verify.
 *
 * Layout (as dm-integrity interleaves): the inode is a run of groups of
 * TC_INTEG_GROUP + 1 sectors: one tag sector, then TC_INTEG_GROUP data
 * sectors. Image sector u lives at inode sector
 *   (u / TC_INTEG_GROUP) * (TC_INTEG_GROUP + 1) + 1 + u % TC_INTEG_GROUP.
 * Slot u % TC_INTEG_GROUP of its group's tag sector (32 bytes) holds two
 * 16-byte tags: the current one and the one before it.
 *
 * Tag = HMAC-SHA256(K, "tromcho-integrity-v1" || inode (8, LE) || u (8, LE)
 * || the sector's stored ciphertext), first 16 bytes, with
 * K = HKDF-SHA256(salt "tromcho-integrity", the 64-byte image key, info
 * "sector tags"). So a sector verifies only in its own layer (inode), at
 * its own index, with its own content: a changed, swapped or moved sector
 * fails, and so does a written sector whose data went missing.
 *
 * Writes: read the tag sectors, set slot = (new tag, old current tag),
 * write the tag sectors, then the data. A crash between the two leaves the
 * old data, which the older tag still accepts. Writes of one group are
 * serialized in the process.
 *
 * Reads hold the group lock (a write of this process is never seen half
 * done) and retry a failure once (another process's write seen half done).
 * A write of a group this process has not written yet also reads the
 * stored data, so a writer that died between its tag and data writes
 * leaves the old data verifiable however often that repeats.
 *
 * Not caught: the replay of an older version of the same sector together
 * with its tag sector (and the previous version alone, the second tag);
 * several processes writing one image at once (tag sectors are
 * read-modify-written per process). */
#ifndef TROMCHO_IMAGE_INTEGRITY_H
#define TROMCHO_IMAGE_INTEGRITY_H
#include <stdbool.h>
#include <stdint.h>
#include "crypto.h"
#include "objstore.h"

#define TC_INTEG_GROUP 127        /* data sectors per tag sector */
#define TC_INTEG_SLOT 32

struct tc_integrity;

/* For one layer: its key, inode and name (for messages; copied). */
struct tc_integrity *tc_integrity_new(const uint8_t key[TC_XTS_KEY_SIZE], uint64_t inode, const char *name);
void tc_integrity_free(struct tc_integrity *t);

/* Bytes of the inode that hold image bytes [0, size). */
uint64_t tc_integrity_stored_size(uint64_t size);

/* Read whole image sectors [off, off+len) of this layer where need[s] is
 * set: stored ciphertext into buf, have[s] = 1 for sectors the layer holds,
 * each verified. Returns 0, or -1 with EIO and a message naming the image
 * and the sector (also logged) when one fails. */
int tc_integrity_read(struct tc_integrity *t, const struct tc_objstore *os, uint32_t block_size, uint64_t off,
                      uint64_t len, uint8_t *buf, const uint8_t *need, uint8_t *have);
/* Write whole image sectors [off, off+len) of ciphertext with their tags. */
int tc_integrity_write(struct tc_integrity *t, const struct tc_objstore *os, uint32_t block_size, uint64_t off,
                       uint64_t len, const uint8_t *ct);
/* alloc[s] |= 1 for the sectors of [off, off+len) this layer holds. */
int tc_integrity_present(struct tc_integrity *t, const struct tc_objstore *os, uint32_t block_size, uint64_t off,
                         uint64_t len, uint8_t *alloc);

#endif
