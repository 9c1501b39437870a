/* The KV client against a real KV server (etcd, or tromcho-gateway): every
 * operation, non-blocking calls on the background thread and on a caller's
 * poll loop, a watch that resumes across a server restart with no lost and
 * no repeated event, failover from a dead endpoint, a burst of 1000
 * concurrent requests over a bounded number of connections, and 16 threads
 * doing CAS increments with no lost update.
 *
 * Run by test-kv-client.sh: KV_URL = the server, KV_RESTART = a command that
 * restarts it (optional: without it the restart part is skipped). */
#include <config.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "error.h"
#include "kv_client.h"
#include "log.h"
#include "tap.h"

static const char *url;
static char pfx[64];       /* a prefix of this run's own */

static char *
k(const char *suffix)
{
  static _Thread_local char buf[8][256];
  static _Thread_local int i;
  char *b = buf[i++ % 8];
  snprintf(b, 256, "%s%s", pfx, suffix);
  return b;
}

static struct tc_kv *
client(const char *const *urls, int n)
{
  /* https: the CA and client certificate from the environment. */
  struct tc_kv_options o = { .urls = urls, .n_urls = n, .connect_timeout_ms = 2000, .request_timeout_ms = 10000,
                             .ca = getenv("KV_CA"), .cert = getenv("KV_CERT"), .key = getenv("KV_KEY") };
  struct tc_kv *kv = tc_kv_new(&o);
  if (!kv) {
    fprintf(stderr, "tc_kv_new: %s\n", tc_last_error());
    exit(1);
  }
  return kv;
}

static uint64_t
now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static void
lost_count(void *arg, int64_t id)
{
  (void) id;
  __atomic_add_fetch((int *) arg, 1, __ATOMIC_RELAXED);
}

