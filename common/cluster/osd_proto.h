/* The OSD protocol: what each operation of osd_ops.h carries in the frame
 * header (frame.h) and payload, for client->OSD and OSD->OSD requests over
 * the messenger (msgr.h). This is a contract between osd/ and the cluster
 * client (common/cluster/cluster.c); change both together.
 *
 * Addressing. hdr.inode is the full inode number (pool << 48 | id, see
 * image_meta.h); hdr.offset a byte offset in the inode. Every data
 * operation stays inside one object (one block_size block) and is 4096-byte
 * aligned: offset % 4096 == 0 and length % 4096 == 0. The OSD refuses
 * anything else with -EINVAL.
 *
 * Each operation reads the 64-byte frame header through its own packed
 * view (union tc_osd_hdr below): the messenger's fields (magic, opcode,
 * flags, req_id, payload_len, checksum, hdr_check) sit at the same place in
 * every view, the 28 bytes between them are the operation's arguments, and
 * no field means one thing for one operation and another for the next.
 * Build a request in its view and copy .frame into tc_msgr_req.hdr; read a
 * request or a reply with tc_osd_hdr_of(). Bitmaps: bit i = sector i
 * present, LSB first; at most 64 sectors per operation, so one READ covers
 * at most 256 KiB and a pool's block_size is at most 256 KiB.
 *
 * Replies: status = 0 or a positive count on success, -errno on failure.
 * -EPERM: the rights table forbids it (logged by the OSD with the peer and
 *         the object; the connection goes on).
 * -EAGAIN: this OSD is not (or no longer, or not yet) the active primary of
 *         the PG: the client refreshes /pg/config and retries elsewhere.
 * -EINVAL: malformed request. -EIO: the data is bad on every replica.
 * -ESTALE: WRITE_IF: the sector changed since the client read it; READ:
 *         the inode is retired (see READ).
 * -EROFS: WRITE, WRITE_PARTIAL, WRITE_IF, DELETE to an inode whose record
 *         is read-only (a snapshot, a re-keyed layer): the fence. DELETE of
 *         a retired inode is served (removing its data).
 *
 * Client operations (sent to the PG's primary unless said otherwise):
 *   READ        rw view: inode, offset, len (<= 256 KiB), version = 0 or
 *               a KV revision: the primary answers only once the image
 *               records it holds were read at that revision or later
 *               (reading the KV again if needed, else -EAGAIN), so every
 *               write it took to an inode fenced by then came before (the
 *               fence of common/README.md, "Layer switch and re-key").
 *               reply (rw view): payload = len bytes (absent sectors zero),
 *               bitmap = presence, version = the object's version.
 *               -ESTALE: the inode's record says "retired" (a re-keyed
 *               image's old layer, its data deleted): the reader's layer
 *               chain is stale, it reloads it.
 *   WRITE       rw view: inode, offset, len = payload_len, payload = data
 *               (<= one object, <= 256 KiB). reply: version = the object's
 *               new version. Acknowledged once pg_minsize replicas hold it
 *               (not yet durable: see SYNC; with TC_OSD_FLAG_FUA durable,
 *               see FUA below).
 *   WRITE_PARTIAL rw view: inode, offset (any byte), len = payload_len,
 *               payload = data (1 byte to 256 KiB, inside one object): the
 *               primary reads the sectors the range touches from its copy
 *               (absent ones as zeros), puts the bytes in, and writes and
 *               replicates the whole sectors as one WRITE, all in one turn
 *               of its loop, so no other write of the object comes between
 *               (for unencrypted single-layer images). reply: as WRITE.
 *   WRITE_IF    rw view: inode, offset (a sector), len = 4096, payload =
 *               struct tc_osd_write_if (16 bytes) then the 4096 bytes of
 *               the new sector: written (as WRITE) only if the sector as
 *               stored now is present when `present` says so and its
 *               XXH3-64 is `hash`; else -ESTALE and nothing is written: the
 *               client reads the sector again and retries (encrypted or
 *               layered images, whose read-modify-write only the client can
 *               do). reply: as WRITE.
 *   DELETE      rw view: inode, offset, len: the sectors become absent.
 *               reply: version as WRITE.
 *   SYNC        any OSD; no arguments. Makes durable every write and delete
 *               this OSD acknowledged (locally and on the secondaries it
 *               sent them to). reply: status 0; -EAGAIN when a secondary
 *               failed its SEC_SYNC, or was lost holding unsynced writes
 *               since the caller's last SYNC (once per such loss): what it
 *               took may now be on fewer than pg_minsize copies, and the
 *               client writes its unsynced writes again, then syncs.
 *   SCRUB       obj view: inode, offset (the object). Compares the replicas'
 *               versions and sector checksums and repairs bad or stale
 *               copies from a good one. reply (scrub view): status =
 *               sectors found bad, repaired = sectors repaired.
 *   DESCRIBE    admin; no arguments. reply: payload = JSON about the OSD
 *               (osd_num, objects, PGs and their states) and "objects":
 *               the objects of its PGs that are not clean (pool, pg,
 *               inode, offset, version, state: degraded / inconsistent /
 *               incomplete, osd_set, stale_osds), at most 4096.
 *   PING        reply: status 0.
 *   SHOW_CONFIG payload = JSON {"osd_num": N} when the caller claims to be
 *               OSD N (checked against the proven identity), else empty.
 *               reply: payload = JSON {"osd_num", "block_size", "pools":
 *               [...], "primary_pgs": [...]}.
 *   SEC_LIST    list view: inode_first..inode_last, pg of pg_count
 *               (pg_count 0: no PG filter).
 *               reply: payload = array of struct tc_osd_list_entry.
 *
 * OSD-to-OSD operations (only peers proven to be OSDs; version = the
 * primary's version of the object, never 0):
 *   SEC_READ        as READ (rw view), from any replica (recovery, scrub).
 *   SEC_READ_BMP    as SEC_READ without data: reply bitmap, version.
 *   SEC_WRITE       as WRITE, with the version set by the primary; with
 *                   TC_OSD_FLAG_FUA answered once this OSD's store synced
 *                   (the reply carries the flag). SEC_DELETE likewise.
 *   SEC_WRITE_STABLE replace a whole object (recovery): rw view with offset
 *                   = the object's start, len = block_size, version; payload
 *                   = 8-byte presence bitmap of the sectors to keep, then
 *                   block_size bytes.
 *   SEC_DELETE      as DELETE, with the version (protocol 1 sent the
 *                   length as an 8-byte payload; now it is len).
 *   SEC_SYNC        make this OSD's store durable.
 *   SEC_LOCK        lock view: pool, pg of pg_count, epoch = the KV
 *                   revision of the PG configuration (/pg/config's
 *                   mod_revision) the primary peered at: this OSD takes
 *                   SEC_WRITEs of that PG only from the caller's connection
 *                   until the next SEC_LOCK. A SEC_LOCK at an older
 *                   revision than the lock held gets -ESTALE (a primary
 *                   peering on a map the cluster has left), one beyond
 *                   /pg/config's revision in the KV -EAGAIN (the member
 *                   read the KV again at most 100 ms before; the primary
 *                   peers again a few seconds later), one of a PG the
 *                   member's map does not have -ENOENT. primary = the
 *                   sender's OSD number: a member whose own map is newer
 *                   than the lock and names another primary for the PG
 *                   refuses the lock (-ESTALE) and the holder's SEC_WRITEs
 *                   (-EBUSY): it was deposed, whether or not its successor
 *                   reached this member yet.
 *                   A SEC_WRITE, SEC_WRITE_STABLE or SEC_DELETE of a locked
 *                   PG on another connection gets -EBUSY (a deposed primary).
 *   SEC_STABILIZE, SEC_ROLLBACK: reserved for two-phase (EC) writes; OSDs
 *                   answer -ENOTSUP after the rights check.
 *
 * FUA (TC_OSD_FLAG_FUA in the header's flags, request and reply): a WRITE,
 * WRITE_PARTIAL, WRITE_IF or DELETE with it is acknowledged only once
 * pg_minsize replicas hold it durably (each store synced after it): the
 * primary syncs its store (osd_sync_async) and sends the secondaries their
 * SEC_WRITE / SEC_DELETE with the flag, and a secondary answers those only
 * once its store synced. An OSD that did so sets the flag in its reply. A
 * FUA write needs no SYNC afterwards (it is not in the client's
 * unsynced-write log). The flag on any other operation: -EINVAL.
 * Old peers: the messenger passes the flags' other bits through untouched
 * (it owns TC_FRAME_MSGR_FLAGS only) and an OSD built before FUA ignores them,
 * so it answers a FUA write as a plain one, without the flag in its reply.
 * The sender takes a reply without the flag as "written, not durable" and
 * makes it durable itself: the cluster client with a SYNC (as for any
 * unsynced write), the primary with a SEC_SYNC to that secondary before it
 * counts it. So mixed versions stay safe, only slower; no version bump.
 *
 * Version. TC_OSD_PROTO_VERSION travels in every handshake message (the
 * messenger's TC_PROTO_VERSION, frame.h): a peer of another version is
 * refused at the handshake with a message naming both versions.
 */
