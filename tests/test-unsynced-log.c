/* The cluster client's unsynced-write log (common/cluster/unsynced_log.h):
 * what it keeps for replay, and that a failed allocation never drops the
 * record of an acknowledged write (allocation failures injected through the
 * log's allocator). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "tc_config.h"
#include "unsynced_log.h"

#define S 4096

/* The injected allocator: fails every allocation while fail_allocs. */
static bool fail_allocs;
static int failed;

static void *
test_alloc(size_t n)
{
  if (fail_allocs) {
    failed++;
    return NULL;
  }
  return malloc(n);
}

static uint8_t *
pattern(uint32_t len, uint8_t v)
{
  uint8_t *p = malloc(len);
  if (p)
    memset(p, v, len);
  return p;
}

/* Record an acknowledged write the way the cluster client does: reserve
 * before sending, add when acknowledged. */
static uint64_t versions;   /* the version the OSD gives each write: one more each time */

static int
write_acked(struct tc_ulog *log, uint64_t inode, uint64_t off, uint32_t len, const uint8_t *data, bool partial)
{
  struct tc_ulog_entry *e = tc_ulog_reserve(log, inode, off, len, data != NULL, partial);
  if (!e)
    return -2;
  e->version = ++versions;
  return tc_ulog_add(log, e, data);
}

/* byte_after_replay with only the entries newer than version: -1 where none. */
static int
byte_newer_than(const struct tc_ulog *log, uint64_t b, uint64_t version)
{
  int v = -1;
  for (const struct tc_ulog_entry *u = log->head; u; u = u->next)
    if (u->inode == 1 && u->version > version && b >= u->offset && b < u->offset + u->len)
      v = u->data ? u->data[b - u->offset] : 0;
  return v;
}

/* Whether the log, replayed over zeroed memory in log order, leaves byte b
 * of inode 1 as v (DELETEs read as zeros). */
static int
byte_after_replay(const struct tc_ulog *log, uint64_t b)
{
  int v = -1;
  for (const struct tc_ulog_entry *u = log->head; u; u = u->next)
    if (u->inode == 1 && b >= u->offset && b < u->offset + u->len)
      v = u->data ? u->data[b - u->offset] : 0;
  return v;
}

static size_t
count(const struct tc_ulog *log)
{
  size_t n = 0;
  for (const struct tc_ulog_entry *u = log->head; u; u = u->next)
    n++;
  return n;
}

static uint64_t
sum_len(const struct tc_ulog *log)
{
  uint64_t n = 0;
  for (const struct tc_ulog_entry *u = log->head; u; u = u->next)
    n += u->len;
  return n;
}

/* Overlapping entries of inode 1 that disagree on a byte could be replayed
 * in either order (the replay sends them all at once): none may. */
static bool
overlaps_agree(const struct tc_ulog *log)
{
  for (const struct tc_ulog_entry *a = log->head; a; a = a->next)
    for (const struct tc_ulog_entry *b = a->next; b; b = b->next) {
      if (a->inode != b->inode)
        continue;
      uint64_t lo = a->offset > b->offset ? a->offset : b->offset;
      uint64_t hi = a->offset + a->len < b->offset + b->len ? a->offset + a->len : b->offset + b->len;
      for (uint64_t x = lo; x < hi; x++) {
        int va = a->data ? a->data[x - a->offset] : 0, vb = b->data ? b->data[x - b->offset] : 0;
        if (va != vb)
          return false;
      }
    }
  return true;
}