static void
sleep_ms(int ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

static void
test_basic(struct tc_kv *kv)
{
  struct tc_kv_result r;
  /* Binary key and value: NUL and 0xff bytes survive base64. */
  uint8_t bkey[64], bval[5] = { 0, 0xff, 1, 0, 0x80 };
  size_t bkl = (size_t) snprintf((char *) bkey, sizeof bkey, "%s", k("bin/")) ;
  bkey[bkl++] = 0;
  bkey[bkl++] = 0xff;
  CHECK(tc_kv_put(kv, bkey, bkl, bval, sizeof bval, 0, &r) == 0, "put binary: %s", tc_last_error());
  int64_t put_rev = r.revision;
  CHECK(put_rev > 0, "put returns the header revision");
  tc_kv_result_free(&r);
  CHECK(tc_kv_get(kv, bkey, bkl, &r) == 0, "get binary: %s", tc_last_error());
  CHECK(r.n_kvs == 1 && r.kvs[0].key_len == bkl && !memcmp(r.kvs[0].key, bkey, bkl) &&
        r.kvs[0].value_len == sizeof bval && !memcmp(r.kvs[0].value, bval, sizeof bval), "binary round trip");
  CHECK(r.n_kvs == 1 && r.kvs[0].mod_revision == put_rev && r.kvs[0].create_revision == put_rev &&
        r.kvs[0].version == 1 && r.kvs[0].lease == 0, "revisions and version of a new key");
  tc_kv_result_free(&r);

  /* Missing key. */
  CHECK(tc_kv_get(kv, k("nothing"), 0, &r) == 0 && r.n_kvs == 0 && r.count == 0, "get missing key");
  tc_kv_result_free(&r);

  /* Versions count up; create_revision stays. */
  CHECK(tc_kv_put(kv, k("v"), 0, "one", 0, 0, NULL) == 0, "put v");
  CHECK(tc_kv_put(kv, k("v"), 0, "two", 0, 0, NULL) == 0, "put v again");
  CHECK(tc_kv_get(kv, k("v"), 0, &r) == 0 && r.n_kvs == 1 && r.kvs[0].version == 2 &&
        r.kvs[0].create_revision < r.kvs[0].mod_revision && !strcmp((char *) r.kvs[0].value, "two"),
        "version 2 after two puts");
  tc_kv_result_free(&r);
  /* Empty value. */
  CHECK(tc_kv_put(kv, k("empty"), 0, NULL, 0, 0, NULL) == 0, "put empty value");
  CHECK(tc_kv_get(kv, k("empty"), 0, &r) == 0 && r.n_kvs == 1 && r.kvs[0].value_len == 0 &&
        r.kvs[0].value[0] == 0, "empty value reads back empty");
  tc_kv_result_free(&r);

  /* Prefix reads, limit, count. */
  for (int i = 0; i < 5; i++) {
    char key[160], val[16];
    snprintf(key, sizeof key, "%sdir/%d", pfx, i);
    snprintf(val, sizeof val, "val%d", i);
    CHECK(tc_kv_put(kv, key, 0, val, 0, 0, NULL) == 0, "put dir/%d", i);
  }
  CHECK(tc_kv_put(kv, k("dir0"), 0, "outside", 0, 0, NULL) == 0, "put dir0");
  CHECK(tc_kv_get_prefix(kv, k("dir/"), 0, &r) == 0, "prefix: %s", tc_last_error());
  CHECK(r.n_kvs == 5 && r.count == 5 && !r.more, "prefix finds 5 keys (got %zu)", r.n_kvs);
  for (size_t i = 0; i < r.n_kvs; i++) {
    char want[32];
    snprintf(want, sizeof want, "val%zu", i);
    CHECK(!strcmp((char *) r.kvs[i].value, want), "prefix result %zu in key order", i);
  }
  tc_kv_result_free(&r);
  struct tc_kv_request lim = { .type = TC_KV_REQ_OP,
                               .op = { .type = TC_KV_RANGE, .key = k("dir/"), .prefix = true, .limit = 2 } };
  CHECK(tc_kv_request(kv, &lim, &r) == 0 && r.n_kvs == 2 && r.more && r.count == 5, "limit 2: more, count 5");
  tc_kv_result_free(&r);
  struct tc_kv_request cnt = { .type = TC_KV_REQ_OP,
                               .op = { .type = TC_KV_RANGE, .key = k("dir/"), .prefix = true, .count_only = true } };
  CHECK(tc_kv_request(kv, &cnt, &r) == 0 && r.n_kvs == 0 && r.count == 5, "count_only");
  tc_kv_result_free(&r);
  /* Explicit range [dir/1, dir/3). */
  struct tc_kv_request rng = { .type = TC_KV_REQ_OP,
                               .op = { .type = TC_KV_RANGE, .key = k("dir/1"), .range_end = k("dir/3") } };
  CHECK(tc_kv_request(kv, &rng, &r) == 0 && r.n_kvs == 2, "range [dir/1, dir/3) has 2 keys");
  tc_kv_result_free(&r);
  /* Reading at an old revision. */
  struct tc_kv_request old = { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_RANGE, .key = k("v"), .revision = put_rev } };
  CHECK(tc_kv_request(kv, &old, &r) == 0 && r.n_kvs == 0, "key v did not exist at an older revision");
  tc_kv_result_free(&r);

  /* Delete one, delete a prefix. */
  CHECK(tc_kv_delete(kv, k("dir/0"), 0, false, &r) == 0 && r.deleted == 1, "delete one key");
  tc_kv_result_free(&r);
  CHECK(tc_kv_delete(kv, k("dir/"), 0, true, &r) == 0 && r.deleted == 4, "delete prefix deletes 4 (%" PRId64 ")",
        r.deleted);
  tc_kv_result_free(&r);
  CHECK(tc_kv_get(kv, k("dir0"), 0, &r) == 0 && r.n_kvs == 1, "the prefix delete left dir0");
  tc_kv_result_free(&r);
  CHECK(tc_kv_delete(kv, k("nothing"), 0, false, &r) == 0 && r.deleted == 0, "deleting nothing deletes 0");
  tc_kv_result_free(&r);
  /* prev_kv on delete. */
  struct tc_kv_request dp = { .type = TC_KV_REQ_OP,
                              .op = { .type = TC_KV_DELETE, .key = k("dir0"), .prev_kv = true } };
  CHECK(tc_kv_request(kv, &dp, &r) == 0 && r.n_kvs == 1 && !strcmp((char *) r.kvs[0].value, "outside"),
        "delete with prev_kv returns the old pair");
  tc_kv_result_free(&r);

  /* Errors: empty key. */
  CHECK(tc_kv_put(kv, "", 0, "x", 0, 0, NULL) < 0 && errno == EINVAL, "empty key refused with EINVAL");
}

