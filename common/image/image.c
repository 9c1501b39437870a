/* The image layer: layers, AES-256-XTS, read-modify-write (see image.h). */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "image.h"
#include "image_int.h"
#include "image_integrity.h"
#include "sector_lock.h"

/* --- XTS context pool --- */

static struct tc_xts *
xts_get(struct xts_pool *p)
{
  struct tc_xts *x = NULL;
  pthread_mutex_lock(&p->lock);
  if (p->nfree > 0)
    x = p->free[--p->nfree];
  pthread_mutex_unlock(&p->lock);
  if (!x && tc_xts_new(&x, p->key) < 0)
    return NULL;
  return x;
}

static void
xts_put(struct xts_pool *p, struct tc_xts *x)
{
  pthread_mutex_lock(&p->lock);
  if (p->nfree == p->cap) {
    int ncap = p->cap ? p->cap * 2 : 8;
    struct tc_xts **nf = realloc(p->free, ncap * sizeof *nf);
    if (!nf) {    /* keep working: just don't pool this one */
      pthread_mutex_unlock(&p->lock);
      tc_xts_free(x);
      return;
    }
    p->free = nf;
    p->cap = ncap;
  }
  p->free[p->nfree++] = x;
  pthread_mutex_unlock(&p->lock);
}

static void
xts_pool_destroy(struct xts_pool *p)
{
  for (int i = 0; i < p->nfree; i++)
    tc_xts_free(p->free[i]);
  free(p->free);
  tc_wipe(p->key, sizeof p->key);
  pthread_mutex_destroy(&p->lock);
}

static void
layers_destroy(struct layer *ls, int n)
{
  if (!ls)
    return;
  for (int i = 0; i < n; i++) {
    xts_pool_destroy(&ls[i].xts);
    tc_integrity_free(ls[i].integ);
  }
  free(ls);
}

/* Encrypt or decrypt whole sectors of layer l at image sector `sector`. */
int
image_layer_crypt(struct layer *l, bool encrypt, uint64_t sector, const void *in, void *out, size_t len)
{
  struct tc_xts *x = xts_get(&l->xts);
  if (!x)
    return -1;
  int r = encrypt ? tc_xts_encrypt(x, sector, in, out, len) : tc_xts_decrypt(x, sector, in, out, len);
  xts_put(&l->xts, x);
  return r;
}

/* Submit n operations and wait for all; returns 0 or -1 with errno. */
int
image_run_ops(struct tc_image *img, struct tc_objop *ops, int n, const char *what)
{
  int r = tc_objstore_run(&img->os, ops, (size_t) n, 0, NULL, NULL);
  if (r < 0)
    return tc_error(-r, "image %s: %s", what, strerror(-r));
  return 0;
}

/* Split [off, off+len) into object-sized chunks: the number of chunks. */
static int
count_chunks(const struct tc_image *img, uint64_t off, uint64_t len)
{
  uint64_t first = off / img->block_size, last = (off + len - 1) / img->block_size;
  return (int) (last - first + 1);
}

/* Fill ops[] with one op per object chunk of [off, off+len). buf and bitmap
 * advance with the chunk (bitmap may be NULL). */
static int
make_chunks(const struct tc_image *img, struct tc_objop *ops, enum tc_objop_code code, uint64_t inode,
            uint64_t off, uint64_t len, uint8_t *buf, uint8_t *bitmaps, size_t bmstride)
{
  int n = 0;
  uint64_t pos = off, end = off + len;
  while (pos < end) {
    uint64_t objend = (pos / img->block_size + 1) * img->block_size;
    uint64_t chunk = (objend < end ? objend : end) - pos;
    ops[n] = (struct tc_objop) {
      .code = code, .inode = inode, .offset = pos, .len = (uint32_t) chunk,
      .buf = buf ? buf + (pos - off) : NULL,
      .bitmap = bitmaps ? bitmaps + n * bmstride : NULL,
    };
    n++;
    pos += chunk;
  }
  return n;
}

static bool
bit(const uint8_t *bm, uint64_t i)
{
  return bm[i / 8] >> (i % 8) & 1;
}

