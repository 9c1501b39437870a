/* client-tool: the client API driven from the shell tests (a helper, not a
 * test itself). Config from TROMCHO_CONFIG / --config like every tool.
 *
 *   client-tool rawread IMAGE OFFSET LEN   the stored bytes of IMAGE's own
 *                                          inode (ciphertext if encrypted)
 *   client-tool rawwrite IMAGE OFFSET      stdin (a multiple of 4096 bytes) into
 *                                          IMAGE's own inode as stored, bypassing
 *                                          the image layer (an attacker's write)
 *   client-tool rawdelete IMAGE OFFSET LEN delete that stored range
 *   client-tool threads IMAGE [ROUNDS]     8 threads write overlapping unaligned
 *                                          ranges at once (a reader watches); every
 *                                          sector must be one writers' version
 *   client-tool objects POOL ID            count the objects of inode POOL/ID
 *                                          on the OSDs (SEC_LIST)
 *   client-tool usage INODE                bytes the OSDs hold of INODE (SEC_LIST)
 *   client-tool snapwatch IMAGE            open IMAGE read-write, snapshot it with
 *                                          `tromcho snap-create IMAGE@live` from
 *                                          outside: the handle's writes go on, into
 *                                          the image's new top, never the snapshot
 *   client-tool api IMAGE                  open/stat/list/resize/trim/zero/
 *                                          extents/read-only checks (TAP)
 *   client-tool keyloop IMAGE              one client, commands on stdin: "open"
 *                                          (re)opens IMAGE (its key resolved again),
 *                                          "read" reads the open handle; each prints
 *                                          "ok <first 16 bytes in hex>" or "err <msg>"
 * Exit 0 on success, 1 with "FAIL: ..." otherwise. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "client.h"
#include "cluster.h"
#include "crypto.h"
#include "error.h"
#include "image.h"
#include "image_admin.h"
#include "log.h"
#include "tap.h"
#include "testlib.h"

#define NTHREADS 8

static uint64_t rng = 0x9E3779B97F4A7C15ULL;   /* tl_xorshift state */

static int
die(const char *what)
{
  fprintf(stderr, "FAIL: %s: %s\n", what, tc_last_error());
  return 1;
}

static void
usage_cb(void *opaque, uint64_t inode, uint64_t bytes)
{
  (void) inode;
  *(uint64_t *) opaque += bytes;
}

static int
cmd_rawread(struct tc_client *cl, const char *name, uint64_t off, uint32_t len)
{
  struct tc_image_meta m;
  if (tc_client_stat(cl, name, &m, NULL) < 0)
    return die("stat");
  uint8_t *buf = aligned_alloc(4096, len), bm[64] = { 0 };
  struct tc_objop op = { .code = TC_OBJ_READ, .inode = TC_INODE(m.pool, m.id), .offset = off, .len = len,
                         .buf = buf, .bitmap = bm };
  tc_image_meta_clear(&m);
  if (!buf || tc_cluster_run(tc_client_cluster(cl), &op) < 0) {
    free(buf);
    return die("raw read");
  }
  int r = fwrite(buf, 1, len, stdout) == len ? 0 : 1;
  free(buf);
  return r;
}

/* Write stdin, or delete, at a stored offset of IMAGE's own inode. */
static int
cmd_rawwrite(struct tc_client *cl, const char *name, uint64_t off, int64_t dellen)
{
  struct tc_image_meta m;
  if (tc_client_stat(cl, name, &m, NULL) < 0)
    return die("stat");
  uint64_t inode = TC_INODE(m.pool, m.id);
  uint32_t bs;
  tc_image_meta_clear(&m);
  if (tc_client_block_size(cl, TC_INODE_POOL(inode), &bs) < 0)
    return die("block size");
  static uint8_t buf[1 << 20];
  size_t n = dellen >= 0 ? (size_t) dellen : fread(buf, 1, sizeof buf, stdin);
  if (n == 0 || n % 4096)
    return fprintf(stderr, "FAIL: length %zu is not a positive multiple of 4096\n", n), 1;
  for (size_t done = 0; done < n;) {
    uint64_t pos = off + done, objend = (pos / bs + 1) * bs;
    uint32_t chunk = (uint32_t) ((objend - pos) < n - done ? objend - pos : n - done);
    struct tc_objop op = { .code = dellen >= 0 ? TC_OBJ_DELETE : TC_OBJ_WRITE, .inode = inode, .offset = pos,
                           .len = chunk, .buf = dellen >= 0 ? NULL : buf + done };
    if (tc_cluster_run(tc_client_cluster(cl), &op) < 0)
      return die("raw write");
    done += chunk;
  }
  return 0;
}

