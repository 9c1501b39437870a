/* The OSD store: format and open refusals, round trips against an
 * in-memory model, presence bitmaps, holes, versions, delete, list,
 * persistence across reopen and across a crash, checksum detection on read
 * and scrub, ENOSPC and space reclaim, sparse deletes, many objects. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdbool.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <lmdb.h>
#include "crypto.h"
#include "error.h"
#include "log.h"
#include "store.h"
#include "store_background.h"
#include "tap.h"
#include "testlib.h"

#define SEC TC_STORE_SECTOR
static char dir[64];

static char *
path(const char *name)
{
  static char buf[4][128];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

static int
format(const char *name, uint64_t size, uint32_t bs, uint64_t osd, bool force)
{
  struct tc_store_format_opts o = { .data_path = path(name), .size = size, .osd_num = osd,
                                    .block_size = bs, .force = force };
  return tc_store_format(&o);
}

static int
all_zero(const uint8_t *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i])
      return 0;
  return 1;
}

static void
test_format_and_open(void)
{
  struct tc_store *st;
  CHECK(format("a", 32 << 20, 0, 0, false) < 0 && errno == EINVAL && strstr(tc_last_error(), "osd_num"),
        "osd_num 0 refused: %s", tc_last_error());
  CHECK(format("a", 1 << 20, 0, 1, false) < 0 && errno == EINVAL && strstr(tc_last_error(), "too small"),
        "too small refused: %s", tc_last_error());
  CHECK(access(path("a"), F_OK) < 0, "a refused format creates no file");
  int mfd = open(path("a.meta"), O_WRONLY | O_CREAT, 0600);
  close(mfd);
  CHECK(format("a", 32 << 20, 0, 7, false) < 0 && errno == EEXIST && strstr(tc_last_error(), "a.meta"),
        "a leftover metadata file is not overwritten: %s", tc_last_error());
  unlink(path("a.meta"));
  CHECK(format("a", 32 << 20, 12288, 1, false) < 0 && errno == EINVAL, "block size 12k refused");
  CHECK(format("a", 32 << 20, 0, 7, false) == 0, "format: %s", tc_last_error());
  struct stat sb;
  CHECK(stat(path("a"), &sb) == 0 && sb.st_size == 32 << 20 && sb.st_blocks * 512 >= (496 << 10) &&
        sb.st_blocks * 512 < (1 << 20),
        "the data file is sparse but for its 496 KiB overflow area (%jd blocks)", (intmax_t) sb.st_blocks);
  CHECK(format("a", 32 << 20, 0, 7, false) < 0 && errno == EEXIST && strstr(tc_last_error(), "already formatted"),
        "formatted file refused without force: %s", tc_last_error());

  /* Garbage and foreign files. */
  int fd = open(path("garbage"), O_WRONLY | O_CREAT, 0600);
  uint8_t junk[8192];
  tc_random(junk, sizeof junk);
  CHECK(fd >= 0 && write(fd, junk, sizeof junk) == (ssize_t) sizeof junk && ftruncate(fd, 32 << 20) == 0, "garbage file");
  close(fd);
  CHECK(tc_store_open(&st, path("garbage"), NULL) < 0 && errno == EINVAL &&
        strstr(tc_last_error(), "not a tromcho OSD store") && strstr(tc_last_error(), "garbage"),
        "garbage refused on open: %s", tc_last_error());
  CHECK(format("garbage", 0, 0, 1, false) < 0 && errno == EEXIST && strstr(tc_last_error(), "not a tromcho store"),
        "garbage refused by format: %s", tc_last_error());
  CHECK(format("garbage", 0, 0, 1, true) == 0, "garbage formatted with force: %s", tc_last_error());
  CHECK(tc_store_open(&st, path("garbage"), NULL) == 0 && tc_store_close(st) == 0, "forced store opens");

  /* A header with one flipped byte. */
  CHECK(format("flip", 32 << 20, 0, 2, false) == 0, "format flip");
  fd = open(path("flip"), O_RDWR);
  uint8_t b;
  CHECK(pread(fd, &b, 1, 40) == 1, "read header");
  b ^= 0x10;
  CHECK(pwrite(fd, &b, 1, 40) == 1, "flip header byte");
  close(fd);
  CHECK(tc_store_open(&st, path("flip"), NULL) < 0 && errno == EINVAL && strstr(tc_last_error(), "corrupt"),
        "corrupt header refused: %s", tc_last_error());

  /* Metadata of another store; missing metadata; opened twice. */
  CHECK(format("b", 32 << 20, 0, 8, false) == 0, "format b");
  CHECK(tc_store_open(&st, path("a"), path("b.meta")) < 0 && errno == EINVAL &&
        strstr(tc_last_error(), "another store"), "foreign metadata refused: %s", tc_last_error());
  CHECK(tc_store_open(&st, path("a"), path("none.meta")) < 0 && errno == ENOENT, "missing metadata refused");
  CHECK(access(path("none.meta"), F_OK) < 0, "open does not create metadata");
  struct tc_store *st2;
  CHECK(tc_store_open(&st, path("a"), NULL) == 0, "open a: %s", tc_last_error());
  CHECK(tc_store_open(&st2, path("a"), NULL) < 0 && errno == EBUSY, "second open refused: %s", tc_last_error());
  CHECK(format("a", 0, 0, 7, true) < 0 && errno == EBUSY, "format of an open store refused");
  struct tc_store_info info;
  tc_store_get_info(st, &info);
  CHECK(info.osd_num == 7 && info.block_size == TC_STORE_DEFAULT_BLOCK_SIZE && info.size == 32 << 20 &&
        info.data_offset == 1 << 20 && info.data_sectors == (31u << 20) / SEC, "info");
  tc_store_close(st);
}

/* The model: per (inode, block) sector contents by version, 0 = absent. */
#define M_INODES 3
#define M_BLOCKS 6
#define M_SPB 16    /* 64 KiB blocks */
static uint64_t model_ver[M_INODES][M_BLOCKS][M_SPB];   /* version that wrote each sector */
static uint64_t model_objver[M_INODES][M_BLOCKS];

static int
check_model(struct tc_store *st, const char *when)
{
  static uint8_t buf[M_SPB * SEC], want[SEC];
  uint8_t present[M_SPB / 8];
  int bad = 0;
  for (int i = 0; i < M_INODES; i++)
    for (int b = 0; b < M_BLOCKS; b++) {
      uint64_t inode = 0x1000000000000ull + i, ver = 99;
      int n = tc_store_read(st, inode, (uint64_t) b * M_SPB * SEC, M_SPB * SEC, buf, present, &ver);
      int expect_n = 0;
      for (int s = 0; s < M_SPB; s++) {
        int p = (present[s / 8] >> (s % 8)) & 1;
        expect_n += model_ver[i][b][s] != 0;
        if (p != (model_ver[i][b][s] != 0))
          bad++;
        else if (p) {
          tl_fill_sector(want, SEC, inode, (uint64_t) b * M_SPB + s, model_ver[i][b][s]);
          bad += memcmp(want, buf + s * SEC, SEC) != 0;
        }
        else
          bad += !all_zero(buf + s * SEC, SEC);
      }
      bad += n != expect_n;
      bad += ver != (expect_n ? model_objver[i][b] : 0);
    }
  CHECK(bad == 0, "%s: store matches the model (%d mismatches)", when, bad);
  return bad;
}