/* Read whole sectors [off, off+len) into buf, decrypted, through the layers. */
int
image_read_sectors(struct tc_image *img, uint8_t *buf, uint64_t off, uint64_t len)
{
  uint64_t nsec = len / SECTOR;
  int nchunks = count_chunks(img, off, len);
  size_t bmstride = img->block_size / SECTOR / 8 + 1;
  int r = -1;
  uint8_t *have = NULL;
  uint8_t *need = malloc(nsec);
  uint8_t *bitmaps = calloc(nchunks, bmstride);
  struct tc_objop *ops = calloc(nchunks, sizeof *ops);
  uint8_t *tmp = NULL;
  if (!need || !bitmaps || !ops) {
    tc_error(ENOMEM, "image read: out of memory");
    goto out;
  }
  memset(need, 1, nsec);
  uint64_t left = nsec;
  for (int l = 0; l < img->nlayers && left > 0; l++) {
    struct layer *ly = &img->layers[l];
    /* Layer 0 reads straight into the caller's buffer; deeper layers into a
     * scratch buffer from which only the sectors still needed are taken. */
    uint8_t *dst = buf;
    if (l > 0) {
      if (!tmp && !(tmp = aligned_alloc(SECTOR, len))) {
        tc_error(ENOMEM, "image read: out of memory");
        goto out;
      }
      dst = tmp;
    }
    if (ly->integ) {
      if (!have && !(have = malloc(nsec))) {
        tc_error(ENOMEM, "image read: out of memory");
        goto out;
      }
      if (tc_integrity_read(ly->integ, &img->os, img->block_size, off, len, dst, need, have) < 0)
        goto out;
      for (uint64_t s = 0; s < nsec; s++) {
        if (!need[s] || !have[s])
          continue;
        if (l > 0)
          memcpy(buf + s * SECTOR, tmp + s * SECTOR, SECTOR);
        if (image_layer_crypt(ly, false, off / SECTOR + s, buf + s * SECTOR, buf + s * SECTOR, SECTOR) < 0)
          goto out;
        need[s] = 0;
        left--;
      }
      continue;
    }
    int n = make_chunks(img, ops, TC_OBJ_READ, ly->inode, off, len, dst, bitmaps, bmstride);
    /* Skip chunks with nothing left to find. */
    int m = 0;
    for (int i = 0; i < n; i++) {
      uint64_t s0 = (ops[i].offset - off) / SECTOR, ns = ops[i].len / SECTOR;
      bool any = false;
      for (uint64_t s = s0; s < s0 + ns && !any; s++)
        any = need[s];
      if (any) {
        memset(ops[i].bitmap, 0, bmstride);
        ops[m++] = ops[i];
      }
    }
    if (image_run_ops(img, ops, m, "read") < 0)
      goto out;
    for (int i = 0; i < m; i++) {
      uint64_t s0 = (ops[i].offset - off) / SECTOR, ns = ops[i].len / SECTOR;
      for (uint64_t k = 0; k < ns;) {
        if (!need[s0 + k] || !bit(ops[i].bitmap, k)) {
          k++;
          continue;
        }
        /* A run of sectors this layer gives: one XTS call (one context
         * from the pool) for all of it, from the scratch buffer straight
         * into the caller's for a parent. */
        uint64_t k1 = k + 1;
        while (k1 < ns && need[s0 + k1] && bit(ops[i].bitmap, k1))
          k1++;
        uint64_t s = s0 + k, run = k1 - k;
        const uint8_t *src = l > 0 ? tmp + s * SECTOR : buf + s * SECTOR;
        if (ly->encrypted) {
          if (image_layer_crypt(ly, false, off / SECTOR + s, src, buf + s * SECTOR, run * SECTOR) < 0)
            goto out;
        }
        else if (l > 0)
          memcpy(buf + s * SECTOR, src, run * SECTOR);
        memset(need + s, 0, run);
        left -= run;
        k = k1;
      }
    }
  }
  for (uint64_t s = 0; s < nsec; s++)
    if (need[s])
      memset(buf + s * SECTOR, 0, SECTOR);
  r = 0;
out:
  free(have);
  free(need);
  free(bitmaps);
  free(ops);
  free(tmp);
  return r;
}

/* An objop transform: XTS-encrypt a write's part into the store's copy
 * (the tweak is the sector's offset in the inode, as on read). */
static int
encrypt_part(void *ctx, uint64_t offset, const void *in, void *out, uint32_t len)
{
  return image_layer_crypt(ctx, true, offset / SECTOR, in, out, len);
}

