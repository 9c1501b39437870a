/* The OSD store's metadata: object records in LMDB and their encoding.
 *
 * LMDB runs with MDB_NOLOCK (the store's own mutex and the flock on the
 * data file keep it to one writer in one process, and no read transaction
 * ever runs beside the write batch) and its default durable commit: the
 * tree pages are flushed before the meta page, so a power loss at any
 * instant leaves the last committed batch intact. */
#include <config.h>
#include <errno.h>
#include <string.h>
#include "crypto.h"
#include "error.h"
#include "store_impl.h"

void
tc_store_obj_key(uint8_t key[16], uint64_t inode, uint64_t block)
{
  for (int i = 0; i < 8; i++) {
    key[i] = (uint8_t) (inode >> (56 - 8 * i));
    key[8 + i] = (uint8_t) (block >> (56 - 8 * i));
  }
}

void
tc_store_obj_key_parse(const uint8_t key[16], uint64_t *inode, uint64_t *block)
{
  uint64_t a = 0, b = 0;
  for (int i = 0; i < 8; i++) {
    a = a << 8 | key[i];
    b = b << 8 | key[8 + i];
  }
  *inode = a;
  *block = b;
}

static uint32_t
bm_words(uint32_t spb)
{
  return (spb + 63) / 64;
}

size_t
tc_store_obj_rec_max_size(uint32_t spb)
{
  return 8 + 8 * bm_words(spb) + 12 * (size_t) spb;
}

size_t
tc_store_obj_rec_encode(const struct tc_store_obj_rec *r, uint32_t spb, uint8_t *out)
{
  uint8_t *p = out;
  memcpy(p, &r->version, 8);
  p += 8;
  memcpy(p, r->bitmap, 8 * bm_words(spb));
  p += 8 * bm_words(spb);
  for (uint32_t i = 0; i < spb; i++)
    if (tc_store_bit(r->bitmap, i)) {
      memcpy(p, &r->loc[i], 4);
      p += 4;
    }
  for (uint32_t i = 0; i < spb; i++)
    if (tc_store_bit(r->bitmap, i)) {
      memcpy(p, &r->csum[i], 8);
      p += 8;
    }
  return (size_t) (p - out);
}

const char *
tc_store_obj_rec_decode(struct tc_store_obj_rec *r, uint32_t spb, const void *val, size_t len)
{
  const uint8_t *p = val;
  size_t head = 8 + 8 * bm_words(spb);
  if (len < head)
    return "the record is too short";
  memset(r->bitmap, 0, sizeof r->bitmap);
  memcpy(&r->version, p, 8);
  memcpy(r->bitmap, p + 8, 8 * bm_words(spb));
  uint32_t n = 0;
  for (uint32_t w = 0; w < bm_words(spb); w++)
    n += (uint32_t) __builtin_popcountll(r->bitmap[w]);
  if (spb % 64 && (r->bitmap[spb / 64] >> (spb % 64)))
    return "the record has sectors past the end of the block";
  if (len != head + 12 * (size_t) n)
    return "the record's length does not match its bitmap";
  const uint8_t *locs = p + head, *sums = locs + 4 * (size_t) n;
  uint32_t k = 0;
  for (uint32_t i = 0; i < spb; i++)
    if (tc_store_bit(r->bitmap, i)) {
      memcpy(&r->loc[i], locs + 4 * k, 4);
      memcpy(&r->csum[i], sums + 8 * k, 8);
      k++;
    }
  return NULL;
}

uint64_t
tc_store_sector_csum(const void *data, uint64_t inode, uint64_t inode_sector)
{
  return tc_xxh3_64_seed(data, TC_STORE_SECTOR, inode * 0x9E3779B97F4A7C15ull ^ inode_sector);
}

int
tc_store_mdb_error(int rc, const char *what, const char *path)
{
  int err = rc > 0 ? rc : (rc == MDB_MAP_FULL ? ENOSPC : EIO);
  return tc_error(err, "store metadata %s: %s: %s", path, what, mdb_strerror(rc));
}

int
tc_store_meta_open(MDB_env **out, const char *path, uint64_t data_size)
{
  MDB_env *env;
  int rc = mdb_env_create(&env);
  if (rc)
    return tc_store_mdb_error(rc, "mdb_env_create", path);
  /* Room for every sector of the data area with B-tree and copy-on-write
   * overhead; only what is used takes space (the file grows on demand). */
  size_t map = (size_t) (1ull << 30) + (size_t) (data_size / 16);
  if ((rc = mdb_env_set_mapsize(env, map)) || (rc = mdb_env_set_maxdbs(env, 2))) {
    mdb_env_close(env);
    return tc_store_mdb_error(rc, "setting the map size", path);
  }
  rc = mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK | MDB_NORDAHEAD, 0600);
  if (rc) {
    mdb_env_close(env);
    return tc_store_mdb_error(rc, "mdb_env_open", path);
  }
  *out = env;
  return 0;
}
