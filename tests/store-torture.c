/* Crash torture driver for the OSD store (used by test-store-crash.sh).
 *
 *   store-torture run DATA SEED FIRST_VERSION OPS SYNC_EVERY [DIE_AFTER]
 *     Random sector-aligned writes (content derived from inode, sector and
 *     version) and deletes on a small set of objects; before each op it
 *     prints "W ino blk first count ver" or "D ino blk first count", after
 *     every SYNC_EVERY ops it syncs and prints "S".
 *   store-torture run-async ...   (the same arguments)
 *     The syncs run on a second thread while the writes go on (the OSD's
 *     group commit): after op N the writer asks for a sync and carries on;
 *     the sync thread prints "S N" when it returns (ops 1..N durable). With DIE_AFTER it kills itself
 *     (SIGKILL) right after op DIE_AFTER, inside a batch. Every line is flushed,
 *     so after a kill -9 the log names every op that may have started and
 *     every op that was acknowledged as synced.
 *
 *   store-torture verify DATA BASELINE < LOG
 *     BASELINE holds the state verified after the previous round (absent
 *     file = empty store); LOG is this round's output. Checks every sector:
 *     present sectors decode to a sector written by some op, never garbage,
 *     and are in the state after the last synced op on that sector or after
 *     a later op on it; also that the whole store equals the state after
 *     one prefix of the log at or past the last sync (the store commits in
 *     batches). Then writes the observed state to BASELINE. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include "crypto.h"
#include "error.h"
#include "store.h"
#include "testlib.h"

#define SEC TC_STORE_SECTOR
#define INODES 3
#define BLOCKS 32
#define SPB 32                      /* 128 KiB blocks */
#define NSECT (INODES * BLOCKS * SPB)
#define NOBJ (INODES * BLOCKS)
#define INODE(i) (0x10000 + (uint64_t) (i))

/* run-async: the sync thread and what it was asked for. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  long asked, done;          /* op counts */
  int stop, failed;
  struct tc_store *st;
} as = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, NULL };

static void *
sync_thread(void *arg)
{
  (void) arg;
  pthread_mutex_lock(&as.lock);
  for (;;) {
    while (as.asked == as.done && !as.stop)
      pthread_cond_wait(&as.cond, &as.lock);
    if (as.asked == as.done)
      break;
    long n = as.asked;
    pthread_mutex_unlock(&as.lock);
    int r = tc_store_sync(as.st);
    if (r == 0) {
      printf("S %ld\n", n);
      fflush(stdout);
    }
    else
      fprintf(stderr, "store-torture: sync after op %ld: %s\n", n, tc_last_error());
    pthread_mutex_lock(&as.lock);
    as.done = n;
    as.failed |= r < 0;
  }
  pthread_mutex_unlock(&as.lock);
  return NULL;
}

static int
run(const char *data, uint64_t seed, uint64_t ver, long ops, long sync_every, long die_after, int async)
{
  struct tc_store *st;
  pthread_t th;
  static uint8_t buf[SPB * SEC];
  if (tc_store_open(&st, data, NULL) < 0) {
    fprintf(stderr, "store-torture: %s\n", tc_last_error());
    return 1;
  }
  as.st = st;
  if (async && pthread_create(&th, NULL, sync_thread, NULL) != 0) {
    fprintf(stderr, "store-torture: no sync thread\n");
    return 1;
  }
  for (long n = 1; n <= ops; n++) {
    int i = (int) (tl_splitmix(&seed) % INODES), b = (int) (tl_splitmix(&seed) % BLOCKS);
    int first = (int) (tl_splitmix(&seed) % SPB), count = 1 + (int) (tl_splitmix(&seed) % (SPB - first));
    if (tl_splitmix(&seed) % 4 == 0)
      count = SPB - first;     /* often to the end of the block: large writes too */
    uint64_t off = ((uint64_t) b * SPB + first) * SEC;
    int r;
    if (tl_splitmix(&seed) % 16) {
      ver++;
      printf("W %d %d %d %d %" PRIu64 "\n", i, b, first, count, ver);
      fflush(stdout);
      for (int s = 0; s < count; s++)
        tl_fill_sector(buf + s * SEC, SEC, INODE(i), (uint64_t) b * SPB + first + s, ver);
      r = tc_store_write(st, INODE(i), off, (uint32_t) count * SEC, buf, ver);
    }
    else {
      printf("D %d %d %d %d\n", i, b, first, count);
      fflush(stdout);
      r = tc_store_delete(st, INODE(i), off, (uint32_t) count * SEC);
    }
    if (n == die_after)
      raise(SIGKILL);
    if (async && r == 0 && n % sync_every == 0) {
      pthread_mutex_lock(&as.lock);
      as.asked = n;
      r = as.failed ? -1 : 0;
      pthread_cond_signal(&as.cond);
      pthread_mutex_unlock(&as.lock);
    }
    else if (r == 0 && n % sync_every == 0 && (r = tc_store_sync(st)) == 0) {
      printf("S\n");
      fflush(stdout);
    }
    if (r < 0) {
      fprintf(stderr, "store-torture: op %ld: %s\n", n, tc_last_error());
      return 1;
    }
  }
  if (async) {
    pthread_mutex_lock(&as.lock);
    as.stop = 1;
    pthread_cond_signal(&as.cond);
    pthread_mutex_unlock(&as.lock);
    pthread_join(th, NULL);
  }
  return tc_store_close(st) < 0;
}