static void
test_keeps_newest(void)
{
  struct tc_ulog log = { .alloc = test_alloc };
  uint8_t *a = pattern(4 * S, 0xaa), *b = pattern(S, 0xbb), *c = pattern(100, 0xcc);
  CHECK(a && b && c, "memory");
  if (!a || !b || !c)
    goto out;
  CHECK(write_acked(&log, 1, 0, 4 * S, a, false) == 0, "write A");
  CHECK(write_acked(&log, 1, S, S, b, false) == 0, "write B inside A");
  /* A split around B: head, tail, then B. */
  CHECK(count(&log) == 3 && log.bytes == 4 * S && sum_len(&log) == log.bytes, "A cut in two around B (%zu, %lu)",
        count(&log), (unsigned long) log.bytes);
  CHECK(byte_after_replay(&log, 0) == 0xaa && byte_after_replay(&log, S) == 0xbb &&
        byte_after_replay(&log, 2 * S) == 0xaa, "replay gives A, B, A");
  CHECK(write_acked(&log, 1, 2 * S + 10, 100, c, true) == 0, "partial write C over A's tail");
  CHECK(byte_after_replay(&log, 2 * S + 10) == 0xcc && byte_after_replay(&log, 2 * S + 9) == 0xaa,
        "the partial write patched A's tail");
  CHECK(overlaps_agree(&log), "overlapping entries carry the same bytes");
  CHECK(write_acked(&log, 1, 0, 4 * S, NULL, false) == 0, "delete everything");
  CHECK(count(&log) == 1 && byte_after_replay(&log, S) == 0 && log.bytes == 4 * S, "only the DELETE is left");
  uint64_t seq = log.seq;
  CHECK(write_acked(&log, 2, 0, S, b, false) == 0 && count(&log) == 2, "another inode is not cut");
  tc_ulog_trim(&log, seq);
  CHECK(count(&log) == 1 && log.head->inode == 2 && log.bytes == S, "trim forgets what the SYNC covered");
out:
  tc_ulog_clear(&log);
  CHECK(!log.head && !log.tail && log.bytes == 0, "cleared");
  free(a);
  free(b);
  free(c);
}

/* The bug: the record used to be allocated when the write was
 * acknowledged; without memory then, the acknowledged write was kept
 * nowhere and an OSD failure before the next SYNC lost it. */
static void
test_record_reserved(void)
{
  struct tc_ulog log = { .alloc = test_alloc };
  uint8_t *a = pattern(S, 0xaa);
  CHECK(a != NULL, "memory");
  if (!a)
    return;
  struct tc_ulog_entry *e = tc_ulog_reserve(&log, 1, 8 * S, S, true, false);
  CHECK(e != NULL, "reserve");
  fail_allocs = true;
  failed = 0;
  int r = e ? tc_ulog_add(&log, e, a) : -1;
  fail_allocs = false;
  CHECK(r == 0 && failed == 0, "acknowledging needs no memory (r %d, %d allocations failed)", r, failed);
  CHECK(count(&log) == 1 && byte_after_replay(&log, 8 * S) == 0xaa, "the acknowledged write is kept for replay");
  /* Without memory before sending, the write fails instead. */
  fail_allocs = true;
  CHECK(tc_ulog_reserve(&log, 1, 0, S, true, false) == NULL, "no memory: reserving fails (the write fails)");
  CHECK(tc_ulog_reserve(&log, 1, 0, S, false, false) == NULL, "no memory: reserving a DELETE fails");
  fail_allocs = false;
  tc_ulog_release(tc_ulog_reserve(&log, 1, 0, S, true, false));   /* an unused reservation is freed */
  tc_ulog_clear(&log);
  free(a);
}

/* Cutting an older entry in two needs memory: without it nothing is
 * dropped, and the older entry agrees with the newer write or the write
 * is reported failed. */
