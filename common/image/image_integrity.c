/* Authenticated images: interleaved tag sectors (see image_integrity.h). */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "image_integrity.h"
#include "log.h"

#define SECTOR TC_SECTOR
#define G TC_INTEG_GROUP
#define TAG 16
static const char DOMAIN[] = "tromcho-integrity-v1";

struct held {
  uint64_t g0, g1;             /* groups [g0, g1] */
  struct held *next;
};

/* Tag sectors this process wrote, direct-mapped by group: a write of a
 * cached group skips reading its tag sector (a round trip). Only writes
 * fill and use it, under the group lock: a reader's copy could be older
 * than a concurrent writer's (one writer process per image, see the header). */
#define CACHE_SLOTS 4096
struct cached {
  uint64_t g;                  /* UINT64_MAX: empty */
  uint8_t sector[SECTOR];
};

struct tc_integrity {
  struct tc_hmac *mac;
  pthread_mutex_t cache_lock;
  struct cached *cache;        /* CACHE_SLOTS entries */
  uint64_t inode;
  char name[256];
  pthread_mutex_t lock;        /* the held group ranges */
  pthread_cond_t released;
  struct held *held;
};

struct tc_integrity *
tc_integrity_new(const uint8_t key[TC_XTS_KEY_SIZE], uint64_t inode, const char *name)
{
  struct tc_integrity *t = calloc(1, sizeof *t);
  uint8_t prk[TC_SHA256_SIZE], k[TC_SHA256_SIZE];
  if (!t) {
    tc_error(ENOMEM, "image %s: out of memory", name);
    return NULL;
  }
  tc_hkdf_extract("tromcho-integrity", 17, key, TC_XTS_KEY_SIZE, prk);
  int r = tc_hkdf_expand(prk, "sector tags", 11, k, sizeof k);
  if (r == 0)
    r = tc_hmac_new(&t->mac, k, sizeof k);
  tc_wipe(prk, sizeof prk);
  tc_wipe(k, sizeof k);
  if (r < 0) {
    free(t);
    return NULL;
  }
  if (!(t->cache = malloc(CACHE_SLOTS * sizeof *t->cache))) {
    tc_hmac_free(t->mac);
    free(t);
    tc_error(ENOMEM, "image %s: out of memory", name);
    return NULL;
  }
  for (int i = 0; i < CACHE_SLOTS; i++)
    t->cache[i].g = UINT64_MAX;
  pthread_mutex_init(&t->cache_lock, NULL);
  t->inode = inode;
  snprintf(t->name, sizeof t->name, "%s", name);
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->released, NULL);
  return t;
}

void
tc_integrity_free(struct tc_integrity *t)
{
  if (!t)
    return;
  tc_hmac_free(t->mac);
  free(t->cache);
  pthread_mutex_destroy(&t->cache_lock);
  pthread_mutex_destroy(&t->lock);
  pthread_cond_destroy(&t->released);
  free(t);
}

/* Copy group g's tag sector from the cache into out: whether it was there. */
static bool
cache_get(struct tc_integrity *t, uint64_t g, uint8_t *out)
{
  struct cached *c = &t->cache[g % CACHE_SLOTS];
  pthread_mutex_lock(&t->cache_lock);
  bool hit = c->g == g;
  if (hit)
    memcpy(out, c->sector, SECTOR);
  pthread_mutex_unlock(&t->cache_lock);
  return hit;
}

static void
cache_put(struct tc_integrity *t, uint64_t g, const uint8_t *sector)
{
  struct cached *c = &t->cache[g % CACHE_SLOTS];
  pthread_mutex_lock(&t->cache_lock);
  c->g = g;
  memcpy(c->sector, sector, SECTOR);
  pthread_mutex_unlock(&t->cache_lock);
}

static void
cache_drop(struct tc_integrity *t, uint64_t g)
{
  struct cached *c = &t->cache[g % CACHE_SLOTS];
  pthread_mutex_lock(&t->cache_lock);
  if (c->g == g)
    c->g = UINT64_MAX;
  pthread_mutex_unlock(&t->cache_lock);
}

static uint64_t phys_sector(uint64_t u) { return u / G * (G + 1) + 1 + u % G; }
static uint64_t tag_sector(uint64_t g) { return g * (G + 1); }

uint64_t
tc_integrity_stored_size(uint64_t size)
{
  uint64_t n = (size + SECTOR - 1) / SECTOR;
  return n ? (phys_sector(n - 1) + 1) * SECTOR : 0;
}