static void
test_leases(struct tc_kv *kv)
{
  struct tc_kv_result r;
  int64_t id = 0, ttl = 0;
  CHECK(tc_kv_lease_grant(kv, 30, &id) == 0 && id != 0, "lease grant: %s", tc_last_error());
  CHECK(tc_kv_put(kv, k("leased"), 0, "x", 0, id, NULL) == 0, "put with lease");
  CHECK(tc_kv_get(kv, k("leased"), 0, &r) == 0 && r.n_kvs == 1 && r.kvs[0].lease == id, "key carries the lease");
  tc_kv_result_free(&r);
  CHECK(tc_kv_lease_keepalive(kv, id, &ttl) == 0 && ttl > 25 && ttl <= 30, "keepalive: ttl %" PRId64, ttl);
  CHECK(tc_kv_lease_revoke(kv, id) == 0, "revoke: %s", tc_last_error());
  CHECK(tc_kv_get(kv, k("leased"), 0, &r) == 0 && r.n_kvs == 0, "revoking the lease deleted its key");
  tc_kv_result_free(&r);
  CHECK(tc_kv_lease_keepalive(kv, id, &ttl) < 0 && errno == ENOENT, "keepalive of a revoked lease: ENOENT (%s)",
        tc_last_error());
  CHECK(tc_kv_put(kv, k("leased"), 0, "x", 0, id, NULL) < 0, "put with a revoked lease fails");
  /* A keeper of a lease the server dropped: lost once, and its "until"
   * drops to 0 (the lease is not held, whatever the grant said). */
  int lost = 0;
  uint64_t g = now_ms();
  struct tc_kv_lease_keeper *gone = tc_kv_lease_keeper_start(kv, id, 2, g, lost_count, &lost);
  CHECK(gone != NULL, "keeper of a revoked lease starts");
  sleep_ms(1200);
  CHECK(__atomic_load_n(&lost, __ATOMIC_RELAXED) == 1, "the keeper of a revoked lease says it is lost (%d)", lost);
  CHECK(tc_kv_lease_keeper_until_ms(gone) == 0, "a lease the server says is gone is held until 0, at once");
  tc_kv_lease_keeper_stop(gone);

  /* A lease left alone expires; the keeper keeps another alive. */
  int64_t short_id, kept_id;
  CHECK(tc_kv_lease_grant(kv, 2, &short_id) == 0, "grant 2 s");
  CHECK(tc_kv_lease_grant(kv, 2, &kept_id) == 0, "grant 2 s (kept)");
  CHECK(tc_kv_put(kv, k("short"), 0, "x", 0, short_id, NULL) == 0, "put on short lease");
  CHECK(tc_kv_put(kv, k("kept"), 0, "x", 0, kept_id, NULL) == 0, "put on kept lease");
  /* A keeper whose holder stops beating lets its lease lapse. */
  int64_t hung_id;
  int hung_lost = 0;
  uint64_t beat = now_ms();
  CHECK(tc_kv_lease_grant(kv, 2, &hung_id) == 0, "grant 2 s (holder hangs)");
  CHECK(tc_kv_put(kv, k("hung"), 0, "x", 0, hung_id, NULL) == 0, "put on the hung holder's lease");
  struct tc_kv_lease_keeper *hung = tc_kv_lease_keeper_start(kv, hung_id, 2, 0, lost_count, &hung_lost);
  CHECK(hung != NULL, "keeper start (holder hangs)");
  tc_kv_lease_keeper_watch(hung, &beat, 1000);
  uint64_t t0 = now_ms();
  struct tc_kv_lease_keeper *keeper = tc_kv_lease_keeper_start(kv, kept_id, 2, t0 - 500, NULL, NULL);
  CHECK(keeper != NULL, "keeper start");
  uint64_t u0 = tc_kv_lease_keeper_until_ms(keeper);
  CHECK(u0 == t0 - 500 + 1800, "until: nine tenths of the TTL after the grant was sent (%" PRIu64 " ms after it)",
        u0 - (t0 - 500));
  /* etcd checks expiry every 500 ms; allow for it. */
  sleep_ms(4500);
  uint64_t u1 = tc_kv_lease_keeper_until_ms(keeper);
  CHECK(u1 > now_ms() && u1 <= now_ms() + 1800, "until moves on with each renewal (%" PRId64 " ms ahead)",
        (int64_t) (u1 - now_ms()));
  CHECK(tc_kv_get(kv, k("short"), 0, &r) == 0 && r.n_kvs == 0, "a lease nobody renews expires with its key");
  tc_kv_result_free(&r);
  CHECK(tc_kv_get(kv, k("kept"), 0, &r) == 0 && r.n_kvs == 1, "the keeper kept its lease alive");
  tc_kv_result_free(&r);
  CHECK(tc_kv_get(kv, k("hung"), 0, &r) == 0 && r.n_kvs == 0, "a lease whose holder stopped beating lapsed");
  tc_kv_result_free(&r);
  /* The holder beats again: the keeper tries, the server says the lease
   * is gone, the keeper says lost. */
  __atomic_store_n(&beat, now_ms(), __ATOMIC_RELEASE);
  sleep_ms(1200);
  CHECK(__atomic_load_n(&hung_lost, __ATOMIC_RELAXED) == 1, "a lapsed lease is lost once its holder beats (%d)",
        hung_lost);
  tc_kv_lease_keeper_stop(hung);
  tc_kv_lease_keeper_stop(keeper);
  tc_kv_lease_revoke(kv, kept_id);
}