static int
count_cb(void *opaque, const struct tc_store_obj *o)
{
  int *n = opaque;
  int i = (int) (o->inode - 0x1000000000000ull), b = (int) (o->offset / (M_SPB * SEC));
  int ok = i >= 0 && i < M_INODES && b < M_BLOCKS && o->version == model_objver[i][b];
  uint32_t sectors = 0;
  for (int s = 0; s < M_SPB; s++) {
    int p = (o->bitmap[0] >> s) & 1;
    sectors += p;
    ok &= p == (model_ver[i][b][s] != 0);
  }
  ok &= sectors == o->sectors && sectors > 0;
  n[0]++;
  n[1] += !ok;
  return 0;
}

static void
test_round_trips(void)
{
  struct tc_store *st;
  CHECK(format("rt", 64 << 20, 64 * 1024, 1, false) == 0, "format rt: %s", tc_last_error());
  CHECK(tc_store_open(&st, path("rt"), NULL) == 0, "open rt: %s", tc_last_error());
  static uint8_t buf[M_SPB * SEC];
  uint64_t seed = 42, version = 0;
  check_model(st, "empty store");
  for (int op = 0; op < 3000; op++) {
    int i = (int) (tl_splitmix(&seed) % M_INODES), b = (int) (tl_splitmix(&seed) % M_BLOCKS);
    int first = (int) (tl_splitmix(&seed) % M_SPB), count = 1 + (int) (tl_splitmix(&seed) % (M_SPB - first));
    uint64_t inode = 0x1000000000000ull + i, off = ((uint64_t) b * M_SPB + first) * SEC;
    int kind = (int) (tl_splitmix(&seed) % 10);
    if (kind < 8) {
      version++;
      for (int s = 0; s < count; s++)
        tl_fill_sector(buf + s * SEC, SEC, inode, (uint64_t) b * M_SPB + first + s, version);
      if (tc_store_write(st, inode, off, (uint32_t) count * SEC, buf, version) < 0) {
        CHECK(0, "write: %s", tc_last_error());
        break;
      }
      for (int s = 0; s < count; s++)
        model_ver[i][b][first + s] = version;
      model_objver[i][b] = version;
    }
    else {
      if (tc_store_delete(st, inode, off, (uint32_t) count * SEC) < 0) {
        CHECK(0, "delete: %s", tc_last_error());
        break;
      }
      for (int s = 0; s < count; s++)
        model_ver[i][b][first + s] = 0;
    }
    if (kind == 9 && tc_store_sync(st) < 0)
      CHECK(0, "sync: %s", tc_last_error());
    if (op % 500 == 499 && check_model(st, "random writes"))
      break;
  }
  /* Partial reads: ranges inside one object report their own bitmap. */
  int bad = 0;
  for (int t = 0; t < 200; t++) {
    int i = (int) (tl_splitmix(&seed) % M_INODES), b = (int) (tl_splitmix(&seed) % M_BLOCKS);
    int first = (int) (tl_splitmix(&seed) % M_SPB), count = 1 + (int) (tl_splitmix(&seed) % (M_SPB - first));
    uint64_t inode = 0x1000000000000ull + i;
    uint8_t present[2], want[SEC];
    memset(buf, 0xAA, sizeof buf);
    int n = tc_store_read(st, inode, ((uint64_t) b * M_SPB + first) * SEC, (uint32_t) count * SEC, buf, present, NULL);
    int expect = 0;
    for (int s = 0; s < count; s++) {
      uint64_t v = model_ver[i][b][first + s];
      expect += v != 0;
      bad += (int) ((present[s / 8] >> (s % 8)) & 1) != (v != 0);
      if (v)
        tl_fill_sector(want, SEC, inode, (uint64_t) b * M_SPB + first + s, v);
      else
        memset(want, 0, SEC);
      bad += memcmp(want, buf + s * SEC, SEC) != 0;
    }
    bad += n != expect;
  }
  CHECK(bad == 0, "partial reads match the model (%d mismatches)", bad);

  /* List: all objects, then one inode. */
  int cnt[2] = { 0, 0 }, expect_all = 0, expect_one = 0;
  for (int i = 0; i < M_INODES; i++)
    for (int b = 0; b < M_BLOCKS; b++) {
      int any = 0;
      for (int s = 0; s < M_SPB; s++)
        any |= model_ver[i][b][s] != 0;
      expect_all += any;
      expect_one += any && i == 1;
    }
  CHECK(tc_store_list(st, 0, UINT64_MAX, count_cb, cnt) == 0 && cnt[0] == expect_all && cnt[1] == 0,
        "list all: %d objects (%d expected), %d wrong", cnt[0], expect_all, cnt[1]);
  cnt[0] = cnt[1] = 0;
  CHECK(tc_store_list(st, 0x1000000000001ull, 0x1000000000001ull, count_cb, cnt) == 0 &&
        cnt[0] == expect_one && cnt[1] == 0, "list one inode: %d objects (%d expected)", cnt[0], expect_one);
  struct tc_store_stats ss;
  CHECK(tc_store_stats(st, &ss) == 0 && ss.objects == (uint64_t) expect_all, "stats objects %" PRIu64, ss.objects);
  /* One object's version and bitmap without its data. */
  int obad = 0;
  for (int i = 0; i < M_INODES; i++)
    for (int b = 0; b < M_BLOCKS; b++) {
      struct tc_store_obj o;
      uint64_t bm = 0;
      for (int s = 0; s < M_SPB; s++)
        bm |= (uint64_t) (model_ver[i][b][s] != 0) << s;
      int r = tc_store_object(st, 0x1000000000000ull + i, (uint64_t) b * M_SPB * SEC + 5, &o);
      obad += r != (bm != 0) || o.bitmap[0] != bm || o.offset != (uint64_t) b * M_SPB * SEC ||
              (bm && o.version != model_objver[i][b]) || o.sectors != (uint32_t) __builtin_popcountll(bm);
    }
  CHECK(obad == 0, "tc_store_object matches the model (%d mismatches)", obad);

  /* Misuse. */
  CHECK(tc_store_write(st, 1, 100, SEC, buf, 1) < 0 && errno == EINVAL && strstr(tc_last_error(), "4 KiB"),
        "unaligned write refused: %s", tc_last_error());
  CHECK(tc_store_read(st, 1, 0, 100, buf, NULL, NULL) < 0 && errno == EINVAL, "unaligned read refused");
  CHECK(tc_store_write(st, 1, 60 * 1024, 8192, buf, 1) < 0 && errno == EINVAL &&
        strstr(tc_last_error(), "object boundary"), "write across objects refused: %s", tc_last_error());
  CHECK(tc_store_write(st, 1, 0, 0, buf, 1) < 0 && errno == EINVAL, "empty write refused");
  CHECK(tc_store_write(st, 1, 0, SEC, buf, 0) < 0 && errno == EINVAL, "version 0 refused");

  /* Whole-object delete; a missing object reads as a hole with version 0. */
  uint64_t ver = 1;
  CHECK(tc_store_delete_object(st, 0x1000000000000ull, 5) == 0, "delete object");
  memset(model_ver[0][0], 0, sizeof model_ver[0][0]);
  memset(buf, 0xAA, sizeof buf);
  uint8_t present[2] = { 0xFF, 0xFF };
  CHECK(tc_store_read(st, 0x1000000000000ull, 0, M_SPB * SEC, buf, present, &ver) == 0 && ver == 0 &&
        present[0] == 0 && present[1] == 0 && all_zero(buf, sizeof buf), "deleted object reads as a hole");
  CHECK(tc_store_read(st, 777, 1 << 20, SEC, buf, present, &ver) == 0 && ver == 0 && all_zero(buf, SEC),
        "never-written object reads as zeros");

  /* Persistence: close (which syncs) and reopen. */
  CHECK(tc_store_close(st) == 0, "close: %s", tc_last_error());
  CHECK(tc_store_open(&st, path("rt"), NULL) == 0, "reopen: %s", tc_last_error());
  check_model(st, "after reopen");
  tc_store_close(st);
}

