/* Fuzz target for the gateway's KV request handling with an identity
 * attached (gateway/http.c kv_handle_as, the use_perms access filter of
 * kvfilter.c, the store): etcd v3 JSON requests from anyone (trusted
 * network), a client alice (group staff), a client bob (no record), an
 * administrator root, an OSD and a monitor, against a real store in a
 * temporary folder that holds user records, a pool and carol's image
 * "secret" (with its key).
 *
 * Besides not crashing, whatever the request:
 *  - alice, bob and the OSD change none of the protected records (user
 *    records, /config/pools, carol's image and its index, /pg/config), and
 *    the monitor none of those under /config and /index;
 *  - no reply to alice or bob names carol's image records.
 * Requests from anyone and root may change anything: the protected records
 * are put back before the next input.
 *
 * Input: byte 0 picks the caller, byte 1 the endpoint, the rest is the body.
 *
 * Built with --enable-fuzzing (CC=clang) it is a libFuzzer target:
 *   tests/fuzz-kv-caller tests/fuzz/corpus-kv-caller
 * Otherwise it is a unit test: the seeds, tests/fuzz/corpus-kv-caller, then
 * deterministic mutations for at most 10 s. `fuzz-kv-caller --write-corpus
 * DIR` writes the seeds as a corpus. */
#include <config.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gw_identity.h"
#include "http.h"
#include "kvexec.h"
#include "kvfilter.h"
#include "kvrequest.h"
#include "kvstore.h"
#include "lease.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char *const paths[] = {
  "/v3/kv/range", "/v3/kv/put", "/v3/kv/deleterange", "/v3/kv/txn", "/v3/kv/compaction",
  "/v3/lease/grant", "/v3/lease/revoke", "/v3/lease/keepalive", "/v3/lease/timetolive", "/v3/lease/leases",
  "/health",
};
#define NPATHS (sizeof paths / sizeof paths[0])

enum who { W_ANYONE, W_ALICE, W_BOB, W_ROOT, W_OSD, W_MON, W_N };

#define ENC_KEY "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff" \
                "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
struct record {
  const char *key, *value;
  bool config;         /* under /config or /index: the monitor may not change it either */
};
static const struct record protected[] = {
  { "/tromcho/config/user/alice", "{\"type\":\"client\",\"groups\":[\"staff\"]}", true },
  { "/tromcho/config/user/root", "{\"type\":\"admin\"}", true },
  { "/tromcho/config/pools", "{\"1\":{\"name\":\"p1\",\"pg_count\":1,\"pg_size\":1,\"pg_minsize\":1,"
    "\"creator_group\":\"staff\"}}", true },
  { "/tromcho/config/inode/1/1", "{\"name\":\"secret\",\"size\":4096,\"owner\":\"carol\",\"enc_key\":\""
    ENC_KEY "\"}", true },
  { "/tromcho/index/image/secret", "{\"id\":1,\"pool_id\":1}", true },
  { "/tromcho/pg/config", "{\"items\":{\"1\":{\"0\":{\"osd_set\":[1],\"primary\":1}}}}", false },
};
#define NPROT (sizeof protected / sizeof protected[0])
/* What a reply that names carol's records contains (base64 key + quote). */
static char secret_b64[2][80];

static struct kvs *store;
static struct leases *leases;
static struct kvfilter filter;
static char dir[] = "/tmp/tromcho-fuzz-kv-caller.XXXXXX";