static void
test_split_without_memory(void)
{
  uint8_t *a = pattern(4 * S, 0xaa), *b = pattern(S, 0xbb), *c = pattern(100, 0xcc);
  CHECK(a && b && c, "memory");
  if (!a || !b || !c)
    goto out;

  /* Write inside a write: the older one is patched and kept whole. */
  struct tc_ulog log = { .alloc = test_alloc };
  CHECK(write_acked(&log, 1, 0, 4 * S, a, false) == 0, "write A");
  struct tc_ulog_entry *e = tc_ulog_reserve(&log, 1, S, S, true, false);
  fail_allocs = true;
  int r = tc_ulog_add(&log, e, b);
  fail_allocs = false;
  CHECK(r == 0, "write B inside A without memory: kept (%d)", r);
  CHECK(byte_after_replay(&log, 0) == 0xaa && byte_after_replay(&log, 3 * S) == 0xaa &&
        byte_after_replay(&log, S) == 0xbb && overlaps_agree(&log), "A kept whole, patched with B");
  CHECK(sum_len(&log) == log.bytes, "byte count");
  tc_ulog_clear(&log);

  /* A DELETE inside a write: the older one is patched with zeros. */
  CHECK(write_acked(&log, 1, 0, 4 * S, a, false) == 0, "write A");
  e = tc_ulog_reserve(&log, 1, S, S, false, false);
  fail_allocs = true;
  r = tc_ulog_add(&log, e, NULL);
  fail_allocs = false;
  CHECK(r == 0 && byte_after_replay(&log, 0) == 0xaa && byte_after_replay(&log, S) == 0 && overlaps_agree(&log),
        "delete inside A without memory: A patched with zeros (%d)", r);
  tc_ulog_clear(&log);

  /* A write inside a DELETE: nothing can carry the bytes, the write fails
   * and the DELETE is still there whole. */
  CHECK(write_acked(&log, 1, 0, 4 * S, NULL, false) == 0, "delete D");
  e = tc_ulog_reserve(&log, 1, S, S, true, false);
  fail_allocs = true;
  r = tc_ulog_add(&log, e, b);
  fail_allocs = false;
  CHECK(r == -ENOMEM, "write inside D without memory: the write fails (%d)", r);
  CHECK(log.head && log.head->offset == 0 && log.head->len == 4 * S && !log.head->data, "D kept whole");
  CHECK(sum_len(&log) == log.bytes, "byte count");
  tc_ulog_clear(&log);

  /* A partial write over a DELETE: the DELETE must become zeros to carry
   * the bytes; without memory the write fails, the DELETE stays. */
  CHECK(write_acked(&log, 1, 0, 4 * S, NULL, false) == 0, "delete D");
  e = tc_ulog_reserve(&log, 1, S + 5, 100, true, true);
  fail_allocs = true;
  r = tc_ulog_add(&log, e, c);
  fail_allocs = false;
  CHECK(r == -ENOMEM && log.head && log.head->len == 4 * S, "partial write over D without memory fails (%d)", r);
  tc_ulog_clear(&log);
out:
  free(a);
  free(b);
  free(c);
}

/* A FUA write acknowledged durable (tc_ulog_add_durable) is not kept, but
 * it cuts and patches the older entries it covers as a kept one would: a
 * replay after an OSD loss must not bring back the bytes it replaced. */
static void
test_durable(void)
{
  struct tc_ulog log = { .alloc = test_alloc };
  uint8_t *a = pattern(4 * S, 0xaa), *b = pattern(S, 0xbb), *c = pattern(100, 0xcc);
  CHECK(a && b && c, "memory");
  if (!a || !b || !c)
    goto out;
  CHECK(write_acked(&log, 1, 0, 4 * S, a, false) == 0, "write A (unsynced)");
  struct tc_ulog_entry *e = tc_ulog_reserve(&log, 1, S, S, true, false);
  CHECK(e && tc_ulog_add_durable(&log, e, b) == 0, "FUA write B inside A, durable");
  CHECK(count(&log) == 2 && log.bytes == 3 * S && sum_len(&log) == log.bytes, "A cut around B, B not kept (%zu)",
        count(&log));
  CHECK(byte_after_replay(&log, 0) == 0xaa && byte_after_replay(&log, S) == -1 && byte_after_replay(&log, 2 * S) == 0xaa,
        "a replay rewrites A around B, never over it");
  e = tc_ulog_reserve(&log, 1, 2 * S + 10, 100, true, true);
  CHECK(e && tc_ulog_add_durable(&log, e, c) == 0, "FUA partial write C over A's tail, durable");
  CHECK(count(&log) == 2 && byte_after_replay(&log, 2 * S + 10) == 0xcc && byte_after_replay(&log, 2 * S + 9) == 0xaa,
        "A's tail patched with C's bytes, C not kept");
  uint64_t seq = log.seq;
  e = tc_ulog_reserve(&log, 1, 0, 4 * S, false, false);
  CHECK(e && tc_ulog_add_durable(&log, e, NULL) == 0 && count(&log) == 0 && log.bytes == 0,
        "a durable DELETE over everything leaves nothing to replay");
  CHECK(log.seq > seq, "sequence numbers go on");
out:
  tc_ulog_clear(&log);
  free(a);
  free(b);
  free(c);
}