static void
test_txn(struct tc_kv *kv)
{
  struct tc_kv_result r;
  CHECK(tc_kv_put(kv, k("t"), 0, "a", 0, 0, &r) == 0, "put t");
  int64_t rev = r.revision;
  tc_kv_result_free(&r);

  /* Compare on value: success runs put + range. */
  struct tc_kv_cmp c1 = { .key = k("t"), .target = TC_KV_CMP_VALUE, .result = TC_KV_EQUAL, .value = "a" };
  struct tc_kv_op s1[] = {
    { .type = TC_KV_PUT, .key = k("t"), .value = "b" },
    { .type = TC_KV_RANGE, .key = k("t") },
  };
  struct tc_kv_op f1[] = { { .type = TC_KV_PUT, .key = k("t-failed"), .value = "x" } };
  struct tc_kv_txn t1 = { &c1, 1, s1, 2, f1, 1 };
  CHECK(tc_kv_txn(kv, &t1, &r) == 0 && r.succeeded, "txn value == a succeeds: %s", tc_last_error());
  CHECK(r.n_responses == 2 && r.responses[1].n_kvs == 1 && !strcmp((char *) r.responses[1].kvs[0].value, "b"),
        "txn responses: the range sees the put");
  tc_kv_result_free(&r);
  /* Same compare again fails: failure branch runs. */
  CHECK(tc_kv_txn(kv, &t1, &r) == 0 && !r.succeeded && r.n_responses == 1, "txn value == a now fails");
  tc_kv_result_free(&r);
  CHECK(tc_kv_get(kv, k("t-failed"), 0, &r) == 0 && r.n_kvs == 1, "failure branch ran");
  tc_kv_result_free(&r);

  /* Version, create and mod revision; a missing key has all 0. */
  struct tc_kv_cmp create0 = { .key = k("t-new"), .target = TC_KV_CMP_CREATE, .result = TC_KV_EQUAL, .number = 0 };
  struct tc_kv_op put_new = { .type = TC_KV_PUT, .key = k("t-new"), .value = "1" };
  struct tc_kv_txn t2 = { &create0, 1, &put_new, 1, NULL, 0 };
  CHECK(tc_kv_txn(kv, &t2, &r) == 0 && r.succeeded, "create_revision == 0 on a missing key");
  tc_kv_result_free(&r);
  CHECK(tc_kv_txn(kv, &t2, &r) == 0 && !r.succeeded, "create_revision == 0 fails once it exists");
  tc_kv_result_free(&r);
  struct tc_kv_cmp ver = { .key = k("t"), .target = TC_KV_CMP_VERSION, .result = TC_KV_EQUAL, .number = 2 };
  struct tc_kv_txn t3 = { &ver, 1, NULL, 0, NULL, 0 };
  CHECK(tc_kv_txn(kv, &t3, &r) == 0 && r.succeeded, "version == 2");
  tc_kv_result_free(&r);
  struct tc_kv_cmp mod[] = {
    { .key = k("t"), .target = TC_KV_CMP_MOD, .result = TC_KV_GREATER, .number = rev },
    { .key = k("t"), .target = TC_KV_CMP_CREATE, .result = TC_KV_EQUAL, .number = rev },
    { .key = k("t"), .target = TC_KV_CMP_VALUE, .result = TC_KV_NOT_EQUAL, .value = "a" },
    { .key = k("t"), .target = TC_KV_CMP_VERSION, .result = TC_KV_LESS, .number = 3 },
  };
  struct tc_kv_txn t4 = { mod, 4, NULL, 0, NULL, 0 };
  CHECK(tc_kv_txn(kv, &t4, &r) == 0 && r.succeeded, "mod > rev, create == rev, value != a, version < 3");
  tc_kv_result_free(&r);
  mod[0].result = TC_KV_LESS;
  CHECK(tc_kv_txn(kv, &t4, &r) == 0 && !r.succeeded, "one false compare fails the txn");
  tc_kv_result_free(&r);
  /* Delete inside a txn. */
  struct tc_kv_op del = { .type = TC_KV_DELETE, .key = k("t"), .prefix = true };
  struct tc_kv_txn t5 = { NULL, 0, &del, 1, NULL, 0 };
  CHECK(tc_kv_txn(kv, &t5, &r) == 0 && r.succeeded && r.n_responses == 1 && r.responses[0].deleted == 3,
        "txn delete prefix t: deleted %" PRId64, r.n_responses ? r.responses[0].deleted : -1);
  tc_kv_result_free(&r);
}

/* ---- non-blocking ---- */

struct waiter {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done, errors;
  int64_t max_rev;
};