struct op { char kind; int i, b, first, count; uint64_t ver; };

/* Apply op to a state (per-sector version, 0 = absent; per-object version).
 * Calls changed(sector) for each sector whose value changes. */
static void
apply(const struct op *o, uint64_t *sect, uint64_t *objv, void (*changed)(int, uint64_t, uint64_t))
{
  int obj = o->i * BLOCKS + o->b;
  for (int s = o->first; s < o->first + o->count; s++) {
    int k = obj * SPB + s;
    uint64_t nv = o->kind == 'W' ? o->ver : 0;
    if (changed)
      changed(k, sect[k], nv);
    sect[k] = nv;
  }
  if (o->kind == 'W')
    objv[obj] = o->ver;
}

static uint64_t observed[NSECT], observed_objv[NOBJ];
static long mismatches;

static void
count_change(int k, uint64_t from, uint64_t to)
{
  mismatches += (to != observed[k]) - (from != observed[k]);
}

static int
verify(const char *data, const char *baseline)
{
  static uint64_t base[NSECT], base_objv[NOBJ], synced[NSECT], state[NSECT], objv[NOBJ];
  FILE *f = fopen(baseline, "rb");
  if (f) {
    if (fread(base, sizeof base, 1, f) != 1 || fread(base_objv, sizeof base_objv, 1, f) != 1) {
      fprintf(stderr, "store-torture: %s is not a baseline\n", baseline);
      return 1;
    }
    fclose(f);
  }
  /* Read the log: complete lines only (a kill may cut the last one). */
  size_t nops = 0, cap = 1024, nsynced = 0;
  struct op *ops = malloc(cap * sizeof *ops);
  char line[128];
  while (ops && fgets(line, sizeof line, stdin)) {
    if (!strchr(line, '\n'))
      break;
    struct op o = { 0 };
    if (line[0] == 'S') {
      long upto;   /* "S N" (run-async): ops 1..N are durable */
      if (sscanf(line, "S %ld", &upto) != 1)
        nsynced = nops;
      else if (upto < 0 || (size_t) upto > nops) {
        fprintf(stderr, "store-torture: bad log line (sync of ops not started): %s", line);
        return 1;
      }
      else if ((size_t) upto > nsynced)
        nsynced = (size_t) upto;
      continue;
    }
    int n = sscanf(line, "%c %d %d %d %d %" SCNu64, &o.kind, &o.i, &o.b, &o.first, &o.count, &o.ver);
    if (!((o.kind == 'W' && n == 6) || (o.kind == 'D' && n == 5)) || o.i < 0 || o.i >= INODES ||
        o.b < 0 || o.b >= BLOCKS || o.first < 0 || o.count < 1 || o.first + o.count > SPB) {
      fprintf(stderr, "store-torture: bad log line: %s", line);
      return 1;
    }
    if (nops == cap && !(ops = realloc(ops, (cap *= 2) * sizeof *ops)))
      break;
    ops[nops++] = o;
  }
  if (!ops) {
    fprintf(stderr, "store-torture: out of memory\n");
    return 1;
  }

  struct tc_store *st;
  if (tc_store_open(&st, data, NULL) < 0) {
    fprintf(stderr, "store-torture: reopen after the crash: %s\n", tc_last_error());
    return 1;
  }
  static uint8_t buf[SPB * SEC], want[SEC];
  long garbage = 0;
  for (int i = 0; i < INODES; i++)
    for (int b = 0; b < BLOCKS; b++) {
      uint8_t present[SPB / 8];
      uint64_t v;
      int obj = i * BLOCKS + b;
      if (tc_store_read(st, INODE(i), (uint64_t) b * SPB * SEC, SPB * SEC, buf, present, &v) < 0) {
        fprintf(stderr, "store-torture: FAIL: read of inode %d block %d: %s\n", i, b, tc_last_error());
        return 1;
      }
      observed_objv[obj] = v;
      for (int s = 0; s < SPB; s++) {
        int k = obj * SPB + s;
        observed[k] = 0;
        if (!((present[s / 8] >> (s % 8)) & 1))
          continue;
        memcpy(&observed[k], buf + s * SEC, 8);
        tl_fill_sector(want, SEC, INODE(i), (uint64_t) b * SPB + s, observed[k]);
        if (memcmp(want, buf + s * SEC, SEC) != 0) {
          garbage++;
          fprintf(stderr, "store-torture: FAIL: inode %d block %d sector %d holds garbage\n", i, b, s);
        }
      }
    }
  tc_store_close(st);

  /* Per sector: the synced state or the state after a later op on it. */
  memcpy(synced, base, sizeof base);
  memcpy(objv, base_objv, sizeof objv);
  for (size_t n = 0; n < nsynced; n++)
    apply(&ops[n], synced, objv, NULL);
  long lost = 0;
  for (int k = 0; k < NSECT; k++) {
    if (observed[k] == synced[k])
      continue;
    int ok = 0;
    for (size_t n = nsynced; n < nops && !ok; n++) {
      const struct op *o = &ops[n];
      ok = k / SPB == o->i * BLOCKS + o->b && k % SPB >= o->first && k % SPB < o->first + o->count &&
           observed[k] == (o->kind == 'W' ? o->ver : 0);
    }
    if (!ok) {
      lost++;
      if (lost < 10)
        fprintf(stderr, "store-torture: FAIL: object %d sector %d holds version %" PRIu64
                ", synced %" PRIu64 " and no later op wrote that\n", k / SPB, k % SPB, observed[k], synced[k]);
    }
  }
  /* Batch atomicity: the whole store equals the state after some prefix. */
  memcpy(state, synced, sizeof state);
  mismatches = 0;
  for (int k = 0; k < NSECT; k++)
    mismatches += state[k] != observed[k];
  long prefix = -1;
  for (size_t n = nsynced;; n++) {
    if (mismatches == 0) {
      int objs_ok = 1;
      for (int o = 0; o < NOBJ; o++) {
        int any = 0;
        for (int s = 0; s < SPB; s++)
          any |= observed[o * SPB + s] != 0;
        objs_ok &= !any || observed_objv[o] == objv[o];
      }
      if (objs_ok) {
        prefix = (long) n;
        break;
      }
    }
    if (n == nops)
      break;
    apply(&ops[n], state, objv, count_change);
  }
  printf("verify: %zu ops in the log, %zu synced, store = state after op %ld; %ld garbage, %ld lost\n",
         nops, nsynced, prefix, garbage, lost);
  free(ops);
  if (garbage || lost || prefix < 0) {
    if (prefix < 0)
      fprintf(stderr, "store-torture: FAIL: the store matches no prefix of the log at or past the last sync\n");
    return 1;
  }
  f = fopen(baseline, "wb");
  if (!f || fwrite(observed, sizeof observed, 1, f) != 1 || fwrite(observed_objv, sizeof observed_objv, 1, f) != 1 ||
      fclose(f) != 0) {
    fprintf(stderr, "store-torture: writing %s failed\n", baseline);
    return 1;
  }
  return 0;
}

int
main(int argc, char **argv)
{
  if (tc_crypto_init() < 0)
    return 1;
  if ((argc == 7 || argc == 8) && (!strcmp(argv[1], "run") || !strcmp(argv[1], "run-async")))
    return run(argv[2], strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0), atol(argv[5]), atol(argv[6]),
               argc == 8 ? atol(argv[7]) : 0, !strcmp(argv[1], "run-async"));
  if (argc == 4 && !strcmp(argv[1], "verify"))
    return verify(argv[2], argv[3]);
  fprintf(stderr, "usage: store-torture run|run-async DATA SEED FIRST_VERSION OPS SYNC_EVERY [DIE_AFTER]\n"
          "       store-torture verify DATA BASELINE < LOG\n");
  return 2;
}