static void
make_tag(const struct tc_integrity *t, uint64_t u, const uint8_t *ct, uint8_t out[TAG])
{
  uint8_t pre[sizeof DOMAIN - 1 + 16], full[TC_SHA256_SIZE];
  memcpy(pre, DOMAIN, sizeof DOMAIN - 1);
  for (int i = 0; i < 8; i++) {
    pre[sizeof DOMAIN - 1 + i] = (uint8_t) (t->inode >> (8 * i));
    pre[sizeof DOMAIN - 1 + 8 + i] = (uint8_t) (u >> (8 * i));
  }
  tc_hmac2(t->mac, pre, sizeof pre, ct, SECTOR, full);
  memcpy(out, full, TAG);
}

/* --- a batch of object operations, waited for --- */

struct batch {
  struct tc_objop *ops;
  uint8_t *bitmaps;
  size_t n, cap, bmstride;
  uint32_t bs;
};

static int
batch_init(struct batch *b, uint32_t bs, size_t cap)
{
  memset(b, 0, sizeof *b);
  b->bs = bs;
  b->cap = cap;
  b->bmstride = bs / SECTOR / 8 + 1;
  b->ops = calloc(cap, sizeof *b->ops);
  b->bitmaps = calloc(cap, b->bmstride);
  if (!b->ops || !b->bitmaps)
    return tc_error(ENOMEM, "image: out of memory");
  return 0;
}

static void
batch_free(struct batch *b)
{
  free(b->ops);
  free(b->bitmaps);
}

/* Add ops for inode sectors [p, p + n) (split at objects); buf advances. */
static int
batch_add(struct batch *b, enum tc_objop_code code, uint64_t inode, uint64_t p, uint64_t n, uint8_t *buf)
{
  uint64_t pos = p * SECTOR, end = (p + n) * SECTOR;
  while (pos < end) {
    uint64_t objend = (pos / b->bs + 1) * b->bs;
    uint64_t chunk = (objend < end ? objend : end) - pos;
    if (b->n == b->cap)
      return tc_error(EOVERFLOW, "image: integrity batch overflow");
    b->ops[b->n] = (struct tc_objop) { .code = code, .inode = inode, .offset = pos, .len = (uint32_t) chunk,
                                       .buf = buf ? buf + (pos - p * SECTOR) : NULL,
                                       .bitmap = b->bitmaps + b->n * b->bmstride };
    b->n++;
    pos += chunk;
  }
  return 0;
}

/* Run ops [from, n) (a zero-length one stands for a cached sector). */
static int
batch_run(struct batch *b, const struct tc_objstore *os, size_t from, const char *name, const char *what)
{
  int e = tc_objstore_run(os, b->ops + from, b->n - from, 0, NULL, NULL);
  if (e < 0)
    return tc_error(-e, "image %s: %s: %s", name, what, strerror(-e));
  return 0;
}

static bool
op_has(const struct tc_objop *op, uint64_t k)
{
  return op->bitmap[k / 8] >> (k % 8) & 1;
}

/* Whether inode sector p was present, from the ops [from, to) that read it. */
static bool
present(const struct batch *b, size_t from, size_t to, uint64_t p)
{
  for (size_t i = from; i < to; i++) {
    const struct tc_objop *op = &b->ops[i];
    uint64_t s0 = op->offset / SECTOR;
    if (p >= s0 && p < s0 + op->len / SECTOR)
      return op_has(op, p - s0);
  }
  return false;
}

/* --- group locks: writers of one group go one at a time --- */

static int
lock_groups(struct tc_integrity *t, uint64_t g0, uint64_t g1)
{
  struct held *h = malloc(sizeof *h);
  if (!h)
    return tc_error(ENOMEM, "image %s: out of memory", t->name);
  h->g0 = g0;
  h->g1 = g1;
  pthread_mutex_lock(&t->lock);
  for (;;) {
    bool busy = false;
    for (struct held *x = t->held; x && !busy; x = x->next)
      busy = x->g0 <= g1 && g0 <= x->g1;
    if (!busy)
      break;
    pthread_cond_wait(&t->released, &t->lock);
  }
  h->next = t->held;
  t->held = h;
  pthread_mutex_unlock(&t->lock);
  return 0;
}