static void
on_done(void *arg, int err, const char *msg, struct tc_kv_result *res)
{
  struct waiter *w = arg;
  pthread_mutex_lock(&w->lock);
  w->done++;
  if (err) {
    w->errors++;
    fprintf(stderr, "async error: %s\n", msg);
  }
  if (res->revision > w->max_rev)
    w->max_rev = res->revision;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

static void
test_async(struct tc_kv *kv)
{
  struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };
  enum { N = 100 };
  for (int i = 0; i < N; i++) {
    char key[160], val[16];
    snprintf(key, sizeof key, "%sasync/%03d", pfx, i);
    snprintf(val, sizeof val, "%d", i);
    struct tc_kv_request req = { .type = TC_KV_REQ_OP,
                                 .op = { .type = TC_KV_PUT, .key = key, .value = val } };
    CHECK(tc_kv_submit(kv, &req, on_done, &w) == 0, "submit %d", i);
  }
  pthread_mutex_lock(&w.lock);
  while (w.done < N)
    pthread_cond_wait(&w.cond, &w.lock);
  pthread_mutex_unlock(&w.lock);
  CHECK(w.errors == 0, "async puts without error");
  struct tc_kv_result r;
  CHECK(tc_kv_get_prefix(kv, k("async/"), 0, &r) == 0 && r.n_kvs == N, "100 async puts landed (%zu)", r.n_kvs);
  tc_kv_result_free(&r);
}

static double mono(void);

/* Sockets this process has open now. */
static int
count_sockets(void)
{
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  if (!d)
    return -1;
  while ((e = readdir(d))) {
    char path[300], target[64];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t l = readlink(path, target, sizeof target - 1);
    if (l > 0) {
      target[l] = 0;
      n += !strncmp(target, "socket:", 7);
    }
  }
  closedir(d);
  return n;
}

/* A burst of 1000 concurrent requests on a fresh client whose requests may
 * stay silent for at most 1 s: they queue behind a few kept-alive
 * connections (no handshake storm, no queue time counted as silence) and
 * all succeed, over http and over https alike. */
static void
test_burst(void)
{
  enum { N = 1000 };
  struct tc_kv_options o = { .urls = &url, .n_urls = 1, .connect_timeout_ms = 1000, .request_timeout_ms = 1000,
                             .ca = getenv("KV_CA"), .cert = getenv("KV_CERT"), .key = getenv("KV_KEY") };
  struct tc_kv *kv = tc_kv_new(&o);
  CHECK(kv != NULL, "burst client: %s", tc_last_error());
  if (!kv)
    return;
  int before = count_sockets();
  struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };
  double t0 = mono();
  for (int i = 0; i < N; i++) {
    char key[160], val[16];
    snprintf(key, sizeof key, "%sburst/%04d", pfx, i);
    snprintf(val, sizeof val, "%d", i);
    struct tc_kv_request req = { .type = TC_KV_REQ_OP,
                                 .op = { .type = TC_KV_PUT, .key = key, .value = val } };
    CHECK(tc_kv_submit(kv, &req, on_done, &w) == 0, "submit %d", i);
  }
  int most = 0;
  pthread_mutex_lock(&w.lock);
  while (w.done < N) {
    pthread_mutex_unlock(&w.lock);
    int n = count_sockets() - before;
    if (n > most)
      most = n;
    sleep_ms(5);
    pthread_mutex_lock(&w.lock);
  }
  pthread_mutex_unlock(&w.lock);
  printf("burst: %d concurrent puts in %.2f s, at most %d connections\n", N, mono() - t0, most);
  CHECK(w.errors == 0, "%d concurrent puts without error (%d failed)", N, w.errors);
  /* 8 per endpoint (kv_client.c), plus a socket curl may hold for its wakeup. */
  CHECK(most <= 10, "the burst used at most 10 connections (%d)", most);
  struct tc_kv_result r;
  CHECK(tc_kv_get_prefix(kv, k("burst/"), 0, &r) == 0 && r.n_kvs == N, "%d burst puts landed (%zu)", N, r.n_kvs);
  tc_kv_result_free(&r);
  tc_kv_free(kv);
}

/* A caller's poll loop driving the client through the seam. */
struct ploop {
  struct pollfd fds[64];
  int nfds;
  double timer_at;   /* monotonic seconds; 0: none */
  int wakeups, timers;
};

