/* The unsynced-write log (see unsynced_log.h). */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "unsynced_log.h"

static void *
log_alloc(const struct tc_ulog *log, size_t n)
{
  return log->alloc ? log->alloc(n) : malloc(n);
}

/* An entry's data buffer. Large ones are mapped on their own: they live
 * until a SYNC, among the short-lived request buffers, and on the heap
 * they left it fragmented (nbdkit held 420 MB of free heap after a
 * four-connection run with 40 MB in use). */
#define MAP_MIN (64u << 10)

/* Freed mapped buffers are kept for the next records of the same size, up
 * to TC_ULOG_POOL_BYTES: every 1 MiB write maps eight 128 KiB records and
 * its sync unmaps them, and new mappings cost nbdkit ~7% of all CPU under
 * 1 MiB writes (page faults, zeroing the pages, munmap's TLB shootdowns;
 * perf, 2026-12-03). A pool of 16 MiB still mapped half of them anew: a
 * SYNC frees up to the whole dirty window (then 64 MiB); with 64 MiB 1 MiB
 * writes went 6-12% faster (bench/README.md). The pool follows the
 * window's default, 32 MiB since 2026-12-06. Process-wide and under a
 * lock: records are made on the callers' threads and freed on the
 * client's loop, of any client. */
#define POOL_SLOTS (TC_ULOG_POOL_BYTES / MAP_MIN)
#define POOL_BYTES TC_ULOG_POOL_BYTES
static struct {
  pthread_mutex_t lock;
  size_t n, bytes;
  uint64_t uses, uses_seen;   /* gets and puts; at the last idle check */
  struct { void *p; size_t len; } slot[POOL_SLOTS];
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The slots in the order they were put: pool_get takes the newest of its
 * size, pool_put evicts the oldest to make room, so sizes no longer asked
 * for age out instead of holding the pool. */
static void *
pool_get(size_t len)
{
  void *p = NULL;
  pthread_mutex_lock(&pool.lock);
  for (size_t i = pool.n; i-- > 0;)
    if (pool.slot[i].len == len) {
      p = pool.slot[i].p;
      memmove(&pool.slot[i], &pool.slot[i + 1], (pool.n - i - 1) * sizeof pool.slot[0]);
      pool.n--;
      pool.bytes -= len;
      pool.uses++;
      break;
    }
  pthread_mutex_unlock(&pool.lock);
  return p;
}

static void
pool_put(void *p, size_t len)
{
  struct { void *p; size_t len; } out[POOL_SLOTS + 1];
  size_t n_out = 0, evict = 0;
  pthread_mutex_lock(&pool.lock);
  if (len > POOL_BYTES) {
    out[n_out].p = p;
    out[n_out++].len = len;
  } else {
    while (pool.n - evict == POOL_SLOTS || pool.bytes + len > POOL_BYTES) {
      out[n_out].p = pool.slot[evict].p;
      out[n_out++].len = pool.slot[evict].len;
      pool.bytes -= pool.slot[evict++].len;
    }
    memmove(&pool.slot[0], &pool.slot[evict], (pool.n - evict) * sizeof pool.slot[0]);
    pool.n -= evict;
    pool.slot[pool.n].p = p;
    pool.slot[pool.n++].len = len;
    pool.bytes += len;
    pool.uses++;
  }
  pthread_mutex_unlock(&pool.lock);
  for (size_t i = 0; i < n_out; i++)
    munmap(out[i].p, out[i].len);
}

void
tc_ulog_pool_idle_trim(void)
{
  struct { void *p; size_t len; } out[POOL_SLOTS];
  size_t n_out = 0;
  pthread_mutex_lock(&pool.lock);
  if (pool.uses == pool.uses_seen) {
    n_out = pool.n;
    memcpy(out, pool.slot, n_out * sizeof out[0]);
    pool.n = pool.bytes = 0;
  }
  pool.uses_seen = pool.uses;
  pthread_mutex_unlock(&pool.lock);
  for (size_t i = 0; i < n_out; i++)
    munmap(out[i].p, out[i].len);
}

static uint8_t *
data_alloc(const struct tc_ulog *log, struct tc_ulog_entry *e, uint32_t n)
{
  e->mapped = false;
  if (!log->alloc && n >= MAP_MIN) {
    void *p = pool_get(n);
    if (!p && (p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
      return NULL;
    e->mapped = true;
    return p;
  }
  return log_alloc(log, n ? n : 1);
}

/* e->cap is the size data_alloc was asked for. */
static void
data_free(struct tc_ulog_entry *e)
{
  if (e->data && e->mapped)
    pool_put(e->data, e->cap);
  else
    free(e->data);
  e->data = NULL;
}

struct tc_ulog_entry *
tc_ulog_reserve(const struct tc_ulog *log, uint64_t inode, uint64_t offset, uint32_t len, bool data, bool partial)
{
  struct tc_ulog_entry *e = log_alloc(log, sizeof *e);
  if (!e) {
    errno = ENOMEM;
    return NULL;
  }
  *e = (struct tc_ulog_entry) { .inode = inode, .offset = offset, .len = len, .partial = partial };
  if (data && !(e->data = data_alloc(log, e, len))) {
    free(e);
    errno = ENOMEM;
    return NULL;
  }
  e->cap = data ? len : 0;
  return e;
}

void
tc_ulog_release(struct tc_ulog_entry *e)
{
  if (!e)
    return;
  data_free(e);
  free(e);
}

/* --- the index: entries by (inode, 1 MiB window). Objects are at most
 * 1 MiB and aligned to their size, so an entry (one object's write) lies
 * in one window; one that does not is kept on the wide chain, scanned by
 * every add. The index is only a shortcut: without memory for it every
 * entry is wide, and the log works as a plain list. */
#define WIN_SHIFT 20

static size_t
slot_of(const struct tc_ulog *log, uint64_t inode, uint64_t win)
{
  uint64_t h = (inode * 0x9e3779b97f4a7c15ull) ^ (win * 0xc2b2ae3d27d4eb4full);
  return (size_t) (h ^ (h >> 29)) & (log->nslots - 1);
}

static struct tc_ulog_entry **
chain_of(struct tc_ulog *log, struct tc_ulog_entry *e)
{
  return e->slot < 0 ? &log->wide : &log->slots[e->slot];
}

static void
chain_push(struct tc_ulog *log, struct tc_ulog_entry *e)
{
  uint64_t win = e->offset >> WIN_SHIFT;
  e->slot = -1;
  if (log->nslots && e->len && (e->offset + e->len - 1) >> WIN_SHIFT == win)
    e->slot = (long) slot_of(log, e->inode, win);
  struct tc_ulog_entry **c = chain_of(log, e);
  e->cprev = NULL;
  e->cnext = *c;
  if (*c)
    (*c)->cprev = e;
  *c = e;
}

static void
chain_pop(struct tc_ulog *log, struct tc_ulog_entry *e)
{
  if (e->cprev)
    e->cprev->cnext = e->cnext;
  else
    *chain_of(log, e) = e->cnext;
  if (e->cnext)
    e->cnext->cprev = e->cprev;
}

/* Keep about two entries a slot: a bigger table, everything re-chained.
 * Without memory the table stays as it is (longer chains). */
static void
index_grow(struct tc_ulog *log)
{
  if (log->count < 2 * log->nslots)
    return;
  size_t n = log->nslots ? 2 * log->nslots : 1024;
  struct tc_ulog_entry **t = calloc(n, sizeof *t);
  if (!t)
    return;
  free(log->slots);
  log->slots = t;
  log->nslots = n;
  log->wide = NULL;
  for (struct tc_ulog_entry *u = log->head; u; u = u->next)
    chain_push(log, u);
}

static void
log_unlink(struct tc_ulog *log, struct tc_ulog_entry *u)
{
  chain_pop(log, u);
  log->count--;
  log->mem -= u->cap;
  if (u->prev)
    u->prev->next = u->next;
  else
    log->head = u->next;
  if (u->next)
    u->next->prev = u->prev;
  else
    log->tail = u->prev;
  log->bytes -= u->len;
  tc_ulog_release(u);
}

/* Put e (not in the log) right after u. */
static void
log_insert_after(struct tc_ulog *log, struct tc_ulog_entry *u, struct tc_ulog_entry *e)
{
  e->prev = u;
  e->next = u->next;
  if (u->next)
    u->next->prev = e;
  else
    log->tail = e;
  u->next = e;
  log->bytes += e->len;
  log->mem += e->cap;
  log->count++;
  chain_push(log, e);
}

/* Copy the bytes of [off, end) (data NULL: zeros, what a DELETE reads as)
 * into u's data where they overlap. */
static void
log_overwrite(struct tc_ulog_entry *u, uint64_t off, uint64_t end, const uint8_t *data)
{
  uint64_t ue = u->offset + u->len, from = off > u->offset ? off : u->offset, to = end < ue ? end : ue;
  if (data)
    memcpy(u->data + (from - u->offset), data + (from - off), to - from);
  else
    memset(u->data + (from - u->offset), 0, to - from);
}

/* u's data was cut to its len: give back the buffer when it is now less
 * than half used (a 128 KiB write cut to 4 KiB would otherwise hold 128
 * KiB for the 4). Without memory for the smaller copy it stays as it is. */
static void
log_shrink(struct tc_ulog *log, struct tc_ulog_entry *u)
{
  if (!u->data || (uint64_t) u->len * 2 >= u->cap)
    return;
  struct tc_ulog_entry n = { 0 };
  uint8_t *d = data_alloc(log, &n, u->len);
  if (!d)
    return;
  memcpy(d, u->data, u->len);
  data_free(u);
  u->data = d;
  u->mapped = n.mapped;
  log->mem -= u->cap - u->len;
  u->cap = u->len;
}

/* A partial write was acknowledged over the bytes of an older whole-sector
 * entry u: put its bytes into u's data and make u as young as the write
 * (so u is kept until a SYNC covers it). u and the partial entry then
 * overlap with the same bytes, which replay in either order. */
static void
log_patch(struct tc_ulog *log, struct tc_ulog_entry *u, uint64_t off, uint64_t end, const uint8_t *data,
          uint64_t version)
{
  log_overwrite(u, off, end, data);
  /* u now says what the partial write left: replayed unless the object
   * holds that (a version 0 of an old OSD: unconditionally). */
  u->version = u->version && version ? (version > u->version ? version : u->version) : 0;
  u->seq = log->seq + 1;   /* the partial entry's */
  if (u == log->tail)
    return;
  if (u->prev)
    u->prev->next = u->next;
  else
    log->head = u->next;
  u->next->prev = u->prev;
  u->prev = log->tail;
  u->next = NULL;
  log->tail->next = u;
  log->tail = u;
}

/* Cut [off, end) out of the older entry u, which overlaps it. Returns 0, or
 * -ENOMEM when u had to be split in two and could not be (u is then kept
 * whole, patched with the newer bytes when it carries data). */
static int
log_cut(struct tc_ulog *log, struct tc_ulog_entry *u, uint64_t off, uint64_t end, const uint8_t *data)
{
  uint64_t ue = u->offset + u->len;
  if (u->offset >= off && ue <= end) {
    log_unlink(log, u);
    return 0;
  }
  if (u->offset < off && ue > end) {
    /* The newer write lies inside u: u keeps its head, a new entry of the
     * same age takes its tail. */
    struct tc_ulog_entry *t = tc_ulog_reserve(log, u->inode, end, (uint32_t) (ue - end), u->data != NULL,
                                              u->partial);
    if (!t) {
      /* Kept whole, u must say what the newer write says where they
       * overlap, as both may be replayed in either order. Two DELETEs
       * agree already; a DELETE cannot carry bytes without memory. */
      if (u->data)
        log_overwrite(u, off, end, data);
      else if (data)
        return -ENOMEM;
      return 0;
    }
    t->seq = u->seq;
    t->version = u->version;
    if (u->data)
      memcpy(t->data, u->data + (end - u->offset), t->len);
    log_insert_after(log, u, t);
  }
  if (u->offset < off) {
    /* Keep the head. */
    log->bytes -= ue - off;
    u->len = (uint32_t) (off - u->offset);
    log_shrink(log, u);
  }
  else {
    /* Keep the tail. */
    uint32_t keep = (uint32_t) (ue - end);
    if (u->data)
      memmove(u->data, u->data + (end - u->offset), keep);
    log->bytes -= u->len - keep;
    u->offset = end;
    u->len = keep;
    log_shrink(log, u);
  }
  return 0;
}

/* Cut or patch the entries older than n where n covers them; n->seq taken. */
static int
log_supersede(struct tc_ulog *log, struct tc_ulog_entry *n, const void *data)
{
  uint64_t off = n->offset, end = off + n->len;
  int r = 0;
  if (n->data && data) {
    if (data != n->data)   /* else the bytes are there already */
      memcpy(n->data, data, n->len);
  }
  else if (n->data) {
    /* Reserved for bytes, acknowledged without: a DELETE. */
    data_free(n);
    n->cap = 0;
  }
  /* The older entries that can overlap: the chain of n's window and the
   * wide chain, or, if n itself is wide, the whole log. */
  struct tc_ulog_entry *stop = log->tail;   /* entries moved to the tail are not seen twice */
  int narrow = log->nslots && n->len && (end - 1) >> WIN_SHIFT == off >> WIN_SHIFT;
  struct tc_ulog_entry *chains[2] = { narrow ? log->slots[slot_of(log, n->inode, off >> WIN_SHIFT)] : log->head,
                                      narrow ? log->wide : NULL };
  for (int c = 0; c < 2; c++)
  for (struct tc_ulog_entry *u = chains[c], *next; u; u = next) {
    /* A cut may free u, or put its tail right after it (on u's chain's
     * head: not seen, and it does not overlap n anyway). */
    next = narrow ? u->cnext : u == stop ? NULL : u->next;
    uint64_t ue = u->offset + u->len;
    if (u->inode != n->inode || ue <= off || end <= u->offset)
      continue;
    if (n->partial && !u->partial) {
      /* A DELETE becomes a write of zeros (what its sectors read as), so
       * that it can carry the partial write's bytes. */
      if (!u->data) {
        if (!(u->data = data_alloc(log, u, u->len))) {
          r = -ENOMEM;
          continue;
        }
        memset(u->data, 0, u->len);
        u->cap = u->len;
        log->mem += u->cap;
      }
      log_patch(log, u, off, end, n->data, n->version);
      continue;
    }
    if (log_cut(log, u, off, end, n->data) < 0)
      r = -ENOMEM;
  }
  n->seq = ++log->seq;
  return r;
}

int
tc_ulog_add(struct tc_ulog *log, struct tc_ulog_entry *n, const void *data)
{
  int r = log_supersede(log, n, data);
  n->next = NULL;
  n->prev = log->tail;
  if (log->tail)
    log->tail->next = n;
  else
    log->head = n;
  log->tail = n;
  log->bytes += n->len;
  log->mem += n->cap;
  log->count++;
  chain_push(log, n);
  index_grow(log);
  return r;
}

int
tc_ulog_add_durable(struct tc_ulog *log, struct tc_ulog_entry *n, const void *data)
{
  int r = log_supersede(log, n, data);
  tc_ulog_release(n);
  return r;
}

/* Bits [from, to) of bm set (on) or cleared. */
static void
bits_set(uint8_t *bm, uint64_t from, uint64_t to, bool on)
{
  for (uint64_t i = from; i < to; i++) {
    if (on)
      bm[i / 8] |= (uint8_t) (1u << (i % 8));
    else
      bm[i / 8] &= (uint8_t) ~(1u << (i % 8));
  }
}

static void
overlay_one(const struct tc_ulog_entry *u, uint64_t offset, uint64_t end, uint8_t *buf, uint8_t *bitmap,
            uint64_t bit0)
{
  uint64_t from = u->offset > offset ? u->offset : offset;
  uint64_t to = u->offset + u->len < end ? u->offset + u->len : end;
  if (buf) {
    if (u->data)
      memcpy(buf + (from - offset), u->data + (from - u->offset), to - from);
    else
      memset(buf + (from - offset), 0, to - from);
  }
  if (!bitmap || offset % 4096)
    return;
  if (u->data)   /* a sector any byte of a write touched exists */
    bits_set(bitmap, bit0 + (from - offset) / 4096, bit0 + (to - offset + 4095) / 4096, true);
  else           /* a DELETE covers whole sectors */
    bits_set(bitmap, bit0 + (from - offset + 4095) / 4096, bit0 + (to - offset) / 4096, false);
}

/* Whether u is to be laid over a read of [offset, end) of inode at version. */
static bool
overlays(const struct tc_ulog_entry *u, uint64_t inode, uint64_t offset, uint64_t end, uint64_t version)
{
  return u->inode == inode && u->version > version && u->offset < end && offset < u->offset + u->len;
}

size_t
tc_ulog_overlay(const struct tc_ulog *log, uint64_t inode, uint64_t offset, uint32_t len, uint64_t version,
                uint8_t *buf, uint8_t *bitmap, uint64_t bit0)
{
  if (!log->head || len == 0)
    return 0;
  uint64_t end = offset + len;
  size_t n = 0;
  if (!log->nslots) {   /* no index: the whole log */
    for (const struct tc_ulog_entry *u = log->head; u; u = u->next)
      if (overlays(u, inode, offset, end, version)) {
        overlay_one(u, offset, end, buf, bitmap, bit0);
        n++;
      }
    return n;
  }
  /* Each window's chain (entries within one window) and the wide chain. */
  for (uint64_t win = offset >> WIN_SHIFT; win <= (end - 1) >> WIN_SHIFT; win++)
    for (const struct tc_ulog_entry *u = log->slots[slot_of(log, inode, win)]; u; u = u->cnext)
      if (u->offset >> WIN_SHIFT == win && overlays(u, inode, offset, end, version)) {
        overlay_one(u, offset, end, buf, bitmap, bit0);
        n++;
      }
  for (const struct tc_ulog_entry *u = log->wide; u; u = u->cnext)
    if (overlays(u, inode, offset, end, version)) {
      overlay_one(u, offset, end, buf, bitmap, bit0);
      n++;
    }
  return n;
}

void
tc_ulog_trim(struct tc_ulog *log, uint64_t upto)
{
  while (log->head && log->head->seq <= upto)
    log_unlink(log, log->head);
}

void
tc_ulog_clear(struct tc_ulog *log)
{
  while (log->head)
    log_unlink(log, log->head);
  free(log->slots);
  log->slots = NULL;
  log->nslots = 0;
  log->wide = NULL;
}