static void
unlock_groups(struct tc_integrity *t, uint64_t g0, uint64_t g1)
{
  pthread_mutex_lock(&t->lock);
  for (struct held **p = &t->held; *p; p = &(*p)->next)
    if ((*p)->g0 == g0 && (*p)->g1 == g1) {
      struct held *h = *p;
      *p = h->next;
      free(h);
      break;
    }
  pthread_cond_broadcast(&t->released);
  pthread_mutex_unlock(&t->lock);
}

/* --- reads --- */

static const uint8_t zero[TC_INTEG_SLOT];
/* The previous tag of a sector whose first write is under way: until its
 * data lands, "no data" is its old state (never written), as the previous
 * tag is for a rewrite. Cleared to zero once the data is written. */
static const uint8_t absent[TAG] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

static int
fail_sector(struct tc_integrity *t, uint64_t u, const char *why)
{
  tc_err("image %s: sector %llu (byte offset %llu): %s", t->name, (unsigned long long) u,
         (unsigned long long) u * SECTOR, why);
  return tc_error(EIO, "image %s: sector %llu (byte offset %llu): %s", t->name, (unsigned long long) u,
                  (unsigned long long) u * SECTOR, why);
}

static int read_once(struct tc_integrity *t, const struct tc_objstore *os, uint32_t block_size, uint64_t off,
                     uint64_t len, uint8_t *buf, const uint8_t *need, uint8_t *have);

/* Under the group lock, so a write of this process is never seen half
 * done (its tag sector without its data); a failure is retried once, for a
 * write of another process seen half done. */
int
tc_integrity_read(struct tc_integrity *t, const struct tc_objstore *os, uint32_t block_size, uint64_t off,
                  uint64_t len, uint8_t *buf, const uint8_t *need, uint8_t *have)
{
  uint64_t g0 = off / SECTOR / G, g1 = (off + len - 1) / SECTOR / G;
  if (lock_groups(t, g0, g1) < 0)
    return -1;
  int r = read_once(t, os, block_size, off, len, buf, need, have);
  if (r < 0 && errno == EIO)
    r = read_once(t, os, block_size, off, len, buf, need, have);
  unlock_groups(t, g0, g1);
  return r;
}

static int
read_once(struct tc_integrity *t, const struct tc_objstore *os, uint32_t block_size, uint64_t off,
          uint64_t len, uint8_t *buf, const uint8_t *need, uint8_t *have)
{
  uint64_t u0 = off / SECTOR, nsec = len / SECTOR;
  uint64_t g0 = u0 / G, g1 = (u0 + nsec - 1) / G, ng = g1 - g0 + 1;
  uint8_t *tags = aligned_alloc(SECTOR, ng * SECTOR);
  size_t *tagop = calloc(2 * ng, sizeof *tagop), *dataend = tagop ? tagop + ng : NULL;
  struct batch b;
  int r = batch_init(&b, block_size, ng * (4 + (G + 1) * (uint64_t) SECTOR / block_size));
  if (r == 0 && (!tags || !tagop))
    r = tc_error(ENOMEM, "image %s: out of memory", t->name);
  memset(have, 0, nsec);
  for (uint64_t g = g0; g <= g1 && r == 0; g++) {
    /* The needed sectors of this group: [a, z] (image sectors). */
    uint64_t lo = g * G > u0 ? g * G : u0, hi = (g + 1) * G < u0 + nsec ? (g + 1) * G : u0 + nsec;
    uint64_t a = hi, z = lo;
    for (uint64_t u = lo; u < hi; u++)
      if (need[u - u0]) {
        if (a == hi)
          a = u;
        z = u;
      }
    tagop[g - g0] = SIZE_MAX;
    if (a == hi)
      continue;
    tagop[g - g0] = b.n;
    /* Always the stored tag sector, never the cache: another process may
     * have written the image since (a reader beside the one writer). */
    r = batch_add(&b, TC_OBJ_READ, t->inode, tag_sector(g), 1, tags + (g - g0) * SECTOR);
    if (r == 0)
      r = batch_add(&b, TC_OBJ_READ, t->inode, phys_sector(a), z - a + 1, buf + (a - u0) * SECTOR);
    dataend[g - g0] = b.n;
  }
  if (r == 0)
    r = batch_run(&b, os, 0, t->name, "read");
  for (uint64_t s = 0; s < nsec && r == 0; s++) {
    uint64_t u = u0 + s, g = u / G;
    if (!need[s] || tagop[g - g0] == SIZE_MAX)
      continue;
    size_t ti = tagop[g - g0];
    const uint8_t *slot = tags + (g - g0) * SECTOR + (u % G) * TC_INTEG_SLOT;
    bool tagged = op_has(&b.ops[ti], 0) && !tc_memeq_ct(slot, zero, TC_INTEG_SLOT);
    /* The data ops of group g follow its tag op. */
    bool data = present(&b, ti + 1, dataend[g - g0], phys_sector(u));
    if (!data && !tagged)
      continue;            /* never written in this layer */
    if (!data && tc_memeq_ct(slot + TAG, absent, TAG))
      continue;            /* its first write died before its data landed */
    if (!data)
      r = fail_sector(t, u, "missing from the OSDs although its tag says it was written");
    else if (!tagged)
      r = fail_sector(t, u, "has no tag (changed, swapped or moved on the OSDs?)");
    else {
      uint8_t tag[TAG];
      make_tag(t, u, buf + s * SECTOR, tag);
      if (!tc_memeq_ct(tag, slot, TAG) && !tc_memeq_ct(tag, slot + TAG, TAG))
        r = fail_sector(t, u, "fails its integrity check (changed, swapped or moved on the OSDs?)");
      else
        have[s] = 1;
      tc_wipe(tag, sizeof tag);
    }
  }
  batch_free(&b);
  free(tags);
  free(tagop);
  return r;
}