static double
mono(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
pl_watch_fd(void *loop, int fd, int events)
{
  struct ploop *p = loop;
  int i;
  for (i = 0; i < p->nfds; i++)
    if (p->fds[i].fd == fd)
      break;
  if (!events) {
    if (i < p->nfds)
      p->fds[i] = p->fds[--p->nfds];
    return;
  }
  if (i == p->nfds) {
    if (p->nfds == 64)
      abort();
    p->nfds++;
  }
  p->fds[i].fd = fd;
  p->fds[i].events = (short) ((events & TC_KV_POLL_IN ? POLLIN : 0) | (events & TC_KV_POLL_OUT ? POLLOUT : 0));
}

static void
pl_set_timer(void *loop, long ms)
{
  ((struct ploop *) loop)->timer_at = ms < 0 ? 0 : mono() + ms / 1e3;
}

static void
pl_wakeup(void *loop)
{
  __atomic_add_fetch(&((struct ploop *) loop)->wakeups, 1, __ATOMIC_SEQ_CST);
}

static const struct tc_kv_loop_ops pl_ops = { pl_watch_fd, pl_set_timer, pl_wakeup };

struct collect {
  int64_t revs[512];
  char vals[512][16];
  int n, updates, compacted;
  int64_t compact_rev;
  pthread_mutex_t lock;
};

static void
on_watch(void *arg, const struct tc_kv_watch_update *u)
{
  struct collect *c = arg;
  pthread_mutex_lock(&c->lock);
  c->updates++;
  if (u->compact_revision) {
    c->compacted++;
    c->compact_rev = u->compact_revision;
  }
  for (size_t i = 0; i < u->n_events && c->n < 512; i++) {
    c->revs[c->n] = u->events[i].kv.mod_revision;
    snprintf(c->vals[c->n], 16, "%s", u->events[i].type == TC_KV_EVENT_DELETE ? "DEL" : (char *) u->events[i].kv.value);
    c->n++;
  }
  pthread_mutex_unlock(&c->lock);
}

static int
collected(struct collect *c)
{
  pthread_mutex_lock(&c->lock);
  int n = c->n;
  pthread_mutex_unlock(&c->lock);
  return n;
}

static void
pl_run(struct tc_kv *kv, struct ploop *p, int ms)
{
  double end = mono() + ms / 1e3;
  for (;;) {
    double now = mono();
    if (now >= end)
      return;
    double until = p->timer_at && p->timer_at < end ? p->timer_at : end;
    int t = until <= now ? 0 : (int) ((until - now) * 1000) + 1;
    if (t > 20)
      t = 20;   /* wakeups come from other threads: look every 20 ms */
    struct pollfd fds[64];
    int n = p->nfds;
    memcpy(fds, p->fds, sizeof fds[0] * (size_t) n);
    int r = poll(fds, (nfds_t) n, t);
    if (__atomic_exchange_n(&p->wakeups, 0, __ATOMIC_SEQ_CST))
      tc_kv_loop_wakeup(kv);
    for (int i = 0; r > 0 && i < n; i++)
      if (fds[i].revents)
        tc_kv_loop_fd_ready(kv, fds[i].fd,
                            (fds[i].revents & (POLLIN | POLLHUP | POLLERR) ? TC_KV_POLL_IN : 0) |
                            (fds[i].revents & POLLOUT ? TC_KV_POLL_OUT : 0));
    if (p->timer_at && mono() >= p->timer_at) {
      p->timer_at = 0;
      p->timers++;
      tc_kv_loop_timeout(kv);
    }
  }
}

static void
test_external_loop(void)
{
  struct ploop p = { .nfds = 0 };
  struct tc_kv *kv = client(&url, 1);
  CHECK(tc_kv_attach_loop(kv, &pl_ops, &p) == 0, "attach loop");
  struct collect c = { .lock = PTHREAD_MUTEX_INITIALIZER };
  struct tc_kv_watch *w = tc_kv_watch(kv, k("loop/"), 0, true, 0, on_watch, &c);
  CHECK(w != NULL, "watch on the external loop");
  pl_run(kv, &p, 300);
  struct waiter wt = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };
  for (int i = 0; i < 10; i++) {
    char key[160];
    snprintf(key, sizeof key, "%sloop/%d", pfx, i);
    struct tc_kv_request req = { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_PUT, .key = key, .value = "v" } };
    tc_kv_submit(kv, &req, on_done, &wt);
  }
  for (int i = 0; i < 50 && (wt.done < 10 || collected(&c) < 10); i++)
    pl_run(kv, &p, 100);
  CHECK(wt.done == 10 && wt.errors == 0, "10 puts completed on the poll loop (%d)", wt.done);
  CHECK(c.n == 10, "the watch on the poll loop saw 10 events (%d)", c.n);
  /* A restart: the watch reconnects through the loop's timer. */
  const char *restart = getenv("KV_RESTART");
  if (restart && *restart) {
    int connects = tc_kv_watch_connects(w);
    CHECK(system(restart) == 0, "restart the KV server");
    struct tc_kv *other = client(&url, 1);
    for (int i = 10; i < 15; i++) {
      char key[160];
      snprintf(key, sizeof key, "%sloop/%d", pfx, i);
      CHECK(tc_kv_put(other, key, 0, "w", 0, 0, NULL) == 0, "put after restart: %s", tc_last_error());
    }
    tc_kv_free(other);
    for (int i = 0; i < 100 && collected(&c) < 15; i++)
      pl_run(kv, &p, 100);
    CHECK(tc_kv_watch_connects(w) > connects && c.n == 15 && p.timers > 0,
          "the watch on the poll loop resumed after a restart (%d events, %d connects, %d timers)", c.n,
          tc_kv_watch_connects(w), p.timers);
  }
  tc_kv_watch_cancel(w);
  tc_kv_free(kv);
}

/* ---- watch across a restart ---- */

