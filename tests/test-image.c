/* The image layer over an in-memory object store: byte-exact reads and
 * writes against a plain-buffer model (aligned, unaligned, sub-sector), XTS
 * ciphertext at rest, layers, trim/zero, extents, concurrent overlapping
 * writers. The same layer over the real cluster is tested by the client's
 * integration tests. */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "crypto.h"
#include "error.h"
#include "image.h"
#include "memstore.h"
#include "tap.h"
#include "testlib.h"

#define MiB (1ULL << 20)
#define BS (128 * 1024)

static uint64_t rng = 88172645463325252ULL;   /* tl_xorshift state */

static struct tc_layer_desc
layer(uint64_t inode, int keyseed)
{
  struct tc_layer_desc d = { .inode = inode, .encrypted = keyseed != 0 };
  for (int i = 0; i < TC_XTS_KEY_SIZE; i++)
    d.key[i] = (uint8_t) (keyseed * 31 + i * 7);
  return d;
}

/* Random writes and reads against a model buffer. */
static void
random_io(struct tc_image *img, uint8_t *model, uint64_t size, int rounds, const char *what)
{
  uint8_t *buf = malloc(2 * MiB), *got = malloc(2 * MiB);
  int bad = 0;
  for (int i = 0; i < rounds && !bad; i++) {
    uint64_t len, off;
    switch (i % 4) {
    case 0: len = (tl_xorshift(&rng) % 64 + 1) * 4096; off = tl_xorshift(&rng) % (size / 4096 - 64) * 4096; break;  /* aligned */
    case 1: len = tl_xorshift(&rng) % 4096 + 1; off = tl_xorshift(&rng) % (size - 4096); break;                      /* sub-sector */
    case 2: len = tl_xorshift(&rng) % (2 * MiB - 1) + 1; off = tl_xorshift(&rng) % (size - len); break;             /* unaligned */
    default: len = tl_xorshift(&rng) % 300 + 1; off = (tl_xorshift(&rng) % (size / 4096 - 1) + 1) * 4096 - len / 2; break; /* straddle */
    }
    tl_fill_random(&rng, buf, len);
    if (tc_image_write(img, buf, len, off) < 0) {
      CHECK(0, "%s: write %llu+%llu: %s", what, (unsigned long long) off, (unsigned long long) len, tc_last_error());
      bad = 1;
      break;
    }
    memcpy(model + off, buf, len);
    uint64_t roff = tl_xorshift(&rng) % size, rlen = tl_xorshift(&rng) % (2 * MiB);
    if (rlen > size - roff)
      rlen = size - roff;
    if (tc_image_read(img, got, rlen, roff) < 0 || memcmp(got, model + roff, rlen) != 0) {
      CHECK(0, "%s: read %llu+%llu differs from the model (round %d)", what, (unsigned long long) roff,
            (unsigned long long) rlen, i);
      bad = 1;
    }
  }
  CHECK(!bad, "%s: %d random writes and reads", what, rounds);
  free(buf);
  free(got);
}

static void
check_whole(struct tc_image *img, const uint8_t *model, uint64_t size, const char *what)
{
  uint8_t *got = malloc(size);
  CHECK(tc_image_read(img, got, size, 0) == 0 && memcmp(got, model, size) == 0, "%s: whole image equals model", what);
  free(got);
}

struct extent_list { uint64_t off[64], len[64]; bool alloc[64]; int n; };
static int
collect_extent(void *opaque, uint64_t off, uint64_t len, bool allocated)
{
  struct extent_list *e = opaque;
  if (e->n < 64) {
    e->off[e->n] = off;
    e->len[e->n] = len;
    e->alloc[e->n] = allocated;
    e->n++;
  }
  return 0;
}

/* --- concurrent writers --- */
struct writer {
  struct tc_image *img;
  int id;
  uint64_t off, len;
  int rounds;
  pthread_barrier_t *barrier;
};