/* --- concurrent writers ---
 * Each round, 8 threads write their own unaligned range (fill byte 0xA0+id)
 * inside one 64 KiB window at once, so ranges overlap and share partial
 * sectors; a reader reads the window meanwhile. A sector write is atomic,
 * so at any time every byte is 0 or the fill of a writer covering it, and
 * bytes of one sector covered by the same writers agree (no torn sector);
 * after the round a byte only one writer covered holds that writer's fill
 * (no update lost to a stale read-modify-write). */

#define WINDOW (64 * 1024)

struct shared {
  struct tc_image *img;
  pthread_barrier_t start, done;
  uint64_t base;                 /* the window */
  uint64_t off[NTHREADS], len[NTHREADS];
  int rounds;
  volatile int stop, round_no;
  int failed;
  char why[256];
};

struct writer {
  struct shared *s;
  int id;
};

static void
fail_shared(struct shared *s, const char *why)
{
  if (!__atomic_exchange_n(&s->failed, 1, __ATOMIC_ACQ_REL))
    snprintf(s->why, sizeof s->why, "%s", why);
}

static void *
writer_main(void *arg)
{
  struct writer *w = arg;
  struct shared *s = w->s;
  uint8_t *buf = malloc(WINDOW);
  for (int r = 0; r < s->rounds; r++) {
    pthread_barrier_wait(&s->start);
    if (!s->stop) {
      memset(buf, 0xA0 + w->id, s->len[w->id]);
      if (tc_image_write(s->img, buf, s->len[w->id], s->base + s->off[w->id]) < 0)
        fail_shared(s, tc_last_error());
    }
    pthread_barrier_wait(&s->done);
  }
  free(buf);
  return NULL;
}

static unsigned
cover(const struct shared *s, uint64_t i)
{
  unsigned m = 0;
  for (int w = 0; w < NTHREADS; w++)
    if (i >= s->off[w] && i < s->off[w] + s->len[w])
      m |= 1u << w;
  return m;
}

/* Check a snapshot of the window; final = after the round. NULL if fine. */
static const char *
check_window(const struct shared *s, const uint8_t *buf, bool final)
{
  static _Thread_local char why[200];
  for (uint64_t sec = 0; sec < WINDOW; sec += 4096) {
    unsigned seen_set[64];
    uint8_t seen_val[64];
    int nseen = 0;
    for (uint64_t i = sec; i < sec + 4096; i++) {
      unsigned c = cover(s, i);
      uint8_t v = buf[i];
      bool ok = v == 0 ? !(final && c) : v >= 0xA0 && v < 0xA0 + NTHREADS && (c >> (v - 0xA0) & 1);
      if (!ok) {
        snprintf(why, sizeof why, "byte %" PRIu64 " of the window is 0x%02x, writers covering it: 0x%02x%s", i, v, c,
                 final && v == 0 ? " (an update was lost)" : "");
        return why;
      }
      int k;
      for (k = 0; k < nseen && seen_set[k] != c; k++)
        ;
      if (k == nseen && nseen < 64) {
        seen_set[nseen] = c;
        seen_val[nseen++] = v;
      }
      else if (k < nseen && seen_val[k] != v) {
        snprintf(why, sizeof why, "sector at %" PRIu64 " is torn: bytes covered by writers 0x%02x hold 0x%02x and 0x%02x",
                 sec, c, seen_val[k], v);
        return why;
      }
    }
  }
  return NULL;
}

static void *
reader_main(void *arg)
{
  struct shared *s = arg;
  uint8_t *buf = malloc(WINDOW);
  while (!s->stop) {
    int r0 = __atomic_load_n(&s->round_no, __ATOMIC_ACQUIRE);
    if (tc_image_read(s->img, buf, WINDOW, s->base) < 0) {
      fail_shared(s, tc_last_error());
      break;
    }
    /* Only judge a read that stayed inside one round. */
    if (__atomic_load_n(&s->round_no, __ATOMIC_ACQUIRE) != r0 || r0 < 0)
      continue;
    const char *why = check_window(s, buf, false);
    if (why && __atomic_load_n(&s->round_no, __ATOMIC_ACQUIRE) == r0)
      fail_shared(s, why);
  }
  free(buf);
  return NULL;
}

