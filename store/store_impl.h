/* Internals of the OSD store shared by store.c, store_format.c,
 * store_meta.c and store_alloc.c. Not part of the API. */
#ifndef TROMCHO_STORE_IMPL_H
#define TROMCHO_STORE_IMPL_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>
#include <sys/queue.h>
#include "store.h"
#include "store_background.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the store's on-disk formats are written for little-endian hosts"
#endif

#define TC_STORE_HDR_SIZE 4096
#define TC_STORE_HDR_AREA (1u << 20)   /* data area starts at max(this, block_size) */
#define TC_STORE_HDR_AREA_BIG (16u << 20)   /* ...or this, on a store of TC_STORE_BIG_STORE or more */
#define TC_STORE_BIG_STORE (4ull << 30)
#define TC_STORE_MAGIC "TROMCHO-OSDSTORE"
#define TC_STORE_FORMAT_VERSION 1
#define TC_STORE_BITMAP_WORDS (TC_STORE_MAX_SECTORS / 64)

/* The header at offset 0 of the data file; also kept in the metadata under
 * the key "header" so a data file and its metadata are checked to match. */
struct tc_store_hdr {
  char magic[16];
  uint32_t format_version;
  uint32_t block_size;
  uint64_t osd_num;
  uint64_t size;
  uint64_t data_offset;
  uint8_t uuid[16];
  uint64_t created;        /* seconds since the epoch */
  uint64_t checksum;       /* XXH3-64 of everything above */
} __attribute__((packed));

/* Fill and check headers (store_format.c). check returns -1 with a message
 * naming what (a file path) on a missing magic, bad checksum or bad field. */
void tc_store_hdr_seal(struct tc_store_hdr *h);
int tc_store_hdr_check(const struct tc_store_hdr *h, const char *what);

/* --- sector allocator (store_alloc.c): a bitmap over the data area --- */
#define TC_STORE_ALLOC_MIN_RUN 8        /* sectors: shorter holes are skipped for multi-sector requests... */
#define TC_STORE_ALLOC_MAX_HOLES 256    /* ...until this many were looked at */
/* Requests of this many sectors or more (a 64 KiB write) are placed in one
 * run of free sectors when there is one anywhere, so that a large write
 * stays one pwrite however scattered small overwrites left the free space. */
#define TC_STORE_ALLOC_LARGE 16
/* The overflow area: the top 1/64 of the data area (at most 1 GiB), where
 * small overwrites go when their object's own run has no free sector, so
 * that they never take the holes of other objects' runs (which would then
 * never free whole, and whole-object rewrites would grow the file). Written
 * with zeros when a file store is formatted: a sync of a write there then
 * changes no extent (store.md). */
static inline uint32_t
tc_store_overflow_sectors(uint32_t nsect)
{
  uint32_t n = nsect / 64, cap = (uint32_t) ((1ull << 30) / 4096);
  return n < cap ? n : cap;
}
/* Write zeros into the holes of a file store's overflow area (at format,
 * all of it; at open, what a store formatted before the area existed, or
 * punched by a deletion since, left sparse); *filled: bytes written. */
int tc_store_fill_overflow(int fd, const char *path, uint64_t data_offset, uint64_t size, uint64_t *filled);
struct tc_store_alloc {
  uint64_t *bits;     /* 1 = in use */
  uint32_t nsect;
  uint32_t used;
  uint32_t top;       /* the first sector of the overflow area */
  uint32_t tcursor;   /* top-down next-fit: below here (nsect after a rewind) */
  int low_full;       /* no free sector below top: look there again once one is freed */
  uint32_t cursor;    /* next-fit: where the last allocation ended */
  size_t zcursor;     /* large requests: the bitmap word after the last one placed; SIZE_MAX: none free */
  size_t zlow;        /* the lowest word freed since the last rewind */
};
int tc_store_alloc_init(struct tc_store_alloc *a, uint32_t nsect);
void tc_store_alloc_destroy(struct tc_store_alloc *a);
void tc_store_alloc_reset(struct tc_store_alloc *a);
/* Mark one sector used while rebuilding from metadata; -1 if it already is
 * (two objects claim one sector: the metadata is corrupt). */
int tc_store_alloc_claim(struct tc_store_alloc *a, uint32_t loc);
/* Restart allocation at the lowest free sector (after a commit freed old
 * copies), so the data file stays as compact as the live data. */
static inline void
tc_store_alloc_rewind(struct tc_store_alloc *a)
{
  a->cursor = 0;
  a->tcursor = a->nsect;
  if (a->zlow < a->zcursor)
    a->zcursor = a->zlow;
  a->zlow = SIZE_MAX;
}
/* Allocate up to want contiguous sectors, below the overflow area while
 * there is room there; returns how many (>= 1) with the first in *start, 0
 * if the data area is full. */