#ifndef TROMCHO_OSD_PROTO_H
#define TROMCHO_OSD_PROTO_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "frame.h"
#include "osd_ops.h"

#define TC_OSD_PROTO_VERSION 3
_Static_assert(TC_OSD_PROTO_VERSION == TC_PROTO_VERSION, "the handshake carries the OSD protocol's version");

#define TC_OSD_MAX_OP_SECTORS 64
#define TC_OSD_MAX_OP_BYTES (TC_OSD_MAX_OP_SECTORS * 4096)

/* Header flags of the OSD protocol (tc_frame_hdr.flags): the messenger
 * owns bits 0 and 1 (TC_FRAME_MSGR_FLAGS, frame.h) and leaves the others
 * alone. */
#define TC_OSD_FLAG_FUA 0x0100u   /* request: durable before the reply; reply: it is */
_Static_assert((TC_OSD_FLAG_FUA & TC_FRAME_MSGR_FLAGS) == 0, "FUA is not the messenger's bit");
/* Replay (request: a WRITE, WRITE_PARTIAL, WRITE_IF or DELETE whose rw
 * view's version is the object version the first reply to this write
 * carried, not 0): a client writing again, after an OSD was lost, a write
 * that was acknowledged and not yet synced. The primary writes only if the
 * object's version now is below that one; else the object holds the write
 * already (the survivors' newest copy won at peering, and versions are
 * taken in order) or something newer over it (another process may have
 * written since), and the reply, status 0, carries the flag: nothing was
 * written. An OSD from before this flag ignores it and writes (the old
 * replay). */