/* Write whole sectors [off, off+len) from buf to layer 0, encrypting. */
int
image_write_sectors(struct tc_image *img, const uint8_t *buf, uint64_t off, uint64_t len, unsigned flags)
{
  struct layer *ly = &img->layers[0];
  uint8_t *src = (uint8_t *) buf;   /* objstore writes do not modify buf */
  uint8_t *bounce = NULL;
  int r = -1;
  struct tc_objop *ops = calloc(count_chunks(img, off, len), sizeof *ops);
  if (!ops)
    return tc_error(ENOMEM, "image write: out of memory");
  if (ly->encrypted && !ly->integ) {
    /* No ciphertext buffer here: the store encrypts each part straight
     * into its replay record (a third copy of every write in flight
     * otherwise: nbdkit's buffer, this one, the record). */
    int n = make_chunks(img, ops, TC_OBJ_WRITE, ly->inode, off, len, src, NULL, 0);
    for (int i = 0; i < n; i++) {
      ops[i].flags = flags;
      ops[i].transform = encrypt_part;
      ops[i].transform_ctx = ly;
    }
    r = image_run_ops(img, ops, n, "write");
    free(ops);
    return r;
  }
  if (ly->encrypted) {
    if (!(bounce = aligned_alloc(SECTOR, len))) {
      tc_error(ENOMEM, "image write: out of memory");
      goto out;
    }
    if (image_layer_crypt(ly, true, off / SECTOR, buf, bounce, len) < 0)
      goto out;
    src = bounce;
  }
  if (ly->integ) {
    /* Its tag writes carry the flags too: data and tags durable for FUA. */
    struct tc_objstore_flagged f;
    struct tc_objstore os = tc_objstore_with_flags(&f, &img->os, flags);
    r = tc_integrity_write(ly->integ, &os, img->block_size, off, len, src);
  }
  else {
    int n = make_chunks(img, ops, TC_OBJ_WRITE, ly->inode, off, len, src, NULL, 0);
    /* The ciphertext is ours, freed below: the store may seal it in place. */
    for (int i = 0; i < n; i++) {
      ops[i].flags = flags;
      ops[i].scratch = bounce != NULL;
    }
    r = image_run_ops(img, ops, n, "write");
  }
out:
  free(ops);
  free(bounce);
  return r;
}

/* --- public API --- */

/* Build the layers of descs (keys checked, XTS pools seeded); *out holds
 * them, NULL with -1 on error (nothing left allocated). */
static int
layers_build(const struct tc_layer_desc *descs, int n, struct layer **out)
{
  struct layer *ls = calloc(n, sizeof *ls);
  *out = NULL;
  if (!ls)
    return tc_error(ENOMEM, "image: out of memory");
  int built = 0, r = 0;
  for (int i = 0; i < n && r == 0; i++) {
    struct layer *l = &ls[i];
    l->inode = descs[i].inode;
    l->encrypted = descs[i].encrypted;
    pthread_mutex_init(&l->xts.lock, NULL);
    built = i + 1;
    const char *name = descs[i].name ? descs[i].name : "?";
    if (l->encrypted) {
      memcpy(l->xts.key, descs[i].key, TC_XTS_KEY_SIZE);
      /* Check the key now (equal halves are refused) and seed the pool. */
      struct tc_xts *x = xts_get(&l->xts);
      if (!x) {
        r = -1;
        break;
      }
      xts_put(&l->xts, x);
    }
    if (descs[i].integrity) {
      if (!l->encrypted)
        r = tc_error(EINVAL, "image %s: an authenticated layer needs a key", name);
      else if (!(l->integ = tc_integrity_new(descs[i].key, l->inode, name)))
        r = -1;
    }
  }
  if (r < 0) {
    int e = errno;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    layers_destroy(ls, built);
    return tc_error(e, "%s", msg);
  }
  *out = ls;
  return 0;
}