static int
cmd_threads(struct tc_client *cl, const char *name, int rounds)
{
  struct tc_image *img = tc_client_open(cl, name, false);
  if (!img)
    return die("open");
  uint64_t size = tc_image_size(img);
  struct shared s = { .img = img, .rounds = rounds, .round_no = -1 };
  pthread_barrier_init(&s.start, NULL, NTHREADS + 1);
  pthread_barrier_init(&s.done, NULL, NTHREADS + 1);
  pthread_t th[NTHREADS], rd;
  struct writer w[NTHREADS];
  uint8_t *buf = malloc(WINDOW), *zero = calloc(1, WINDOW);
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (struct writer) { &s, i };
    pthread_create(&th[i], NULL, writer_main, &w[i]);
  }
  pthread_create(&rd, NULL, reader_main, &s);
  int r, completed = 0;
  for (r = 0; r < rounds && !s.failed; r++) {
    /* A fresh zeroed window each round, ranges inside it. */
    s.base = (tl_xorshift(&rng) % (size / WINDOW)) * WINDOW;
    if (tc_image_write(img, zero, WINDOW, s.base) < 0) {
      fail_shared(&s, tc_last_error());
      break;
    }
    for (int i = 0; i < NTHREADS; i++) {
      s.len[i] = tl_xorshift(&rng) % (3 * 4096) + 1;
      s.off[i] = tl_xorshift(&rng) % (WINDOW - s.len[i]);
    }
    __atomic_store_n(&s.round_no, r, __ATOMIC_RELEASE);
    pthread_barrier_wait(&s.start);
    pthread_barrier_wait(&s.done);
    completed++;
    __atomic_store_n(&s.round_no, -1, __ATOMIC_RELEASE);
    if (s.failed)
      break;
    if (tc_image_read(img, buf, WINDOW, s.base) < 0) {
      fail_shared(&s, tc_last_error());
      break;
    }
    const char *why = check_window(&s, buf, true);
    if (why) {
      char msg[256];
      snprintf(msg, sizeof msg, "round %d: %s", r, why);
      fail_shared(&s, msg);
    }
  }
  /* Release the writers from their remaining rounds. */
  s.stop = 1;
  for (r = completed; r < rounds; r++) {
    pthread_barrier_wait(&s.start);
    pthread_barrier_wait(&s.done);
  }
  pthread_join(rd, NULL);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(th[i], NULL);
  tc_image_free(img);
  free(buf);
  free(zero);
  pthread_barrier_destroy(&s.start);
  pthread_barrier_destroy(&s.done);
  if (s.failed) {
    fprintf(stderr, "FAIL: %s\n", s.why);
    return 1;
  }
  printf("OK %d rounds of %d concurrent overlapping unaligned writers\n", rounds, NTHREADS);
  return 0;
}

/* --- API checks (TAP) --- */

static int
list_cb(void *opaque, const struct tc_image_meta *m, bool writable)
{
  (void) writable;
  int *n = opaque;
  (*n)++;
  return strcmp(m->name, "stop-here") == 0 ? 7 : 0;
}

struct ext { uint64_t alloc, free; };
static int
ext_cb(void *opaque, uint64_t off, uint64_t len, bool allocated)
{
  (void) off;
  struct ext *e = opaque;
  if (allocated)
    e->alloc += len;
  else
    e->free += len;
  return 0;
}