/* A child writes, syncs, writes more without syncing, and dies: the
 * reopened store has the synced writes and the old data of the rest. */
static void
test_crash_loses_only_unsynced(void)
{
  struct tc_store *st;
  static uint8_t buf[4 * SEC], want[SEC];
  CHECK(format("crash", 32 << 20, 0, 1, false) == 0, "format crash");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (tc_store_open(&st, path("crash"), NULL) < 0)
      _exit(2);
    for (int s = 0; s < 4; s++)
      tl_fill_sector(buf + s * SEC, SEC, 5, (uint64_t) s, 1);
    if (tc_store_write(st, 5, 0, 4 * SEC, buf, 1) < 0 || tc_store_sync(st) < 0)
      _exit(3);
    for (int s = 0; s < 2; s++)
      tl_fill_sector(buf + s * SEC, SEC, 5, (uint64_t) s + 1, 2);
    if (tc_store_write(st, 5, SEC, 2 * SEC, buf, 2) < 0 || tc_store_write(st, 5, 1 << 17, SEC, buf, 2) < 0)
      _exit(4);
    _exit(0);   /* no sync, no close: as kill -9 */
  }
  int status;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  CHECK(tc_store_open(&st, path("crash"), NULL) == 0, "reopen after crash: %s", tc_last_error());
  uint64_t ver = 0;
  uint8_t present = 0;
  int n = tc_store_read(st, 5, 0, 4 * SEC, buf, &present, &ver);
  int same = 1;
  for (int s = 0; s < 4; s++) {
    tl_fill_sector(want, SEC, 5, (uint64_t) s, 1);
    same &= memcmp(want, buf + s * SEC, SEC) == 0;
  }
  CHECK(n == 4 && present == 0xF && ver == 1 && same, "synced write intact, unsynced overwrite absent (n=%d ver=%" PRIu64 ")", n, ver);
  CHECK(tc_store_read(st, 5, 1 << 17, SEC, buf, &present, &ver) == 0 && ver == 0, "unsynced new object absent");
  /* The sectors the lost writes used are free again. */
  struct tc_store_stats ss;
  CHECK(tc_store_stats(st, &ss) == 0 && ss.used_bytes == 4 * SEC && ss.objects == 1,
        "space of lost writes reclaimed (used %" PRIu64 ")", ss.used_bytes);
  tc_store_close(st);
}

/* Find the file offset of a 16-byte pattern in the data file. */
static off_t
find_in_file(const char *p, const uint8_t *pat)
{
  int fd = open(p, O_RDONLY);
  static uint8_t buf[1 << 20];
  off_t pos = 0, found = -1;
  ssize_t n;
  while (found < 0 && (n = pread(fd, buf, sizeof buf, pos)) > 0) {
    for (ssize_t i = 0; i + 32 <= n; i += SEC)
      if (memcmp(buf + i, pat, 32) == 0) {
        found = pos + i;
        break;
      }
    pos += n;
  }
  close(fd);
  return found;
}


/* Write pattern (inode 7, sector s, version v) to sectors [s0, s0+n) of
 * object 0 and sync: one journal batch. */
static int
journal_step(struct tc_store *st, uint32_t s0, uint32_t n, uint64_t v)
{
  static uint8_t buf[32 * SEC];
  for (uint32_t s = 0; s < n; s++)
    tl_fill_sector(buf + (size_t) s * SEC, SEC, 7, s0 + s, v);
  return tc_store_write(st, 7, (uint64_t) s0 * SEC, n * SEC, buf, v) < 0 || tc_store_sync(st) < 0 ? -1 : 0;
}

/* Sectors [0, 4) of object 0 of inode 7 hold versions want[]: 1 if so. */
static int
journal_state(struct tc_store *st, const uint64_t want[4], uint64_t objver)
{
  static uint8_t buf[4 * SEC], exp[SEC];
  uint64_t ver = 0;
  uint8_t present = 0;
  int n = tc_store_read(st, 7, 0, 4 * SEC, buf, &present, &ver);
  if (n < 0 || ver != objver)
    return 0;
  for (int s = 0; s < 4; s++) {
    if (!want[s]) {
      if (present >> s & 1)
        return 0;
      continue;
    }
    tl_fill_sector(exp, SEC, 7, (uint64_t) s, want[s]);
    if (!(present >> s & 1) || memcmp(exp, buf + s * SEC, SEC))
      return 0;
  }
  return 1;
}

/* A child makes three synced batches (journal only: no checkpoint) and
 * dies; how = 0 leaves it, 1 zeroes the data of the last batch's write
 * (its flush never reached the disk), 2 flips a byte of the last batch in
 * the journal. Returns the reopened store. */
static struct tc_store *
journal_crash(const char *name, uint64_t size, int how)
{
  struct tc_store *st;
  CHECK(format(name, size, 0, 1, true) == 0, "format %s", name);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (tc_store_open(&st, path(name), NULL) < 0 || journal_step(st, 0, 4, 1) < 0 ||
        journal_step(st, 1, 1, 2) < 0 || journal_step(st, 2, 1, 3) < 0)
      _exit(2);
    struct tc_store_stats ss;
    if (tc_store_stats(st, &ss) < 0 || ss.commits != 3)
      _exit(3);   /* three journal batches */
    _exit(0);     /* no close: as kill -9 */
  }
  int status;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child status %d", name, status);
  uint8_t pat[SEC];
  int fd = open(path(name), O_RDWR);
  CHECK(fd >= 0, "open %s", name);
  if (how == 1) {
    tl_fill_sector(pat, SEC, 7, 2, 3);
    off_t at = find_in_file(path(name), pat);
    CHECK(at > 0, "%s: the last batch's sector is in the file", name);
    memset(pat, 0, SEC);
    CHECK(pwrite(fd, pat, SEC, at) == SEC, "zero it");
  }
  else if (how == 2) {
    /* The third batch header (magic "TCJN") in the header area. */
    static uint8_t area[1 << 20];
    CHECK(pread(fd, area, sizeof area, 0) == (ssize_t) sizeof area, "read the area");
    int seen = 0;
    for (size_t i = 4096; i + 64 <= sizeof area; i += 8)
      if (!memcmp(area + i, "TCJN", 4) && ++seen == 3) {
        area[i + 64 + 24] ^= 1;  /* its first entry's version */
        CHECK(pwrite(fd, area + i + 64 + 24, 1, (off_t) (i + 64 + 24)) == 1, "flip");
        break;
      }
    CHECK(seen == 3, "%s: three batches in the journal (%d)", name, seen);
  }
  close(fd);
  CHECK(tc_store_open(&st, path(name), NULL) == 0, "%s: reopen: %s", name, tc_last_error());
  return st;
}