static void *
writer_thread(void *arg)
{
  struct writer *w = arg;
  uint8_t *buf = malloc(w->len);
  memset(buf, 0x10 + w->id, w->len);
  for (int r = 0; r < w->rounds; r++) {
    pthread_barrier_wait(w->barrier);
    if (tc_image_write(w->img, buf, w->len, w->off) < 0)
      fprintf(stderr, "writer %d: %s\n", w->id, tc_last_error());
    pthread_barrier_wait(w->barrier);
    pthread_barrier_wait(w->barrier);   /* main checks between rounds */
  }
  free(buf);
  return NULL;
}

/* 8 writers (writer i through imgs[i]) of overlapping unaligned ranges
 * inside three sectors, `rounds` rounds. Before each round the sectors are
 * reset to 0xEE; after it, every byte some writer covered must hold the
 * value of a writer that covers it (a lost read-modify-write update leaves
 * 0xEE or a foreign value), and bytes nobody covered stay 0xEE. Returns the
 * number of rounds that lost an update. */
static int
concurrent_writers(struct tc_image **imgs, int rounds)
{
  uint8_t *around = malloc(3 * 4096);
  memset(around, 0xEE, 3 * 4096);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 9);
  struct writer ws[8];
  pthread_t th[8];
  const uint64_t wbase = 100 * 4096;
  for (int i = 0; i < 8; i++) {
    ws[i] = (struct writer) { imgs[i], i, wbase + 500 + i * 1301, 1500 + i * 150, rounds, &bar };
    pthread_create(&th[i], NULL, writer_thread, &ws[i]);
  }
  int torn = 0;
  uint8_t *got = malloc(3 * 4096);
  for (int r = 0; r < rounds; r++) {
    torn += tc_image_write(imgs[0], around, 3 * 4096, wbase) < 0;
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    if (tc_image_read(imgs[0], got, 3 * 4096, wbase) < 0)
      torn++;
    else
      for (uint64_t i = 0; i < 3 * 4096; i++) {
        bool covered = false, ok = false;
        for (int w = 0; w < 8; w++)
          if (wbase + i >= ws[w].off && wbase + i < ws[w].off + ws[w].len) {
            covered = true;
            ok |= got[i] == 0x10 + w;
          }
        if (covered ? !ok : got[i] != 0xEE) {
          torn++;
          break;
        }
      }
    pthread_barrier_wait(&bar);
  }
  for (int i = 0; i < 8; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&bar);
  free(around);
  free(got);
  return torn;
}

/* The memstore seen through another context, as a second process sees the
 * cluster: the image layer shares no sector lock with the first. */
struct other_ctx { struct memstore *ms; };
static int
other_submit(void *ctx, struct tc_objop *op)
{
  struct tc_objstore os = memstore_objstore(((struct other_ctx *) ctx)->ms);
  return os.submit(os.ctx, op);
}

/* 5. The layer switch: writers keep going while the chain is swapped for
 * one with a new top above the old; nothing is lost, nothing reaches the
 * old top after the swap, the stale mark runs the switch hook first. */
struct switcher {
  struct tc_image *img;
  uint8_t *model;            /* this thread's region only */
  uint64_t off, len;
  volatile int *stop;
  int bad;
};

static void *
switch_writer(void *arg)
{
  struct switcher *w = arg;
  uint8_t buf[9000];
  unsigned seed = (unsigned) w->off;
  while (!*w->stop && !w->bad) {
    uint64_t len = (uint64_t) rand_r(&seed) % sizeof buf + 1;
    uint64_t at = (uint64_t) rand_r(&seed) % (w->len - len);
    for (uint64_t i = 0; i < len; i++)
      buf[i] = (uint8_t) rand_r(&seed);
    if (tc_image_write(w->img, buf, len, w->off + at) < 0) {
      fprintf(stderr, "switch writer: %s\n", tc_last_error());
      w->bad = 1;
    }
    memcpy(w->model + at, buf, len);
  }
  return NULL;
}