#define TC_OSD_FLAG_REPLAY 0x0200u
_Static_assert((TC_OSD_FLAG_REPLAY & TC_FRAME_MSGR_FLAGS) == 0, "REPLAY is not the messenger's bit");

/* The condition of a WRITE_IF (little-endian, packed), before the data. */
struct tc_osd_write_if {
  uint64_t hash;         /* XXH3-64 of the stored sector (when present) */
  uint64_t present;      /* 1: the sector must be present; 0: absent */
} __attribute__((packed));

/* The messenger's part of every view: before and after the arguments. */
#define TC_OSD_HDR_HEAD \
  uint32_t magic;       /* the messenger's */ \
  uint16_t opcode;      /* enum tc_osd_op */ \
  uint16_t flags;       /* the messenger's bit 0, TC_OSD_FLAG_* */ \
  uint64_t req_id       /* the messenger's */
#define TC_OSD_HDR_TAIL \
  uint64_t checksum;    /* the messenger's */ \
  uint64_t hdr_check    /* the messenger's */

/* READ, WRITE, WRITE_PARTIAL, WRITE_IF, DELETE, SEC_READ, SEC_READ_BMP, SEC_WRITE, SEC_DELETE,
 * SEC_WRITE_STABLE: a range of one object. */
struct tc_osd_op_rw {
  TC_OSD_HDR_HEAD;
  uint64_t inode;
  uint64_t offset;      /* byte offset in the inode */
  uint32_t payload_len; /* the messenger's */
  uint32_t len;         /* bytes of the range */
  uint64_t version;     /* SEC_*: the primary's version of the object; else 0 */
  TC_OSD_HDR_TAIL;
} __attribute__((packed));

/* SCRUB: one object. */
struct tc_osd_op_obj {
  TC_OSD_HDR_HEAD;
  uint64_t inode;
  uint64_t offset;      /* any byte of the object */
  uint32_t payload_len;
  uint32_t reserved0;
  uint64_t reserved1;
  TC_OSD_HDR_TAIL;
} __attribute__((packed));

/* SEC_LIST: the objects of inodes inode_first..inode_last, of one PG. */
struct tc_osd_op_list {
  TC_OSD_HDR_HEAD;
  uint64_t inode_first;
  uint64_t inode_last;
  uint32_t payload_len;
  uint32_t reserved0;
  uint32_t pg;          /* with pg_count: only this PG's objects */
  uint32_t pg_count;    /* 0: every object of the range */
  TC_OSD_HDR_TAIL;
} __attribute__((packed));

/* SEC_LOCK: PG pg of pool (of pg_count PGs), at the primary's epoch. */
struct tc_osd_op_lock {
  TC_OSD_HDR_HEAD;
  uint64_t pool;
  uint64_t epoch;       /* the KV revision of /pg/config the primary peered at */
  uint32_t payload_len;
  uint32_t primary;     /* the sender's OSD number (0: not said) */
  uint32_t pg;
  uint32_t pg_count;
  TC_OSD_HDR_TAIL;
} __attribute__((packed));

/* The reply to a READ, WRITE, DELETE or SEC_* data operation (and the
 * status of every other reply). */
struct tc_osd_reply_rw {
  TC_OSD_HDR_HEAD;
  uint64_t reserved0;
  uint64_t bitmap;      /* READ, SEC_READ, SEC_READ_BMP: sectors present */
  uint32_t payload_len;
  int32_t status;       /* >= 0 result, < 0 -errno */
  uint64_t version;     /* the object's version */
  TC_OSD_HDR_TAIL;
} __attribute__((packed));