static void
cleanup(void)
{
  leases_stop(leases);
  kvs_close(store);
  char cmd[80];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

/* The record's mod_revision and lease now (0, 0 if absent). */
static void
record_state(const char *key, int64_t *mod, int64_t *lease, bool *same_value, const char *value)
{
  struct kvs_txn tx;
  struct kv_err err;
  struct kv_rec r;
  *mod = *lease = 0;
  *same_value = false;
  if (kvs_read_begin(store, &tx, &err) < 0)
    abort();
  int rc = kvs_get(&tx, (const uint8_t *) key, strlen(key), &r, &err);
  if (rc < 0)
    abort();
  if (rc > 0) {
    *mod = r.mod_rev;
    *lease = r.lease;
    *same_value = r.vlen == strlen(value) && memcmp(r.val, value, r.vlen) == 0;
  }
  kvs_read_end(&tx);
}

/* Put one record as the trusted network would. */
static void
put_trusted(const char *key, const char *value)
{
  size_t kl, vl;
  char *k = kv_b64_encode((const uint8_t *) key, strlen(key), &kl);
  char *v = kv_b64_encode((const uint8_t *) value, strlen(value), &vl);
  size_t blen = kl + vl + 40;
  char *body = malloc(blen);
  if (!k || !v || !body)
    abort();
  snprintf(body, blen, "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
  int status;
  size_t outlen;
  char *out = kv_handle(store, leases, "POST", "/v3/kv/put", body, strlen(body), &status, &outlen);
  if (!out || status != 200)
    abort();
  free(out);
  free(body);
  free(k);
  free(v);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void) argc; (void) argv;
  tc_log_set_level(TC_LOG_ERROR);   /* every refusal is logged: too many lines */
  if (!mkdtemp(dir) || !(store = kvs_open(dir, 1 << 30)) || kvs_set_meta_sync(store, false) < 0 ||
      !(leases = leases_start(store)) || kvfilter_init(&filter, "/tromcho", true) < 0)
    abort();
  atexit(cleanup);
  for (int i = 0; i < 2; i++) {
    const char *key = protected[i == 0 ? 3 : 4].key;
    size_t n;
    char *b = kv_b64_encode((const uint8_t *) key, strlen(key), &n);
    if (!b)
      abort();
    snprintf(secret_b64[i], sizeof secret_b64[i], "\"%s\"", b);
    free(b);
  }
  /* alice's own image, so that her writes have something to succeed on. */
  put_trusted("/tromcho/config/inode/1/2", "{\"name\":\"mine\",\"size\":4096,\"owner\":\"alice\"}");
  put_trusted("/tromcho/index/image/mine", "{\"id\":2,\"pool_id\":1}");
  return 0;
}

static void
make_caller(enum who w, struct gw_identity *gid, struct caller *c)
{
  static const char *const names[W_N] = { "anyone", "alice", "bob", "root", "osd", "mon" };
  gw_identity_anyone(gid);
  memset(c, 0, sizeof *c);
  c->peer = "fuzz";
  if (w == W_ANYONE) {
    c->identity = "anyone";
    return;
  }
  gid->id.role = w == W_OSD ? TC_ROLE_OSD : w == W_MON ? TC_ROLE_MON : TC_ROLE_USER;
  snprintf(gid->cn, sizeof gid->cn, "%s", names[w]);
  if (gid->id.role == TC_ROLE_USER)
    gid->id.name = gid->cn;
  snprintf(gid->desc, sizeof gid->desc, "%s %s", gid->id.role == TC_ROLE_USER ? "user" : "peer", names[w]);
  c->identity = gid->desc;
  c->gid = gid;
  c->filter = &filter;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 2)
    return 0;
  enum who w = (enum who) (data[0] % W_N);
  const char *path = paths[data[1] % NPATHS];
  /* The records back as they were (anyone and root may have changed them). */
  int64_t mod[NPROT], lease;
  for (size_t i = 0; i < NPROT; i++) {
    bool same;
    record_state(protected[i].key, &mod[i], &lease, &same, protected[i].value);
    if (!same || lease) {
      put_trusted(protected[i].key, protected[i].value);
      record_state(protected[i].key, &mod[i], &lease, &same, protected[i].value);
    }
  }
  size_t len = size - 2;
  char *body = malloc(len ? len : 1);
  if (!body)
    abort();
  memcpy(body, data + 2, len);
  struct gw_identity gid;
  struct caller c;
  make_caller(w, &gid, &c);
  int status;
  size_t outlen;
  char *out = kv_handle_as(store, leases, &c, "POST", path, body, len, &status, &outlen);
  free(body);
  if (!out || status < 200 || status > 599)
    abort();
  if ((w == W_ALICE || w == W_BOB) && (strstr(out, secret_b64[0]) || strstr(out, secret_b64[1]))) {
    fprintf(stderr, "%s got carol's image records from %s: %s\n", c.identity, path, out);
    abort();
  }
  free(out);
  if (w == W_ALICE || w == W_BOB || w == W_OSD || w == W_MON)
    for (size_t i = 0; i < NPROT; i++) {
      if (w == W_MON && !protected[i].config)
        continue;
      int64_t now;
      bool same;
      record_state(protected[i].key, &now, &lease, &same, protected[i].value);
      if (now != mod[i] || lease) {
        fprintf(stderr, "%s changed %s through %s\n", c.identity, protected[i].key, path);
        abort();
      }
    }
  return 0;
}