uint32_t tc_store_alloc_run(struct tc_store_alloc *a, uint32_t want, uint32_t *start);
/* Up to want contiguous sectors from the top of the data area downwards
 * (the overflow area first); how many, 0 if none is free. */
uint32_t tc_store_alloc_top(struct tc_store_alloc *a, uint32_t want, uint32_t *start);
/* Take sector s if it is free: 1, else 0. */
int tc_store_alloc_take(struct tc_store_alloc *a, uint32_t s);
void tc_store_alloc_release(struct tc_store_alloc *a, uint32_t start, uint32_t n);

/* --- object records (store_meta.c) --- */
/* An object's metadata, expanded: arrays indexed by sector in the object. */
struct tc_store_obj_rec {
  uint64_t version;
  uint64_t bitmap[TC_STORE_BITMAP_WORDS];
  uint32_t loc[TC_STORE_MAX_SECTORS];
  uint64_t csum[TC_STORE_MAX_SECTORS];
};
/* LMDB key of (inode, block): 16 bytes big-endian so keys sort by inode then block. */
void tc_store_obj_key(uint8_t key[16], uint64_t inode, uint64_t block);
void tc_store_obj_key_parse(const uint8_t key[16], uint64_t *inode, uint64_t *block);
/* Encoded: version, bitmap (words for spb sectors), then for each present
 * sector in order its u32 location, then their u64 checksums. */
size_t tc_store_obj_rec_encode(const struct tc_store_obj_rec *r, uint32_t spb, uint8_t *out);
/* NULL if the record is well formed, else what is wrong with it. */
const char *tc_store_obj_rec_decode(struct tc_store_obj_rec *r, uint32_t spb, const void *val, size_t len);
size_t tc_store_obj_rec_max_size(uint32_t spb);
static inline int tc_store_bit(const uint64_t *bm, uint32_t i) { return (bm[i / 64] >> (i % 64)) & 1; }
static inline void tc_store_bit_set(uint64_t *bm, uint32_t i) { bm[i / 64] |= 1ull << (i % 64); }
static inline void tc_store_bit_clear(uint64_t *bm, uint32_t i) { bm[i / 64] &= ~(1ull << (i % 64)); }
/* The checksum of one sector: XXH3-64 seeded with its logical address. */
uint64_t tc_store_sector_csum(const void *data, uint64_t inode, uint64_t inode_sector);

/* A growable list of sector runs. */
struct tc_store_runs {
  uint32_t (*v)[2];   /* start, count */
  size_t n, cap;
};
int tc_store_runs_add(struct tc_store_runs *r, uint32_t start, uint32_t n);

/* A write or delete that arrived while a commit was flushing: its data is
 * already in free sectors; its metadata joins the next batch once the
 * commit is done (store.c, apply_pending). */
struct tc_store_pending {
  STAILQ_ENTRY(tc_store_pending) next;
  uint64_t inode, offset, version;
  uint32_t len;
  int kind;                   /* TC_STORE_PEND_* */
  uint64_t *sums;             /* write: one checksum a sector, then... */
  uint32_t *locs;             /* ...its data sector (both inside this allocation) */
};
enum { TC_STORE_PEND_WRITE, TC_STORE_PEND_DELETE, TC_STORE_PEND_TOMBSTONE };

/* Every this many bytes written, the store asks its writeback thread to
 * start the page cache's writeback of the data file (store_background.h). */
#define TC_STORE_WRITEBACK_BYTES (1u << 20)

/* --- journal (store_journal.c; store.md, "The journal") --- */
#define TC_STORE_JMAGIC 0x4e4a4354u    /* "TCJN" */
/* A batch: this header, then len bytes of entries. csum is XXH3-64 of the
 * header before it, chained with the entries; uuid is the store's, gen the
 * generation the metadata names (info "journal_gen"), seq 1, 2, ... */
struct tc_store_jhdr {
  uint32_t magic;
  uint32_t nent;
  uint32_t len;
  uint32_t reserved;
  uint64_t gen;
  uint64_t seq;
  uint8_t uuid[16];
  uint64_t reserved2;
  uint64_t csum;
};
/* An entry: a write (then len/4096 checksums and as many u32 data sectors,
 * padded to 8 bytes) or a delete (TC_STORE_PEND_*) as the store applied it. */
