/* The OSD store: open, read, write, delete, sync, scrub, list, stats.
 * See store.h for the contract and store_meta.c for the metadata. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cleanup.h"
#include "error.h"
#include "fullio.h"
#include "log.h"
#include "store_impl.h"

static uint64_t
sector_pos(const struct tc_store *st, uint32_t loc)
{
  return st->hdr.data_offset + (uint64_t) loc * TC_STORE_SECTOR;
}

/* Refuse calls on a store that lost its batch (see store.h). */
#define CHECK_USABLE(st) do {                                                   \
    if ((st)->broken)                                                           \
      return tc_error(EIO, "store %s: unusable after an earlier failure (%s); reopen it", \
                      (st)->data_path, strerror((st)->broken));                 \
  } while (0)

static int
mark_broken(struct tc_store *st)
{
  int err = errno;
  st->broken = err ? err : EIO;
  tc_err("store %s: %s", st->data_path, tc_last_error());
  errno = err;
  return -1;
}

/* The background jobs (store_background.h), defined with their callers. */
static int start_writeback(struct tc_store_bg *bg);
static int checkpoint_job(struct tc_store_bg *bg);

/* The open batch, beginning one if none. */
static int
batch(struct tc_store *st, MDB_txn **txn)
{
  if (!st->txn) {
    int rc = mdb_txn_begin(st->env, NULL, 0, &st->txn);
    if (rc) {
      st->txn = NULL;
      return tc_store_mdb_error(rc, "mdb_txn_begin", st->meta_path);
    }
  }
  *txn = st->txn;
  return 0;
}

/* Load the record of (inode, block) into st->rec; 1 if found, 0 if not. */
static int
rec_load(struct tc_store *st, MDB_txn *txn, uint64_t inode, uint64_t block)
{
  uint8_t key[16];
  tc_store_obj_key(key, inode, block);
  MDB_val k = { sizeof key, key }, v;
  int rc = mdb_get(txn, st->objs, &k, &v);
  if (rc == MDB_NOTFOUND) {
    memset(&st->rec, 0, offsetof(struct tc_store_obj_rec, loc));
    return 0;
  }
  if (rc)
    return tc_store_mdb_error(rc, "mdb_get", st->meta_path);
  const char *why = tc_store_obj_rec_decode(&st->rec, st->spb, v.mv_data, v.mv_size);
  if (why)
    return tc_error(EIO, "store %s: object inode %#" PRIx64 " block %" PRIu64 ": %s",
                    st->meta_path, inode, block, why);
  return 1;
}

static int
rec_empty(const struct tc_store *st)
{
  for (uint32_t w = 0; w < st->bm_words; w++)
    if (st->rec.bitmap[w])
      return 0;
  return 1;
}

/* Store st->rec as (inode, block), or delete the key if it has no sectors
 * (unless keep: a tombstone, an object with a version and no sectors). */
static int
rec_save_keep(struct tc_store *st, MDB_txn *txn, uint64_t inode, uint64_t block, int keep)
{
  uint8_t key[16];
  tc_store_obj_key(key, inode, block);
  MDB_val k = { sizeof key, key };
  int rc;
  if (!keep && rec_empty(st)) {
    rc = mdb_del(txn, st->objs, &k, NULL);
    if (rc == MDB_NOTFOUND)
      rc = 0;
  }
  else {
    MDB_val v = { tc_store_obj_rec_encode(&st->rec, st->spb, st->valbuf), st->valbuf };
    rc = mdb_put(txn, st->objs, &k, &v, 0);
  }
  return rc ? tc_store_mdb_error(rc, "mdb_put", st->meta_path) : 0;
}

static int
rec_save(struct tc_store *st, MDB_txn *txn, uint64_t inode, uint64_t block)
{
  return rec_save_keep(st, txn, inode, block, 0);
}

/* Wait until no checkpoint is flushing (lock held): what needs the
 * batch's view (reads, lists, scrubs) or changes it the ordinary way. */
static void
wait_idle(struct tc_store *st)
{
  while (st->committing)
    pthread_cond_wait(&st->idle, &st->lock);
}

/* Wait until no flush at all runs (lock held): before starting one. */
static void
wait_flushes(struct tc_store *st)
{
  while (st->committing || st->jflushing)
    pthread_cond_wait(&st->idle, &st->lock);
}

static const uint8_t jgen_key[] = "journal_gen";

static void
pending_free(struct tc_store *st)
{
  while (!STAILQ_EMPTY(&st->pending)) {
    struct tc_store_pending *p = STAILQ_FIRST(&st->pending);
    STAILQ_REMOVE_HEAD(&st->pending, next);
    free(p);
  }
}

static int apply_pending(struct tc_store *st);
static int apply_write(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len, const uint32_t *locs,
                       const uint64_t *sums, uint64_t version, int loaded);
static int apply_delete(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len, int tombstone,
                        uint64_t version);

/* A batch is durable (lock held): its old copies may be reused, its
 * deleted sectors are punched out of the file; frees the two lists. */
static void
batch_durable(struct tc_store *st, uint64_t upto, struct tc_store_runs *fr, struct tc_store_runs *pu)
{
  st->durable_seq = upto;
  for (size_t i = 0; i < fr->n; i++)
    tc_store_alloc_release(&st->alloc, fr->v[i][0], fr->v[i][1]);
  for (size_t i = 0; i < pu->n; i++) {
    uint32_t s0 = pu->v[i][0], n = pu->v[i][1];
    tc_store_alloc_release(&st->alloc, s0, n);
    /* The overflow area stays written (store_impl.h): not punched. */
    if (s0 >= st->alloc.top)
      continue;
    if (n > st->alloc.top - s0)
      n = st->alloc.top - s0;
    if (fallocate(st->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  (off_t) (st->hdr.data_offset + (uint64_t) s0 * TC_STORE_SECTOR),
                  (off_t) n * TC_STORE_SECTOR) < 0 && errno != EOPNOTSUPP)
      tc_warn("store %s: punching %u freed sectors: %m", st->data_path, n);
  }
  if (fr->n || pu->n)
    tc_store_alloc_rewind(&st->alloc);
  free(fr->v);
  free(pu->v);
}

/* A flush failed (lock held): the store refuses calls until reopened;
 * what was queued behind it and the freed-sector lists are dropped. */
static void
flush_failed(struct tc_store *st, int err, struct tc_store_runs *fr, struct tc_store_runs *pu)
{
  st->broken = err ? err : EIO;
  pending_free(st);
  free(fr->v);
  free(pu->v);
}

