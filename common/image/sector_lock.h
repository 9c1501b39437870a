/* Sector locks shared by every handle of one image in this process.
 *
 * A partial-sector write is a read-modify-write; two of them on one sector
 * must not run at once, or one's bytes are lost. nbdkit opens one image
 * handle per NBD connection and FUSE one per open(), so the lock cannot
 * live in a handle: it lives in a process-wide registry of open images,
 * keyed by the object store (the cluster) and the image's inode, and
 * reference-counted by the handles. (Across processes, the OSD serialises
 * partial writes: see image_partial.c.) */
#ifndef TROMCHO_SECTOR_LOCK_H
#define TROMCHO_SECTOR_LOCK_H
#include <stdint.h>

struct tc_sector_locks;

/* A held range [start, end) of byte offsets; lives in the caller's frame
 * while held. */
struct tc_sector_range {
  uint64_t start, end;
  struct tc_sector_range *next;
};

/* The locks of (store, inode), created on first use; NULL with errno
 * ENOMEM. Release with tc_sector_locks_put. Thread-safe. */
struct tc_sector_locks *tc_sector_locks_get(const void *store, uint64_t inode);
void tc_sector_locks_put(struct tc_sector_locks *l);

/* Wait until no other holder overlaps [start, end), then hold it in r. */
void tc_sector_lock(struct tc_sector_locks *l, struct tc_sector_range *r, uint64_t start, uint64_t end);
void tc_sector_unlock(struct tc_sector_locks *l, struct tc_sector_range *r);

/* How many images the registry holds (for tests). */
int tc_sector_locks_count(void);

#endif