struct tc_image *
tc_image_new(const struct tc_objstore *os, uint32_t block_size, uint64_t size,
             const struct tc_layer_desc *layers, int nlayers, bool readonly)
{
  if (block_size < SECTOR || (block_size & (block_size - 1)) || size % SECTOR || nlayers < 1) {
    tc_error(EINVAL, "image: bad geometry (block size %u, size %llu, %d layers)", block_size,
             (unsigned long long) size, nlayers);
    return NULL;
  }
  struct tc_image *img = calloc(1, sizeof *img);
  if (!img) {
    tc_error(ENOMEM, "image: out of memory");
    return NULL;
  }
  img->os = *os;
  img->block_size = block_size;
  img->size = size;
  img->readonly = readonly;
  pthread_mutex_init(&img->lock, NULL);
  /* Writers first: a layer switch waits for the I/O running, not for
   * every I/O that keeps arriving. */
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&img->layers_lock, &ra);
  pthread_rwlockattr_destroy(&ra);
  if (!readonly && !(img->locks = tc_sector_locks_get(os->ctx, layers[0].inode))) {
    tc_image_free(img);
    return NULL;
  }
  if (layers_build(layers, nlayers, &img->layers) < 0) {
    tc_image_free(img);
    return NULL;
  }
  img->nlayers = nlayers;
  return img;
}

void
tc_image_free(struct tc_image *img)
{
  if (!img)
    return;
  if (img->close_fn)
    img->close_fn(img->close_arg, img);
  layers_destroy(img->layers, img->nlayers);
  tc_sector_locks_put(img->locks);
  pthread_rwlock_destroy(&img->layers_lock);
  pthread_mutex_destroy(&img->lock);
  free(img);
}

void
tc_image_set_switch_hook(struct tc_image *img, int (*fn)(void *arg, struct tc_image *img), void *arg)
{
  img->switch_fn = fn;
  img->switch_arg = arg;
}

void
tc_image_mark_stale(struct tc_image *img)
{
  __atomic_store_n(&img->stale, true, __ATOMIC_RELEASE);
}

int
tc_image_replace_layers(struct tc_image *img, uint64_t expect_top, const struct tc_layer_desc *layers, int nlayers)
{
  if (nlayers < 1)
    return tc_error(EINVAL, "image: a chain of %d layers", nlayers);
  struct layer *nl;
  if (layers_build(layers, nlayers, &nl) < 0)
    return -1;
  struct tc_sector_locks *locks = NULL;
  if (!tc_image_readonly(img) && !(locks = tc_sector_locks_get(img->os.ctx, layers[0].inode))) {
    layers_destroy(nl, nlayers);
    return -1;
  }
  pthread_rwlock_wrlock(&img->layers_lock);
  bool same = img->layers[0].inode == expect_top;
  struct layer *old = img->layers;
  int nold = img->nlayers;
  struct tc_sector_locks *oldlocks = img->locks;
  if (same) {
    /* No I/O runs: no range of the old sector locks is held. The locks
     * follow the top inode, so this handle shares them with the handles
     * opened on the new top. */
    img->layers = nl;
    img->nlayers = nlayers;
    if (locks)
      img->locks = locks;
  }
  pthread_rwlock_unlock(&img->layers_lock);
  if (same) {
    layers_destroy(old, nold);
    if (locks)
      tc_sector_locks_put(oldlocks);
  }
  else {
    layers_destroy(nl, nlayers);
    tc_sector_locks_put(locks);
  }
  return same;
}

int
tc_image_layer_inodes(struct tc_image *img, uint64_t *out, int max)
{
  pthread_rwlock_rdlock(&img->layers_lock);
  int n = img->nlayers < max ? img->nlayers : max;
  for (int i = 0; i < n; i++)
    out[i] = img->layers[i].inode;
  pthread_rwlock_unlock(&img->layers_lock);
  return n;
}

void
tc_image_set_close_hook(struct tc_image *img, void (*fn)(void *arg, struct tc_image *img), void *arg)
{
  img->close_fn = fn;
  img->close_arg = arg;
}

uint64_t
tc_image_size(const struct tc_image *img)
{
  struct tc_image *m = (struct tc_image *) img;
  pthread_mutex_lock(&m->lock);
  uint64_t s = m->size;
  pthread_mutex_unlock(&m->lock);
  return s;
}

void
tc_image_set_size(struct tc_image *img, uint64_t size)
{
  pthread_mutex_lock(&img->lock);
  img->size = size;
  pthread_mutex_unlock(&img->lock);
}