static void
test_journal(void)
{
  static const uint64_t all[4] = { 1, 2, 3, 1 }, two[4] = { 1, 2, 1, 1 };
  struct tc_store *st = journal_crash("j0", 32 << 20, 0);
  CHECK(journal_state(st, all, 3), "journal: three synced batches replayed after a crash");
  /* The replay was checkpointed: a second crash right away keeps it. */
  CHECK(journal_step(st, 3, 1, 4) == 0, "write after replay");
  static const uint64_t four[4] = { 1, 2, 3, 4 };
  CHECK(journal_state(st, four, 4), "new write after replay");
  tc_store_close(st);
  CHECK(tc_store_open(&st, path("j0"), NULL) == 0 && journal_state(st, four, 4), "reopen after close");
  tc_store_close(st);

  st = journal_crash("j1", 32 << 20, 1);
  CHECK(journal_state(st, two, 2), "journal: a last batch whose data is not on disk is dropped whole");
  struct tc_store_stats ss;
  CHECK(tc_store_stats(st, &ss) == 0 && ss.used_bytes == 4 * SEC, "its sector is free again (used %" PRIu64 ")",
        ss.used_bytes);
  tc_store_close(st);

  st = journal_crash("j2", 32 << 20, 2);
  CHECK(journal_state(st, two, 2), "journal: a torn last batch (checksum) is dropped");
  CHECK(journal_step(st, 2, 1, 5) == 0, "write after the torn batch");
  tc_store_close(st);
  CHECK(tc_store_open(&st, path("j2"), NULL) == 0, "reopen j2");
  static const uint64_t five[4] = { 1, 2, 5, 1 };
  CHECK(journal_state(st, five, 5), "the old batch never comes back");
  tc_store_close(st);

  /* A store of 4 GiB or more has a 16 MiB header area, the journal in it. */
  st = journal_crash("jbig", 4ull << 30, 0);
  struct tc_store_info info;
  tc_store_get_info(st, &info);
  CHECK(info.data_offset == 16 << 20 && journal_state(st, all, 3), "a 16 MiB journal replayed (data at %" PRIu64 ")",
        info.data_offset);
  tc_store_close(st);
  unlink(path("jbig"));
}

static void
test_corruption(void)
{
  struct tc_store *st;
  static uint8_t buf[8 * SEC];
  CHECK(format("bad", 32 << 20, 0, 1, false) == 0, "format bad");
  CHECK(tc_store_open(&st, path("bad"), NULL) == 0, "open bad");
  for (int s = 0; s < 8; s++)
    tl_fill_sector(buf + s * SEC, SEC, 9, 64 + (uint64_t) s, 3);
  CHECK(tc_store_write(st, 9, 64 * SEC, 8 * SEC, buf, 3) == 0 && tc_store_close(st) == 0, "write 8 sectors");
  /* Flip one byte in the data of sector 5 (inode offset 69 * 4096). */
  uint8_t pat[SEC];
  tl_fill_sector(pat, SEC, 9, 69, 3);
  off_t at = find_in_file(path("bad"), pat);
  CHECK(at > 0, "found the sector in the data file");
  int fd = open(path("bad"), O_RDWR);
  uint8_t b;
  CHECK(pread(fd, &b, 1, at + 1000) == 1, "read byte");
  b ^= 0x01;
  CHECK(pwrite(fd, &b, 1, at + 1000) == 1, "flip byte");
  close(fd);

  CHECK(tc_store_open(&st, path("bad"), NULL) == 0, "reopen bad");
  memset(buf, 0xAA, sizeof buf);
  int r = tc_store_read(st, 9, 64 * SEC, 8 * SEC, buf, NULL, NULL);
  CHECK(r < 0 && errno == EIO && strstr(tc_last_error(), "checksum mismatch") &&
        strstr(tc_last_error(), "inode 0x9") && strstr(tc_last_error(), "offset 282624"),
        "flipped byte detected on read: %s", tc_last_error());
  CHECK(all_zero(buf, sizeof buf), "no corrupted data returned");
  uint8_t want[SEC];
  tl_fill_sector(want, SEC, 9, 64, 3);
  CHECK(tc_store_read(st, 9, 64 * SEC, 5 * SEC, buf, NULL, NULL) == 5 && memcmp(buf, want, SEC) == 0,
        "the good sectors before it still read");
  uint8_t bad[4];
  CHECK(tc_store_scrub(st, 9, 64 * SEC, bad) == 1 && bad[0] == (1 << 5) && bad[1] == 0,
        "scrub finds the bad sector (%02x %02x)", bad[0], bad[1]);
  CHECK(tc_store_scrub(st, 9, 0, bad) == 0, "scrub of a missing object is clean");
  /* Rewriting the bad sector repairs it (as recovery from a replica would). */
  tl_fill_sector(want, SEC, 9, 69, 4);
  CHECK(tc_store_write(st, 9, 69 * SEC, SEC, want, 4) == 0 && tc_store_scrub(st, 9, 64 * SEC, bad) == 0 &&
        tc_store_read(st, 9, 64 * SEC, 8 * SEC, buf, NULL, NULL) == 8, "rewrite repairs");
  struct tc_store_stats ss;
  CHECK(tc_store_stats(st, &ss) == 0 && ss.checksum_errors == 2, "checksum errors counted (%" PRIu64 ")",
        ss.checksum_errors);
  tc_store_close(st);

  /* Data moved to another place is caught too: the checksum is seeded with
   * the sector's logical address. Copy sector 64 over sector 65. */
  tl_fill_sector(pat, SEC, 9, 64, 3);
  off_t a64 = find_in_file(path("bad"), pat);
  tl_fill_sector(pat, SEC, 9, 65, 3);
  off_t a65 = find_in_file(path("bad"), pat);
  fd = open(path("bad"), O_RDWR);
  CHECK(a64 > 0 && a65 > 0 && pread(fd, buf, SEC, a64) == SEC && pwrite(fd, buf, SEC, a65) == SEC, "misplace a sector");
  close(fd);
  CHECK(tc_store_open(&st, path("bad"), NULL) == 0, "reopen bad");
  CHECK(tc_store_read(st, 9, 65 * SEC, SEC, buf, NULL, NULL) < 0 && errno == EIO, "misplaced sector detected");
  tc_store_close(st);
}