static int hook_calls;
static int
count_hook(void *arg, struct tc_image *img)
{
  (void) arg;
  (void) img;
  hook_calls++;
  return 0;
}

static void
test_switch(void)
{
  struct memstore *ms = memstore_new();
  struct tc_objstore os = memstore_objstore(ms);
  const uint64_t size = 4 * MiB, region = MiB;
  struct tc_layer_desc top = layer(40, 7), chain[2] = { layer(41, 8), layer(40, 7) };
  struct tc_image *img = tc_image_new(&os, BS, size, &top, 1, false);
  uint8_t *model = malloc(size), *old = malloc(size), *got = malloc(size);
  tl_fill_random(&rng, model, size);
  CHECK(img && tc_image_write(img, model, size, 0) == 0, "switch: image written");
  volatile int stop = 0;
  struct switcher w[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (struct switcher) { img, model + i * region, i * region, region, &stop, 0 };
    pthread_create(&t[i], NULL, switch_writer, &w[i]);
  }
  usleep(100000);
  CHECK(tc_image_replace_layers(img, 99, chain, 2) == 0, "switch: a stale expected top changes nothing");
  CHECK(tc_image_replace_layers(img, 40, chain, 2) == 1, "switch: swapped under 4 writers");
  for (uint64_t s = 0; s < size / 4096; s++) {   /* the old top as it is now */
    const uint8_t *p = memstore_sector(ms, 40, s);
    if (p)
      memcpy(old + s * 4096, p, 4096);
    else
      memset(old + s * 4096, 0, 4096);
  }
  usleep(200000);
  stop = 1;
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    bad |= w[i].bad;
  }
  CHECK(!bad, "switch: no write failed");
  CHECK(tc_image_read(img, got, size, 0) == 0 && memcmp(got, model, size) == 0, "switch: every write is there");
  int same = 1;
  for (uint64_t s = 0; s < size / 4096 && same; s++) {
    const uint8_t *p = memstore_sector(ms, 40, s);
    same = p ? memcmp(p, old + s * 4096, 4096) == 0 : !memcmp(old + s * 4096, (uint8_t[4096]) { 0 }, 4096);
  }
  CHECK(same, "switch: no write reached the old top after the swap");
  int in_new = 0;
  for (uint64_t s = 0; s < size / 4096; s++)
    in_new += memstore_sector(ms, 41, s) != NULL;
  CHECK(in_new > 0, "switch: the writes after the swap went to the new top (%d sectors)", in_new);
  uint64_t inodes[4];
  CHECK(tc_image_layer_inodes(img, inodes, 4) == 2 && inodes[0] == 41 && inodes[1] == 40, "switch: chain 41, 40");
  tc_image_set_switch_hook(img, count_hook, NULL);
  tc_image_mark_stale(img);
  CHECK(tc_image_read(img, got, 4096, 0) == 0 && hook_calls == 1, "switch: a stale chain is reloaded first");
  CHECK(tc_image_read(img, got, 4096, 0) == 0 && hook_calls == 1, "switch: once");
  tc_image_free(img);
  memstore_free(ms);
  free(model);
  free(old);
  free(got);
}

/* tc_image_write_flags(TC_IMAGE_FUA): every object write of the call
 * carries TC_OBJ_FUA (aligned, unaligned, across objects; plain: WRITE and
 * WRITE_PARTIAL; encrypted: WRITE_IF; authenticated: the tag sectors too),
 * a plain tc_image_write none; the bytes are right either way. */
