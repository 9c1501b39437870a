/* Formatting an OSD store: the header at the start of the data file, and a
 * fresh metadata file that carries a copy of it. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cleanup.h"
#include "crypto.h"
#include "error.h"
#include "fullio.h"
#include "tc_config.h"
#include "store_impl.h"

_Static_assert(sizeof(struct tc_store_hdr) <= TC_STORE_HDR_SIZE, "store header fits its sector");

void
tc_store_hdr_seal(struct tc_store_hdr *h)
{
  h->checksum = tc_xxh3_64(h, offsetof(struct tc_store_hdr, checksum));
}

int
tc_store_hdr_check(const struct tc_store_hdr *h, const char *what)
{
  if (memcmp(h->magic, TC_STORE_MAGIC, sizeof h->magic) != 0)
    return tc_error(EINVAL, "%s is not a tromcho OSD store (no store header; format it with tromcho osd-create)", what);
  if (h->checksum != tc_xxh3_64(h, offsetof(struct tc_store_hdr, checksum)))
    return tc_error(EINVAL, "%s: the store header is corrupt (checksum mismatch)", what);
  if (h->format_version != TC_STORE_FORMAT_VERSION)
    return tc_error(ENOTSUP, "%s: store format version %" PRIu32 " is not supported (this build reads %d)",
                    what, h->format_version, TC_STORE_FORMAT_VERSION);
  if (h->block_size < TC_STORE_MIN_BLOCK_SIZE || h->block_size > TC_STORE_MAX_BLOCK_SIZE ||
      (h->block_size & (h->block_size - 1)) || h->data_offset % h->block_size ||
      h->data_offset < TC_STORE_HDR_AREA || h->size < h->data_offset + h->block_size ||
      h->size - h->data_offset > TC_STORE_MAX_SIZE || h->osd_num == 0)
    return tc_error(EINVAL, "%s: the store header has impossible values (block_size %" PRIu32
                    ", size %" PRIu64 ", osd_num %" PRIu64 ")", what, h->block_size, h->size, h->osd_num);
  return 0;
}

int64_t
tc_store_parse_block_size(const char *s)
{
  int64_t v = tc_parse_size(s);
  if (v < TC_STORE_MIN_BLOCK_SIZE || v > TC_STORE_MAX_BLOCK_SIZE || (v & (v - 1))) {
    tc_error(EINVAL, "block size '%s' is not a power of two between 4k and 1M", s);
    return -1;
  }
  return v;
}

/* Size of an open file or block device. */
static int
data_size(int fd, const char *path, int *is_blk, uint64_t *size)
{
  struct stat st;
  if (fstat(fd, &st) < 0)
    return tc_error(errno, "%s: stat: %m", path);
  *is_blk = S_ISBLK(st.st_mode);
  if (*is_blk) {
    if (ioctl(fd, BLKGETSIZE64, size) < 0)
      return tc_error(errno, "%s: BLKGETSIZE64: %m", path);
  }
  else if (S_ISREG(st.st_mode))
    *size = (uint64_t) st.st_size;
  else
    return tc_error(EINVAL, "%s is neither a regular file nor a block device", path);
  return 0;
}

/* Refuse to overwrite a store or other data unless forced: offset of the
 * first non-zero byte of the first 64 KiB, or -1 if all zeros. */
static int
check_existing(int fd, const char *path, uint64_t have, bool force)
{
  uint8_t buf[65536];
  size_t n = have < sizeof buf ? (size_t) have : sizeof buf;
  ssize_t r = tc_read_full(fd, buf, n, 0);
  if (r < 0)
    return tc_error(errno, "%s: read: %m", path);
  if (force)
    return 0;
  const struct tc_store_hdr *h = (const void *) buf;
  if ((size_t) r >= sizeof *h && memcmp(h->magic, TC_STORE_MAGIC, sizeof h->magic) == 0)
    return tc_error(EEXIST, "%s is already formatted as a tromcho OSD store (osd_num %" PRIu64
                    "); use --force to erase it", path, h->osd_num);
  for (ssize_t i = 0; i < r; i++)
    if (buf[i])
      return tc_error(EEXIST, "%s holds data that is not a tromcho store (non-zero byte at offset %zd);"
                      " use --force to erase it", path, i);
  return 0;
}