static int
cmd_api(struct tc_client *cl, const char *name)
{
  struct tc_image *img = tc_client_open(cl, name, false);
  CHECK(img != NULL, "open %s read-write", name);
  if (!img)
    return die("open");
  uint64_t size = tc_image_size(img);
  struct tc_image_meta m;
  bool wr = false;
  CHECK(tc_client_stat(cl, name, &m, &wr) == 0 && m.size == size && wr, "stat: size %" PRIu64 ", writable", size);
  tc_image_meta_clear(&m);
  errno = 0;
  CHECK(tc_client_open(cl, "no-such-image", false) == NULL && errno == ENOENT, "open of a missing image: ENOENT (%s)",
     tc_last_error());
  int n = 0;
  CHECK(tc_client_list(cl, list_cb, &n) == 0 && n >= 1, "list: %d image(s)", n);
  /* write, flush, read back */
  uint8_t *a = malloc(1 << 20), *b = malloc(1 << 20);
  for (int i = 0; i < 1 << 20; i++)
    a[i] = (uint8_t) tl_xorshift(&rng);
  CHECK(tc_image_write(img, a, 300000, 12345) == 0 && tc_image_flush(img) == 0, "write 300000 bytes at 12345, flush");
  CHECK(tc_image_read(img, b, 300000, 12345) == 0 && memcmp(a, b, 300000) == 0, "read back");
  /* zero and trim read as zeros; extents see the hole */
  CHECK(tc_image_zero(img, 100000, 20000, false) == 0 && tc_image_read(img, b, 100000, 20000) == 0 &&
     b[0] == 0 && b[99999] == 0 && !memcmp(b, b + 1, 99999), "zero 100000 bytes at 20000");
  CHECK(tc_image_trim(img, 65536, 131072) == 0 && tc_image_read(img, b, 65536, 131072) == 0 && !memcmp(b, b + 1, 65535) &&
     b[0] == 0, "trim 64 KiB at 128 KiB");
  struct ext e = { 0, 0 };
  CHECK(tc_image_extents(img, 1 << 20, 0, ext_cb, &e) == 0 && e.alloc + e.free == 1 << 20 && e.alloc > 0 && e.free > 0,
     "extents over 1 MiB: %" PRIu64 " allocated, %" PRIu64 " not", e.alloc, e.free);
  /* beyond the end */
  errno = 0;
  CHECK(tc_image_write(img, a, 8192, size - 4096) < 0 && errno == ENOSPC, "write past the end: ENOSPC");
  /* resize is seen by the open image */
  CHECK(tc_client_resize(cl, name, size * 2) == 0 && tc_image_size(img) == size * 2, "resize to %" PRIu64 " (open image sees it)",
     size * 2);
  CHECK(tc_image_write(img, a, 4096, size * 2 - 4096) == 0, "write in the grown part");
  CHECK(tc_client_resize(cl, name, size) == 0 && tc_image_size(img) == size, "shrink back");
  CHECK(tc_client_resize(cl, name, size * 2) == 0 && tc_image_read(img, b, 4096, size * 2 - 4096) == 0 &&
     !memcmp(b, b + 1, 4095) && b[0] == 0, "grown again: the dropped part reads as zeros");
  CHECK(tc_client_resize(cl, name, size) == 0, "shrink back again");
  /* read-only open */
  struct tc_image *ro = tc_client_open(cl, name, true);
  errno = 0;
  CHECK(ro && tc_image_write(ro, a, 4096, 0) < 0 && errno == EROFS, "read-only open refuses writes: EROFS");
  CHECK(ro && tc_image_read(ro, b, 4096, 12288) == 0 && !memcmp(a, b + 57, 4096 - 57),
     "read-only open reads the data");
  tc_image_free(ro);
  tc_image_free(img);
  free(a);
  free(b);
  return DONE();
}

/* Open and read IMAGE on command, through one client (its Vault token cache). */
static int
cmd_keyloop(struct tc_client *cl, const char *name)
{
  struct tc_image *img = NULL;
  char line[64];
  uint8_t *buf = aligned_alloc(4096, 4096);
  if (!buf)
    return 1;
  setvbuf(stdout, NULL, _IOLBF, 0);
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    if (!strcmp(line, "open")) {
      struct tc_image *n = tc_client_open(cl, name, true);
      if (!n) {
        printf("err %s\n", tc_last_error());
        continue;
      }
      tc_image_free(img);
      img = n;
    }
    else if (strcmp(line, "read") != 0) {
      printf("err unknown command %s\n", line);
      continue;
    }
    if (!img || tc_image_read(img, buf, 4096, 0) < 0) {
      printf("err %s\n", img ? tc_last_error() : "not open");
      continue;
    }
    printf("ok ");
    for (int i = 0; i < 16; i++)
      printf("%02x", buf[i]);
    printf("\n");
  }
  tc_image_free(img);
  free(buf);
  return 0;
}

