/* The OSD store: one OSD's objects on one data file or block device, with
 * their metadata in an LMDB file beside it (DESIGN.md section 4, "Store").
 *
 * An object is one block (block_size bytes, fixed at format time, default
 * 128 KiB) of one inode, named by (inode, block index). Each object has a
 * version (set by the caller: the primary's version), a bitmap of which
 * 4 KiB sectors exist, and per sector a location in the data file and the
 * XXH3-64 checksum of its bytes (seeded with the sector's logical address,
 * so data found at the wrong place also fails).
 *
 * Writes are copy-on-write per sector: new data goes to free sectors, then
 * the metadata in the current batch points at it; the old sectors are freed
 * only once the batch is durable. A batch becomes durable at tc_store_sync
 * (its operations written to the journal in the data file's header area,
 * then one fdatasync of the data file: store.md, "The journal"); the LMDB
 * transaction is committed durably (a checkpoint) when it grows large
 * (TC_STORE_BATCH_MAX writes), when the journal area or the data area is
 * full, and at close; open replays the journal. So:
 *   - after kill -9 or power loss, the store is exactly as it was at the
 *     last durable batch: every synced write is there, an unsynced write is
 *     entirely absent (the old data of every sector, never garbage);
 *   - every present sector is checked against its checksum on every read and
 *     by scrub; a mismatch is an error (EIO) that names the inode and offset,
 *     and the caller's buffer is zeroed, never filled with the bad bytes.
 *
 * Offsets are byte offsets in the inode. Reads, writes and deletes work on
 * whole 4 KiB sectors (offset and length multiples of TC_STORE_SECTOR) within
 * one object; a caller with an unaligned request reads the covering sectors,
 * modifies them and writes them back (read-modify-write).
 *
 * Thread safety: a store may be used from any thread; one mutex serialises
 * every call. Data I/O is synchronous buffered pread/pwrite on the caller's
 * thread (tromcho-osd calls it on its event loop thread: osd/README.md).
 * Two processes may not open one store: the data file is flock()ed.
 *
 * Every call returns 0 (or a count) on success, -1 with errno and
 * tc_last_error() on failure. After a failure of the metadata store or of a
 * durable commit the store refuses every further call with EIO: reopen it
 * (the OSD restarts and peers). */
#ifndef TROMCHO_STORE_H
#define TROMCHO_STORE_H
#include <stdbool.h>
#include <stdint.h>

#define TC_STORE_SECTOR 4096u
#define TC_STORE_DEFAULT_BLOCK_SIZE (128u * 1024)
#define TC_STORE_MIN_BLOCK_SIZE TC_STORE_SECTOR
#define TC_STORE_MAX_BLOCK_SIZE (1024u * 1024)
#define TC_STORE_MAX_SECTORS (TC_STORE_MAX_BLOCK_SIZE / TC_STORE_SECTOR)   /* per object: 256 */
/* Smallest store: the 1 MiB header area plus 15 MiB of data. */
#define TC_STORE_MIN_SIZE (16ull << 20)
/* Largest data area: sector locations are 32-bit. */
#define TC_STORE_MAX_SIZE ((16ull << 40) - (1ull << 20))
/* A batch is checkpointed by itself after this many writes and deletes
 * (the journal area usually fills first). */
#define TC_STORE_BATCH_MAX 32768

struct tc_store;

struct tc_store_format_opts {
  const char *data_path;   /* file (created sparse if absent) or block device */
  const char *meta_path;   /* NULL: data_path + ".meta" (required for a block device) */
  uint64_t size;           /* bytes; 0 = the existing file's or device's size */
  uint64_t osd_num;        /* > 0 */
  uint32_t block_size;     /* power of two in [4 KiB, 1 MiB]; 0 = 128 KiB */
  bool force;              /* overwrite an existing store or foreign data */
};

/* Format a store. Refuses (EEXIST) a data file that already holds a store
 * or any other non-zero bytes in its first 64 KiB, or an existing metadata
 * file, unless force; refuses a size below TC_STORE_MIN_SIZE (EINVAL). Existing data is discarded
 * (punched) and the metadata file recreated. */
int tc_store_format(const struct tc_store_format_opts *opts);

/* Open a formatted store. meta_path NULL = data_path + ".meta". Refuses a
 * file without a valid store header (EINVAL naming the file), metadata
 * that belongs to another store (EINVAL), a store already open (EBUSY). */
int tc_store_open(struct tc_store **out, const char *data_path, const char *meta_path);
/* Sync and close. Returns -1 if the final sync failed (the store is freed
 * in any case; unsynced writes are then lost, as after a crash). */