#ifndef TC_LIBFUZZER
#include "fuzz-corpus-replay.h"

struct seed {
  const char *name;
  enum who who;
  uint8_t path;
  const char *body;
  int status;              /* expected HTTP status, 0: any */
};

/* base64: /tromcho/config/user/alice = L3Ryb21jaG8vY29uZmlnL3VzZXIvYWxpY2U=,
 * {"type":"admin"} = eyJ0eXBlIjoiYWRtaW4ifQ==, /tromcho/ = L3Ryb21jaG8v,
 * /tromcho0 = L3Ryb21jaG8w, /tromcho/config/inode/1/1 = L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMQ==,
 * /tromcho/config/inode/1/2 = L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMg==,
 * /tromcho/config/inode/1/281474976710657 = L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMjgxNDc0OTc2NzEwNjU3,
 * {"name":"mine","size":8192,"owner":"alice"} = eyJuYW1lIjoibWluZSIsInNpemUiOjgxOTIsIm93bmVyIjoiYWxpY2UifQ== */
static const struct seed seeds[] = {
  { "alice-range-all", W_ALICE, 0, "{\"key\":\"L3Ryb21jaG8v\",\"range_end\":\"L3Ryb21jaG8w\"}", 200 },
  { "bob-range-all", W_BOB, 0, "{\"key\":\"AA==\",\"range_end\":\"AA==\"}", 200 },
  { "bob-range-secret", W_BOB, 0, "{\"key\":\"L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMQ==\"}", 200 },
  { "alice-promote", W_ALICE, 1, "{\"key\":\"L3Ryb21jaG8vY29uZmlnL3VzZXIvYWxpY2U=\",\"value\":\"eyJ0eXBlIjoiYWRtaW4ifQ==\"}", 0 },
  { "alice-alias", W_ALICE, 1, "{\"key\":\"L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMjgxNDc0OTc2NzEwNjU3\","
    "\"value\":\"eyJuYW1lIjoibWluZSIsInNpemUiOjgxOTIsIm93bmVyIjoiYWxpY2UifQ==\"}", 0 },
  { "alice-own", W_ALICE, 1, "{\"key\":\"L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMg==\","
    "\"value\":\"eyJuYW1lIjoibWluZSIsInNpemUiOjgxOTIsIm93bmVyIjoiYWxpY2UifQ==\"}", 200 },
  { "alice-take-secret", W_ALICE, 1, "{\"key\":\"L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMQ==\","
    "\"value\":\"eyJuYW1lIjoibWluZSIsInNpemUiOjgxOTIsIm93bmVyIjoiYWxpY2UifQ==\",\"prev_kv\":true}", 0 },
  { "bob-delete-all", W_BOB, 2, "{\"key\":\"AA==\",\"range_end\":\"AA==\"}", 0 },
  { "osd-delete-config", W_OSD, 2, "{\"key\":\"L3Ryb21jaG8v\",\"range_end\":\"L3Ryb21jaG8w\",\"prev_kv\":true}", 0 },
  { "mon-put-user", W_MON, 1, "{\"key\":\"L3Ryb21jaG8vY29uZmlnL3VzZXIvYWxpY2U=\",\"value\":\"e30=\"}", 0 },
  { "alice-txn-mixed", W_ALICE, 3, "{\"compare\":[],\"success\":[{\"request_put\":{\"key\":\"L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMg==\","
    "\"value\":\"e30=\"}},{\"request_put\":{\"key\":\"L3Ryb21jaG8vY29uZmlnL3VzZXIvYWxpY2U=\",\"value\":\"eyJ0eXBlIjoiYWRtaW4ifQ==\"}}]}", 0 },
  { "bob-txn-compare-secret", W_BOB, 3, "{\"compare\":[{\"key\":\"L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMQ==\",\"target\":\"VALUE\","
    "\"result\":\"EQUAL\",\"value\":\"e30=\"}],\"failure\":[{\"request_range\":{\"key\":\"L3Ryb21jaG8vY29uZmlnL2lub2RlLzEvMQ==\"}}]}", 0 },
  { "bob-txn-range-all", W_BOB, 3, "{\"success\":[{\"request_range\":{\"key\":\"AA==\",\"range_end\":\"AA==\"}}]}", 0 },
  { "alice-compact", W_ALICE, 4, "{\"revision\":\"2\"}", 0 },
  { "alice-lease", W_ALICE, 5, "{\"TTL\":\"60\"}", 200 },
  { "bob-revoke", W_BOB, 6, "{\"ID\":\"1\"}", 0 },
  { "bob-leases", W_BOB, 9, "{}", 0 },
  { "root-put-user", W_ROOT, 1, "{\"key\":\"L3Ryb21jaG8vY29uZmlnL3VzZXIvYWxpY2U=\",\"value\":\"eyJ0eXBlIjoiYWRtaW4ifQ==\"}", 200 },
  { "anyone-delete-all", W_ANYONE, 2, "{\"key\":\"AA==\",\"range_end\":\"AA==\"}", 200 },
  { "root-range", W_ROOT, 0, "{\"key\":\"L3Ryb21jaG8v\",\"range_end\":\"L3Ryb21jaG8w\",\"keys_only\":true}", 200 },
  { "alice-bad-json", W_ALICE, 1, "{\"key\":", 400 },
  { "mon-health", W_MON, 10, "", 200 },
};