/* Write the holes of the overflow area of a file store with zeros
 * (store_impl.h): a write there then lands in a block the file system
 * already allocated and wrote, so its sync changes no extent (no journal
 * commit of the file system's own) and it never takes a page of the file
 * never used before. A hole reads as zeros, so writing zeros over it
 * changes no byte of any sector, used or free. */
int
tc_store_fill_overflow(int fd, const char *path, uint64_t data_offset, uint64_t size, uint64_t *filled)
{
  uint32_t nsect = (uint32_t) ((size - data_offset) / TC_STORE_SECTOR);
  uint64_t pos = data_offset + (uint64_t) (nsect - tc_store_overflow_sectors(nsect)) * TC_STORE_SECTOR;
  size_t chunk = 1 << 20;
  CLEANUP_FREE uint8_t *zero = calloc(1, chunk);
  if (!zero)
    return tc_error(ENOMEM, "%s: no memory to zero the overflow area", path);
  *filled = 0;
  while (pos < size) {
    off_t hole = lseek(fd, (off_t) pos, SEEK_HOLE);
    if (hole < 0)
      return tc_error(errno, "%s: looking for holes from %" PRIu64 ": %m", path, pos);
    if ((uint64_t) hole >= size)
      break;
    off_t data = lseek(fd, hole, SEEK_DATA);
    if (data < 0 && errno != ENXIO)
      return tc_error(errno, "%s: looking for data from %jd: %m", path, (intmax_t) hole);
    uint64_t end = data < 0 || (uint64_t) data > size ? size : (uint64_t) data;
    for (pos = (uint64_t) hole; pos < end;) {
      size_t n = end - pos < chunk ? (size_t) (end - pos) : chunk;
      if (tc_write_full(fd, zero, n, (off_t) pos) < 0)
        return tc_error(errno, "%s: writing zeros at %" PRIu64 ": %m", path, pos);
      pos += n;
      *filled += n;
    }
  }
  return 0;
}