/* Hand the batch's freed-sector lists over to *fr and *pu (lock held). */
static void
take_freed(struct tc_store *st, struct tc_store_runs *fr, struct tc_store_runs *pu)
{
  *fr = st->to_free;
  *pu = st->to_punch;
  memset(&st->to_free, 0, sizeof st->to_free);
  memset(&st->to_punch, 0, sizeof st->to_punch);
}

/* Checkpoint: make the batch durable in the metadata itself: data first, then the metadata that points at it;
 * only then may the old copies be reused. Called with the lock held; the
 * flushes run with it released (group commit): writes and deletes that
 * arrive meanwhile queue in st->pending (their data written at once) and
 * join the next batch when this one is durable; every other call waits. So
 * the committed batch holds exactly the writes made before the commit
 * began, and their data was written before the fdatasync. */
static int
commit(struct tc_store *st)
{
  wait_flushes(st);
  CHECK_USABLE(st);
  uint64_t upto = st->seq;
  MDB_txn *txn = st->txn;
  /* The checkpoint holds every journaled operation: the journal starts a
   * new generation, so its old batches are never replayed over it. */
  uint64_t gen = st->j.gen + 1;
  if (txn) {
    MDB_val k = { sizeof jgen_key - 1, (void *) jgen_key }, v = { sizeof gen, &gen };
    int rc = mdb_put(txn, st->info, &k, &v, 0);
    if (rc)
      return tc_store_mdb_error(rc, "mdb_put journal_gen", st->meta_path);
  }
  int dirty = st->data_dirty;
  struct tc_store_runs fr, pu;
  take_freed(st, &fr, &pu);
  st->txn = NULL;
  st->data_dirty = 0;
  st->batch_ops = 0;
  st->committing = 1;
  pthread_mutex_unlock(&st->lock);
  int r = 0;
  if (dirty && fdatasync(st->fd) < 0)
    r = tc_error(errno, "store %s: fdatasync: %m", st->data_path);
  if (txn) {
    int rc = r < 0 ? (mdb_txn_abort(txn), 0) : mdb_txn_commit(txn);
    if (rc)
      r = tc_store_mdb_error(rc, "mdb_txn_commit", st->meta_path);
  }
  int err = errno;
  pthread_mutex_lock(&st->lock);
  st->committing = 0;
  if (r == 0) {
    if (txn) {
      st->commits++;
      st->checkpoints++;
      tc_store_journal_restart(&st->j, gen);
    }
    batch_durable(st, upto, &fr, &pu);
    r = apply_pending(st);
    err = errno;
  }
  else
    flush_failed(st, err, &fr, &pu);   /* the batch is lost */
  pthread_cond_broadcast(&st->idle);
  errno = err;
  return r;
}

/* Make the writes and deletes so far durable through the journal: their
 * operations as the next batch in the journal area, then one fdatasync of
 * the data file makes their data and the batch durable together. A torn
 * batch (power lost during the flush) fails its checksum, or its data
 * fails the checksums it records, at replay. Lock held, flushes with it
 * released (jflushing): writes and deletes meanwhile go on into the open
 * batch and the journal's next batch; other flushes wait. Falls back to a
 * checkpoint when the batch does not fit the area. */
static int
journal_flush(struct tc_store *st)
{
  wait_flushes(st);
  CHECK_USABLE(st);
  if (!tc_store_journal_fits(&st->j))
    return commit(st);
  uint64_t upto = st->seq;
  size_t len;
  uint8_t *b = tc_store_journal_take(&st->j, &len);
  int dirty = st->data_dirty;
  struct tc_store_runs fr, pu;
  take_freed(st, &fr, &pu);
  st->data_dirty = 0;
  uint64_t pos = st->j.area_off + st->j.pos;
  st->jflushing = 1;
  pthread_mutex_unlock(&st->lock);
  int r = 0;
  if (b && tc_write_full(st->fd, b, len, (off_t) pos) < 0)
    r = tc_error(errno, "store %s: journal write at %" PRIu64 ": %m", st->data_path, pos);
  if (r == 0 && (dirty || b) && fdatasync(st->fd) < 0)
    r = tc_error(errno, "store %s: fdatasync: %m", st->data_path);
  int err = errno;
  bool wrote = b != NULL;
  free(b);
  pthread_mutex_lock(&st->lock);
  st->jflushing = 0;
  if (r == 0) {
    if (wrote) {
      tc_store_journal_written(&st->j, len);
      st->commits++;
    }
    batch_durable(st, upto, &fr, &pu);
  }
  else
    flush_failed(st, err, &fr, &pu);   /* durability unknown */
  pthread_cond_broadcast(&st->idle);
  errno = err;
  return r;
}

/* Rebuild the allocator from the committed records. */
static int
rebuild_alloc(struct tc_store *st)
{
  MDB_txn *txn = NULL;
  MDB_cursor *cur;
  MDB_val k, v;
  int rc = batch(st, &txn);
  if (rc < 0)
    return -1;
  if ((rc = mdb_cursor_open(txn, st->objs, &cur)))
    return tc_store_mdb_error(rc, "mdb_cursor_open", st->meta_path);
  tc_store_alloc_reset(&st->alloc);
  int r = 0;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t inode, block;
    if (k.mv_size != 16) {
      r = tc_error(EIO, "store %s: metadata holds a key of %zu bytes", st->meta_path, k.mv_size);
      break;
    }
    tc_store_obj_key_parse(k.mv_data, &inode, &block);
    const char *why = tc_store_obj_rec_decode(&st->rec, st->spb, v.mv_data, v.mv_size);
    if (why) {
      r = tc_error(EIO, "store %s: object inode %#" PRIx64 " block %" PRIu64 ": %s",
                   st->meta_path, inode, block, why);
      break;
    }
    for (uint32_t i = 0; i < st->spb; i++)
      if (tc_store_bit(st->rec.bitmap, i) && tc_store_alloc_claim(&st->alloc, st->rec.loc[i]) < 0) {
        r = tc_error(EIO, "store %s: object inode %#" PRIx64 " block %" PRIu64
                     " sector %u points at data sector %" PRIu32 ", outside the data area or used twice",
                     st->meta_path, inode, block, i, st->rec.loc[i]);
        break;
      }
    if (r < 0)
      break;
  }
  mdb_cursor_close(cur);
  if (r == 0 && rc != MDB_NOTFOUND)
    r = tc_store_mdb_error(rc, "reading objects", st->meta_path);
  /* The batch only read: nothing to commit. */
  mdb_txn_abort(st->txn);
  st->txn = NULL;
  return r;
}