static uint8_t *
seed_bytes(const struct seed *s, size_t *size)
{
  size_t n = strlen(s->body);
  uint8_t *b = malloc(n + 2);
  if (!b)
    return NULL;
  b[0] = (uint8_t) s->who;
  b[1] = s->path;
  memcpy(b + 2, s->body, n);
  *size = n + 2;
  return b;
}

static const char *
seed_name(size_t i)
{
  return seeds[i].name;
}

static uint8_t *
seed_at(size_t i, size_t *size)
{
  return seed_bytes(&seeds[i], size);
}

int
main(int argc, char **argv)
{
  size_t nseeds = sizeof seeds / sizeof seeds[0];
  if (argc == 3 && !strcmp(argv[1], "--write-corpus"))
    return fuzz_write_corpus("fuzz-kv-caller", argv[2], nseeds, seed_name, seed_at);
  LLVMFuzzerInitialize(&argc, &argv);
  int failed = 0;
  for (size_t i = 0; i < nseeds; i++) {
    size_t size;
    uint8_t *b = seed_bytes(&seeds[i], &size);
    if (!b)
      return 1;
    LLVMFuzzerTestOneInput(b, size);
    if (seeds[i].status) {
      /* The same request once more, for its status. */
      struct gw_identity gid;
      struct caller c;
      make_caller(seeds[i].who, &gid, &c);
      int status;
      size_t outlen;
      char *out = kv_handle_as(store, leases, &c, "POST", paths[seeds[i].path], seeds[i].body,
                               strlen(seeds[i].body), &status, &outlen);
      if (status != seeds[i].status) {
        fprintf(stderr, "FAIL: %s: HTTP %d, expected %d: %s\n", seeds[i].name, status, seeds[i].status,
                out ? out : "");
        failed = 1;
      }
      free(out);
    }
    free(b);
  }
  int ncorpus = fuzz_replay_corpus("kv-caller");
  if (ncorpus < 0)
    return 1;
  static const char alphabet[] = "{}[]\":,0123456789AQLw=-\\ trufalse";
  uint64_t x = 0x9E3779B97F4A7C15ull;
  unsigned runs = 0;
  time_t until = time(NULL) + 10;
  for (; runs < 20000 && time(NULL) < until; runs++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t size;
    uint8_t *b = seed_bytes(&seeds[x % nseeds], &size);
    if (!b)
      return 1;
    if (x % 5 == 0)
      b[0] = (uint8_t) (x >> 40);   /* the same request from someone else */
    int flips = (int) (x >> 62);
    for (int f = 0; f < flips; f++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      size_t at = 2 + (x >> 8) % (size - 2 ? size - 2 : 1);
      if (at < size)
        b[at] = alphabet[(x >> 16) % (sizeof alphabet - 1)];
    }
    LLVMFuzzerTestOneInput(b, size);
    free(b);
  }
  if (failed)
    return 1;
  printf("fuzz-kv-caller: %zu seeds checked, %d corpus inputs, %u mutations, no failure\n", nseeds, ncorpus, runs);
  return 0;
}
#endif
