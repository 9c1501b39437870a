/* The store's asynchronous seam: requests run in submission order on the
 * worker, completions arrive through the eventfd on this thread, errors
 * come back as -errno with the message. */
#include <config.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "crypto.h"
#include "error.h"
#include "store.h"
#include "store_queue.h"
#include "tap.h"

#define SEC TC_STORE_SECTOR
#define N 200

static int order[2 * N + 8], norder;
static pthread_t loop_thread;
static int wrong_thread;

static void
done(struct tc_store_req *r)
{
  order[norder++] = (int) (intptr_t) r->opaque;
  wrong_thread += !pthread_equal(pthread_self(), loop_thread);
}

int
main(void)
{
  char dir[] = "/tmp/test-store-queue.XXXXXX", data[128];
  if (tc_crypto_init() < 0 || !mkdtemp(dir))
    return 1;
  snprintf(data, sizeof data, "%s/d", dir);
  loop_thread = pthread_self();
  struct tc_store_format_opts o = { .data_path = data, .size = 32 << 20, .osd_num = 1 };
  struct tc_store *st;
  struct tc_store_queue *q;
  CHECK(tc_store_format(&o) == 0 && tc_store_open(&st, data, NULL) == 0, "open: %s", tc_last_error());
  CHECK(tc_store_queue_new(&q, st) == 0, "queue: %s", tc_last_error());

  static struct tc_store_req w[N], r[N], s, bad;
  static uint8_t wbuf[N][SEC], rbuf[N][SEC];
  int k = 0;
  /* Writes, a sync, then reads of the same sectors: FIFO makes each read
   * see its write. Plus one request that must fail. */
  for (int i = 0; i < N; i++) {
    memset(wbuf[i], i + 1, SEC);
    w[i] = (struct tc_store_req) { .op = TC_STORE_OP_WRITE, .inode = 7, .offset = (uint64_t) i * SEC,
                                   .len = SEC, .buf = wbuf[i], .version = (uint64_t) i + 1, .done = done,
                                   .opaque = (void *) (intptr_t) k++ };
    CHECK(tc_store_submit(q, &w[i]) == 0, "submit write");
  }
  s = (struct tc_store_req) { .op = TC_STORE_OP_SYNC, .done = done, .opaque = (void *) (intptr_t) k++ };
  CHECK(tc_store_submit(q, &s) == 0, "submit sync");
  bad = (struct tc_store_req) { .op = TC_STORE_OP_WRITE, .inode = 7, .offset = 100, .len = SEC, .buf = wbuf[0],
                                .version = 1, .done = done, .opaque = (void *) (intptr_t) k++ };
  CHECK(tc_store_submit(q, &bad) == 0, "submit bad");
  for (int i = 0; i < N; i++) {
    r[i] = (struct tc_store_req) { .op = TC_STORE_OP_READ, .inode = 7, .offset = (uint64_t) i * SEC,
                                   .len = SEC, .buf = rbuf[i], .done = done, .opaque = (void *) (intptr_t) k++ };
    CHECK(tc_store_submit(q, &r[i]) == 0, "submit read");
  }
  /* The event loop: poll the eventfd until everything completed. */
  int polls = 0;
  while (norder < k && polls < 10000) {
    struct pollfd p = { tc_store_queue_fd(q), POLLIN, 0 };
    if (poll(&p, 1, 5000) < 0)
      break;
    polls++;
    if (tc_store_queue_complete(q) < 0)
      break;
  }
  CHECK(norder == k, "%d of %d completions", norder, k);
  int in_order = 1;
  for (int i = 0; i < norder; i++)
    in_order &= order[i] == i;
  CHECK(in_order, "completions in submission order");
  CHECK(!wrong_thread, "done() runs on the polling thread");
  int ok = s.result == 0;
  for (int i = 0; i < N; i++)   /* an object's version is that of its last write */
    ok &= w[i].result == 0 && r[i].result == 1 && r[i].version == (uint64_t) ((i / 32 + 1) * 32 < N ? (i / 32 + 1) * 32 : N) &&
          memcmp(rbuf[i], wbuf[i], SEC) == 0;
  CHECK(ok, "every write, the sync and every read succeeded with the right data");
  CHECK(bad.result == -EINVAL && strstr(bad.error, "4 KiB"), "error as -errno with its message: %d %s",
        bad.result, bad.error);
  /* Free drains what is still queued. */
  struct tc_store_req last = { .op = TC_STORE_OP_SYNC, .done = done, .opaque = (void *) (intptr_t) k++ };
  CHECK(tc_store_submit(q, &last) == 0, "submit last");
  tc_store_queue_free(q);
  CHECK(norder == k && last.result == 0, "free runs the last completion");
  CHECK(tc_store_close(st) == 0, "close");
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    return 1;
  return DONE();
}