int
tc_store_format(const struct tc_store_format_opts *o)
{
  uint32_t bs = o->block_size ? o->block_size : TC_STORE_DEFAULT_BLOCK_SIZE;
  if (bs < TC_STORE_MIN_BLOCK_SIZE || bs > TC_STORE_MAX_BLOCK_SIZE || (bs & (bs - 1)))
    return tc_error(EINVAL, "block size %" PRIu32 " is not a power of two between 4k and 1M", bs);
  if (o->osd_num == 0)
    return tc_error(EINVAL, "osd_num must be given and greater than 0");
  if (!o->data_path)
    return tc_error(EINVAL, "no data path");
  if (o->size && o->size < TC_STORE_MIN_SIZE)   /* before creating anything */
    return tc_error(EINVAL, "%s: %" PRIu64 " bytes is too small for a store (at least %llu MiB)",
                    o->data_path, o->size, TC_STORE_MIN_SIZE >> 20);

  CLEANUP_FREE char *meta = NULL;
  if (o->meta_path)
    meta = strdup(o->meta_path);
  else if (asprintf(&meta, "%s.meta", o->data_path) < 0)
    meta = NULL;
  if (!meta)
    return tc_error(ENOMEM, "no memory");
  struct stat sb;
  if (!o->force && stat(o->data_path, &sb) < 0 && access(meta, F_OK) == 0)
    return tc_error(EEXIST, "metadata file %s already exists; use --force to replace it", meta);

  CLEANUP_CLOSE int fd = open(o->data_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return tc_error(errno, "%s: open: %m", o->data_path);
  if (flock(fd, LOCK_EX | LOCK_NB) < 0)
    return tc_error(errno == EWOULDBLOCK ? EBUSY : errno, "%s is in use by another process", o->data_path);
  int is_blk = 0;
  uint64_t have = 0;
  if (data_size(fd, o->data_path, &is_blk, &have) < 0)
    return -1;
  if (is_blk && !o->meta_path)
    return tc_error(EINVAL, "%s is a block device: give a metadata path on a file system", o->data_path);
  uint64_t size = o->size ? o->size : have;
  if (is_blk && size > have)
    return tc_error(EINVAL, "%s: size %" PRIu64 " is larger than the device (%" PRIu64 ")",
                    o->data_path, size, have);
  /* The header area holds the journal (store.md): a bigger one on a
   * bigger store means fewer checkpoints (LMDB commits). */
  uint64_t area = size >= TC_STORE_BIG_STORE ? TC_STORE_HDR_AREA_BIG : TC_STORE_HDR_AREA;
  uint64_t data_offset = bs > area ? bs : area;
  if (size < TC_STORE_MIN_SIZE)
    return tc_error(EINVAL, "%s: %" PRIu64 " bytes is too small for a store (at least %llu MiB)",
                    o->data_path, size, TC_STORE_MIN_SIZE >> 20);
  size -= (size - data_offset) % bs;   /* whole blocks only */
  if (size - data_offset > TC_STORE_MAX_SIZE)
    return tc_error(EINVAL, "%s: %" PRIu64 " bytes is too large for a store (at most 16 TiB of data)",
                    o->data_path, size);
  if (have && check_existing(fd, o->data_path, have, o->force) < 0)
    return -1;
  if (!o->force && access(meta, F_OK) == 0)
    return tc_error(EEXIST, "metadata file %s already exists; use --force to replace it", meta);
  if (!is_blk && have < size && ftruncate(fd, (off_t) size) < 0)
    return tc_error(errno, "%s: extending to %" PRIu64 " bytes: %m", o->data_path, size);
  /* Erase old contents (sparse again); a device without discard keeps them,
   * which is harmless: nothing points at them. */
  if (!is_blk && have &&
      fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t) size) < 0 &&
      errno != EOPNOTSUPP)
    return tc_error(errno, "%s: punching out old data: %m", o->data_path);
  else if (is_blk) {
    uint8_t zero[TC_STORE_HDR_SIZE] = { 0 };
    if (pwrite(fd, zero, sizeof zero, 0) != (ssize_t) sizeof zero)
      return tc_error(errno, "%s: write: %m", o->data_path);
  }
  uint64_t filled;
  if (!is_blk && tc_store_fill_overflow(fd, o->data_path, data_offset, size, &filled) < 0)
    return -1;

  struct tc_store_hdr h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, TC_STORE_MAGIC, sizeof h.magic);
  h.format_version = TC_STORE_FORMAT_VERSION;
  h.block_size = bs;
  h.osd_num = o->osd_num;
  h.size = size;
  h.data_offset = data_offset;
  if (tc_random(h.uuid, sizeof h.uuid) < 0)
    return -1;
  h.uuid[6] = (h.uuid[6] & 0x0f) | 0x40;   /* RFC 4122 version 4 */
  h.uuid[8] = (h.uuid[8] & 0x3f) | 0x80;
  h.created = (uint64_t) time(NULL);
  tc_store_hdr_seal(&h);

  /* A fresh metadata file holding a copy of the header, durable before the
   * header itself is written: a format cut short leaves no valid store. */
  if (unlink(meta) < 0 && errno != ENOENT)
    return tc_error(errno, "%s: removing the old metadata: %m", meta);
  MDB_env *env;
  if (tc_store_meta_open(&env, meta, size) < 0)
    return -1;
  MDB_txn *txn = NULL;
  MDB_dbi info;
  int rc = mdb_txn_begin(env, NULL, 0, &txn);
  if (!rc && !(rc = mdb_dbi_open(txn, "info", MDB_CREATE, &info))) {
    MDB_dbi objs;
    MDB_val k = { 6, "header" }, v = { sizeof h, &h };
    rc = mdb_dbi_open(txn, "objects", MDB_CREATE, &objs);
    if (!rc)
      rc = mdb_put(txn, info, &k, &v, 0);
    if (!rc)
      rc = mdb_txn_commit(txn);
    else
      mdb_txn_abort(txn);
  }
  mdb_env_close(env);
  if (rc)
    return tc_store_mdb_error(rc, "creating", meta);

  uint8_t sector[TC_STORE_HDR_SIZE] = { 0 };
  memcpy(sector, &h, sizeof h);
  if (pwrite(fd, sector, sizeof sector, 0) != (ssize_t) sizeof sector)
    return tc_error(errno ? errno : EIO, "%s: writing the store header: %m", o->data_path);
  if (fdatasync(fd) < 0)
    return tc_error(errno, "%s: fdatasync: %m", o->data_path);
  return 0;
}