static void
test_space(void)
{
  struct tc_store *st;
  static uint8_t buf[32 * SEC];
  memset(buf, 0x5A, sizeof buf);
  CHECK(format("full", 16 << 20, 0, 1, false) == 0, "format full");
  CHECK(tc_store_open(&st, path("full"), NULL) == 0, "open full");
  int blocks = 0, r;
  while ((r = tc_store_write(st, 1, (uint64_t) blocks * sizeof buf, sizeof buf, buf, 1)) == 0)
    blocks++;
  CHECK(r < 0 && errno == ENOSPC && blocks == 120, "ENOSPC after %d blocks of 128 KiB: %s", blocks, tc_last_error());
  /* Nothing awaits freeing, so even an overwrite (copy-on-write) is refused. */
  CHECK(tc_store_write(st, 1, 0, SEC, buf, 2) < 0 && errno == ENOSPC, "overwrite on a full store refused");
  CHECK(tc_store_read(st, 1, 0, sizeof buf, buf, NULL, NULL) == 32, "still readable when full");
  struct stat sb1, sb2;
  CHECK(tc_store_sync(st) == 0 && stat(path("full"), &sb1) == 0, "sync");
  for (int b = 0; b < 60; b++)
    CHECK(tc_store_delete_object(st, 1, (uint64_t) b * sizeof buf) == 0, "delete");
  CHECK(tc_store_sync(st) == 0 && stat(path("full"), &sb2) == 0, "sync after delete");
  CHECK(sb2.st_blocks < sb1.st_blocks - (60 * 128 * 1024 / 512) + 64,
        "deleted space punched out of the file (%jd -> %jd blocks)", (intmax_t) sb1.st_blocks, (intmax_t) sb2.st_blocks);
  /* Overwrites reuse space: 200 rounds of overwriting 60 blocks fit. */
  int ok = 1;
  for (int round = 0; round < 5 && ok; round++)
    for (int b = 60; b < 120 && ok; b++)
      ok = tc_store_write(st, 1, (uint64_t) b * sizeof buf, sizeof buf, buf, 3 + (uint64_t) round) == 0;
  CHECK(ok, "overwrites reclaim old copies: %s", tc_last_error());
  struct tc_store_stats ss;
  CHECK(tc_store_stats(st, &ss) == 0 && ss.objects == 60, "60 objects left");
  tc_store_close(st);
}

/* Overwrites keep the data file as compact as the live data (freed copies
 * are reused from the lowest sector after each sync), and a large write
 * after many small overwrites still gets long contiguous runs. */
static void
test_compact(void)
{
  struct tc_store *st;
  static uint8_t buf[32 * SEC];
  uint64_t seed = 7;
  CHECK(format("compact", 64 << 20, 0, 1, false) == 0 && tc_store_open(&st, path("compact"), NULL) == 0, "open compact");
  for (int i = 0; i < 3000; i++) {
    uint32_t n = 1 + (uint32_t) (tl_splitmix(&seed) % 4);
    uint64_t sec = tl_splitmix(&seed) % (256 - 4);   /* 1 MiB of inode 1 */
    if ((sec % 32) + n > 32)
      sec -= (sec % 32) + n - 32;
    memset(buf, i, n * SEC);
    if (tc_store_write(st, 1, sec * SEC, n * SEC, buf, (uint64_t) i + 1) < 0 ||
        (i % 16 == 15 && tc_store_sync(st) < 0)) {
      CHECK(0, "overwrite: %s", tc_last_error());
      break;
    }
  }
  CHECK(tc_store_sync(st) == 0, "sync");
  struct stat sb;
  CHECK(stat(path("compact"), &sb) == 0 && sb.st_blocks * 512 < (4 << 20),
        "3000 overwrites of 1 MiB keep the file under 4 MiB (%jd KiB allocated)", (intmax_t) sb.st_blocks / 2);
  for (int s = 0; s < 32; s++)
    tl_fill_sector(buf + s * SEC, SEC, 2, (uint64_t) s, 1);
  CHECK(tc_store_write(st, 2, 0, 32 * SEC, buf, 1) == 0 && tc_store_close(st) == 0, "one 128 KiB write");
  /* Where did its 32 sectors land? Count the physically contiguous runs. */
  off_t where[32];
  for (int s = 0; s < 32; s++)
    where[s] = -1;
  int fd = open(path("compact"), O_RDONLY);
  static uint8_t file[1 << 20];
  ssize_t got;
  for (off_t pos = 0; (got = pread(fd, file, sizeof file, pos)) > 0; pos += got)
    for (ssize_t i = 0; i + SEC <= got; i += SEC)
      for (int s = 0; s < 32; s++)
        if (memcmp(file + i, buf + s * SEC, 32) == 0)
          where[s] = pos + i;
  close(fd);
  int runs = 1, found = where[0] >= 0;
  for (int s = 1; s < 32; s++) {
    found += where[s] >= 0;
    runs += where[s] != where[s - 1] + SEC;
  }
  CHECK(found == 32 && runs == 1, "the 128 KiB object lies in %d runs (%d sectors found)", runs, found);
  /* Whole-object overwrites, synced each round, reuse the space they free. */
  CHECK(tc_store_open(&st, path("compact"), NULL) == 0, "reopen compact");
  for (int round = 0; round < 200; round++)
    for (int obj = 0; obj < 8; obj++) {
      memset(buf, round, sizeof buf);
      if (tc_store_write(st, 3, (uint64_t) obj << 17, 32 * SEC, buf, (uint64_t) round + 1) < 0 ||
          (obj == 7 && tc_store_sync(st) < 0)) {
        CHECK(0, "large overwrite: %s", tc_last_error());
        round = 200;
        break;
      }
    }
  CHECK(tc_store_close(st) == 0, "close compact");
  CHECK(stat(path("compact"), &sb) == 0 && sb.st_blocks * 512 < (8 << 20),
        "200 synced overwrites of 1 MiB in whole objects keep the file under 8 MiB (%jd KiB allocated)",
        (intmax_t) sb.st_blocks / 2);
}

/* Allocated bytes of a file. */
static int64_t
allocated(const char *name)
{
  struct stat sb;
  return stat(path(name), &sb) == 0 ? (int64_t) sb.st_blocks * 512 : -1;
}

/* Small overwrites scattered over many objects, then every object
 * rewritten whole: the whole rewrites find the runs the objects left,
 * because small overwrites went into their own object's holes or the
 * overflow area, never into another object's run. With the first free
 * sector instead, every run held other objects' sectors and the rewrites
 * grew the file by as much as the objects (8 MiB here). */