/* Many random writes, deletes and partial writes over a few MiB of two
 * inodes (past the index's growth, some crossing a 1 MiB window), against
 * a byte model: the replay of the log gives the newest bytes everywhere a
 * write went since the last trim, and overlaps agree. */
static void
test_random_against_model(void)
{
  enum { SPAN = 3 << 20, OPS = 6000 };
  static uint8_t model[SPAN];
  static signed char written[SPAN];
  static uint8_t buf[128 * 1024];
  struct tc_ulog log = { 0 };
  uint64_t x = 88172645463325252ull;
  int bad = 0;
  for (int i = 0; i < OPS; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    int kind = (int) (x % 10);             /* 0: delete, 1-2: partial, else write */
    uint64_t inode = 1 + (x >> 8) % 2;
    uint32_t len;
    uint64_t off;
    if (kind == 1 || kind == 2) {
      len = 1 + (uint32_t) ((x >> 12) % 3000);
      off = (x >> 24) % (SPAN - len);
    }
    else {
      len = S * (1 + (uint32_t) ((x >> 12) % ((i % 97) ? 2 : 32)));
      off = (x >> 24) % (SPAN / S - len / S) * S;
      if (i % 211 == 0)                    /* across a window boundary */
        off = (1 << 20) - S;
    }
    uint8_t v = (uint8_t) (1 + i % 250);
    memset(buf, v, len);
    if (write_acked(&log, inode, off, len, kind ? buf : NULL, kind == 1 || kind == 2) != 0)
      bad++;
    if (inode == 1)
      for (uint32_t k = 0; k < len; k++) {
        model[off + k] = kind ? v : 0;
        written[off + k] = 1;
      }
  }
  CHECK(bad == 0, "%d random adds failed", bad);
  CHECK(log.nslots >= 1024, "the index grew (%zu slots for %zu entries)", log.nslots, log.count);
  CHECK(sum_len(&log) == log.bytes && count(&log) == log.count, "byte and entry counts");
  uint64_t mem = 0;
  size_t fat = 0;
  for (const struct tc_ulog_entry *u = log.head; u; u = u->next) {
    mem += u->cap;
    fat += u->data && (uint64_t) u->len * 2 < u->cap;
  }
  CHECK(mem == log.mem && fat == 0, "memory count %" PRIu64 " = %" PRIu64 ", %zu entries hold more than twice their bytes",
        mem, log.mem, fat);
  int wrong = 0;
  for (uint64_t b = 0; b < SPAN; b += 61)
    if (written[b] && byte_after_replay(&log, b) != model[b])
      wrong++;
  CHECK(wrong == 0, "replay gives the newest byte everywhere (%d wrong)", wrong);
  CHECK(overlaps_agree(&log), "overlapping entries agree");
  /* A read laid over with the log (tc_ulog_overlay) gives the newest byte
   * where inode 1 was written and leaves the rest as the OSDs returned it
   * (0xee here), whatever the range: aligned or not, across windows. */
  int over_wrong = 0, applied = 0;
  for (int i = 0; i < 400; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    uint32_t len = i % 2 ? S * (1 + (uint32_t) (x % 32)) : 1 + (uint32_t) (x % sizeof buf);
    uint64_t off = i % 2 ? (x >> 16) % (SPAN / S - len / S) * S : (x >> 16) % (SPAN - len);
    if (i % 37 == 0)
      off = (1 << 20) - 3 * S;
    memset(buf, 0xee, len);
    applied += tc_ulog_overlay(&log, 1, off, len, 0, buf, NULL, 0) > 0;
    for (uint32_t k = 0; k < len; k++)
      if (buf[k] != (written[off + k] ? model[off + k] : 0xee))
        over_wrong++;
  }
  CHECK(over_wrong == 0 && applied > 300, "reads laid over with the log give the newest bytes (%d wrong, %d of 400 "
        "ranges touched)", over_wrong, applied);
  /* An object as new as an entry holds it, or what another process wrote
   * over it since: only the entries newer than the read's version lay. */
  over_wrong = 0;
  int kept = 0;
  for (int i = 0; i < 200; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    uint32_t len = S * (1 + (uint32_t) (x % 32));
    uint64_t off = (x >> 16) % (SPAN / S - len / S) * S;
    uint64_t version = versions - OPS / 2 + (x >> 40) % OPS;
    memset(buf, 0xee, len);
    tc_ulog_overlay(&log, 1, off, len, version, buf, NULL, 0);
    for (uint32_t k = 0; k < len; k++) {
      int v = byte_newer_than(&log, off + k, version);
      over_wrong += buf[k] != (v < 0 ? 0xee : v);
      kept += v < 0 && written[off + k];
    }
  }
  CHECK(over_wrong == 0 && kept > 0, "reads at a version lay only the newer entries (%d wrong, %d bytes kept as read)",
        over_wrong, kept);
  tc_ulog_clear(&log);
  memset(buf, 0xee, S);
  CHECK(tc_ulog_overlay(&log, 1, 0, S, 0, buf, NULL, 0) == 0 && buf[0] == 0xee, "an empty log changes no read");
}