static void
store_free(struct tc_store *st)
{
  /* The background jobs first: they use the lock, the batch and fd. */
  tc_store_bg_destroy(&st->ckpt);
  tc_store_bg_destroy(&st->wb);
  if (st->txn)
    mdb_txn_abort(st->txn);
  pending_free(st);
  if (st->env)
    mdb_env_close(st->env);
  if (st->fd >= 0)
    close(st->fd);
  tc_store_alloc_destroy(&st->alloc);
  tc_store_journal_destroy(&st->j);
  free(st->to_free.v);
  free(st->to_punch.v);
  free(st->valbuf);
  free(st->iobuf);
  free(st->data_path);
  free(st->meta_path);
  pthread_mutex_destroy(&st->lock);
  pthread_cond_destroy(&st->idle);
  free(st);
}

/* Apply the entries of one journal batch (b, len bytes) to the open batch. */
static int
replay_batch(struct tc_store *st, const uint8_t *b, size_t len, uint32_t nsect)
{
  const uint8_t *p = b + sizeof(struct tc_store_jhdr), *end = b + len;
  while (p < end) {
    struct tc_store_jent e;
    const uint64_t *sums;
    const uint32_t *locs;
    const char *why = tc_store_journal_entry(&p, end, st->hdr.block_size, &e, &sums, &locs);
    if (why)
      return tc_error(EIO, "store %s: journal batch %" PRIu64 ": %s", st->data_path,
                      ((const struct tc_store_jhdr *) (const void *) b)->seq, why);
    if (e.kind == TC_STORE_PEND_WRITE)
      for (uint32_t i = 0; i < e.len / TC_STORE_SECTOR; i++)
        if (locs[i] >= nsect)
          return tc_error(EIO, "store %s: journal: a write of inode %#" PRIx64 " points outside the data area",
                          st->data_path, e.inode);
    int r = e.kind == TC_STORE_PEND_WRITE
            ? apply_write(st, e.inode, e.offset, e.len, locs, sums, e.version, 0)
            : apply_delete(st, e.inode, e.offset, e.len, e.kind == TC_STORE_PEND_TOMBSTONE, e.version);
    if (r < 0)
      return -1;
  }
  return 0;
}

/* Whether the data of the last batch's writes is all on disk: 1, 0 if a
 * sector the replayed metadata points at does not hold what the batch
 * wrote (the batch's flush never completed), -1 on an I/O error. Only the
 * final place of each sector is checked: a sector the batch wrote and then
 * replaced within itself may hold anything since. */
static int
last_batch_whole(struct tc_store *st, const uint8_t *b, size_t len)
{
  const uint8_t *p = b + sizeof(struct tc_store_jhdr), *end = b + len;
  while (p < end) {
    struct tc_store_jent e;
    const uint64_t *sums;
    const uint32_t *locs;
    if (tc_store_journal_entry(&p, end, st->hdr.block_size, &e, &sums, &locs))
      return 0;   /* replay_batch read it whole: cannot happen */
    if (e.kind != TC_STORE_PEND_WRITE)
      continue;
    MDB_txn *txn = NULL;
    if (batch(st, &txn) < 0)
      return -1;
    int found = rec_load(st, txn, e.inode, e.offset / st->hdr.block_size);
    if (found < 0)
      return -1;
    uint32_t first = (uint32_t) (e.offset % st->hdr.block_size / TC_STORE_SECTOR);
    for (uint32_t i = 0; found && i < e.len / TC_STORE_SECTOR; i++) {
      uint32_t sct = first + i;
      if (!tc_store_bit(st->rec.bitmap, sct) || st->rec.loc[sct] != locs[i])
        continue;
      if (tc_read_full(st->fd, st->iobuf, TC_STORE_SECTOR, (off_t) sector_pos(st, locs[i])) != (ssize_t) TC_STORE_SECTOR)
        return tc_error(errno ? errno : EIO, "store %s: reading data sector %" PRIu32 ": %m", st->data_path, locs[i]);
      if (tc_store_sector_csum(st->iobuf, e.inode, e.offset / TC_STORE_SECTOR + i) != sums[i])
        return 0;
    }
  }
  return 1;
}

/* Replay the journal over the last checkpoint and checkpoint the result
 * (a new generation), so the metadata holds every batch that was flushed.
 * Every batch but the last is known whole (a batch is written only after
 * the previous one's flush returned); the last counts only if its data is
 * on disk. */
static int
journal_replay(struct tc_store *st)
{
  struct tc_store_journal *j = &st->j;
  uint32_t nsect = (uint32_t) ((st->hdr.size - st->hdr.data_offset) / TC_STORE_SECTOR);
  uint8_t *area = aligned_alloc(TC_STORE_SECTOR, j->area_len);
  if (!area)
    return tc_error(ENOMEM, "no memory to read the store's journal");
  int r = -1;
  ssize_t got = tc_read_full(st->fd, area, j->area_len, (off_t) j->area_off);
  if (got < 0) {
    tc_error(errno, "store %s: reading the journal: %m", st->data_path);
    goto out;
  }
  memset(area + got, 0, j->area_len - (size_t) got);
  size_t nb = 0, last = 0, last_len = 0, pos = 0, bl;
  while (!tc_store_journal_batch(j, area + pos, j->area_len - pos, nb + 1, &bl)) {
    last = pos;
    last_len = bl;
    pos += bl;
    nb++;
  }
  if (!nb) {
    r = 0;
    goto out;
  }
  j->off = 1;
  size_t upto;
  for (upto = nb; upto > 0; upto--) {
    pos = 0;
    for (size_t k = 0; k < upto; k++) {
      const struct tc_store_jhdr *h = (const void *) (area + pos);
      if (replay_batch(st, area + pos, sizeof *h + h->len, nsect) < 0)
        goto out;
      pos += sizeof *h + h->len;
    }
    if (upto < nb)
      break;
    int whole = last_batch_whole(st, area + last, last_len);
    if (whole < 0)
      goto out;
    if (whole)
      break;
    tc_warn("store %s: the journal's last batch was not flushed whole (power lost during a sync): dropped",
            st->data_path);
    mdb_txn_abort(st->txn);
    st->txn = NULL;
    if (upto == 1) {
      upto = 0;
      break;
    }
  }
  j->off = 0;
  /* The replayed data may be only in the page cache (a killed process):
   * flush it before the checkpoint points at it. */
  if (fdatasync(st->fd) < 0) {
    tc_error(errno, "store %s: fdatasync: %m", st->data_path);
    goto out;
  }
  st->data_dirty = 0;
  free(st->to_free.v);
  free(st->to_punch.v);
  memset(&st->to_free, 0, sizeof st->to_free);
  memset(&st->to_punch, 0, sizeof st->to_punch);
  /* Even with every batch dropped, start a new generation: the dropped one
   * must never be found again. */
  MDB_txn *txn = NULL;
  if (batch(st, &txn) < 0)
    goto out;
  tc_info("store %s: replayed %zu journal batches", st->data_path, upto);
  r = commit(st);
out:
  j->off = 0;
  free(area);
  return r;
}