static void
test_fragmented_rewrite(void)
{
  struct tc_store *st;
  static uint8_t buf[32 * SEC];
  uint64_t seed = 11;
  CHECK(format("frag", 64 << 20, 0, 1, false) == 0 && tc_store_open(&st, path("frag"), NULL) == 0, "open frag");
  int64_t fresh = allocated("frag");
  /* 1/64 of the 63 MiB data area: 1008 KiB */
  CHECK(fresh >= 1008 << 10 && fresh < 1280 << 10,
        "a new store holds its zeroed overflow area only (%jd KiB)", (intmax_t) fresh / 1024);
  int ok = 1;
  for (int obj = 0; obj < 64 && ok; obj++) {
    memset(buf, obj, sizeof buf);
    ok = tc_store_write(st, 5, (uint64_t) obj << 17, 32 * SEC, buf, 1) == 0;
  }
  ok = ok && tc_store_sync(st) == 0;
  for (int i = 0; i < 2000 && ok; i++) {
    uint64_t sec = tl_splitmix(&seed) % (64 * 32);
    memset(buf, i, SEC);
    ok = tc_store_write(st, 5, sec * SEC, SEC, buf, (uint64_t) i + 2) == 0 &&
         (i % 16 != 15 || tc_store_sync(st) == 0);
  }
  ok = ok && tc_store_sync(st) == 0;
  CHECK(ok, "objects written, then 2000 synced 4 KiB overwrites: %s", ok ? "" : tc_last_error());
  int64_t before = allocated("frag");
  for (int obj = 0; obj < 64 && ok; obj++) {
    memset(buf, 100 + obj, sizeof buf);
    ok = tc_store_write(st, 5, (uint64_t) obj << 17, 32 * SEC, buf, 5000) == 0 &&
         (obj % 8 != 7 || tc_store_sync(st) == 0);
  }
  CHECK(ok, "every object rewritten whole: %s", ok ? "" : tc_last_error());
  int64_t after = allocated("frag");
  CHECK(after - before < (2 << 20), "the whole rewrites grew the file by %jd KiB (%jd KiB before them)",
        (intmax_t) (after - before) / 1024, (intmax_t) before / 1024);
  for (int obj = 0; obj < 64 && ok; obj++) {
    ok = tc_store_read(st, 5, (uint64_t) obj << 17, 32 * SEC, buf, NULL, NULL) == 32;
    for (uint32_t k = 0; ok && k < 32 * SEC; k++)
      ok = buf[k] == 100 + obj;
  }
  CHECK(ok, "every object reads back its rewrite");
  /* Small overwrites after the rewrites go to the overflow area again;
   * deleting the objects punches their sectors out of the file, but for
   * those in the overflow area, which stays written: no hole from its
   * first byte (sector 15876 of the data area at 1 MiB) to the end. */
  for (int i = 0; i < 64 && ok; i++)
    ok = tc_store_write(st, 5, ((uint64_t) i << 17) + SEC, SEC, buf, 6000) == 0;
  for (int obj = 0; obj < 64 && ok; obj++)
    ok = tc_store_delete_object(st, 5, (uint64_t) obj << 17) == 0;
  ok = ok && tc_store_sync(st) == 0;
  int fd = open(path("frag"), O_RDONLY);
  off_t top = (1 << 20) + (off_t) 15876 * SEC, hole = fd < 0 ? -1 : lseek(fd, top, SEEK_HOLE);
  if (fd >= 0)
    close(fd);
  CHECK(ok && hole == 64 << 20, "every object deleted: the overflow area has no hole (first at %jd): %s",
        (intmax_t) hole, ok ? "" : tc_last_error());
  CHECK(tc_store_close(st) == 0, "close frag");
}

/* A store whose overflow area is sparse (formatted before it was written
 * at format time, or punched by a deletion before that stopped): open
 * writes zeros into its holes, and only there. */
static void
test_overflow_refill(void)
{
  struct tc_store *st;
  CHECK(format("refill", 64 << 20, 0, 1, false) == 0, "format refill");
  off_t top = (1 << 20) + (off_t) 15876 * SEC, end = 64 << 20;
  int fd = open(path("refill"), O_RDWR);
  static uint8_t pat[SEC], back[SEC];
  memset(pat, 0x5a, sizeof pat);
  /* A sector of data at the area's start, a 512 KiB hole after it, and
   * another one reaching the file's end. */
  bool ok = fd >= 0 && pwrite(fd, pat, SEC, top) == SEC &&
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, top + SEC, 512 << 10) == 0 &&
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, end - 64 * SEC, 64 * SEC) == 0 &&
            lseek(fd, top, SEEK_HOLE) == top + SEC;
  CHECK(ok, "overflow area punched: %s", strerror(errno));
  int64_t sparse = allocated("refill");
  CHECK(tc_store_open(&st, path("refill"), NULL) == 0, "open refill: %s", tc_last_error());
  off_t hole = fd < 0 ? -1 : lseek(fd, top, SEEK_HOLE);
  CHECK(hole == end, "open filled the overflow area's holes (first hole at %jd)", (intmax_t) hole);
  CHECK(allocated("refill") - sparse == (512 << 10) + 64 * SEC, "open wrote the holes only (%jd KiB more)",
        (intmax_t) (allocated("refill") - sparse) / 1024);
  CHECK(fd >= 0 && pread(fd, back, SEC, top) == SEC && !memcmp(back, pat, SEC), "the data sector is intact");
  ok = fd >= 0 && pread(fd, back, SEC, top + SEC) == SEC;
  for (uint32_t i = 0; ok && i < SEC; i++)
    ok = back[i] == 0;
  CHECK(ok, "a filled hole reads zeros");
  CHECK(tc_store_write(st, 5, 0, SEC, pat, 1) == 0 && tc_store_sync(st) == 0 &&
        tc_store_read(st, 5, 0, SEC, back, NULL, NULL) == 1 && !memcmp(back, pat, SEC), "the store works after");
  CHECK(tc_store_close(st) == 0, "close refill");
  if (fd >= 0)
    close(fd);
}

static int
sum_cb(void *opaque, const struct tc_store_obj *o)
{
  uint64_t *sum = opaque;
  sum[0]++;
  sum[1] += o->version;
  return 0;
}

static void
test_many_objects(int n)
{
  struct tc_store *st;
  static uint8_t buf[SEC];
  CHECK(format("many", (uint64_t) n * SEC + (32 << 20), 0, 1, false) == 0, "format many");
  CHECK(tc_store_open(&st, path("many"), NULL) == 0, "open many");
  int bad = 0;
  uint64_t vsum = 0;
  for (int i = 0; i < n && !bad; i++) {
    uint64_t inode = 1 + (uint64_t) (i % 7), block = (uint64_t) i * 2654435761u % 1000003;
    memcpy(buf, &i, sizeof i);
    bad += tc_store_write(st, inode, block * TC_STORE_DEFAULT_BLOCK_SIZE + (uint64_t) (i % 32) * SEC, SEC,
                          buf, (uint64_t) i + 1) < 0;
    vsum += (uint64_t) i + 1;
  }
  CHECK(!bad, "%d writes to new objects: %s", n, tc_last_error());
  CHECK(tc_store_close(st) == 0 && tc_store_open(&st, path("many"), NULL) == 0, "reopen many");
  for (int i = 0; i < n && bad < 5; i++) {
    uint64_t inode = 1 + (uint64_t) (i % 7), block = (uint64_t) i * 2654435761u % 1000003, ver = 0;
    int got = -1;
    int r = tc_store_read(st, inode, block * TC_STORE_DEFAULT_BLOCK_SIZE + (uint64_t) (i % 32) * SEC, SEC, buf, NULL, &ver);
    memcpy(&got, buf, sizeof got);
    bad += r != 1 || got != i || ver != (uint64_t) i + 1;
  }
  CHECK(!bad, "every object found after reopen");
  uint64_t sum[2] = { 0, 0 };
  struct tc_store_stats ss;
  CHECK(tc_store_list(st, 0, UINT64_MAX, sum_cb, sum) == 0 && sum[0] == (uint64_t) n && sum[1] == vsum,
        "list of %d objects with their versions", n);
  CHECK(tc_store_stats(st, &ss) == 0 && ss.objects == (uint64_t) n && ss.used_bytes == (uint64_t) n * SEC,
        "stats: %" PRIu64 " objects, %" PRIu64 " bytes", ss.objects, ss.used_bytes);
  tc_store_close(st);
}

/* The smallest (4 KiB, one sector) and largest (1 MiB, 256 sectors, a
 * four-word bitmap, records on LMDB overflow pages) block sizes. */