bool
tc_image_readonly(const struct tc_image *img)
{
  return __atomic_load_n(&img->readonly, __ATOMIC_ACQUIRE);
}

void
tc_image_set_readonly(struct tc_image *img, const char *why)
{
  pthread_mutex_lock(&img->lock);
  if (why)
    snprintf(img->ro_why, sizeof img->ro_why, "%s", why);
  pthread_mutex_unlock(&img->lock);
  __atomic_store_n(&img->readonly, true, __ATOMIC_RELEASE);
}

void
tc_image_set_revoked(struct tc_image *img, const char *why)
{
  pthread_mutex_lock(&img->lock);
  snprintf(img->ro_why, sizeof img->ro_why, "%s", why ? why : "key revoked");
  pthread_mutex_unlock(&img->lock);
  __atomic_store_n(&img->revoked, true, __ATOMIC_RELEASE);
  __atomic_store_n(&img->readonly, true, __ATOMIC_RELEASE);
}

static int
check_range(struct tc_image *img, uint64_t len, uint64_t off, bool write)
{
  uint64_t size = tc_image_size(img);
  if (__atomic_load_n(&img->revoked, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&img->lock);
    tc_error(EKEYREVOKED, "image: %s", img->ro_why);
    pthread_mutex_unlock(&img->lock);
    return -1;
  }
  if (write && tc_image_readonly(img)) {
    pthread_mutex_lock(&img->lock);
    tc_error(EROFS, "image: read-only%s%s", img->ro_why[0] ? ": " : "", img->ro_why);
    pthread_mutex_unlock(&img->lock);
    return -1;
  }
  if (off > size || len > size - off)
    return tc_error(write ? ENOSPC : EINVAL, "image: range %llu+%llu beyond the end (%llu bytes)",
                    (unsigned long long) off, (unsigned long long) len, (unsigned long long) size);
  return 0;
}

/* Run body(img, arg) under the chain's read lock. When the chain was marked
 * stale, or the OSDs refused the top layer (EROFS: fenced by a snapshot or
 * a re-key) or a layer (ESTALE: retired), the switch hook reloads it and
 * the body runs again on the new chain: a handle follows its image to the
 * new top and no error reaches its user. */