/* The sectors a read reports present after the overlay: a write's are, a
 * DELETE's are not, the others stay as the OSDs said. */
static void
test_overlay_bitmap(void)
{
  struct tc_ulog log = { 0 };
  uint8_t *a = pattern(S, 0xaa), *p = pattern(10, 0xcc);
  CHECK(a && p, "memory");
  CHECK(write_acked(&log, 1, S, S, a, false) == 0, "write sector 1");
  CHECK(write_acked(&log, 1, 2 * S, 2 * S, NULL, false) == 0, "delete sectors 2 and 3");
  CHECK(write_acked(&log, 1, 5 * S + 100, 10, p, true) == 0, "partial write in sector 5");
  CHECK(write_acked(&log, 9, 0, 8 * S, NULL, false) == 0, "delete all of another inode");
  static uint8_t buf[8 * S];
  memset(buf, 0x11, sizeof buf);
  uint64_t v0 = versions - 4;   /* the first of the four writes above */
  uint8_t bm = 0x0d | 0x40;   /* sectors 0, 2, 3 and 6 present */
  CHECK(tc_ulog_overlay(&log, 1, 0, 8 * S, v0, buf, &bm, 0) == 3, "three entries laid over");
  CHECK(bm == (0x01 | 0x02 | 0x20 | 0x40), "bitmap %#x: sectors 0, 1, 5 and 6 present", bm);
  CHECK(buf[0] == 0x11 && buf[S] == 0xaa && buf[2 * S] == 0 && buf[4 * S - 1] == 0 && buf[4 * S] == 0x11 &&
        buf[5 * S + 99] == 0x11 && buf[5 * S + 100] == 0xcc && buf[5 * S + 109] == 0xcc && buf[5 * S + 110] == 0x11,
        "bytes: written, zeros where deleted, the rest as read");
  uint16_t bm2 = 0x8;
  CHECK(tc_ulog_overlay(&log, 1, S, 2 * S, v0, NULL, (uint8_t *) &bm2, 2) == 2 && bm2 == 0x4,
        "a bitmap-only read of sectors 1-2 at bit 2: %#x", bm2);
  memset(buf, 0x11, sizeof buf);
  CHECK(tc_ulog_overlay(&log, 1, 0, 8 * S, v0 + 2, buf, NULL, 0) == 1 && buf[S] == 0x11 && buf[2 * S] == 0x11 &&
        buf[5 * S + 100] == 0xcc, "at the delete's version only the partial write after it lays");
  free(a);
  free(p);
  tc_ulog_clear(&log);
}