static void
test_block_sizes(void)
{
  static uint8_t buf[1 << 20], want[SEC];
  static const uint32_t sizes[] = { 4096, 1 << 20 };
  for (int z = 0; z < 2; z++) {
    uint32_t bs = sizes[z], spb = bs / SEC;
    struct tc_store *st;
    char name[16];
    snprintf(name, sizeof name, "bs%u", bs);
    CHECK(format(name, 64 << 20, bs, 1, false) == 0 && tc_store_open(&st, path(name), NULL) == 0,
          "open with block size %u", bs);
    /* Every other sector of 3 objects, then the last sector of each. */
    int bad = 0;
    for (uint64_t b = 0; b < 3; b++) {
      for (uint32_t s = 0; s < spb; s += 2) {
        tl_fill_sector(buf, SEC, 3, b * spb + s, b + 1);
        bad += tc_store_write(st, 3, (b * spb + s) * SEC, SEC, buf, b + 1) < 0;
      }
      tl_fill_sector(buf, SEC, 3, b * spb + spb - 1, 9);
      bad += tc_store_write(st, 3, (b * spb + spb - 1) * SEC, SEC, buf, 9) < 0;
    }
    CHECK(!bad, "writes with block size %u: %s", bs, tc_last_error());
    CHECK(tc_store_close(st) == 0 && tc_store_open(&st, path(name), NULL) == 0, "reopen bs %u", bs);
    uint8_t present[32], scrub_bad[32];
    for (uint64_t b = 0; b < 3; b++) {
      uint64_t v;
      int n = tc_store_read(st, 3, b * bs, bs, buf, present, &v);
      int expect = (int) (spb + 1) / 2 + (spb > 1 && (spb - 1) % 2 ? 1 : 0);
      bad += n != expect || v != 9;
      for (uint32_t s = 0; s < spb; s++) {
        int p = (present[s / 8] >> (s % 8)) & 1;
        uint64_t ver = s == spb - 1 ? 9 : s % 2 == 0 ? b + 1 : 0;
        bad += p != (ver != 0);
        if (ver)
          tl_fill_sector(want, SEC, 3, b * spb + s, ver);
        else
          memset(want, 0, SEC);
        bad += memcmp(want, buf + (size_t) s * SEC, SEC) != 0;
      }
      bad += tc_store_scrub(st, 3, b * bs, scrub_bad) != 0;
      struct tc_store_obj o;
      bad += tc_store_object(st, 3, b * bs, &o) != 1 || o.sectors != (uint32_t) expect ||
             (spb == 256 && !(o.bitmap[3] >> 63));
    }
    CHECK(!bad, "block size %u: contents, bitmaps, versions, scrub after reopen (%d bad)", bs, bad);
    CHECK(tc_store_delete(st, 3, 0, bs) == 0 && tc_store_read(st, 3, 0, SEC, buf, present, NULL) == 0,
          "block size %u: delete", bs);
    tc_store_close(st);
  }
}

/* Put a raw record into the metadata, as corruption or a bug might. */
static int
poke_record(const char *meta, uint64_t block, const void *val, size_t len)
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  uint8_t key[16] = { 0 };
  key[7] = 1;   /* inode 1 */
  for (int i = 0; i < 8; i++)
    key[8 + i] = (uint8_t) (block >> (56 - 8 * i));
  MDB_val k = { sizeof key, key }, v = { len, (void *) val };
  int rc = mdb_env_create(&env);
  if (!rc && !(rc = mdb_env_set_maxdbs(env, 2)) && !(rc = mdb_env_open(env, meta, MDB_NOSUBDIR | MDB_NOLOCK, 0600)) &&
      !(rc = mdb_txn_begin(env, NULL, 0, &txn))) {
    if (!(rc = mdb_dbi_open(txn, "objects", 0, &dbi)) && !(rc = mdb_put(txn, dbi, &k, &v, 0)))
      rc = mdb_txn_commit(txn);
    else
      mdb_txn_abort(txn);
  }
  mdb_env_close(env);
  return rc;
}

static void
test_bad_metadata(void)
{
  struct tc_store *st;
  uint8_t buf[SEC] = { 1 };
  CHECK(format("meta", 32 << 20, 0, 1, false) == 0 && tc_store_open(&st, path("meta"), NULL) == 0 &&
        tc_store_write(st, 1, 0, SEC, buf, 1) == 0 && tc_store_close(st) == 0, "store with one sector");
  /* A second object claiming data sector 0, which block 0 already uses. */
  uint8_t rec[8 + 8 + 12] = { 0 };
  rec[0] = 1;        /* version 1 */
  rec[8] = 1;        /* sector 0 present */
  CHECK(poke_record(path("meta.meta"), 1, rec, sizeof rec) == 0, "poke a shared sector");
  CHECK(tc_store_open(&st, path("meta"), NULL) < 0 && errno == EIO && strstr(tc_last_error(), "used twice"),
        "a sector used twice is refused: %s", tc_last_error());
  /* A sector outside the data area. */
  uint32_t far = 1u << 30;
  memcpy(rec + 16, &far, 4);
  CHECK(poke_record(path("meta.meta"), 1, rec, sizeof rec) == 0, "poke a far sector");
  CHECK(tc_store_open(&st, path("meta"), NULL) < 0 && errno == EIO && strstr(tc_last_error(), "outside the data area"),
        "a sector outside the data area is refused: %s", tc_last_error());
  /* A truncated record. */
  CHECK(poke_record(path("meta.meta"), 1, rec, 10) == 0, "poke a short record");
  CHECK(tc_store_open(&st, path("meta"), NULL) < 0 && errno == EIO && strstr(tc_last_error(), "too short") && strstr(tc_last_error(), "inode 0x1 block 1"),
        "a short record is refused: %s", tc_last_error());
  /* A record whose length does not match its bitmap. */
  CHECK(poke_record(path("meta.meta"), 1, rec, sizeof rec - 4) == 0, "poke a record of the wrong length");
  CHECK(tc_store_open(&st, path("meta"), NULL) < 0 && errno == EIO && strstr(tc_last_error(), "does not match"),
        "a record of the wrong length is refused: %s", tc_last_error());
}

/* Several threads on one store: each owns an inode, writes, syncs, deletes
 * and reads back; the store's mutex keeps them apart. */
struct thr { struct tc_store *st; int id; int bad; };

static void *
thread_main(void *arg)
{
  struct thr *t = arg;
  uint8_t buf[2 * SEC], want[SEC];
  uint64_t inode = 100 + (uint64_t) t->id, seed = (uint64_t) t->id;
  uint64_t ver[64] = { 0 };
  for (int op = 0; op < 400; op++) {
    int sec = (int) (tl_splitmix(&seed) % 64);
    uint64_t off = (uint64_t) sec * SEC;
    if (op % 7 == 6) {
      t->bad += tc_store_delete(t->st, inode, off, SEC) < 0;
      ver[sec] = 0;
    }
    else {
      tl_fill_sector(buf, SEC, inode, (uint64_t) sec, (uint64_t) op + 1);
      t->bad += tc_store_write(t->st, inode, off, SEC, buf, (uint64_t) op + 1) < 0;
      ver[sec] = (uint64_t) op + 1;
    }
    if (op % 50 == 0)
      t->bad += tc_store_sync(t->st) < 0;
    int r = tc_store_read(t->st, inode, off, SEC, buf, NULL, NULL);
    if (ver[sec])
      tl_fill_sector(want, SEC, inode, (uint64_t) sec, ver[sec]);
    else
      memset(want, 0, SEC);
    t->bad += r != (ver[sec] != 0) || memcmp(buf, want, SEC) != 0;
  }
  return NULL;
}

