/* The object interface under the image layer: asynchronous reads and writes
 * of byte ranges of one object (one block_size block of one inode). The
 * cluster client implements it over the messenger (routing to PG primaries,
 * retrying); tests implement it in memory. The image layer never talks to
 * the network itself.
 *
 * Ranges are 4096-byte aligned and lie inside one object (WRITE_PARTIAL:
 * any bytes inside one object; WRITE_IF: exactly one sector). A submitted
 * operation completes exactly once by calling op->done(op), from any thread,
 * with op->result = 0 or a negative errno. submit() itself never blocks for
 * I/O (it may wait for back-pressure).
 *
 * TC_OBJ_FUA in flags (WRITE, WRITE_PARTIAL, WRITE_IF, DELETE): the
 * operation completes only once it is durable, as if a SYNC had followed
 * it, but without syncing anything else (the cluster client: the OSD
 * protocol's FUA, osd_proto.h). Stores without a cache may ignore it. */
#ifndef TROMCHO_OBJSTORE_H
#define TROMCHO_OBJSTORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_SECTOR 4096

enum tc_objop_code {
  TC_OBJ_READ,      /* fill buf (len bytes) and bitmap; absent sectors read as zeros */
  TC_OBJ_BITMAP,    /* fill only bitmap: which sectors of the range exist */
  TC_OBJ_WRITE,     /* write buf (len bytes) */
  TC_OBJ_DELETE,    /* make the range's sectors absent (trim) */
  TC_OBJ_SYNC,      /* make every completed write durable (inode/offset unused) */
  /* Serialised by the store against every other write of the object: */
  TC_OBJ_WRITE_PARTIAL,  /* write buf into the stored sectors (absent = zeros) */
  TC_OBJ_WRITE_IF,       /* write one sector only if it is as if_present/if_hash
                          * say, else fail with -ESTALE */
};

struct tc_objop {
  enum tc_objop_code code;
  uint64_t inode;
  uint64_t offset;        /* byte offset in the inode */
  uint32_t len;
  void *buf;
  uint8_t *bitmap;        /* 1 bit per sector of the range, LSB first; (len/4096+7)/8 bytes */
  uint64_t if_hash;       /* WRITE_IF: XXH3-64 of the stored sector read */
  bool if_present;        /* WRITE_IF: whether it was present */
  uint64_t min_rev;       /* READ: served once the OSD's image records are at
                           * least at this KV revision (the fence), 0: any */
  unsigned flags;         /* TC_OBJ_FUA */
  bool scratch;           /* WRITE: buf is the submitter's own copy (the image
                           * layer's XTS ciphertext), not read after done():
                           * the store may overwrite it (the cluster client
                           * seals it in place for the wire) */
  /* WRITE: when set, buf is plaintext and the store stores what this
   * makes of it: each part of the write is turned (XTS-encrypted by the
   * image layer) straight into the store's own copy of it (the cluster
   * client's replay record), on the submitter's thread at submit, so the
   * submitter needs no ciphertext buffer of its own. offset is the byte
   * offset in the inode of in; returns 0 or -1 with tc_last_error().
   * Every object store must honour it (never store buf as it is). */
  int (*transform)(void *ctx, uint64_t offset, const void *in, void *out, uint32_t len);
  void *transform_ctx;
  int result;
  void (*done)(struct tc_objop *op);
  void *opaque;           /* the submitter's */
};

#define TC_OBJ_FUA 1u     /* flags: durable when it completes */

struct tc_objstore {
  /* Returns 0 once the operation is queued (it will complete through done),
   * or a negative errno if it cannot be queued (done is not called). */
  int (*submit)(void *ctx, struct tc_objop *op);
  void *ctx;
};

/* An object store that submits through *inner with flags added to every
 * write-type operation (WRITE, WRITE_PARTIAL, WRITE_IF, DELETE), reads
 * untouched: for a caller that hands an object store to code it does not
 * own (image_integrity.c) and wants all its writes FUA. f is the storage
 * (it and *inner outlive the returned store's use). */
struct tc_objstore_flagged {
  const struct tc_objstore *inner;
  unsigned flags;
};
struct tc_objstore tc_objstore_with_flags(struct tc_objstore_flagged *f, const struct tc_objstore *inner,
                                          unsigned flags);

/* Called before the i-th of n operations is submitted (progress). */
typedef void (*tc_objstore_progress_fn)(void *arg, size_t i, size_t n);

/* The blocking adapter over submit (objstore_run.c): submit ops[0..n), at
 * most max_inflight at once (0: no limit), and wait until every submitted
 * one completed. Stops submitting at the first error; returns 0 or that
 * negative errno (the caller words the message). A zero-length operation
 * other than a SYNC stands for nothing to do and is skipped. Sets each
 * op's done and opaque. */
int tc_objstore_run(const struct tc_objstore *os, struct tc_objop *ops, size_t n, size_t max_inflight,
                    tc_objstore_progress_fn fn, void *arg);
/* Process-wide: a caller of tc_objstore_run waiting alone polls its
 * completion (yielding the CPU) for up to us microseconds before it
 * sleeps (option idle_poll_us, set by the cluster client; 0, the
 * default: sleep at once), less while its waits last longer than that
 * (common/util/poll_window.h). */
void tc_objstore_run_set_poll_us(unsigned us);
/* Process-wide: each thread calling tc_objstore_run puts itself under
 * SCHED_BATCH at its first call (option sched_batch, set by the cluster
 * client; tc_tune_sched_batch in common/util/tune.h). */
void tc_objstore_run_set_sched_batch(bool on);

#endif