static void
put_n(struct tc_kv *kv, const char *key, int from, int n)
{
  for (int i = from; i < from + n; i++) {
    char val[16];
    snprintf(val, sizeof val, "%d", i);
    if (tc_kv_put(kv, key, 0, val, 0, 0, NULL) < 0)
      CHECK(0, "put %d: %s", i, tc_last_error());
  }
}

static void
test_watch(struct tc_kv *kv)
{
  struct tc_kv_result r;
  CHECK(tc_kv_put(kv, k("w/a"), 0, "0", 0, 0, &r) == 0, "put before the watch");
  int64_t start = r.revision;
  tc_kv_result_free(&r);
  put_n(kv, k("w/a"), 1, 9);      /* values 1..9 */

  /* From an old revision: replays 0..9, then live events. */
  struct collect c = { .lock = PTHREAD_MUTEX_INITIALIZER };
  struct tc_kv *wkv = client(&url, 1);
  struct tc_kv_watch *w = tc_kv_watch(wkv, k("w/"), 0, true, start, on_watch, &c);
  CHECK(w != NULL, "watch: %s", tc_last_error());
  put_n(kv, k("w/a"), 10, 20);    /* 10..29 */
  for (int i = 0; i < 100 && collected(&c) < 30; i++)
    sleep_ms(50);
  CHECK(collected(&c) == 30, "30 events before the restart (%d)", collected(&c));

  const char *restart = getenv("KV_RESTART");
  int writes = 30;
  if (restart && *restart) {
    int connects = tc_kv_watch_connects(w);
    CHECK(system(restart) == 0, "restart the KV server");
    /* Writes right after the restart, while the watch reconnects. */
    put_n(kv, k("w/a"), 30, 20);
    writes = 50;
    for (int i = 0; i < 100 && collected(&c) < writes; i++)
      sleep_ms(50);
    CHECK(tc_kv_watch_connects(w) > connects, "the watch reconnected (%d connects)", tc_kv_watch_connects(w));
  }
  else
    printf("# KV_RESTART unset: watch resume across a restart not tested\n");
  CHECK(tc_kv_delete(kv, k("w/a"), 0, false, NULL) == 0, "delete w/a");
  for (int i = 0; i < 100 && collected(&c) < writes + 1; i++)
    sleep_ms(50);
  sleep_ms(200);
  pthread_mutex_lock(&c.lock);
  CHECK(c.n == writes + 1, "every event exactly once: %d of %d", c.n, writes + 1);
  int in_order = 1;
  for (int i = 0; i < c.n && i < writes + 1; i++) {
    char want[32];
    snprintf(want, sizeof want, "%d", i);
    if (strcmp(c.vals[i], i < writes ? want : "DEL") || (i && c.revs[i] != c.revs[i - 1] + 1))
      in_order = 0;
  }
  CHECK(in_order, "events in order, consecutive revisions, nothing repeated");
  CHECK(c.compacted == 0, "no compaction reported");
  pthread_mutex_unlock(&c.lock);
  tc_kv_watch_cancel(w);

  /* Compaction: a watch from a compacted revision is told so. */
  char cmd[1024];
  const char *curlopts = getenv("KV_CURLOPTS");
  snprintf(cmd, sizeof cmd, "curl -sf %s -X POST %s/v3/kv/compaction -d '{\"revision\": %" PRId64 "}' >/dev/null",
           curlopts ? curlopts : "", url, start + 5);
  if (system(cmd) == 0) {
    struct collect c2 = { .lock = PTHREAD_MUTEX_INITIALIZER };
    w = tc_kv_watch(wkv, k("w/"), 0, true, start, on_watch, &c2);
    for (int i = 0; i < 100 && !c2.compacted; i++)
      sleep_ms(50);
    for (int i = 0; i < 40 && collected(&c2) < writes + 1 - 5; i++)
      sleep_ms(50);
    CHECK(c2.compacted == 1 && c2.compact_rev == start + 5, "compaction reported at %" PRId64 " (%" PRId64 ")",
          start + 5, c2.compact_rev);
    CHECK(c2.n == writes + 1 - 5, "after compaction the watch resumes at the compact revision (%d events)", c2.n);
    tc_kv_watch_cancel(w);
  }
  else
    printf("# the server does not compact: compaction not tested\n");
  tc_kv_free(wkv);
}

/* ---- failover ---- */