static void
test_fua(void)
{
  const uint64_t size = 4 * MiB;
  struct memstore *ms = memstore_new();
  struct tc_objstore os = memstore_objstore(ms);
  struct tc_layer_desc kinds[3] = { layer(60, 0), layer(61, 9), layer(62, 10) };
  kinds[2].integrity = true;
  kinds[2].name = "integ";
  const char *what[3] = { "plain", "encrypted", "authenticated" };
  uint8_t *buf = malloc(MiB), *got = malloc(MiB);
  CHECK(ms && buf && got, "memory");
  if (!ms || !buf || !got)
    goto out;
  for (int k = 0; k < 3; k++) {
    struct tc_image *img = tc_image_new(&os, BS, size, &kinds[k], 1, false);
    CHECK(img != NULL, "%s: open: %s", what[k], tc_last_error());
    if (!img)
      continue;
    static const struct { uint64_t off, len; } w[] = { { 0, 4096 }, { BS - 4096, 8192 }, { 12345, 100 },
                                                       { 4095, 2 }, { 3 * BS + 7, 300000 } };
    unsigned long plain0 = memstore_writes(ms, false), fua0 = memstore_writes(ms, true);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
      for (uint64_t j = 0; j < w[i].len; j++)
        buf[j] = (uint8_t) (tl_xorshift(&rng) >> 24);
      CHECK(tc_image_write_flags(img, buf, w[i].len, w[i].off, TC_IMAGE_FUA) == 0 &&
            tc_image_read(img, got, w[i].len, w[i].off) == 0 && memcmp(buf, got, w[i].len) == 0,
            "%s: FUA write %zu reads back: %s", what[k], i, tc_last_error());
    }
    unsigned long fua = memstore_writes(ms, true) - fua0, plain = memstore_writes(ms, false) - plain0;
    CHECK(fua > 0 && plain == 0, "%s: every object write of a FUA write carries FUA (%lu with, %lu without)", what[k],
          fua, plain);
    fua0 = memstore_writes(ms, true);
    plain0 = memstore_writes(ms, false);
    CHECK(tc_image_write(img, buf, 5000, 9000) == 0, "%s: plain write", what[k]);
    CHECK(memstore_writes(ms, true) == fua0 && memstore_writes(ms, false) > plain0, "%s: a plain write carries no FUA",
          what[k]);
    tc_image_free(img);
  }
  CHECK(memstore_ops(ms, TC_OBJ_WRITE_PARTIAL) > 0 && memstore_ops(ms, TC_OBJ_WRITE_IF) > 0,
        "FUA reached WRITE_PARTIAL and WRITE_IF");
out:
  memstore_free(ms);
  free(buf);
  free(got);
}