int tc_store_close(struct tc_store *st);

struct tc_store_info {
  uint8_t uuid[16];
  uint64_t osd_num;
  uint32_t block_size;
  uint64_t size;          /* bytes of the data file the store uses */
  uint64_t data_offset;   /* where the data area starts */
  uint64_t data_sectors;  /* sectors in the data area */
};
void tc_store_get_info(const struct tc_store *st, struct tc_store_info *info);

/* Read len bytes at offset of inode (one object, sector-aligned) into buf.
 * present (may be NULL) gets one bit per sector of the range, LSB first
 * ((len/4096 + 7) / 8 bytes): 1 = the sector exists. Absent sectors read as
 * zeros. *version (may be NULL) = the object's version, 0 if it does not
 * exist. Returns the number of present sectors in the range. A checksum
 * mismatch fails with EIO naming the inode and offset, buf zeroed. */
int tc_store_read(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len,
                  void *buf, uint8_t *present, uint64_t *version);

/* Write len bytes at offset of inode (one object, sector-aligned) and set
 * the object's version (>= 1; 0 means "no object" in reads). Durable after the next tc_store_sync. ENOSPC when
 * the data area is full (even after committing the batch). */
int tc_store_write(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len,
                   const void *buf, uint64_t version);

/* Delete the sectors [offset, offset+len) of one object (sector-aligned);
 * the object disappears when no sector remains. Freed space is punched out
 * of the data file once the deletion is durable. Deleting absent sectors
 * is not an error. */
int tc_store_delete(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len);
/* As tc_store_delete, and set the object's version; the object stays (a
 * tombstone: a version and no sectors) when no sector remains, so that
 * replicas can tell a deleted object from one they never had. tc_store_list
 * reports tombstones with sectors = 0. */
int tc_store_delete_version(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len,
                            uint64_t version);
/* Delete the whole object that holds offset. */
int tc_store_delete_object(struct tc_store *st, uint64_t inode, uint64_t offset);

/* Durability barrier: every write and delete before it survives a crash or
 * power loss once it returns 0. */
int tc_store_sync(struct tc_store *st);

/* Check every present sector of the object that holds offset. bad (may be
 * NULL) gets one bit per sector of the object ((block_size/4096+7)/8
 * bytes). Returns the number of bad sectors (0 = clean; a missing object
 * is clean), or -1 on an I/O error. Each bad sector is logged. */
int tc_store_scrub(struct tc_store *st, uint64_t inode, uint64_t offset, uint8_t *bad);

struct tc_store_obj {
  uint64_t inode;
  uint64_t offset;        /* byte offset of the object's first byte in the inode */
  uint64_t version;
  uint32_t sectors;       /* present sectors */
  uint64_t bitmap[TC_STORE_MAX_SECTORS / 64];   /* bit i = sector i present */
};
/* The version and bitmap of the object that holds offset, without reading
 * its data (SEC_READ_BMP, or the primary choosing the next version).
 * Returns 1 if it exists, 0 if not (*obj then zeroed but for inode and
 * offset). */
int tc_store_object(struct tc_store *st, uint64_t inode, uint64_t offset, struct tc_store_obj *obj);

/* Call cb for each object with inode_min <= inode <= inode_max, in (inode,
 * offset) order, with its version and bitmap (for peering / SEC_LIST).
 * cb returning non-zero stops the walk and becomes the result. cb must not
 * call the store. */
typedef int (*tc_store_list_cb)(void *opaque, const struct tc_store_obj *obj);
int tc_store_list(struct tc_store *st, uint64_t inode_min, uint64_t inode_max,
                  tc_store_list_cb cb, void *opaque);

struct tc_store_stats {
  uint64_t objects;          /* objects (including unsynced changes) */
  uint64_t used_bytes;       /* data sectors in use, including old copies awaiting sync */
  uint64_t free_bytes;       /* data sectors free */
  uint64_t data_bytes;       /* size of the data area */
  uint64_t unsynced_ops;     /* writes and deletes since the last durable batch */
  uint64_t checksum_errors;  /* bad sectors found by reads and scrubs since open */
  uint64_t commits;          /* durable batches since open */
  uint64_t checkpoints;      /* of them, durable LMDB commits (store.md) */
  uint64_t writebacks;       /* page cache writebacks started since open (store_background.h) */
};
int tc_store_stats(struct tc_store *st, struct tc_store_stats *stats);

/* Parse "128k"-style block sizes and check them; -1 (EINVAL) if not a power
 * of two in [4 KiB, 1 MiB]. */
int64_t tc_store_parse_block_size(const char *s);

#endif