static void
test_failover(void)
{
  /* A port nothing listens on: bind, note it, close. */
  const char *urls[2] = { !strncmp(url, "https", 5) ? "https://127.0.0.1:1" : "http://127.0.0.1:1", url };
  struct tc_kv *kv = client(urls, 2);
  struct tc_kv_result r;
  CHECK(tc_kv_put(kv, k("fo"), 0, "x", 0, 0, NULL) == 0, "put through the second endpoint: %s", tc_last_error());
  CHECK(!strcmp(tc_kv_current_url(kv), url), "the client moved to the live endpoint");
  CHECK(tc_kv_get(kv, k("fo"), 0, &r) == 0 && r.n_kvs == 1, "get after failover");
  tc_kv_result_free(&r);
  struct collect c = { .lock = PTHREAD_MUTEX_INITIALIZER };
  /* A watch that starts on the dead endpoint moves on by itself. */
  const char *urls2[2] = { urls[0], url };
  struct tc_kv *kv2 = client(urls2, 2);
  struct tc_kv_watch *w = tc_kv_watch(kv2, k("fo"), 0, false, 0, on_watch, &c);
  for (int i = 0; i < 60 && tc_kv_watch_connects(w) < 2; i++)
    sleep_ms(50);
  sleep_ms(300);
  CHECK(tc_kv_put(kv, k("fo"), 0, "y", 0, 0, NULL) == 0, "put y");
  for (int i = 0; i < 100 && collected(&c) < 1; i++)
    sleep_ms(50);
  CHECK(collected(&c) == 1, "a watch fails over to the live endpoint (%d events)", collected(&c));
  tc_kv_watch_cancel(w);
  tc_kv_free(kv2);
  /* No live endpoint at all: a clear error, not a hang. */
  const char *dead[1] = { !strncmp(url, "https", 5) ? "https://127.0.0.1:1" : "http://127.0.0.1:1" };
  struct tc_kv_options o = { .urls = dead, .n_urls = 1, .connect_timeout_ms = 200, .request_timeout_ms = 600 };
  struct tc_kv *kv3 = tc_kv_new(&o);
  CHECK(tc_kv_get(kv3, k("fo"), 0, &r) < 0 && errno == ECONNREFUSED && strstr(tc_last_error(), "127.0.0.1:1"),
        "no endpoint: ECONNREFUSED naming it (%s)", tc_last_error());
  tc_kv_free(kv3);
  tc_kv_free(kv);
}

/* ---- CAS from 16 threads ---- */

enum { THREADS = 16, INCS = 25 };
static struct tc_kv *cas_kv;
static int cas_retries[THREADS];

static void *
cas_thread(void *arg)
{
  int t = (int) (intptr_t) arg;
  for (int i = 0; i < INCS; i++) {
    for (;;) {
      struct tc_kv_result r;
      if (tc_kv_get(cas_kv, k("counter"), 0, &r) < 0)
        return (void *) 1;
      long v = r.n_kvs ? atol((char *) r.kvs[0].value) : 0;
      int64_t mod = r.n_kvs ? r.kvs[0].mod_revision : 0;
      tc_kv_result_free(&r);
      char val[32];
      snprintf(val, sizeof val, "%ld", v + 1);
      struct tc_kv_cmp c = { .key = k("counter"), .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = mod };
      struct tc_kv_op op = { .type = TC_KV_PUT, .key = k("counter"), .value = val };
      struct tc_kv_txn txn = { &c, 1, &op, 1, NULL, 0 };
      if (tc_kv_txn(cas_kv, &txn, &r) < 0)
        return (void *) 1;
      bool ok = r.succeeded;
      tc_kv_result_free(&r);
      if (ok)
        break;
      cas_retries[t]++;
    }
  }
  return NULL;
}

static void
test_cas(struct tc_kv *kv)
{
  pthread_t th[THREADS];
  cas_kv = kv;
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, cas_thread, (void *) (intptr_t) i);
  int failed = 0, retries = 0;
  for (int i = 0; i < THREADS; i++) {
    void *rv;
    pthread_join(th[i], &rv);
    failed += rv != NULL;
    retries += cas_retries[i];
  }
  CHECK(failed == 0, "CAS threads ran without request errors (%d failed)", failed);
  struct tc_kv_result r;
  CHECK(tc_kv_get(kv, k("counter"), 0, &r) == 0 && r.n_kvs == 1 && atol((char *) r.kvs[0].value) == THREADS * INCS,
        "counter = %d after %d CAS increments (%s), %d conflicts retried", THREADS * INCS, THREADS * INCS,
        r.n_kvs ? (char *) r.kvs[0].value : "none", retries);
  tc_kv_result_free(&r);
}

int
main(void)
{
  url = getenv("KV_URL");
  if (!url) {
    printf("KV_URL unset: skipped (run through test-kv-client.sh)\n");
    return 77;
  }
  tc_log_open("test-kv-client", 0);
  if (getenv("TEST_DEBUG"))
    tc_log_set_level(TC_LOG_DEBUG);
  snprintf(pfx, sizeof pfx, "/test/%d/", (int) getpid());
  struct tc_kv *kv = client(&url, 1);
  test_basic(kv);
  test_txn(kv);
  test_async(kv);
  test_burst();
  test_external_loop();
  test_failover();
  test_cas(kv);
  test_leases(kv);
  test_watch(kv);
  tc_kv_free(kv);
  return DONE();
}