int
tc_store_open(struct tc_store **out, const char *data_path, const char *meta_path)
{
  struct tc_store *st = calloc(1, sizeof *st);
  if (!st)
    return tc_error(ENOMEM, "no memory for a store");
  st->fd = -1;
  tc_store_bg_init(&st->wb, "starting writeback", start_writeback, st);
  tc_store_bg_init(&st->ckpt, "checkpoint", checkpoint_job, st);
  pthread_mutex_init(&st->lock, NULL);
  pthread_cond_init(&st->idle, NULL);
  STAILQ_INIT(&st->pending);
  st->data_path = strdup(data_path);
  if (meta_path)
    st->meta_path = strdup(meta_path);
  else if (asprintf(&st->meta_path, "%s.meta", data_path) < 0)
    st->meta_path = NULL;
  if (!st->data_path || !st->meta_path) {
    store_free(st);
    return tc_error(ENOMEM, "no memory for a store");
  }
  int r = -1;
  st->fd = open(data_path, O_RDWR | O_CLOEXEC);
  if (st->fd < 0) {
    tc_error(errno, "%s: open: %m", data_path);
    goto out;
  }
  st->wb.path = st->ckpt.path = st->data_path;
  if (flock(st->fd, LOCK_EX | LOCK_NB) < 0) {
    tc_error(errno == EWOULDBLOCK ? EBUSY : errno, "%s: the store is open in another process", data_path);
    goto out;
  }
  uint8_t sector[TC_STORE_HDR_SIZE];
  ssize_t n = tc_read_full(st->fd, sector, sizeof sector, 0);
  if (n < 0) {
    tc_error(errno, "%s: read: %m", data_path);
    goto out;
  }
  if ((size_t) n < sizeof st->hdr) {
    tc_error(EINVAL, "%s is not a tromcho OSD store (only %zd bytes long)", data_path, n);
    goto out;
  }
  memcpy(&st->hdr, sector, sizeof st->hdr);
  if (tc_store_hdr_check(&st->hdr, data_path) < 0)
    goto out;
  struct stat sb;
  if (fstat(st->fd, &sb) < 0) {
    tc_error(errno, "%s: stat: %m", data_path);
    goto out;
  }
  if (S_ISREG(sb.st_mode) && (uint64_t) sb.st_size < st->hdr.size) {
    tc_error(EINVAL, "%s is %jd bytes, shorter than its store (%" PRIu64 "): truncated?",
             data_path, (intmax_t) sb.st_size, st->hdr.size);
    goto out;
  }
  /* A store formatted before its overflow area was written (or one whose
   * deletions punched it) gets it written now: once, at most 1 GiB. Only
   * an optimisation (store.md): a failure is a warning. */
  uint64_t filled = 0;
  if (S_ISREG(sb.st_mode) && tc_store_fill_overflow(st->fd, data_path, st->hdr.data_offset, st->hdr.size, &filled) < 0)
    tc_warn("%s (the store works without)", tc_last_error());
  else if (filled)
    tc_info("%s: wrote %" PRIu64 " KiB of zeros into the holes of the overflow area", data_path, filled >> 10);
  if (access(st->meta_path, F_OK) < 0) {
    tc_error(ENOENT, "%s: the store's metadata %s is missing", data_path, st->meta_path);
    goto out;
  }
  if (tc_store_meta_open(&st->env, st->meta_path, st->hdr.size) < 0)
    goto out;
  MDB_txn *txn = NULL;
  int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
  if (rc) {
    tc_store_mdb_error(rc, "mdb_txn_begin", st->meta_path);
    goto out;
  }
  MDB_val k = { 6, "header" }, v;
  if ((rc = mdb_dbi_open(txn, "info", 0, &st->info)) || (rc = mdb_dbi_open(txn, "objects", 0, &st->objs)) ||
      (rc = mdb_get(txn, st->info, &k, &v))) {
    mdb_txn_abort(txn);
    tc_store_mdb_error(rc, "not the metadata of a store", st->meta_path);
    errno = EINVAL;
    goto out;
  }
  int same = v.mv_size == sizeof st->hdr && memcmp(v.mv_data, &st->hdr, sizeof st->hdr) == 0;
  uint64_t gen = 0;
  MDB_val gk = { sizeof jgen_key - 1, (void *) jgen_key }, gv;
  if (mdb_get(txn, st->info, &gk, &gv) == 0 && gv.mv_size == sizeof gen)
    memcpy(&gen, gv.mv_data, sizeof gen);
  if ((rc = mdb_txn_commit(txn))) {   /* keeps the dbi handles */
    tc_store_mdb_error(rc, "mdb_txn_commit", st->meta_path);
    goto out;
  }
  if (!same) {
    tc_error(EINVAL, "%s: the metadata %s belongs to another store (header differs)", data_path, st->meta_path);
    goto out;
  }
  st->spb = st->hdr.block_size / TC_STORE_SECTOR;
  st->bm_words = (st->spb + 63) / 64;
  st->valbuf = malloc(tc_store_obj_rec_max_size(st->spb));
  st->iobuf = aligned_alloc(TC_STORE_SECTOR, st->hdr.block_size);
  if (!st->valbuf || !st->iobuf) {
    tc_error(ENOMEM, "no memory for a store");
    goto out;
  }
  /* The journal: the header area after the header sector. */
  tc_store_journal_init(&st->j, TC_STORE_HDR_SIZE, st->hdr.data_offset - TC_STORE_HDR_SIZE, st->hdr.uuid, gen);
  pthread_mutex_lock(&st->lock);
  rc = journal_replay(st);
  pthread_mutex_unlock(&st->lock);
  if (rc < 0)
    goto out;
  if (tc_store_alloc_init(&st->alloc, (uint32_t) ((st->hdr.size - st->hdr.data_offset) / TC_STORE_SECTOR)) < 0 ||
      rebuild_alloc(st) < 0)
    goto out;
  r = 0;
out:
  if (r < 0) {
    KEEP_ERRNO;
    store_free(st);
    return -1;
  }
  *out = st;
  return 0;
}

int
tc_store_close(struct tc_store *st)
{
  if (!st)
    return 0;
  int r = 0;
  pthread_mutex_lock(&st->lock);
  wait_flushes(st);
  if (!st->broken && (st->txn || st->data_dirty || st->to_free.n || st->to_punch.n || !STAILQ_EMPTY(&st->pending)))
    r = commit(st);
  pthread_mutex_unlock(&st->lock);
  store_free(st);
  return r;
}