/* The reply to a SCRUB. */
struct tc_osd_reply_scrub {
  TC_OSD_HDR_HEAD;
  uint64_t reserved0;
  uint64_t repaired;    /* sectors repaired */
  uint32_t payload_len;
  int32_t status;       /* >= 0: sectors found bad; < 0 -errno */
  uint64_t reserved1;
  TC_OSD_HDR_TAIL;
} __attribute__((packed));

/* One frame header, every view of it. */
union tc_osd_hdr {
  struct tc_frame_hdr frame;
  struct tc_osd_op_rw rw;
  struct tc_osd_op_obj obj;
  struct tc_osd_op_list list;
  struct tc_osd_op_lock lock;
  struct tc_osd_reply_rw reply;
  struct tc_osd_reply_scrub scrub;
};

#define TC_OSD_VIEW_CHECK(view) \
  _Static_assert(sizeof(struct view) == sizeof(struct tc_frame_hdr), #view " is a frame header"); \
  _Static_assert(offsetof(struct view, opcode) == offsetof(struct tc_frame_hdr, opcode) && \
                 offsetof(struct view, req_id) == offsetof(struct tc_frame_hdr, req_id) && \
                 offsetof(struct view, payload_len) == offsetof(struct tc_frame_hdr, len) && \
                 offsetof(struct view, checksum) == offsetof(struct tc_frame_hdr, checksum), \
                 #view " keeps the messenger's fields in place")
TC_OSD_VIEW_CHECK(tc_osd_op_rw);
TC_OSD_VIEW_CHECK(tc_osd_op_obj);
TC_OSD_VIEW_CHECK(tc_osd_op_list);
TC_OSD_VIEW_CHECK(tc_osd_op_lock);
TC_OSD_VIEW_CHECK(tc_osd_reply_rw);
TC_OSD_VIEW_CHECK(tc_osd_reply_scrub);
_Static_assert(offsetof(struct tc_osd_reply_rw, status) == offsetof(struct tc_frame_hdr, status) &&
               offsetof(struct tc_osd_reply_scrub, status) == offsetof(struct tc_frame_hdr, status),
               "every reply's status is the messenger's status");

/* Request headers, each built in its operation's view (the messenger fills
 * magic, req_id, payload_len and the checks). */
static inline struct tc_frame_hdr
tc_osd_rw_hdr(enum tc_osd_op op, uint64_t inode, uint64_t offset, uint32_t len, uint64_t version)
{
  union tc_osd_hdr u = { .rw = { .opcode = (uint16_t) op, .inode = inode, .offset = offset, .len = len,
                                 .version = version } };
  return u.frame;
}

static inline struct tc_frame_hdr
tc_osd_obj_hdr(enum tc_osd_op op, uint64_t inode, uint64_t offset)
{
  union tc_osd_hdr u = { .obj = { .opcode = (uint16_t) op, .inode = inode, .offset = offset } };
  return u.frame;
}

static inline struct tc_frame_hdr
tc_osd_list_hdr(uint64_t inode_first, uint64_t inode_last, uint32_t pg, uint32_t pg_count)
{
  union tc_osd_hdr u = { .list = { .opcode = TC_OP_SEC_LIST, .inode_first = inode_first,
                                   .inode_last = inode_last, .pg = pg, .pg_count = pg_count } };
  return u.frame;
}

static inline struct tc_frame_hdr
tc_osd_lock_hdr(uint64_t pool, uint32_t pg, uint32_t pg_count, uint64_t epoch, uint32_t primary)
{
  union tc_osd_hdr u = { .lock = { .opcode = TC_OP_SEC_LOCK, .pool = pool, .epoch = epoch, .pg = pg,
                                   .pg_count = pg_count, .primary = primary } };
  return u.frame;
}

/* Reply headers (the messenger copies req_id and the opcode). */
static inline struct tc_frame_hdr
tc_osd_reply_hdr(int32_t status, uint64_t bitmap, uint64_t version)
{
  union tc_osd_hdr u = { .reply = { .status = status, .bitmap = bitmap, .version = version } };
  return u.frame;
}

static inline struct tc_frame_hdr
tc_osd_scrub_reply_hdr(int32_t status, uint64_t repaired)
{
  union tc_osd_hdr u = { .scrub = { .status = status, .repaired = repaired } };
  return u.frame;
}

/* The views of a received header (a copy: no aliasing of the original). */
static inline union tc_osd_hdr
tc_osd_hdr_of(const struct tc_frame_hdr *h)
{
  union tc_osd_hdr u;
  memcpy(&u, h, sizeof u);
  return u;
}

/* One object in a SEC_LIST reply (little-endian, packed). */
struct tc_osd_list_entry {
  uint64_t inode;
  uint64_t offset;       /* the object's first byte */
  uint64_t version;
  uint64_t bitmap;       /* present sectors of the object (<= 64) */
} __attribute__((packed));

#endif