/* A scratch write (the cluster client seals its buffer in place) copies
 * its bytes into the record before sending and acknowledges with the
 * record's own data: kept as a write of those bytes (not taken for a
 * DELETE), and an older entry under it is still cut. */
static void
test_bytes_already_in_record(void)
{
  struct tc_ulog log = { 0 };
  uint8_t *a = pattern(2 * S, 0xaa);
  CHECK(a != NULL, "memory");
  if (!a)
    return;
  CHECK(write_acked(&log, 1, 0, 2 * S, a, false) == 0, "older write");
  struct tc_ulog_entry *e = tc_ulog_reserve(&log, 1, S, S, true, false);
  CHECK(e != NULL, "reserve");
  if (!e) {
    tc_ulog_clear(&log);
    free(a);
    return;
  }
  memset(e->data, 0x55, S);
  CHECK(tc_ulog_add(&log, e, e->data) == 0, "acknowledged with the record's bytes");
  CHECK(e->data != NULL && byte_after_replay(&log, S) == 0x55 && byte_after_replay(&log, 2 * S - 1) == 0x55,
        "the record keeps its bytes for replay (not a DELETE)");
  CHECK(byte_after_replay(&log, 0) == 0xaa && count(&log) == 2 && sum_len(&log) == 2 * S,
        "the older write is cut to what the newer does not cover");
  tc_ulog_clear(&log);
  free(a);
}

/* Large records (mapped on their own) are reused once freed, for a record
 * of the same size: a trimmed or released 128 KiB record's buffer comes
 * back for the next 128 KiB one, never for another size, and a record cut
 * to less than half (shrunk into a smaller buffer) gives its buffer back
 * whole. The bytes read back are always the new write's. */
static void
test_mapped_reuse(void)
{
  struct tc_ulog log = { 0 };
  const uint32_t big = 32 * S;
  uint8_t *a = pattern(big, 0x11), *b = pattern(big, 0x22);
  CHECK(a && b, "memory");
  if (!a || !b) {
    free(a);
    free(b);
    return;
  }
  struct tc_ulog_entry *e = tc_ulog_reserve(&log, 1, 0, big, true, false);
  CHECK(e && e->mapped, "a 128 KiB record is mapped on its own");
  if (!e)
    goto out;
  uint8_t *first = e->data;
  CHECK(tc_ulog_add(&log, e, a) == 0, "acknowledged");
  tc_ulog_trim(&log, log.seq);
  CHECK(log.head == NULL && log.mem == 0, "the sync trims it");
  struct tc_ulog_entry *o = tc_ulog_reserve(&log, 1, 0, 16 * S, true, false);
  CHECK(o && o->data != first, "a 64 KiB record does not take the 128 KiB buffer");
  tc_ulog_release(o);
  e = tc_ulog_reserve(&log, 1, big, big, true, false);
  /* A new mapping reads as zeros: the trimmed record's bytes say it is the same buffer. */
  CHECK(e && e->data == first && e->data[0] == 0x11 && e->data[big - 1] == 0x11,
        "the next 128 KiB record reuses the trimmed one's buffer");
  if (!e)
    goto out;
  CHECK(tc_ulog_add(&log, e, b) == 0, "acknowledged");
  CHECK(byte_after_replay(&log, big) == 0x22 && byte_after_replay(&log, 2 * big - 1) == 0x22 &&
        byte_after_replay(&log, 0) == -1, "the log holds the new write's bytes only");
  /* Cut to 4 KiB: shrunk into a malloc'd buffer, the mapped one pooled. */
  CHECK(write_acked(&log, 1, big + S, big - S, a, false) == 0, "a newer write over all but its first 4 KiB");
  struct tc_ulog_entry *c = tc_ulog_reserve(&log, 1, 0, big, true, false);
  CHECK(c && c->data == first, "the shrunk record's buffer comes back whole");
  tc_ulog_release(c);
  CHECK(byte_after_replay(&log, big) == 0x22 && byte_after_replay(&log, big + S) == 0x11 &&
        byte_after_replay(&log, 2 * big - 1) == 0x11, "the cut record and the newer write replay right");
out:
  tc_ulog_clear(&log);
  free(a);
  free(b);
}