static void
test_threads(void)
{
  struct tc_store *st;
  CHECK(format("thr", 32 << 20, 0, 1, false) == 0 && tc_store_open(&st, path("thr"), NULL) == 0, "open thr");
  struct thr t[4];
  pthread_t tid[4];
  for (int i = 0; i < 4; i++) {
    t[i] = (struct thr) { st, i, 0 };
    pthread_create(&tid[i], NULL, thread_main, &t[i]);
  }
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(tid[i], NULL);
    bad += t[i].bad;
  }
  CHECK(bad == 0, "4 threads on one store: %d failures (%s)", bad, tc_last_error());
  CHECK(tc_store_close(st) == 0, "close thr");
}

/* The background jobs: a kick never waits for a run (the OSD's loop
 * kicks them), kicks during a run ask for exactly one more; a store kicks
 * the writeback as its writes pass TC_STORE_WRITEBACK_BYTES without a
 * sync, and the checkpoint when its batch is full (tests/test-store-
 * background.sh checks under strace that the writer never commits). */
static double
secs_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

static atomic_int slow_runs;

static int
slow_action(struct tc_store_bg *bg)
{
  (void) bg;
  atomic_fetch_add(&slow_runs, 1);
  struct timespec d = { 0, 600 * 1000 * 1000 };
  nanosleep(&d, NULL);
  return 0;
}

static void
test_background(void)
{
  struct tc_store_bg wb;
  tc_store_bg_init(&wb, "a slow job", slow_action, NULL);
  CHECK(tc_store_bg_kick(&wb) == 1, "the first kick starts the job's thread");
  for (int i = 0; i < 100 && !atomic_load(&slow_runs); i++) {
    struct timespec d = { 0, 20 * 1000 * 1000 };
    nanosleep(&d, NULL);
  }
  CHECK(atomic_load(&slow_runs) == 1, "a kick starts a run on the job's thread");
  double slowest = 0;
  for (int i = 0; i < 5; i++) {
    double t0 = secs_now();
    tc_store_bg_kick(&wb);
    double t = secs_now() - t0;
    if (t > slowest)
      slowest = t;
  }
  CHECK(slowest < 0.3, "5 kicks while a 0.6 s run goes on return at once (slowest %.3f s)", slowest);
  for (int i = 0; i < 40 && tc_store_bg_count(&wb) < 2; i++) {
    struct timespec d = { 0, 100 * 1000 * 1000 };
    nanosleep(&d, NULL);
  }
  struct timespec d = { 0, 800 * 1000 * 1000 };
  nanosleep(&d, NULL);
  CHECK(tc_store_bg_count(&wb) == 2, "the kicks during the first run asked for one more run (%" PRIu64 " runs)",
        tc_store_bg_count(&wb));
  tc_store_bg_destroy(&wb);

  struct tc_store *st = NULL;
  enum { OBJ = TC_STORE_DEFAULT_BLOCK_SIZE, NOBJ = (4 << 20) / TC_STORE_DEFAULT_BLOCK_SIZE };
  static uint8_t buf[OBJ];
  struct tc_store_stats ss;
  CHECK(format("wb", 32 << 20, 0, 1, false) == 0 && tc_store_open(&st, path("wb"), NULL) == 0, "open wb");
  if (!st)
    return;
  CHECK(tc_store_stats(st, &ss) == 0 && ss.writebacks == 0, "no writeback before any write");
  int bad = 0;
  for (int i = 0; i < NOBJ; i++) {
    memset(buf, 'a' + i % 26, sizeof buf);
    bad += tc_store_write(st, 5, (uint64_t) i * OBJ, sizeof buf, buf, (uint64_t) i + 1) < 0;
  }
  CHECK(!bad, "4 MiB of unsynced writes: %s", tc_last_error());
  for (int i = 0; i < 100 && tc_store_stats(st, &ss) == 0 && ss.writebacks == 0; i++) {
    struct timespec p = { 0, 50 * 1000 * 1000 };
    nanosleep(&p, NULL);
  }
  CHECK(ss.writebacks >= 1, "4 MiB without a sync started the writeback (%" PRIu64 " times)", ss.writebacks);
  CHECK(tc_store_sync(st) == 0 && tc_store_close(st) == 0, "sync and close wb (joins the writeback thread)");
  CHECK(tc_store_open(&st, path("wb"), NULL) == 0, "reopen wb");
  bad = 0;
  for (int i = 0; i < NOBJ; i++) {
    uint64_t ver = 0;
    bad += tc_store_read(st, 5, (uint64_t) i * OBJ, sizeof buf, buf, NULL, &ver) != OBJ / SEC ||
           ver != (uint64_t) i + 1 || buf[0] != 'a' + i % 26 || buf[sizeof buf - 1] != 'a' + i % 26;
  }
  CHECK(!bad, "the 4 MiB read back after reopen");
  tc_store_close(st);
}

/* More single-sector writes than a batch holds, no sync: the checkpoint
 * job commits the batch while the writes go on, and every write is there
 * after a reopen. */
static void
test_background_checkpoint(void)
{
  struct tc_store *st;
  static uint8_t buf[SEC];
  struct tc_store_stats ss;
  const int n = TC_STORE_BATCH_MAX + 2000;
  CHECK(format("ckpt", (uint64_t) n * SEC + (64 << 20), 0, 1, false) == 0 &&
        tc_store_open(&st, path("ckpt"), NULL) == 0, "open ckpt");
  int bad = 0;
  for (int i = 0; i < n && !bad; i++) {
    memcpy(buf, &i, sizeof i);
    bad += tc_store_write(st, 3, (uint64_t) i * SEC, SEC, buf, (uint64_t) i + 1) < 0;
  }
  CHECK(!bad, "%d writes without a sync: %s", n, tc_last_error());
  for (int i = 0; i < 200 && tc_store_stats(st, &ss) == 0 && ss.checkpoints == 0; i++) {
    struct timespec p = { 0, 50 * 1000 * 1000 };
    nanosleep(&p, NULL);
  }
  CHECK(ss.checkpoints >= 1 && ss.unsynced_ops < (uint64_t) n,
        "the full batch was checkpointed (%" PRIu64 " checkpoints, %" PRIu64 " operations unsynced)",
        ss.checkpoints, ss.unsynced_ops);
  CHECK(tc_store_close(st) == 0 && tc_store_open(&st, path("ckpt"), NULL) == 0, "close and reopen ckpt");
  for (int i = 0; i < n && bad < 5; i++) {
    uint64_t ver = 0;
    int got = -1;
    int r = tc_store_read(st, 3, (uint64_t) i * SEC, SEC, buf, NULL, &ver);
    memcpy(&got, buf, sizeof got);
    bad += r != 1 || got != i || ver < (uint64_t) i + 1;   /* the object's: its last write's */
  }
  CHECK(!bad, "all %d writes read back after reopen", n);
  tc_store_close(st);
}

int
main(void)
{
  if (tc_crypto_init() < 0)
    return 1;
  snprintf(dir, sizeof dir, "/tmp/test-store.XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_format_and_open();
  test_round_trips();
  test_crash_loses_only_unsynced();
  test_corruption();
  test_journal();
  test_space();
  test_threads();
  test_background();
  test_background_checkpoint();
  test_block_sizes();
  test_compact();
  test_fragmented_rewrite();
  test_overflow_refill();
  test_bad_metadata();
  test_many_objects(getenv("TEST_STORE_OBJECTS") ? atoi(getenv("TEST_STORE_OBJECTS")) : 20000);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return DONE();
}