void
tc_store_get_info(const struct tc_store *st, struct tc_store_info *info)
{
  memcpy(info->uuid, st->hdr.uuid, sizeof info->uuid);
  info->osd_num = st->hdr.osd_num;
  info->block_size = st->hdr.block_size;
  info->size = st->hdr.size;
  info->data_offset = st->hdr.data_offset;
  info->data_sectors = st->alloc.nsect;
}

/* Check a range: sector-aligned, non-empty, inside one object. */
static int
check_range(const struct tc_store *st, const char *op, uint64_t inode, uint64_t offset, uint64_t len)
{
  if (offset % TC_STORE_SECTOR || len % TC_STORE_SECTOR || len == 0)
    return tc_error(EINVAL, "store %s: inode %#" PRIx64 " offset %" PRIu64 " length %" PRIu64
                    " is not whole 4 KiB sectors", op, inode, offset, len);
  if (offset / st->hdr.block_size != (offset + len - 1) / st->hdr.block_size)
    return tc_error(EINVAL, "store %s: inode %#" PRIx64 " offset %" PRIu64 " length %" PRIu64
                    " crosses an object boundary (block size %" PRIu32 ")", op, inode, offset, len,
                    st->hdr.block_size);
  return 0;
}


/* Read the present sectors [first, first+count) of st->rec into buf,
 * one pread per physically contiguous run. */
static int
read_sectors(struct tc_store *st, uint8_t *buf, uint32_t first, uint32_t count)
{
  for (uint32_t i = first; i < first + count;) {
    if (!tc_store_bit(st->rec.bitmap, i)) {
      i++;
      continue;
    }
    uint32_t j = i + 1;
    while (j < first + count && tc_store_bit(st->rec.bitmap, j) && st->rec.loc[j] == st->rec.loc[j - 1] + 1)
      j++;
    size_t len = (size_t) (j - i) * TC_STORE_SECTOR;
    uint8_t *p = buf + (size_t) (i - first) * TC_STORE_SECTOR;
    uint64_t pos = sector_pos(st, st->rec.loc[i]);
    ssize_t r = tc_read_full(st->fd, p, len, (off_t) pos);
    if (r < 0 || (size_t) r < len)
      return tc_error(r < 0 ? errno : EIO, "store %s: read at %" PRIu64 ": %s", st->data_path, pos,
                      r < 0 ? strerror(errno) : "end of file");
    i = j;
  }
  return 0;
}

int
tc_store_read(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len,
              void *buf, uint8_t *present, uint64_t *version)
{
  SCOPED_LOCK(&st->lock);
  wait_idle(st);
  CHECK_USABLE(st);
  if (check_range(st, "read", inode, offset, len) < 0)
    return -1;
  MDB_txn *txn = NULL;
  if (batch(st, &txn) < 0)
    return mark_broken(st);
  uint64_t block = offset / st->hdr.block_size;
  uint32_t first = (uint32_t) (offset % st->hdr.block_size / TC_STORE_SECTOR), count = len / TC_STORE_SECTOR;
  int found = rec_load(st, txn, inode, block);
  if (found < 0)
    return mark_broken(st);
  if (present)
    memset(present, 0, (count + 7) / 8);
  if (version)
    *version = st->rec.version;
  uint8_t *out = buf;
  int npresent = 0;
  for (uint32_t i = 0; i < count; i++)
    if (!tc_store_bit(st->rec.bitmap, first + i))
      memset(out + (size_t) i * TC_STORE_SECTOR, 0, TC_STORE_SECTOR);
  if (read_sectors(st, out, first, count) < 0) {
    memset(buf, 0, len);
    return -1;
  }
  uint64_t base = offset / TC_STORE_SECTOR - first;   /* inode sector of the object's sector 0 */
  for (uint32_t i = 0; i < count; i++) {
    uint32_t s = first + i;
    if (!tc_store_bit(st->rec.bitmap, s))
      continue;
    if (tc_store_sector_csum(out + (size_t) i * TC_STORE_SECTOR, inode, base + s) != st->rec.csum[s]) {
      st->checksum_errors++;
      memset(buf, 0, len);
      tc_error(EIO, "store %s: checksum mismatch in inode %#" PRIx64 " offset %" PRIu64
               " (data sector %" PRIu32 " at byte %" PRIu64 ")", st->data_path, inode,
               (base + s) * TC_STORE_SECTOR, st->rec.loc[s], sector_pos(st, st->rec.loc[s]));
      tc_err("%s", tc_last_error());
      errno = EIO;
      return -1;
    }
    if (present)
      present[i / 8] |= (uint8_t) (1u << (i % 8));
    npresent++;
  }
  return npresent;
}

/* Write all of buf at pos. */
static int
pwrite_all(struct tc_store *st, const uint8_t *p, size_t len, uint64_t pos)
{
  if (tc_write_full(st->fd, p, len, (off_t) pos) < 0)
    return tc_error(errno, "store %s: write at %" PRIu64 ": %s", st->data_path, pos, strerror(errno));
  return 0;
}

/* Allocate count sectors into locs without committing: 0, or 1 if the
 * data area is full (nothing stays allocated). */
static int
alloc_try(struct tc_store *st, uint32_t *locs, uint32_t count)
{
  uint32_t got = 0;
  while (got < count) {
    uint32_t start, n = tc_store_alloc_run(&st->alloc, count - got, &start);
    if (!n)
      break;
    for (uint32_t k = 0; k < n; k++)
      locs[got++] = start + k;
  }
  if (got == count)
    return 0;
  for (uint32_t k = 0; k < got; k++)
    tc_store_alloc_release(&st->alloc, locs[k], 1);
  return 1;
}

/* Place a small write (fewer than TC_STORE_ALLOC_LARGE sectors) by its
 * object (lock held, no checkpoint flushing: reads the batch's record):
 * each sector at its own place in the object's run if that is free, else
 * in a free sector of that run, else, if it overwrites a sector, in the
 * overflow area from the top down, and if it is new, next-fit as any
 * write. So the holes small overwrites leave in an object's run are
 * filled by that object's later small writes, never by other objects',
 * and the run frees whole once the object is rewritten whole (store.md).
 * 0, 1 if the data area is full (nothing stays allocated), -1 on error. */
