/* The store's journal: the writes and deletes of each sync as one batch in
 * the data file's header area, so that one fdatasync of the data file makes
 * both their data and their metadata durable (store.md, "The journal").
 *
 * A batch is a header (struct tc_store_jhdr) and entries, each an
 * operation as the store applied it to its metadata: kind, length, inode,
 * offset, version, and for a write the data sector and checksum of each of
 * its sectors. Replaying the entries in order through the same code that
 * applied them (store.c) rebuilds the metadata. Batches follow each other
 * from the start of the area; a checkpoint (a durable LMDB commit) starts a
 * new generation at offset 0. This file only builds and parses batches; the
 * I/O and the replay are in store.c. */
#include <config.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "crypto.h"
#include "error.h"
#include "vector.h"
#include "store_impl.h"

_Static_assert(sizeof(struct tc_store_jhdr) == 64, "journal batch header layout");
_Static_assert(sizeof(struct tc_store_jent) == 32, "journal entry layout");

/* Bytes of an entry's arrays: count checksums, then count locations padded
 * to 8 bytes, so every entry and its checksums stay 8-byte aligned. */
static size_t
entry_arrays(uint32_t count)
{
  return (size_t) count * sizeof(uint64_t) + ((size_t) count * sizeof(uint32_t) + 7) / 8 * 8;
}

void
tc_store_journal_init(struct tc_store_journal *j, uint64_t area_off, uint64_t area_len, const uint8_t uuid[16],
                      uint64_t gen)
{
  memset(j, 0, sizeof *j);
  j->area_off = area_off;
  j->area_len = area_len;
  memcpy(j->uuid, uuid, sizeof j->uuid);
  j->gen = gen;
  j->seq = 1;
}

void
tc_store_journal_destroy(struct tc_store_journal *j)
{
  free(j->buf);
  j->buf = NULL;
  j->len = j->cap = 0;
}

int
tc_store_journal_add(struct tc_store_journal *j, int kind, uint64_t inode, uint64_t offset, uint32_t len,
                     uint64_t version, const uint32_t *locs, const uint64_t *sums)
{
  uint32_t count = kind == TC_STORE_PEND_WRITE ? len / TC_STORE_SECTOR : 0;
  size_t need = sizeof(struct tc_store_jent) + entry_arrays(count);
  size_t at = j->len ? j->len : sizeof(struct tc_store_jhdr);
  if (tc_grow(&j->buf, &j->cap, at + need, 1, 4096) < 0)
    return tc_error(ENOMEM, "no memory for the store's journal");
  struct tc_store_jent e = { .kind = (uint8_t) kind, .len = len, .inode = inode, .offset = offset,
                             .version = version };
  uint8_t *p = j->buf + at;
  memcpy(p, &e, sizeof e);
  p += sizeof e;
  memset(p, 0, need - sizeof e);
  if (count) {
    memcpy(p, sums, count * sizeof *sums);
    memcpy(p + count * sizeof *sums, locs, count * sizeof *locs);
  }
  j->len = at + need;
  j->nent++;
  return 0;
}

int
tc_store_journal_fits(const struct tc_store_journal *j)
{
  return j->pos + j->len <= j->area_len;
}

static uint64_t
batch_csum(const uint8_t *b, size_t len)
{
  /* Everything but the checksum field itself, which is last in the header. */
  uint64_t h = tc_xxh3_64(b, offsetof(struct tc_store_jhdr, csum));
  return tc_xxh3_64_seed(b + sizeof(struct tc_store_jhdr), len - sizeof(struct tc_store_jhdr), h);
}

uint8_t *
tc_store_journal_take(struct tc_store_journal *j, size_t *len)
{
  if (!j->nent) {
    *len = 0;
    return NULL;
  }
  struct tc_store_jhdr h = { .magic = TC_STORE_JMAGIC, .nent = j->nent, .gen = j->gen, .seq = j->seq,
                             .len = (uint32_t) (j->len - sizeof h) };
  memcpy(h.uuid, j->uuid, sizeof h.uuid);
  memcpy(j->buf, &h, sizeof h);
  h.csum = batch_csum(j->buf, j->len);
  memcpy(j->buf, &h, sizeof h);
  uint8_t *b = j->buf;
  *len = j->len;
  j->buf = NULL;
  j->len = j->cap = 0;
  j->nent = 0;
  return b;
}

void
tc_store_journal_written(struct tc_store_journal *j, size_t len)
{
  j->pos += len;
  j->seq++;
}

void
tc_store_journal_restart(struct tc_store_journal *j, uint64_t gen)
{
  tc_store_journal_destroy(j);
  j->nent = 0;
  j->gen = gen;
  j->seq = 1;
  j->pos = 0;
}

const char *
tc_store_journal_batch(const struct tc_store_journal *j, const uint8_t *p, size_t avail, uint64_t seq,
                       size_t *batch_len)
{
  struct tc_store_jhdr h;
  if (avail < sizeof h)
    return "the area ends";
  memcpy(&h, p, sizeof h);
  if (h.magic != TC_STORE_JMAGIC)
    return "no batch header";
  if (memcmp(h.uuid, j->uuid, sizeof h.uuid) != 0 || h.gen != j->gen)
    return "a batch of an earlier generation or store";
  if (h.seq != seq)
    return "a batch out of sequence";
  if (h.len > avail - sizeof h)
    return "a batch longer than the area";
  if (h.csum != batch_csum(p, sizeof h + h.len))
    return "a torn batch (checksum mismatch)";
  *batch_len = sizeof h + h.len;
  return NULL;
}

const char *
tc_store_journal_entry(const uint8_t **pp, const uint8_t *end, uint32_t block_size, struct tc_store_jent *e,
                       const uint64_t **sums, const uint32_t **locs)
{
  const uint8_t *p = *pp;
  if ((size_t) (end - p) < sizeof *e)
    return "an entry is cut short";
  memcpy(e, p, sizeof *e);
  p += sizeof *e;
  if (e->kind != TC_STORE_PEND_WRITE && e->kind != TC_STORE_PEND_DELETE && e->kind != TC_STORE_PEND_TOMBSTONE)
    return "an entry of an unknown kind";
  if (!e->len || e->len % TC_STORE_SECTOR || e->offset % TC_STORE_SECTOR ||
      e->offset / block_size != (e->offset + e->len - 1) / block_size)
    return "an entry whose range is not whole sectors of one object";
  if (e->kind == TC_STORE_PEND_WRITE && !e->version)
    return "a write entry with version 0";
  uint32_t count = e->kind == TC_STORE_PEND_WRITE ? e->len / TC_STORE_SECTOR : 0;
  size_t need = entry_arrays(count);
  if ((size_t) (end - p) < need)
    return "an entry is cut short";
  /* Entries are 8-byte aligned in a batch that starts 8-byte aligned. */
  *sums = (const uint64_t *) (const void *) p;
  *locs = (const uint32_t *) (const void *) (p + count * sizeof **sums);
  *pp = p + need;
  return NULL;
}