/* A SYNC that frees a whole dirty window of 128 KiB records
 * (TC_ULOG_POOL_BYTES) gives every buffer to the next records, whatever
 * other sizes the pool held before (the oldest buffers make room); what it
 * frees beyond that is unmapped (comes back as a new, zeroed mapping). */
static void
test_pool_holds_a_dirty_window(void)
{
  enum { BIG = 32 * S, KEPT = TC_ULOG_POOL_BYTES / BIG, N = KEPT + 16 };
  struct tc_ulog log = { 0 };
  struct tc_ulog_entry **e = calloc(N, sizeof *e);
  CHECK(e != NULL, "memory");
  if (!e)
    return;
  /* N records: whatever the pool held before, and new mappings */
  for (int i = 0; i < N; i++) {
    e[i] = tc_ulog_reserve(&log, 1, (uint64_t) i * BIG, BIG, true, false);
    CHECK(e[i] && e[i]->mapped, "a 128 KiB record is mapped");
    if (!e[i])
      goto out;
    memset(e[i]->data, 0x5a, BIG);
  }
  for (int i = 0; i < N; i++) {
    tc_ulog_release(e[i]);
    e[i] = NULL;
  }
  int reused = 0, fresh = 0;
  for (int i = 0; i < N; i++) {
    e[i] = tc_ulog_reserve(&log, 1, (uint64_t) i * BIG, BIG, true, false);
    if (!e[i])
      break;
    reused += e[i]->data[0] == 0x5a && e[i]->data[BIG - 1] == 0x5a;
    fresh += e[i]->data[0] == 0 && e[i]->data[BIG - 1] == 0;
  }
  CHECK(reused == KEPT && fresh == N - KEPT, "a dirty window's buffers (%d of %d) come back, the rest are unmapped",
        reused, N);
out:
  for (int i = 0; i < N; i++)
    if (e[i])
      tc_ulog_release(e[i]);
  free(e);
}

/* The pool gives its buffers back only after a whole period without use:
 * a trim right after a get or a put keeps them, the next one unmaps them. */
static void
test_pool_idle_trim(void)
{
  const uint32_t big = 32 * S;
  struct tc_ulog log = { 0 };
  struct tc_ulog_entry *e = tc_ulog_reserve(&log, 1, 0, big, true, false);
  CHECK(e && e->mapped, "a 128 KiB record is mapped");
  if (!e)
    return;
  memset(e->data, 0x77, big);
  tc_ulog_release(e);
  tc_ulog_pool_idle_trim();   /* a put since the last check: kept */
  e = tc_ulog_reserve(&log, 1, 0, big, true, false);
  CHECK(e && e->data[0] == 0x77, "a trim right after use keeps the pooled buffer");
  if (!e)
    return;
  tc_ulog_release(e);
  tc_ulog_pool_idle_trim();
  tc_ulog_pool_idle_trim();   /* nothing since the previous one: unmapped */
  e = tc_ulog_reserve(&log, 1, 0, big, true, false);
  CHECK(e && e->data[0] == 0 && e->data[big - 1] == 0, "after an idle period the buffer was unmapped");
  if (e)
    tc_ulog_release(e);
}