static int
alloc_small(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t *locs, uint32_t count)
{
  struct tc_store_alloc *a = &st->alloc;
  uint64_t block = offset / st->hdr.block_size;
  uint32_t first = (uint32_t) (offset % st->hdr.block_size / TC_STORE_SECTOR);
  MDB_txn *txn = NULL;
  int found = batch(st, &txn) < 0 ? -1 : rec_load(st, txn, inode, block);
  if (found < 0)
    return -1;
  /* The run's start: where its first sector outside the overflow area
   * says sector 0 belongs. */
  uint32_t home = UINT32_MAX, end = 0;
  for (uint32_t s = 0; found && s < st->spb && home == UINT32_MAX; s++)
    if (tc_store_bit(st->rec.bitmap, s) && st->rec.loc[s] < a->top && st->rec.loc[s] >= s)
      home = st->rec.loc[s] - s;
  if (home != UINT32_MAX)
    end = a->top - home > st->spb ? home + st->spb : a->top;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t own = home + first + i;
    locs[i] = home != UINT32_MAX && own < end && tc_store_alloc_take(a, own) ? own : UINT32_MAX;
  }
  uint32_t hole = home;
  for (uint32_t i = 0; i < count && home != UINT32_MAX; i++) {
    while (locs[i] == UINT32_MAX && hole < end)
      if (tc_store_alloc_take(a, hole++))
        locs[i] = hole - 1;
  }
  /* The rest in runs of neighbours of one kind (overwritten or new). */
  for (uint32_t i = 0; i < count;) {
    if (locs[i] != UINT32_MAX) {
      i++;
      continue;
    }
    int over = found && tc_store_bit(st->rec.bitmap, first + i);
    uint32_t j = i + 1;
    while (j < count && locs[j] == UINT32_MAX && (found && tc_store_bit(st->rec.bitmap, first + j)) == over)
      j++;
    uint32_t start, n = over ? tc_store_alloc_top(a, j - i, &start) : tc_store_alloc_run(a, j - i, &start);
    if (!n) {
      for (uint32_t k = 0; k < count; k++)
        if (locs[k] != UINT32_MAX)
          tc_store_alloc_release(a, locs[k], 1);
      return 1;
    }
    for (uint32_t k = 0; k < n; k++)
      locs[i + k] = start + k;
    i += n;
  }
  return 0;
}

/* Allocate count sectors into locs, committing the batch once to reclaim
 * old copies if the data area is full. On failure nothing stays allocated. */
static int
alloc_sectors(struct tc_store *st, uint32_t *locs, uint32_t count)
{
  for (int attempt = 0;; attempt++) {
    if (alloc_try(st, locs, count) == 0)
      return 0;
    if (st->jflushing || st->committing) {
      /* A flush holds the old copies it will free: wait for it, retry. */
      wait_flushes(st);
      attempt--;
      continue;
    }
    if (attempt || (!st->to_free.n && !st->to_punch.n))
      return tc_error(ENOSPC, "store %s: the data area is full (%" PRIu32 " sectors)",
                      st->data_path, st->alloc.nsect);
    if (commit(st) < 0)
      return mark_broken(st);
  }
}

/* Write count sectors of in to the fresh sectors locs, one pwrite per
 * contiguous run; on failure the sectors are released. */
static int
write_data(struct tc_store *st, const uint8_t *in, const uint32_t *locs, uint32_t count)
{
  for (uint32_t i = 0; i < count;) {
    uint32_t j = i + 1;
    while (j < count && locs[j] == locs[j - 1] + 1)
      j++;
    if (pwrite_all(st, in + (size_t) i * TC_STORE_SECTOR, (size_t) (j - i) * TC_STORE_SECTOR,
                   sector_pos(st, locs[i])) < 0) {
      for (uint32_t k = 0; k < count; k++)
        tc_store_alloc_release(&st->alloc, locs[k], 1);
      return -1;
    }
    i = j;
  }
  st->data_dirty = 1;
  /* Start the page cache's writeback of what was written so far, without
   * waiting for it: a sync then finds most of the data on disk already
   * and costs about one flush, not the time to write everything dirty
   * (a sync after 32 MiB of 1 MiB writes took ~190 ms). */
  st->unstarted += (uint64_t) count * TC_STORE_SECTOR;
  if (st->unstarted >= TC_STORE_WRITEBACK_BYTES) {
    st->unstarted = 0;
    int r = tc_store_bg_kick(&st->wb) ? 0 : start_writeback(&st->wb);
    if (r < 0)
      tc_warn("store %s: starting writeback: %s", st->data_path, strerror(-r));
  }
  return 0;
}

/* Record an operation applied to the batch in the journal's next batch
 * (not while replaying the journal). */
static int
journal_add(struct tc_store *st, int kind, uint64_t inode, uint64_t offset, uint32_t len, uint64_t version,
            const uint32_t *locs, const uint64_t *sums)
{
  if (st->j.off)
    return 0;
  return tc_store_journal_add(&st->j, kind, inode, offset, len, version, locs, sums);
}

/* The batch is due for a checkpoint: too many objects changed, or more
 * operations recorded than the journal area holds (which also bounds the
 * journal's memory). */
static int
batch_full(const struct tc_store *st)
{
  return st->batch_ops >= TC_STORE_BATCH_MAX || st->j.len > st->j.area_len;
}

/* A full batch is checkpointed by the store's checkpoint job, so that the
 * writer (the OSD's event loop) never waits for its flushes, nor for a
 * journal flush in progress that a checkpoint must wait for; writes go on
 * into the batch meanwhile. Past twice the limits (the job cannot keep
 * up) the writer checkpoints itself: that bounds the batch and the
 * journal's memory. Lock held. */
static int
checkpoint_due(struct tc_store *st)
{
  if (!batch_full(st))
    return 0;
  if (st->batch_ops < 2 * TC_STORE_BATCH_MAX && st->j.len <= 2 * st->j.area_len && tc_store_bg_kick(&st->ckpt))
    return 0;
  return commit(st);
}

/* The checkpoint job: a full batch, if it still is one. A failure breaks
 * the store as it would have in the write (every later call fails);
 * mark_broken logs it, so the job reports success to its runner, which
 * would log it a second time. */
static int
checkpoint_job(struct tc_store_bg *bg)
{
  struct tc_store *st = bg->arg;
  pthread_mutex_lock(&st->lock);
  if (!st->broken && batch_full(st) && commit(st) < 0)
    mark_broken(st);
  pthread_mutex_unlock(&st->lock);
  return 0;
}

/* The writeback job: start the page cache's writeback of the whole data
 * file without waiting for it (fd stays open until the job is stopped). */
static int
start_writeback(struct tc_store_bg *bg)
{
  struct tc_store *st = bg->arg;
  if (sync_file_range(st->fd, 0, 0, SYNC_FILE_RANGE_WRITE) < 0 && errno != ESPIPE && errno != EINVAL)
    return -errno;
  return 0;
}

/* Point the object's sectors at locs in the batch (the data is written);
 * the old copies are freed once the batch is durable. loaded: st->rec
 * already holds the object's record (alloc_small read it, lock held). */