int
main(int argc, char **argv)
{
  tc_log_open("client-tool", 0);
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg || argc < 3 || tc_crypto_init() < 0) {
    fprintf(stderr, "FAIL: usage: client-tool rawread|threads|api IMAGE ... (%s)\n", tc_last_error());
    return 1;
  }
  if (tc_log_configure(cfg, NULL) < 0) {
    fprintf(stderr, "FAIL: client-tool: %s\n", tc_last_error());
    return 1;
  }
  struct tc_client *cl = tc_client_new(cfg);
  if (!cl)
    return die("client");
  int r = 1;
  if (!strcmp(argv[1], "usage") && argc == 3) {
    uint64_t inode = strtoull(argv[2], NULL, 0), bytes = 0;
    r = tc_admin_usage_range(cl, inode, inode, 10000, usage_cb, &bytes) < 0 ? die("usage") : 0;
    if (r == 0)
      printf("%" PRIu64 "\n", bytes);
  }
  else if (!strcmp(argv[1], "rawread") && argc == 5)
    r = cmd_rawread(cl, argv[2], strtoull(argv[3], NULL, 0), (uint32_t) strtoul(argv[4], NULL, 0));
  else if (!strcmp(argv[1], "rawwrite") && argc == 4)
    r = cmd_rawwrite(cl, argv[2], strtoull(argv[3], NULL, 0), -1);
  else if (!strcmp(argv[1], "rawdelete") && argc == 5)
    r = cmd_rawwrite(cl, argv[2], strtoull(argv[3], NULL, 0), strtoll(argv[4], NULL, 0));
  else if (!strcmp(argv[1], "objects") && argc == 4) {
    uint64_t inode = TC_INODE(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
    struct tc_osd_list_entry *e;
    size_t n, k = 0;
    if (tc_cluster_list(tc_client_cluster(cl), inode, inode, 0, &e, &n) == 0) {
      for (size_t i = 0; i < n; i++)
        k += e[i].inode == inode && e[i].bitmap != 0;
      free(e);
      printf("%zu\n", k);
      r = 0;
    }
    else
      r = die("list");
  }
  else if (!strcmp(argv[1], "snapwatch")) {
    struct tc_image *img = tc_client_open(cl, argv[2], false);
    uint8_t buf[4096], got[4096];
    char cmd[512], snap[300];
    memset(buf, 1, sizeof buf);
    snprintf(cmd, sizeof cmd, "tromcho snap-create %s@live >/dev/null", argv[2]);
    snprintf(snap, sizeof snap, "%s@live", argv[2]);
    if (!img || tc_image_write(img, buf, sizeof buf, 0) < 0)
      r = die("open and write");
    else if (system(cmd) != 0)
      fprintf(stderr, "FAIL: %s\n", cmd);
    else {
      /* The handle moves to the image's new top layer: its writes go on,
       * into the image, never into the snapshot. The first one right after
       * the snapshot meets the fence (or the watch got there first). */
      int i, bad = 0;
      for (i = 0; i < 40 && !bad; i++) {
        memset(buf, 2 + i, sizeof buf);
        if (tc_image_write(img, buf, sizeof buf, (uint64_t) (i % 4) * 4096) < 0) {
          fprintf(stderr, "FAIL: write %d after the snapshot: %s\n", i, tc_last_error());
          bad = 1;
        }
        usleep(20000);
      }
      struct tc_image *live = bad ? NULL : tc_client_open(cl, argv[2], true);
      struct tc_image *s = bad ? NULL : tc_client_open(cl, snap, true);
      if (bad)
        ;
      else if (!live || !s)
        r = die("open the image and its snapshot");
      else {
        for (i = 0; i < 4 && !bad; i++) {
          uint8_t want = (uint8_t) (2 + 36 + i);
          if (tc_image_read(live, got, sizeof got, (uint64_t) i * 4096) < 0 || got[0] != want || got[4095] != want) {
            fprintf(stderr, "FAIL: the image's sector %d holds %d, not %d\n", i, got[0], want);
            bad = 1;
          }
          if (tc_image_read(s, got, sizeof got, (uint64_t) i * 4096) < 0 || got[0] != (i == 0 ? 1 : 0)) {
            fprintf(stderr, "FAIL: a write after the snapshot reached it (sector %d holds %d)\n", i, got[0]);
            bad = 1;
          }
        }
        if (!bad) {
          printf("OK: 40 writes after the snapshot went to the image, none to the snapshot\n");
          r = 0;
        }
      }
      tc_image_free(live);
      tc_image_free(s);
    }
    tc_image_free(img);
  }
  else if (!strcmp(argv[1], "threads"))
    r = cmd_threads(cl, argv[2], argc > 3 ? atoi(argv[3]) : 20);
  else if (!strcmp(argv[1], "api"))
    r = cmd_api(cl, argv[2]);
  else if (!strcmp(argv[1], "keyloop"))
    r = cmd_keyloop(cl, argv[2]);
  else
    fprintf(stderr, "FAIL: unknown command %s\n", argv[1]);
  tc_client_free(cl);
  tc_config_free(cfg);
  return r;
}