/* --- writes --- */

int
tc_integrity_write(struct tc_integrity *t, const struct tc_objstore *os, uint32_t block_size, uint64_t off,
                   uint64_t len, const uint8_t *ct)
{
  uint64_t u0 = off / SECTOR, nsec = len / SECTOR;
  uint64_t g0 = u0 / G, g1 = (u0 + nsec - 1) / G, ng = g1 - g0 + 1;
  uint8_t *tags = aligned_alloc(SECTOR, ng * SECTOR), *old = aligned_alloc(SECTOR, len);
  bool *hit = calloc(ng, sizeof *hit), *firsts = calloc(ng, sizeof *firsts);
  struct batch b;
  int r = batch_init(&b, block_size, 3 * ng + 2 * ng * (4 + (G + 1) * (uint64_t) SECTOR / block_size));
  if (r == 0 && (!tags || !old || !hit || !firsts))
    r = tc_error(ENOMEM, "image %s: out of memory", t->name);
  if (r < 0)
    goto out;
  if (lock_groups(t, g0, g1) < 0) {
    r = -1;
    goto out;
  }
  for (uint64_t g = g0; g <= g1 && r == 0; g++) {
    r = batch_add(&b, TC_OBJ_READ, t->inode, tag_sector(g), 1, tags + (g - g0) * SECTOR);
    if (r == 0 && (hit[g - g0] = cache_get(t, g, tags + (g - g0) * SECTOR))) {
      b.ops[b.n - 1].len = 0;
      b.ops[b.n - 1].bitmap[0] = 1;
    }
  }
  /* Groups this process has not written yet: the stored data too, since an
   * earlier writer may have died between its tag and its data writes (then
   * the data matches the previous tag, which must stay the previous one). */
  size_t nref = b.n;
  for (uint64_t g = g0; g <= g1 && r == 0; g++) {
    uint64_t lo = g * G > u0 ? g * G : u0, hi = (g + 1) * G < u0 + nsec ? (g + 1) * G : u0 + nsec;
    if (!hit[g - g0])
      r = batch_add(&b, TC_OBJ_READ, t->inode, phys_sector(lo), hi - lo, old + (lo - u0) * SECTOR);
  }
  if (r == 0)
    r = batch_run(&b, os, 0, t->name, "reading tags");
  for (uint64_t g = g0; g <= g1 && r == 0; g++)
    if (!op_has(&b.ops[g - g0], 0))
      memset(tags + (g - g0) * SECTOR, 0, SECTOR);
  for (uint64_t s = 0; s < nsec && r == 0; s++) {
    uint64_t u = u0 + s;
    uint8_t *slot = tags + (u / G - g0) * SECTOR + (u % G) * TC_INTEG_SLOT;
    if (!hit[u / G - g0] && present(&b, nref, b.n, phys_sector(u))) {
      uint8_t was[TAG];
      make_tag(t, u, old + s * SECTOR, was);
      if (!tc_memeq_ct(was, slot, TAG) && tc_memeq_ct(was, slot + TAG, TAG))
        memcpy(slot, slot + TAG, TAG);  /* the stored data is the previous version */
    }
    else if (!hit[u / G - g0] && tc_memeq_ct(slot + TAG, absent, TAG))
      memset(slot, 0, TC_INTEG_SLOT);   /* an earlier first write died before its data */
    memmove(slot + TAG, slot, TAG);     /* the current tag becomes the previous one */
    if (tc_memeq_ct(slot + TAG, zero, TAG)) {
      memcpy(slot + TAG, absent, TAG);  /* a first write: no data is the old state */
      firsts[u / G - g0] = true;
    }
    make_tag(t, u, ct + s * SECTOR, slot);
  }
  /* Tags first: until the data lands, the previous tag accepts the old data. */
  size_t first = b.n;
  for (uint64_t g = g0; g <= g1 && r == 0; g++)
    r = batch_add(&b, TC_OBJ_WRITE, t->inode, tag_sector(g), 1, tags + (g - g0) * SECTOR);
  if (r == 0)
    r = batch_run(&b, os, first, t->name, "writing tags");
  for (uint64_t g = g0; g <= g1; g++) {
    if (r == 0)
      cache_put(t, g, tags + (g - g0) * SECTOR);
    else
      cache_drop(t, g);    /* what is stored is unknown now */
  }
  first = b.n;
  for (uint64_t g = g0; g <= g1 && r == 0; g++) {
    uint64_t lo = g * G > u0 ? g * G : u0, hi = (g + 1) * G < u0 + nsec ? (g + 1) * G : u0 + nsec;
    r = batch_add(&b, TC_OBJ_WRITE, t->inode, phys_sector(lo), hi - lo, (uint8_t *) ct + (lo - u0) * SECTOR);
  }
  if (r == 0)
    r = batch_run(&b, os, first, t->name, "write");
  if (r < 0)
    for (uint64_t g = g0; g <= g1; g++)
      cache_drop(t, g);    /* the data may not match the cached tags */
  /* The data of first writes landed: "no data" no longer passes for them.
   * If this fails the tags still verify the data (the write stands), and a
   * deletion of it goes unnoticed only until the sector's next write. */
  first = b.n;
  for (uint64_t g = g0; g <= g1 && r == 0; g++) {
    if (!firsts[g - g0])
      continue;
    uint8_t *ts = tags + (g - g0) * SECTOR;
    for (uint64_t k = 0; k < G; k++)
      if (tc_memeq_ct(ts + k * TC_INTEG_SLOT + TAG, absent, TAG))
        memset(ts + k * TC_INTEG_SLOT + TAG, 0, TAG);
    if (batch_add(&b, TC_OBJ_WRITE, t->inode, tag_sector(g), 1, ts) < 0)
      firsts[g - g0] = false;
  }
  if (r == 0 && b.n > first) {
    bool ok = batch_run(&b, os, first, t->name, "writing tags") == 0;
    for (uint64_t g = g0; g <= g1; g++) {
      if (!firsts[g - g0])
        continue;
      if (ok)
        cache_put(t, g, tags + (g - g0) * SECTOR);
      else
        cache_drop(t, g);
    }
    if (!ok)
      tc_warn("image %s: clearing the first-write marks of its tags: %s", t->name, tc_last_error());
  }
  unlock_groups(t, g0, g1);
out:
  batch_free(&b);
  free(tags);
  free(old);
  free(hit);
  free(firsts);
  return r;
}

int
tc_integrity_present(struct tc_integrity *t, const struct tc_objstore *os, uint32_t block_size, uint64_t off,
                     uint64_t len, uint8_t *alloc)
{
  uint64_t u0 = off / SECTOR, nsec = len / SECTOR;
  uint64_t g0 = u0 / G, g1 = (u0 + nsec - 1) / G, ng = g1 - g0 + 1;
  struct batch b;
  int r = batch_init(&b, block_size, ng * (4 + (G + 1) * (uint64_t) SECTOR / block_size));
  for (uint64_t g = g0; g <= g1 && r == 0; g++) {
    uint64_t lo = g * G > u0 ? g * G : u0, hi = (g + 1) * G < u0 + nsec ? (g + 1) * G : u0 + nsec;
    r = batch_add(&b, TC_OBJ_BITMAP, t->inode, phys_sector(lo), hi - lo, NULL);
  }
  if (r == 0)
    r = batch_run(&b, os, 0, t->name, "extents");
  for (uint64_t s = 0; s < nsec && r == 0; s++)
    if (present(&b, 0, b.n, phys_sector(u0 + s)))
      alloc[s] = 1;
  batch_free(&b);
  return r;
}
