/* The OSD protocol: what each operation of osd_ops.h carries in the frame
 * header (frame.h) and payload, for client->OSD and OSD->OSD requests over
 * the messenger (msgr.h). This is a contract between osd/ and the cluster
 * client (common/cluster.c); change both together.
 *
 * Addressing. hdr.inode is the full inode number (pool << 48 | id, see
 * image_meta.h); hdr.offset a byte offset in the inode. Every data
 * operation stays inside one object (one block_size block) and is 4096-byte
 * aligned: offset % 4096 == 0 and length % 4096 == 0. The OSD refuses
 * anything else with -EINVAL.
 *
 * The 64-byte header has no spare field, so fields a request or reply does
 * not otherwise use carry its extra arguments (named below):
 *   requests without payload: hdr.version = the LENGTH for READ, SEC_READ,
 *     SEC_READ_BMP and DELETE; the PG FILTER (pg_count << 32 | pg, 0 = none)
 *     for SEC_LIST and SEC_LOCK;
 *   replies (inode/offset are not echoed): hdr.offset = the BITMAP of the
 *     range (bit i = sector i present, LSB first; at most 64 sectors per
 *     operation, so one READ covers at most 256 KiB and a pool's block_size
 *     is at most 256 KiB), hdr.version = the object's version.
 *
 * Replies: hdr.status = 0 or a positive count on success, -errno on failure.
 * -EPERM: the rights table forbids it (logged by the OSD with the peer and
 *         the object; the connection goes on).
 * -EAGAIN: this OSD is not (or no longer, or not yet) the active primary of
 *         the PG: the client refreshes /pg/config and retries elsewhere.
 * -EINVAL: malformed request. -EIO: the data is bad on every replica.
 * -ESTALE: WRITE_IF only: the sector changed since the client read it.
 *
 * Client operations (sent to the PG's primary unless said otherwise):
 *   READ        req: inode, offset, version = length (<= 256 KiB).
 *               reply: payload = length bytes (absent sectors zero),
 *               offset = presence bitmap, version = object version.
 *   WRITE       req: inode, offset, payload = data (<= one object, <= 256 KiB).
 *               reply: version = the object's new version. Acknowledged once
 *               pg_minsize replicas hold it (not yet durable: see SYNC).
 *   WRITE_PARTIAL req: inode, offset (any byte), payload = data (1 byte to
 *               256 KiB, inside one object): the primary reads the sectors
 *               the range touches from its copy (absent ones as zeros),
 *               puts the bytes in, and writes and replicates the whole
 *               sectors as one WRITE, all in one turn of its loop, so no
 *               other write of the object comes between (for unencrypted
 *               single-layer images). reply: as WRITE.
 *   WRITE_IF    req: inode, offset (a sector), payload = struct
 *               tc_osd_write_if (16 bytes) then the 4096 bytes of the new
 *               sector: written (as WRITE) only if the sector as stored
 *               now is present when `present` says so and its XXH3-64 is
 *               `hash`; else -ESTALE and nothing is written: the client
 *               reads the sector again and retries (encrypted or layered
 *               images, whose read-modify-write only the client can do).
 *   DELETE      req: inode, offset, version = length: the sectors become absent.
 *               reply: version as WRITE.
 *   SYNC        any OSD; req: nothing. Makes durable every write and delete
 *               this OSD acknowledged (locally and on the secondaries it
 *               sent them to). reply: status 0.
 *   SCRUB       req: inode, offset (the object). Compares the replicas'
 *               versions and sector checksums and repairs bad or stale
 *               copies from a good one. reply: status = sectors found bad,
 *               offset = sectors repaired.
 *   DESCRIBE    admin; req: nothing. reply: payload = JSON about the OSD
 *               (osd_num, objects, PGs and their states).
 *   PING        reply: status 0.
 *   SHOW_CONFIG req: payload = JSON {"osd_num": N} when the caller claims
 *               to be OSD N (checked against the proven identity), else
 *               empty. reply: payload = JSON {"osd_num", "block_size",
 *               "pools": [...], "primary_pgs": [...]}.
 *   SEC_LIST    req: inode = first inode, offset = last inode,
 *               version = pg_count << 32 | pg (0: no PG filter).
 *               reply: payload = array of struct tc_osd_list_entry.
 *
 * OSD-to-OSD operations (only peers proven to be OSDs; version = the
 * primary's version of the object):
 *   SEC_READ        as READ, from any replica (recovery, scrub).
 *   SEC_READ_BMP    as SEC_READ without data: reply offset = bitmap, version.
 *   SEC_WRITE       as WRITE with hdr.version set by the primary.
 *   SEC_WRITE_STABLE replace a whole object (recovery): offset = object
 *                   start, payload = 8-byte presence bitmap of the sectors
 *                   to keep, then block_size bytes; version = its version.
 *   SEC_DELETE      as DELETE with hdr.version = the version; payload =
 *                   the 8-byte length.
 *   SEC_SYNC        make this OSD's store durable.
 *   SEC_LOCK        req: version = pg_count << 32 | pg, offset = the primary's
 *                   epoch: this OSD will take SEC_WRITEs of that PG only from
 *                   the caller until the next SEC_LOCK. reply 0.
 *                   inode = the pool's first inode (pool << 48): the pool.
 *                   A SEC_WRITE, SEC_WRITE_STABLE or SEC_DELETE of a locked
 *                   PG on another connection gets -EBUSY (a deposed primary).
 *   SEC_STABILIZE, SEC_ROLLBACK: reserved for two-phase (EC) writes; OSDs
 *                   answer -ENOTSUP after the rights check.
 */
#ifndef TROMCHO_OSD_PROTO_H
#define TROMCHO_OSD_PROTO_H
#include <stdint.h>
#include "osd_ops.h"

#define TC_OSD_MAX_OP_SECTORS 64
#define TC_OSD_MAX_OP_BYTES (TC_OSD_MAX_OP_SECTORS * 4096)

/* The condition of a WRITE_IF (little-endian, packed), before the data. */
struct tc_osd_write_if {
  uint64_t hash;         /* XXH3-64 of the stored sector (when present) */
  uint64_t present;      /* 1: the sector must be present; 0: absent */
} __attribute__((packed));

/* One object in a SEC_LIST reply (little-endian, packed). */
struct tc_osd_list_entry {
  uint64_t inode;
  uint64_t offset;       /* the object's first byte */
  uint64_t version;
  uint64_t bitmap;       /* present sectors of the object (<= 64) */
} __attribute__((packed));

#endif