/* Each entry keeps the object version its reply carried, for the
 * conditional replay (TC_OSD_FLAG_REPLAY): a split keeps it on both parts,
 * a partial write's patch makes the patched entry as new as the patch, and
 * an entry of an old OSD (version 0) stays unconditional. */
static struct tc_ulog_entry *
add_version(struct tc_ulog *log, uint64_t off, uint32_t len, const uint8_t *data, bool partial, uint64_t version)
{
  struct tc_ulog_entry *e = tc_ulog_reserve(log, 1, off, len, data != NULL, partial);
  if (!e)
    return NULL;
  e->version = version;
  return tc_ulog_add(log, e, data) == 0 ? e : NULL;
}

static void
test_versions(void)
{
  struct tc_ulog log = { 0 };
  uint8_t *a = pattern(4 * S, 0xaa);
  CHECK(a != NULL, "memory");
  if (!a)
    return;
  struct tc_ulog_entry *e = add_version(&log, 0, 4 * S, a, false, 7);
  CHECK(e != NULL && add_version(&log, S, S, a, false, 8) != NULL, "a write, then one inside it");
  int n7 = 0;
  for (struct tc_ulog_entry *u = log.head; u; u = u->next)
    n7 += u->version == 7;
  CHECK(count(&log) == 3 && n7 == 2, "both parts of the split keep version 7 (%d)", n7);
  tc_ulog_clear(&log);
  memset(&log, 0, sizeof log);
  CHECK(add_version(&log, 0, S, a, false, 5) != NULL && add_version(&log, 10, 4, a, true, 9) != NULL,
        "a sector, then a partial write over it");
  struct tc_ulog_entry *sec = log.head && !log.head->partial ? log.head : log.tail;
  CHECK(count(&log) == 2 && sec && !sec->partial && sec->version == 9,
        "the patched sector is as new as the patch (version %" PRIu64 ")", sec ? sec->version : 0);
  tc_ulog_clear(&log);
  memset(&log, 0, sizeof log);
  CHECK(add_version(&log, 0, S, a, false, 0) != NULL && add_version(&log, 10, 4, a, true, 9) != NULL,
        "a sector from an old OSD, then a partial write over it");
  sec = log.head && !log.head->partial ? log.head : log.tail;
  CHECK(sec && !sec->partial && sec->version == 0, "an unconditional entry stays unconditional when patched");
  tc_ulog_clear(&log);
  free(a);
}

/* The pool is sized to hold one default write window (unsynced_log.h):
 * the two figures must move together. */
static void
test_pool_is_the_default_window(void)
{
  const struct tc_opt_def *o = tc_option_find("client_max_dirty_bytes");
  CHECK(o && o->defval, "client_max_dirty_bytes has a default");
  if (!o || !o->defval)
    return;
  int64_t window = tc_parse_size(o->defval);
  CHECK(window == (int64_t) TC_ULOG_POOL_BYTES,
        "the pool (%u bytes) holds the default client_max_dirty_bytes (%s = %" PRId64 " bytes)",
        (unsigned) TC_ULOG_POOL_BYTES, o->defval, window);
}

int
main(void)
{
  test_keeps_newest();
  test_durable();
  test_record_reserved();
  test_bytes_already_in_record();
  test_split_without_memory();
  test_random_against_model();
  test_overlay_bitmap();
  test_versions();
  test_mapped_reuse();
  test_pool_holds_a_dirty_window();
  test_pool_idle_trim();
  test_pool_is_the_default_window();
  return DONE();
}