static int
run_io(struct tc_image *img, int (*body)(struct tc_image *img, void *arg), void *arg)
{
  for (int attempt = 0;; attempt++) {
    if (img->switch_fn && __atomic_load_n(&img->stale, __ATOMIC_ACQUIRE) &&
        __atomic_exchange_n(&img->stale, false, __ATOMIC_ACQ_REL) &&
        img->switch_fn(img->switch_arg, img) < 0) {
      tc_image_mark_stale(img);   /* try again before the next I/O */
      return -1;
    }
    pthread_rwlock_rdlock(&img->layers_lock);
    int r = body(img, arg);
    int e = errno;
    pthread_rwlock_unlock(&img->layers_lock);
    if (r == 0 || !img->switch_fn || (e != EROFS && e != ESTALE)) {
      errno = e;
      return r;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    int sw = img->switch_fn(img->switch_arg, img);
    if (sw < 0)
      return -1;
    if (sw == 0)
      return tc_error(e, "%s", msg);
    if (attempt == 16)
      return tc_error(e, "%s (the image's layers kept changing)", msg);
  }
}

struct io {
  const void *wbuf;
  void *rbuf;
  uint64_t len, off;
  bool may_trim;
  unsigned flags;          /* writes: TC_IMAGE_FUA */
  uint64_t pos;            /* extents: the window */
  uint8_t *alloc;
  struct tc_objop *ops;
  uint8_t *bitmaps;
};

static int
read_body(struct tc_image *img, void *arg)
{
  struct io *a = arg;
  uint64_t off = a->off, len = a->len;
  if (off % SECTOR == 0 && len % SECTOR == 0)
    return image_read_sectors(img, a->rbuf, off, len);
  uint64_t a0 = off / SECTOR * SECTOR, a1 = (off + len + SECTOR - 1) / SECTOR * SECTOR;
  uint8_t *tmp = aligned_alloc(SECTOR, a1 - a0);
  if (!tmp)
    return tc_error(ENOMEM, "image read: out of memory");
  int r = image_read_sectors(img, tmp, a0, a1 - a0);
  if (r == 0)
    memcpy(a->rbuf, tmp + (off - a0), len);
  free(tmp);
  return r;
}

int
tc_image_read(struct tc_image *img, void *buf, uint64_t len, uint64_t off)
{
  if (check_range(img, len, off, false) < 0)
    return -1;
  if (len == 0)
    return 0;
  struct io a = { .rbuf = buf, .len = len, .off = off };
  return run_io(img, read_body, &a);
}

/* Write with the sector range already locked. buf == NULL writes zeros. */
static int
write_locked(struct tc_image *img, const void *buf, uint64_t len, uint64_t off, unsigned flags)
{
  if (buf && off % SECTOR == 0 && len % SECTOR == 0)
    return image_write_sectors(img, buf, off, len, flags);
  return image_write_partial(img, buf, len, off, flags);
}

static int
write_body(struct tc_image *img, void *arg)
{
  struct io *a = arg;
  uint64_t a0 = a->off / SECTOR * SECTOR, a1 = (a->off + a->len + SECTOR - 1) / SECTOR * SECTOR;
  struct tc_sector_range held;
  tc_sector_lock(img->locks, &held, a0, a1);
  int r = write_locked(img, a->wbuf, a->len, a->off, a->flags);
  int e = errno;
  tc_sector_unlock(img->locks, &held);
  errno = e;
  return r;
}

int
tc_image_write_flags(struct tc_image *img, const void *buf, uint64_t len, uint64_t off, unsigned flags)
{
  if (check_range(img, len, off, true) < 0)
    return -1;
  if (len == 0)
    return 0;
  struct io a = { .wbuf = buf, .len = len, .off = off, .flags = flags & TC_IMAGE_FUA };
  return run_io(img, write_body, &a);
}

int
tc_image_write(struct tc_image *img, const void *buf, uint64_t len, uint64_t off)
{
  return tc_image_write_flags(img, buf, len, off, 0);
}

int
tc_image_flush(struct tc_image *img)
{
  struct tc_objop op = { .code = TC_OBJ_SYNC };
  return image_run_ops(img, &op, 1, "flush");
}

static bool
zero_fast(const struct tc_image *img, bool may_trim)
{
  /* An authenticated layer writes zeros (with tags): a deallocated sector
   * whose tag says written would fail its check. */
  return may_trim && img->nlayers == 1 && !img->layers[0].integ;
}

/* Zero whole sectors [off, off+len): deallocate when nothing can show
 * through from a parent, else write zeros (encrypted like any data). */
static int
zero_sectors(struct tc_image *img, uint64_t off, uint64_t len, bool may_trim)
{
  if (zero_fast(img, may_trim)) {
    struct tc_objop *ops = calloc(count_chunks(img, off, len), sizeof *ops);
    if (!ops)
      return tc_error(ENOMEM, "image trim: out of memory");
    int n = make_chunks(img, ops, TC_OBJ_DELETE, img->layers[0].inode, off, len, NULL, NULL, 0);
    int r = image_run_ops(img, ops, n, "trim");
    free(ops);
    return r;
  }
  const uint64_t step = 1 << 20;
  uint8_t *zeros = aligned_alloc(SECTOR, step);
  if (!zeros)
    return tc_error(ENOMEM, "image zero: out of memory");
  memset(zeros, 0, step);
  int r = 0;
  for (uint64_t pos = off; pos < off + len && r == 0; pos += step) {
    uint64_t n = off + len - pos < step ? off + len - pos : step;
    r = image_write_sectors(img, zeros, pos, n, 0);
  }
  free(zeros);
  return r;
}

static int
zero_body(struct tc_image *img, void *arg)
{
  struct io *a = arg;
  uint64_t off = a->off, len = a->len;
  uint64_t a0 = off / SECTOR * SECTOR, a1 = (off + len + SECTOR - 1) / SECTOR * SECTOR;
  /* The whole sectors inside the range, and the partial ends. */
  uint64_t w0 = (off + SECTOR - 1) / SECTOR * SECTOR, w1 = (off + len) / SECTOR * SECTOR;
  struct tc_sector_range held;
  tc_sector_lock(img->locks, &held, a0, a1);
  int r = 0;
  if (w0 >= w1)   /* inside one sector, or two partial ones */
    r = write_locked(img, NULL, len, off, 0);
  else {
    if (off < w0)
      r = write_locked(img, NULL, w0 - off, off, 0);
    if (r == 0)
      r = zero_sectors(img, w0, w1 - w0, a->may_trim);
    if (r == 0 && w1 < off + len)
      r = write_locked(img, NULL, off + len - w1, w1, 0);
  }
  int e = errno;
  tc_sector_unlock(img->locks, &held);
  errno = e;
  return r;
}

int
tc_image_zero(struct tc_image *img, uint64_t len, uint64_t off, bool may_trim)
{
  if (check_range(img, len, off, true) < 0)
    return -1;
  if (len == 0)
    return 0;
  struct io a = { .len = len, .off = off, .may_trim = may_trim };
  return run_io(img, zero_body, &a);
}

bool
tc_image_zero_fast(const struct tc_image *img, bool may_trim)
{
  struct tc_image *m = (struct tc_image *) img;
  pthread_rwlock_rdlock(&m->layers_lock);
  bool r = zero_fast(img, may_trim);
  pthread_rwlock_unlock(&m->layers_lock);
  return r;
}

int
tc_image_trim(struct tc_image *img, uint64_t len, uint64_t off)
{
  return tc_image_zero(img, len, off, true);
}

/* Which sectors of the window [a->pos, a->pos + a->len) some layer holds. */
static int
extents_body(struct tc_image *img, void *arg)
{
  struct io *a = arg;
  uint64_t pos = a->pos, n = a->len;
  size_t bmstride = img->block_size / SECTOR / 8 + 1;
  int r = 0;
  memset(a->alloc, 0, n / SECTOR);
  for (int l = 0; l < img->nlayers && r == 0; l++) {
    if (img->layers[l].integ) {
      r = tc_integrity_present(img->layers[l].integ, &img->os, img->block_size, pos, n, a->alloc);
      continue;
    }
    int k = make_chunks(img, a->ops, TC_OBJ_BITMAP, img->layers[l].inode, pos, n, NULL, a->bitmaps, bmstride);
    memset(a->bitmaps, 0, (size_t) k * bmstride);
    r = image_run_ops(img, a->ops, k, "extents");
    for (int i = 0; i < k && r == 0; i++)
      for (uint64_t s = 0; s < a->ops[i].len / SECTOR; s++)
        if (bit(a->ops[i].bitmap, s))
          a->alloc[(a->ops[i].offset - pos) / SECTOR + s] = 1;
  }
  return r;
}

int
tc_image_extents(struct tc_image *img, uint64_t len, uint64_t off, tc_extent_cb cb, void *opaque)
{
  if (check_range(img, len, off, false) < 0)
    return -1;
  uint64_t a0 = off / SECTOR * SECTOR, a1 = (off + len + SECTOR - 1) / SECTOR * SECTOR;
  const uint64_t window = 64ULL << 20;   /* bound the memory of one pass */
  size_t bmstride = img->block_size / SECTOR / 8 + 1;
  int nmax = count_chunks(img, 0, window) + 1;
  struct tc_objop *ops = calloc(nmax, sizeof *ops);
  uint8_t *bitmaps = calloc(nmax, bmstride);
  uint8_t *alloc = malloc(window / SECTOR);
  int r = 0;
  if (!ops || !bitmaps || !alloc) {
    r = tc_error(ENOMEM, "image extents: out of memory");
    goto out;
  }
  uint64_t run_start = a0;
  int run_alloc = -1;
  for (uint64_t pos = a0; pos < a1 && r == 0; pos += window) {
    uint64_t n = a1 - pos < window ? a1 - pos : window;
    struct io a = { .pos = pos, .len = n, .alloc = alloc, .ops = ops, .bitmaps = bitmaps };
    r = run_io(img, extents_body, &a);
    for (uint64_t s = 0; s < n / SECTOR && r == 0; s++) {
      if (run_alloc == alloc[s])
        continue;
      uint64_t at = pos + s * SECTOR;
      if (run_alloc >= 0)
        r = cb(opaque, run_start, at - run_start, run_alloc);
      run_start = at;
      run_alloc = alloc[s];
    }
  }
  if (r == 0 && run_alloc >= 0)
    r = cb(opaque, run_start, a1 - run_start, run_alloc);
out:
  free(ops);
  free(bitmaps);
  free(alloc);
  return r;
}