int
main(void)
{
  CHECK(tc_crypto_init() == 0, "crypto init");
  const uint64_t size = 8 * MiB;
  uint8_t *model = calloc(1, size);

  /* 1. plain image */
  struct memstore *ms = memstore_new();
  struct tc_objstore os = memstore_objstore(ms);
  struct tc_layer_desc plain = layer(1, 0);
  struct tc_image *img = tc_image_new(&os, BS, size, &plain, 1, false);
  CHECK(img != NULL, "open plain image: %s", tc_last_error());
  random_io(img, model, size, 400, "plain");
  check_whole(img, model, size, "plain");
  CHECK(tc_image_flush(img) == 0 && memstore_ops(ms, TC_OBJ_SYNC) == 1, "flush sends one SYNC");
  uint8_t b[8192];
  CHECK(tc_image_read(img, b, 4096, size - 2048) < 0 && errno == EINVAL, "read past the end refused");
  CHECK(tc_image_write(img, b, 1, size) < 0 && errno == ENOSPC, "write past the end refused");
  /* trim: whole sectors deallocated, partial ones zeroed */
  CHECK(tc_image_trim(img, 3 * 4096 + 100, 4096 - 50) == 0, "trim: %s", tc_last_error());
  memset(model + 4096 - 50, 0, 3 * 4096 + 100);
  check_whole(img, model, size, "after trim");
  CHECK(memstore_sector(ms, 1, 1) == NULL && memstore_sector(ms, 1, 3) == NULL &&
        memstore_sector(ms, 1, 0) != NULL, "trim deallocated whole sectors only");
  tc_image_free(img);
  memstore_free(ms);

  /* 2. encrypted image: ciphertext at rest is AES-256-XTS with the sector tweak */
  ms = memstore_new();
  os = memstore_objstore(ms);
  memset(model, 0, size);
  struct tc_layer_desc enc = layer(2, 5);
  img = tc_image_new(&os, BS, size, &enc, 1, false);
  CHECK(img != NULL, "open encrypted image");
  random_io(img, model, size, 400, "encrypted");
  check_whole(img, model, size, "encrypted");
  static const char marker[] = "TROMCHO-SECRET-MARKER-0123456789-TROMCHO-SECRET-MARKER-abcdefgh";
  CHECK(tc_image_write(img, marker, 64, 5 * MiB + 1000) == 0, "write marker");
  memcpy(model + 5 * MiB + 1000, marker, 64);
  CHECK(!memstore_contains(ms, marker, 16), "marker absent from the store");
  struct tc_xts *x;
  CHECK(tc_xts_new(&x, enc.key) == 0, "xts");
  uint64_t sec = (5 * MiB + 1000) / 4096;
  const uint8_t *ct = memstore_sector(ms, 2, sec);
  uint8_t pt[4096];
  CHECK(ct && tc_xts_decrypt(x, sec, ct, pt, 4096) == 0 && memcmp(pt, model + sec * 4096, 4096) == 0,
        "stored sector decrypts with key and tweak = sector index");
  tc_xts_free(x);

  /* 3. layers: an encrypted clone (inode 3) of the encrypted image, and an
   * unencrypted base with an encrypted clone */
  uint8_t *child = malloc(size);
  memcpy(child, model, size);
  struct tc_layer_desc chain[2] = { layer(3, 9), enc };
  struct tc_image *clone = tc_image_new(&os, BS, size, chain, 2, false);
  CHECK(clone != NULL, "open clone");
  check_whole(clone, child, size, "clone before writes shows the parent");
  random_io(clone, child, size, 200, "clone");
  check_whole(clone, child, size, "clone");
  check_whole(img, model, size, "parent untouched by clone writes");
  CHECK(tc_image_zero(clone, MiB, MiB, true) == 0, "zero a range of the clone");
  memset(child + MiB, 0, MiB);
  check_whole(clone, child, size, "zeroed clone range reads zeros, not the parent");
  struct extent_list el = { .n = 0 };
  CHECK(tc_image_extents(clone, size, 0, collect_extent, &el) == 0, "extents of clone");
  {
    uint64_t pos = 0;
    bool contiguous = true, zeroed_alloc = false;
    for (int i = 0; i < el.n; i++) {
      contiguous &= el.off[i] == pos && (i == 0 || el.alloc[i] != el.alloc[i - 1]);
      if (el.off[i] <= MiB && MiB < el.off[i] + el.len[i])
        zeroed_alloc = el.alloc[i];
      pos += el.len[i];
    }
    CHECK(el.n < 64 && contiguous && pos == size, "clone extents tile the image (%d runs)", el.n);
    CHECK(zeroed_alloc, "a zeroed clone range is allocated (it hides the parent)");
  }
  tc_image_free(clone);
  tc_image_free(img);

  uint8_t *base = calloc(1, size);
  struct tc_layer_desc b0 = layer(10, 0);
  struct tc_image *bimg = tc_image_new(&os, BS, size, &b0, 1, false);
  tl_fill_random(&rng, base, 2 * MiB);
  CHECK(tc_image_write(bimg, base, 2 * MiB, 0) == 0, "write base");
  struct tc_layer_desc chain2[2] = { layer(11, 7), b0 };
  struct tc_image *eclone = tc_image_new(&os, BS, size, chain2, 2, false);
  memcpy(child, base, size);
  check_whole(eclone, child, size, "encrypted clone of a plain base");
  CHECK(tc_image_write(eclone, "abc", 3, 4095) == 0, "sub-sector write across sectors in clone");
  memcpy(child + 4095, "abc", 3);
  check_whole(eclone, child, size, "clone RMW merges parent data");
  CHECK(memstore_sector(ms, 11, 0) && memcmp(memstore_sector(ms, 11, 0), base, 4096) != 0,
        "clone sectors are encrypted at rest");
  el.n = 0;
  CHECK(tc_image_extents(bimg, size, 0, collect_extent, &el) == 0 && el.n == 2 && el.alloc[0] &&
        el.len[0] == 2 * MiB && !el.alloc[1] && el.len[1] == size - 2 * MiB, "base extents: data then hole (%d)", el.n);
  tc_image_free(eclone);
  tc_image_free(bimg);

  /* read-only and bad keys */
  struct tc_layer_desc bad = layer(12, 1);
  memcpy(bad.key + 32, bad.key, 32);
  CHECK(tc_image_new(&os, BS, size, &bad, 1, false) == NULL && errno == EINVAL, "equal-halves key refused");
  struct tc_image *ro = tc_image_new(&os, BS, size, &b0, 1, true);
  CHECK(tc_image_write(ro, "x", 1, 0) < 0 && errno == EROFS, "read-only image refuses writes");
  CHECK(tc_image_zero(ro, 4096, 0, true) < 0 && errno == EROFS, "read-only image refuses zero");
  tc_image_free(ro);

  /* 4. 8 concurrent writers of overlapping unaligned ranges inside three
   * sectors through one handle, then through a handle each (as nbdkit opens
   * one per connection: the sector locks are shared per image), then through
   * handles over two object-store contexts (as two processes: the store must
   * serialise partial sectors itself). */
  memstore_set_delay(ms, 200);
  struct tc_layer_desc cl = layer(20, 3);
  struct tc_image *cimg = tc_image_new(&os, BS, size, &cl, 1, false);
  struct tc_image *one[8], *each[8];
  for (int i = 0; i < 8; i++) {
    one[i] = cimg;
    each[i] = tc_image_new(&os, BS, size, &cl, 1, false);
  }
  CHECK(concurrent_writers(one, 30) == 0, "8 concurrent writers on one handle: no update lost");
  CHECK(concurrent_writers(each, 30) == 0, "8 concurrent writers on a handle each: no update lost");
  for (int i = 0; i < 8; i++)
    tc_image_free(each[i]);
  /* Handles over a second context of the same store: no shared lock. */
  struct other_ctx oc = { ms };
  struct tc_objstore os2 = { other_submit, &oc };
  struct tc_layer_desc pl = layer(21, 0), layered[2] = { layer(23, 5), layer(22, 0) };
  struct { const char *what; struct tc_layer_desc *d; int n; } kinds[] = {
    { "encrypted", &cl, 1 }, { "plain", &pl, 1 }, { "layered", layered, 2 },
  };
  for (int k = 0; k < 3; k++) {
    unsigned long before = memstore_ops(ms, TC_OBJ_WRITE_PARTIAL) + memstore_ops(ms, TC_OBJ_WRITE_IF);
    for (int i = 0; i < 8; i++)
      each[i] = tc_image_new(i % 2 ? &os2 : &os, BS, size, kinds[k].d, kinds[k].n, false);
    CHECK(concurrent_writers(each, 20) == 0, "%s: 8 concurrent writers as two processes: no update lost",
          kinds[k].what);
    unsigned long after = memstore_ops(ms, TC_OBJ_WRITE_PARTIAL) + memstore_ops(ms, TC_OBJ_WRITE_IF);
    CHECK(after > before, "%s: partial sectors went through the store's serialisation point", kinds[k].what);
    for (int i = 0; i < 8; i++)
      tc_image_free(each[i]);
  }
  CHECK(memstore_ops(ms, TC_OBJ_WRITE_PARTIAL) > 0 && memstore_ops(ms, TC_OBJ_WRITE_IF) > 0,
        "both WRITE_PARTIAL (plain) and WRITE_IF (encrypted, layered) were used");
  tc_image_free(cimg);

  memstore_free(ms);
  free(model);
  free(child);
  free(base);
  test_switch();
  test_fua();
  return DONE();
}
