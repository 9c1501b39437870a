/* The cluster client's unsynced-write log: acknowledged writes (and
 * deletes) not yet covered by a SYNC, oldest first, replayed when an OSD
 * that took some of them is lost before the SYNC (cluster_replay.c).
 *
 * A write's record is reserved before the write is sent
 * (tc_ulog_reserve): a failed allocation fails the write, never an
 * acknowledged write without its record. Recording it at the
 * acknowledgement (tc_ulog_add) needs memory only to split an older entry
 * in two; without it no entry is dropped: the older one is kept whole
 * (patched with the newer bytes when it can) or the add reports ENOMEM and
 * the write is failed.
 *
 * Owned by one thread (the cluster client's I/O thread), except
 * tc_ulog_reserve and tc_ulog_release, which touch no log state. */
#ifndef TROMCHO_UNSYNCED_LOG_H
#define TROMCHO_UNSYNCED_LOG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One WRITE (data) or DELETE (data NULL). A partial one (WRITE_PARTIAL:
 * any bytes) is replayed as such; the others cover whole sectors. */
struct tc_ulog_entry {
  uint64_t seq, inode, offset;
  uint32_t len;
  bool partial;
  /* The object version its reply carried (0: unknown, an OSD from before
   * versioned replays): replayed with it, so the primary writes it only if
   * the object holds neither it nor something newer (TC_OSD_FLAG_REPLAY).
   * Set by the caller before tc_ulog_add. */
  uint64_t version;
  uint8_t *data;                 /* cap >= len bytes */
  uint32_t cap;
  bool mapped;                   /* data is mmap()ed (large; reused once freed), not malloc()ed */
  struct tc_ulog_entry *next, *prev;
  /* The index (unsynced_log.c): the chain of its slot, or of the wide
   * entries (slot -1: it crosses a 1 MiB boundary, or no index). */
  struct tc_ulog_entry *cnext, *cprev;
  long slot;
};

struct tc_ulog {
  struct tc_ulog_entry *head, *tail;
  uint64_t seq;                  /* the last entry's */
  uint64_t bytes;                /* the entries' lengths */
  uint64_t mem;                  /* the entries' data buffers (caps): what the log holds */
  /* Index of the entries by (inode, 1 MiB window), so that an add looks
   * only at the entries that can overlap it, not at the whole log. */
  struct tc_ulog_entry **slots, *wide;
  size_t nslots, count;
  /* How the log allocates (freed with free()); NULL: malloc. The unit
   * test injects allocation failures here. Set before first use. */
  void *(*alloc)(size_t n);
};

/* The record of a write about to be sent (data: whether it carries bytes,
 * copied at tc_ulog_add). NULL with errno ENOMEM. Caller passes it to
 * tc_ulog_add or tc_ulog_release. */
struct tc_ulog_entry *tc_ulog_reserve(const struct tc_ulog *log, uint64_t inode, uint64_t offset, uint32_t len,
                                      bool data, bool partial);
/* A reserved record whose write was not acknowledged. NULL is ignored. */
void tc_ulog_release(struct tc_ulog_entry *e);

/* Freed data buffers of 64 KiB or more are kept for the next records of the
 * same size, process-wide, up to this many bytes: the default
 * client_max_dirty_bytes (tc_options.c), so a whole dirty window freed by a
 * SYNC comes back for the next one's records. */
#define TC_ULOG_POOL_BYTES (32u << 20)

/* Unmap the pool's buffers if none was taken or given back since the
 * previous call: the cluster client calls it every 30 s (its map thread),
 * so a process that stopped writing gives the memory back. */
void tc_ulog_pool_idle_trim(void);
/* The write of reserved record e (taken, always) was acknowledged with
 * these bytes (NULL for a DELETE; e->data when they are already there): append it as the youngest entry; older
 * entries it covers are dropped or cut to what it does not cover, so a
 * replay never brings back old data; whole-sector entries under a partial
 * write are patched with its bytes. Returns 0, or -ENOMEM when an older
 * entry could be neither cut nor patched: it is then kept whole and the
 * caller must fail the write (its bytes are not guaranteed after a replay). */
int tc_ulog_add(struct tc_ulog *log, struct tc_ulog_entry *e, const void *data);
/* The same for a write acknowledged durable (FUA): it needs no replay, so
 * it is not kept, but older entries are cut (or patched) exactly as above:
 * a replay must not bring back what the durable write replaced. Takes e
 * (always). Returns 0 or -ENOMEM as tc_ulog_add. */
int tc_ulog_add_durable(struct tc_ulog *log, struct tc_ulog_entry *e, const void *data);
/* A read of [offset, offset + len) of inode, within one object, came back
 * from the OSDs at object version `version` into buf (NULL: a bitmap-only
 * read) and bitmap (1 bit a 4 KiB sector, LSB first, bit bit0 for the
 * sector at offset; NULL: none): lay over it what the log's entries newer
 * than that version hold there (the bytes of writes, the zeros of deletes,
 * the sectors present or absent). Versions only grow (a later primary's
 * start above an earlier one's), so an object older than an entry lost
 * that write (every OSD that took it died before the replay writes it
 * again), while one as new or newer holds it or what another process wrote
 * over it since, which must win. Entries without a version (an OSD from
 * before versions) are not laid. Overlapping entries hold the same bytes
 * (tc_ulog_add), so the order does not matter. Returns how many entries it
 * applied. */
size_t tc_ulog_overlay(const struct tc_ulog *log, uint64_t inode, uint64_t offset, uint32_t len, uint64_t version,
                       uint8_t *buf, uint8_t *bitmap, uint64_t bit0);
/* A SYNC covering seq <= upto succeeded: forget those. */
void tc_ulog_trim(struct tc_ulog *log, uint64_t upto);
/* Forget everything (the client is going away). */
void tc_ulog_clear(struct tc_ulog *log);

#endif