struct tc_store_jent {
  uint8_t kind;
  uint8_t pad[3];
  uint32_t len;
  uint64_t inode, offset, version;
};
struct tc_store_journal {
  uint64_t area_off, area_len;   /* where the journal lies in the data file */
  uint8_t uuid[16];
  uint64_t gen, seq;             /* the generation, the next batch's number */
  uint64_t pos;                  /* the next batch's offset in the area */
  uint8_t *buf;                  /* the next batch: room for its header, then entries */
  size_t len, cap;
  uint32_t nent;
  int off;                       /* replaying: record nothing */
};
void tc_store_journal_init(struct tc_store_journal *j, uint64_t area_off, uint64_t area_len,
                           const uint8_t uuid[16], uint64_t gen);
void tc_store_journal_destroy(struct tc_store_journal *j);
/* Record an operation applied to the batch; -1 (ENOMEM). */
int tc_store_journal_add(struct tc_store_journal *j, int kind, uint64_t inode, uint64_t offset, uint32_t len,
                         uint64_t version, const uint32_t *locs, const uint64_t *sums);
/* Whether the recorded operations fit the area as the next batch. */
int tc_store_journal_fits(const struct tc_store_journal *j);
/* The next batch, sealed, handed over (free it); NULL if nothing recorded. */
uint8_t *tc_store_journal_take(struct tc_store_journal *j, size_t *len);
/* A taken batch of len bytes is durable at pos: advance. */
void tc_store_journal_written(struct tc_store_journal *j, size_t len);
/* After a checkpoint: generation gen from offset 0, nothing recorded. */
void tc_store_journal_restart(struct tc_store_journal *j, uint64_t gen);
/* Check the batch at p (avail bytes of the area left) numbered seq:
 * NULL and its length, or why it is not a valid batch (the journal ends). */
const char *tc_store_journal_batch(const struct tc_store_journal *j, const uint8_t *p, size_t avail,
                                   uint64_t seq, size_t *batch_len);
/* Decode the entry at *pp (before end), advancing *pp: NULL, or what is
 * wrong with it. sums and locs point into the batch. */
const char *tc_store_journal_entry(const uint8_t **pp, const uint8_t *end, uint32_t block_size,
                                   struct tc_store_jent *e, const uint64_t **sums, const uint32_t **locs);

struct tc_store {
  pthread_mutex_t lock;
  /* Group commit: a commit flushes with the lock released; meanwhile
   * writes and deletes queue in pending (their data goes to disk at once),
   * every other call waits on idle. */
  pthread_cond_t idle;
  int committing;             /* a checkpoint (LMDB commit) is flushing */
  int jflushing;              /* a journal batch is flushing: writes go on as usual */
  struct tc_store_journal j;
  MDB_dbi info;               /* "header", "journal_gen" */
  STAILQ_HEAD(, tc_store_pending) pending;
  uint64_t seq;               /* writes and deletes since open */
  uint64_t durable_seq;       /* of them, those the last commit made durable */
  int fd;
  char *data_path;
  char *meta_path;
  struct tc_store_hdr hdr;
  uint32_t spb;               /* sectors per block */
  uint32_t bm_words;          /* bitmap words per object */
  MDB_env *env;
  MDB_dbi objs;               /* (inode, block) -> object record */
  MDB_txn *txn;               /* the open batch, NULL if none */
  int broken;                 /* errno that made the store refuse calls, 0 if fine */
  int data_dirty;             /* data written since the last fdatasync */
  uint64_t unstarted;         /* bytes written since writeback was last asked for */
  struct tc_store_bg wb;      /* starts the writeback off the writer's thread */
  struct tc_store_bg ckpt;    /* checkpoints a full batch off the writer's thread */
  uint32_t batch_ops;
  struct tc_store_alloc alloc;
  struct tc_store_runs to_free;     /* old copies: free once the batch is durable */
  struct tc_store_runs to_punch;    /* deleted: free and punch once durable */
  struct tc_store_obj_rec rec;      /* scratch, under lock */
  uint8_t *valbuf;            /* scratch for encoding, tc_store_obj_rec_max_size */
  uint8_t *iobuf;             /* scratch for scrub, one block */
  uint64_t checksum_errors;
  uint64_t commits;           /* durable batches: journal flushes and checkpoints */
  uint64_t checkpoints;       /* of them, durable LMDB commits */
};

/* Open the LMDB environment of a store (LMDB creates the file if absent:
 * tc_store_open checks that it exists first). */
int tc_store_meta_open(MDB_env **env, const char *path, uint64_t data_size);
/* Name an LMDB error in a tc_error message; returns -1. */
int tc_store_mdb_error(int rc, const char *what, const char *path);

#endif