static int
apply_write(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len, const uint32_t *locs,
            const uint64_t *sums, uint64_t version, int loaded)
{
  uint64_t block = offset / st->hdr.block_size;
  uint32_t first = (uint32_t) (offset % st->hdr.block_size / TC_STORE_SECTOR), count = len / TC_STORE_SECTOR;
  MDB_txn *txn = NULL;
  if (batch(st, &txn) < 0 || (!loaded && rec_load(st, txn, inode, block) < 0))
    return -1;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t s = first + i;
    if (tc_store_bit(st->rec.bitmap, s) && tc_store_runs_add(&st->to_free, st->rec.loc[s], 1) < 0)
      return -1;
    tc_store_bit_set(st->rec.bitmap, s);
    st->rec.loc[s] = locs[i];
    st->rec.csum[s] = sums[i];
  }
  st->rec.version = version;
  if (rec_save(st, txn, inode, block) < 0)
    return -1;
  st->batch_ops++;
  return journal_add(st, TC_STORE_PEND_WRITE, inode, offset, len, version, locs, sums);
}

/* Delete sectors in the batch; with tombstone, also set the version and
 * keep the object's record when no sector remains. */
static int
apply_delete(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len, int tombstone,
             uint64_t version)
{
  uint64_t block = offset / st->hdr.block_size;
  uint32_t first = (uint32_t) (offset % st->hdr.block_size / TC_STORE_SECTOR), count = len / TC_STORE_SECTOR;
  MDB_txn *txn = NULL;
  if (batch(st, &txn) < 0)
    return -1;
  int found = rec_load(st, txn, inode, block);
  if (found < 0)
    return -1;
  if (!found && !tombstone)
    return 0;
  int changed = tombstone && (!found || st->rec.version != version);
  for (uint32_t s = first; s < first + count; s++)
    if (tc_store_bit(st->rec.bitmap, s)) {
      if (tc_store_runs_add(&st->to_punch, st->rec.loc[s], 1) < 0)
        return -1;
      tc_store_bit_clear(st->rec.bitmap, s);
      changed = 1;
    }
  if (!changed)
    return 0;
  if (tombstone)
    st->rec.version = version;
  if (rec_save_keep(st, txn, inode, block, tombstone) < 0)
    return -1;
  st->batch_ops++;
  return journal_add(st, tombstone ? TC_STORE_PEND_TOMBSTONE : TC_STORE_PEND_DELETE, inode, offset, len, version,
                     NULL, NULL);
}

/* Queue a write or delete made during a commit (its data, if any, is
 * already written to locs). */
static int
pending_add(struct tc_store *st, int kind, uint64_t inode, uint64_t offset, uint32_t len, uint64_t version,
            const uint32_t *locs, const uint64_t *sums)
{
  uint32_t count = kind == TC_STORE_PEND_WRITE ? len / TC_STORE_SECTOR : 0;
  struct tc_store_pending *p = malloc(sizeof *p + (size_t) count * (sizeof *sums + sizeof *locs));
  if (!p)
    return tc_error(ENOMEM, "store %s: no memory for a write queued behind a commit", st->data_path);
  *p = (struct tc_store_pending) { .inode = inode, .offset = offset, .version = version, .len = len, .kind = kind };
  p->sums = (uint64_t *) (p + 1);
  p->locs = (uint32_t *) (p->sums + count);
  if (count) {
    memcpy(p->sums, sums, count * sizeof *sums);
    memcpy(p->locs, locs, count * sizeof *locs);
  }
  STAILQ_INSERT_TAIL(&st->pending, p, next);
  st->seq++;
  return 0;
}

/* The writes and deletes queued during the commit that just ended, into
 * the new batch, in their order. */
static int
apply_pending(struct tc_store *st)
{
  int r = 0;
  while (!STAILQ_EMPTY(&st->pending) && r == 0) {
    struct tc_store_pending *p = STAILQ_FIRST(&st->pending);
    r = p->kind == TC_STORE_PEND_WRITE
        ? apply_write(st, p->inode, p->offset, p->len, p->locs, p->sums, p->version, 0)
        : apply_delete(st, p->inode, p->offset, p->len, p->kind == TC_STORE_PEND_TOMBSTONE, p->version);
    STAILQ_REMOVE_HEAD(&st->pending, next);
    free(p);
  }
  if (r < 0) {
    int err = errno;
    pending_free(st);
    errno = err;
  }
  return r;
}

int
tc_store_write(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len,
               const void *buf, uint64_t version)
{
  if (check_range(st, "write", inode, offset, len) < 0)
    return -1;
  if (version == 0)
    return tc_error(EINVAL, "store write: inode %#" PRIx64 " offset %" PRIu64 ": version 0 is reserved",
                    inode, offset);
  uint32_t count = len / TC_STORE_SECTOR;
  uint32_t locs[TC_STORE_MAX_SECTORS];
  uint64_t sums[TC_STORE_MAX_SECTORS];
  const uint8_t *in = buf;
  /* Checksums outside the lock: a commit's end or another write need not wait for them. */
  for (uint32_t i = 0; i < count; i++)
    sums[i] = tc_store_sector_csum(in + (size_t) i * TC_STORE_SECTOR, inode, offset / TC_STORE_SECTOR + i);
  SCOPED_LOCK(&st->lock);
  CHECK_USABLE(st);
  if (st->committing) {
    /* A commit is flushing: the data goes to free sectors now, the
     * metadata joins the next batch. If no sector is free, wait for the
     * commit (it frees old copies) and write the ordinary way. */
    if (alloc_try(st, locs, count) == 0) {
      if (write_data(st, in, locs, count) < 0)
        return -1;
      if (pending_add(st, TC_STORE_PEND_WRITE, inode, offset, len, version, locs, sums) < 0) {
        for (uint32_t k = 0; k < count; k++)
          tc_store_alloc_release(&st->alloc, locs[k], 1);
        return -1;
      }
      return 0;
    }
    wait_idle(st);
    CHECK_USABLE(st);
  }
  int placed = count < TC_STORE_ALLOC_LARGE ? alloc_small(st, inode, offset, locs, count) : 1;
  if (placed < 0)
    return mark_broken(st);
  if (placed > 0 && alloc_sectors(st, locs, count) < 0)
    return -1;
  /* New data to free sectors first; nothing points at them yet. */
  if (write_data(st, in, locs, count) < 0)
    return -1;
  if (apply_write(st, inode, offset, len, locs, sums, version, placed == 0) < 0)
    return mark_broken(st);
  st->seq++;
  if (checkpoint_due(st) < 0)
    return mark_broken(st);
  return 0;
}

