/* The unsynced-write log (see unsynced_log.h). */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "unsynced_log.h"

static void *
log_alloc(const struct tc_ulog *log, size_t n)
{
  return log->alloc ? log->alloc(n) : malloc(n);
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
  if (data && !(e->data = log_alloc(log, len ? len : 1))) {
    free(e);
    errno = ENOMEM;
    return NULL;
  }
  return e;
}

void
tc_ulog_release(struct tc_ulog_entry *e)
{
  if (!e)
    return;
  free(e->data);
  free(e);
}

static void
log_unlink(struct tc_ulog *log, struct tc_ulog_entry *u)
{
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

/* A partial write was acknowledged over the bytes of an older whole-sector
 * entry u: put its bytes into u's data and make u as young as the write
 * (so u is kept until a SYNC covers it). u and the partial entry then
 * overlap with the same bytes, which replay in either order. */
static void
log_patch(struct tc_ulog *log, struct tc_ulog_entry *u, uint64_t off, uint64_t end, const uint8_t *data)
{
  log_overwrite(u, off, end, data);
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
    if (u->data)
      memcpy(t->data, u->data + (end - u->offset), t->len);
    log_insert_after(log, u, t);
  }
  if (u->offset < off) {
    /* Keep the head: the buffer stays, only len shrinks. */
    log->bytes -= ue - off;
    u->len = (uint32_t) (off - u->offset);
  }
  else {
    /* Keep the tail. */
    uint32_t keep = (uint32_t) (ue - end);
    if (u->data)
      memmove(u->data, u->data + (end - u->offset), keep);
    log->bytes -= u->len - keep;
    u->offset = end;
    u->len = keep;
  }
  return 0;
}

int
tc_ulog_add(struct tc_ulog *log, struct tc_ulog_entry *n, const void *data)
{
  uint64_t off = n->offset, end = off + n->len;
  int r = 0;
  if (n->data && data) {
    if (data != n->data)   /* else the bytes are there already */
      memcpy(n->data, data, n->len);
  }
  else if (n->data) {
    /* Reserved for bytes, acknowledged without: a DELETE. */
    free(n->data);
    n->data = NULL;
  }
  struct tc_ulog_entry *stop = log->tail;   /* entries moved to the tail are not seen twice */
  for (struct tc_ulog_entry *u = log->head, *next; u; u = next) {
    next = u == stop ? NULL : u->next;
    uint64_t ue = u->offset + u->len;
    if (u->inode != n->inode || ue <= off || end <= u->offset)
      continue;
    if (n->partial && !u->partial) {
      /* A DELETE becomes a write of zeros (what its sectors read as), so
       * that it can carry the partial write's bytes. */
      if (!u->data) {
        if (!(u->data = log_alloc(log, u->len))) {
          r = -ENOMEM;
          continue;
        }
        memset(u->data, 0, u->len);
      }
      log_patch(log, u, off, end, n->data);
      continue;
    }
    if (log_cut(log, u, off, end, n->data) < 0)
      r = -ENOMEM;
  }
  n->seq = ++log->seq;
  n->next = NULL;
  n->prev = log->tail;
  if (log->tail)
    log->tail->next = n;
  else
    log->head = n;
  log->tail = n;
  log->bytes += n->len;
  return r;
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
}