static int
store_delete(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len, int tombstone,
             uint64_t version)
{
  SCOPED_LOCK(&st->lock);
  CHECK_USABLE(st);
  if (check_range(st, "delete", inode, offset, len) < 0)
    return -1;
  if (st->committing)
    return pending_add(st, tombstone ? TC_STORE_PEND_TOMBSTONE : TC_STORE_PEND_DELETE, inode, offset, len,
                       version, NULL, NULL);
  if (apply_delete(st, inode, offset, len, tombstone, version) < 0)
    return mark_broken(st);
  st->seq++;
  if (checkpoint_due(st) < 0)
    return mark_broken(st);
  return 0;
}

int
tc_store_delete(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len)
{
  return store_delete(st, inode, offset, len, 0, 0);
}

int
tc_store_delete_version(struct tc_store *st, uint64_t inode, uint64_t offset, uint32_t len,
                        uint64_t version)
{
  return store_delete(st, inode, offset, len, 1, version);
}

int
tc_store_delete_object(struct tc_store *st, uint64_t inode, uint64_t offset)
{
  uint64_t start = offset - offset % st->hdr.block_size;
  return tc_store_delete(st, inode, start, st->hdr.block_size);
}

int
tc_store_sync(struct tc_store *st)
{
  SCOPED_LOCK(&st->lock);
  CHECK_USABLE(st);
  uint64_t want = st->seq;
  wait_flushes(st);
  CHECK_USABLE(st);
  /* A flush that began after our writes (another caller's) covered them. */
  if (st->durable_seq >= want)
    return 0;
  if (journal_flush(st) < 0)
    return mark_broken(st);
  return 0;
}

int
tc_store_scrub(struct tc_store *st, uint64_t inode, uint64_t offset, uint8_t *bad)
{
  SCOPED_LOCK(&st->lock);
  wait_idle(st);
  CHECK_USABLE(st);
  uint64_t block = offset / st->hdr.block_size;
  if (bad)
    memset(bad, 0, (st->spb + 7) / 8);
  MDB_txn *txn = NULL;
  if (batch(st, &txn) < 0)
    return mark_broken(st);
  int found = rec_load(st, txn, inode, block);
  if (found <= 0)
    return found < 0 ? mark_broken(st) : 0;
  if (read_sectors(st, st->iobuf, 0, st->spb) < 0)
    return -1;
  int nbad = 0;
  uint64_t base = block * st->spb;
  for (uint32_t s = 0; s < st->spb; s++)
    if (tc_store_bit(st->rec.bitmap, s) &&
        tc_store_sector_csum(st->iobuf + (size_t) s * TC_STORE_SECTOR, inode, base + s) != st->rec.csum[s]) {
      nbad++;
      st->checksum_errors++;
      if (bad)
        bad[s / 8] |= (uint8_t) (1u << (s % 8));
      tc_err("store %s: scrub: checksum mismatch in inode %#" PRIx64 " offset %" PRIu64
             " (data sector %" PRIu32 ")", st->data_path, inode, (base + s) * TC_STORE_SECTOR, st->rec.loc[s]);
    }
  return nbad;
}

/* Fill obj from st->rec. */
static void
obj_from_rec(const struct tc_store *st, struct tc_store_obj *obj, uint64_t inode, uint64_t block)
{
  obj->inode = inode;
  obj->offset = block * st->hdr.block_size;
  obj->version = st->rec.version;
  memcpy(obj->bitmap, st->rec.bitmap, sizeof obj->bitmap);
  obj->sectors = 0;
  for (uint32_t w = 0; w < st->bm_words; w++)
    obj->sectors += (uint32_t) __builtin_popcountll(obj->bitmap[w]);
}

int
tc_store_object(struct tc_store *st, uint64_t inode, uint64_t offset, struct tc_store_obj *obj)
{
  SCOPED_LOCK(&st->lock);
  wait_idle(st);
  CHECK_USABLE(st);
  MDB_txn *txn = NULL;
  if (batch(st, &txn) < 0)
    return mark_broken(st);
  uint64_t block = offset / st->hdr.block_size;
  int found = rec_load(st, txn, inode, block);
  if (found < 0)
    return -1;
  obj_from_rec(st, obj, inode, block);
  return found;
}

int
tc_store_list(struct tc_store *st, uint64_t inode_min, uint64_t inode_max,
              tc_store_list_cb cb, void *opaque)
{
  SCOPED_LOCK(&st->lock);
  wait_idle(st);
  CHECK_USABLE(st);
  MDB_txn *txn = NULL;
  MDB_cursor *cur;
  if (batch(st, &txn) < 0)
    return mark_broken(st);
  int rc = mdb_cursor_open(txn, st->objs, &cur);
  if (rc)
    return tc_store_mdb_error(rc, "mdb_cursor_open", st->meta_path);
  uint8_t key[16];
  tc_store_obj_key(key, inode_min, 0);
  MDB_val k = { sizeof key, key }, v;
  int r = 0;
  struct tc_store_obj obj;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); !rc; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t block;
    tc_store_obj_key_parse(k.mv_data, &obj.inode, &block);
    if (obj.inode > inode_max)
      break;
    const char *why = tc_store_obj_rec_decode(&st->rec, st->spb, v.mv_data, v.mv_size);
    if (why) {
      r = tc_error(EIO, "store %s: object inode %#" PRIx64 " block %" PRIu64 ": %s",
                   st->meta_path, obj.inode, block, why);
      break;
    }
    obj_from_rec(st, &obj, obj.inode, block);
    if ((r = cb(opaque, &obj)) != 0)
      break;
  }
  if (r == 0 && rc && rc != MDB_NOTFOUND)
    r = tc_store_mdb_error(rc, "listing objects", st->meta_path);
  mdb_cursor_close(cur);
  return r;
}

int
tc_store_stats(struct tc_store *st, struct tc_store_stats *s)
{
  SCOPED_LOCK(&st->lock);
  wait_idle(st);
  CHECK_USABLE(st);
  MDB_txn *txn = NULL;
  MDB_stat ms;
  if (batch(st, &txn) < 0)
    return mark_broken(st);
  int rc = mdb_stat(txn, st->objs, &ms);
  if (rc)
    return tc_store_mdb_error(rc, "mdb_stat", st->meta_path);
  memset(s, 0, sizeof *s);
  s->objects = ms.ms_entries;
  s->used_bytes = (uint64_t) st->alloc.used * TC_STORE_SECTOR;
  s->data_bytes = (uint64_t) st->alloc.nsect * TC_STORE_SECTOR;
  s->free_bytes = s->data_bytes - s->used_bytes;
  s->unsynced_ops = st->batch_ops;
  s->checksum_errors = st->checksum_errors;
  s->commits = st->commits;
  s->writebacks = tc_store_bg_count(&st->wb);
  s->checkpoints = st->checkpoints;
  return 0;
}
