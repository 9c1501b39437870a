/* Fuzz target for the gateway's admin API requests (gateway/admin_req.c)
 * with an identity attached: the method, the path and the JSON body as the
 * HTTPS daemon hands them over, then the seed's API rights (perms.c,
 * tc_perm_api) for the parsed call and each of a set of callers. Nothing
 * may crash or leak; a refusal must carry a message and a 4xx/5xx status;
 * what parses must be well formed (a call, a name where the call needs
 * one); and the rights must hold whatever the request: an administrator
 * may do everything, a caller that is not a user nothing, a user no
 * administrator-only call, and no image call on an image it may not write
 * (or read, for image/list).
 *
 * Input: byte 0 picks the path (and bit 7 the method: GET instead of POST),
 * the rest is the body.
 *
 * Built with --enable-fuzzing (CC=clang) it is a libFuzzer target:
 *   tests/fuzz-admin-api tests/fuzz/corpus-admin-api
 * Otherwise it is a unit test: it checks the parser's answers on seeds of
 * every call, replays tests/fuzz/corpus-admin-api, then runs 200000
 * deterministic mutations. `fuzz-admin-api --write-corpus DIR` writes the
 * seeds as a corpus. */
#include <config.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "admin_req.h"
#include "perms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const paths[] = {
  "/api/v1/image/list", "/api/v1/image/create", "/api/v1/image/delete", "/api/v1/image/flatten",
  "/api/v1/image/modify", "/api/v1/pool/list", "/api/v1/user/list", "/api/v1/user/set",
  "/api/v1/user/delete", "/api/v1/status", "/api/v1/", "/api/v1/image/list/", "/v3/kv/range", "",
};
#define NPATHS (sizeof paths / sizeof paths[0])

/* Callers: anyone, an OSD, a monitor, alice (client, group staff), bob
 * (client, no group), root (admin). */
static const char *const staff[] = { "staff", NULL };
static const struct tc_user u_alice = { "alice", false, staff }, u_bob = { "bob", false, NULL },
                            u_root = { "root", true, NULL };
static const struct tc_identity callers[] = {
  { TC_ROLE_ANON, NULL, NULL }, { TC_ROLE_OSD, NULL, NULL }, { TC_ROLE_MON, NULL, NULL },
  { TC_ROLE_USER, "alice", &u_alice }, { TC_ROLE_USER, "bob", &u_bob }, { TC_ROLE_USER, "root", &u_root },
};
/* Images: alice's, carol's shared with staff, carol's secret. */
static const struct tc_image_acl images[] = {
  { "alice", NULL, NULL }, { "carol", NULL, "staff" }, { "carol", NULL, NULL },
};

static bool
needs_name(enum admin_call c)
{
  return c == AC_IMAGE_CREATE || c == AC_IMAGE_DELETE || c == AC_IMAGE_FLATTEN || c == AC_IMAGE_MODIFY ||
         c == AC_USER_SET || c == AC_USER_DELETE;
}

static void
check_rights(const struct admin_req *r)
{
  for (size_t i = 0; i < sizeof callers / sizeof callers[0]; i++) {
    const struct tc_identity *who = &callers[i];
    bool admin = who->user && who->user->admin;
    for (size_t k = 0; k <= sizeof images / sizeof images[0]; k++) {
      const struct tc_image_acl *img = k < sizeof images / sizeof images[0] ? &images[k] : NULL;
      bool ok = tc_perm_api(who, r->call_name, img, r->pool);
      if (admin && !ok)
        abort();   /* an administrator refused */
      if (who->role != TC_ROLE_USER && ok)
        abort();   /* an OSD, monitor or anonymous caller allowed an API call */
      if (admin)
        continue;
      switch (r->call) {
      case AC_IMAGE_LIST:
        if (img && ok != tc_perm_image_read(who, img))
          abort();
        break;
      case AC_IMAGE_CREATE:
        if (img && ok != tc_perm_image_write(who, img))
          abort();   /* a snapshot of an image the caller may not write */
        if (!img && ok != tc_perm_pool_create(who, r->pool))
          abort();
        break;
      case AC_IMAGE_DELETE: case AC_IMAGE_FLATTEN: case AC_IMAGE_MODIFY:
        if (ok && (!img || !tc_perm_image_write(who, img)))
          abort();   /* a change of an image that is not the caller's */
        break;
      default:
        if (ok)
          abort();   /* an administrator-only call allowed to a user */
      }
    }
  }
}

/* 0 if parsed, else the HTTP status of the refusal. */
static int
check(const uint8_t *data, size_t size)
{
  if (size < 1)
    return -1;
  const char *path = paths[(data[0] & 0x7f) % NPATHS];
  const char *method = data[0] & 0x80 ? "GET" : "POST";
  /* The body in a buffer of its exact size, so an overread is caught. */
  size_t len = size - 1;
  char *body = malloc(len ? len : 1);
  if (!body)
    return -1;
  memcpy(body, data + 1, len);
  struct admin_req r;
  struct admin_err e = { 0, "" };
  int rc = admin_req_parse(method, path, body, len, &r, &e);
  free(body);
  if (rc == 0) {
    if (r.call == AC_NONE || !r.call_name || (needs_name(r.call) && (!r.name || !*r.name)))
      abort();
    if (r.call == AC_IMAGE_CREATE && !r.size && !r.parent && !strchr(r.name, '@'))
      abort();   /* an image without a size got through */
    if (r.readonly < -1 || r.readonly > 1)
      abort();
    check_rights(&r);
    admin_req_free(&r);
    return 0;
  }
  if (!e.msg[0] || (e.status != 400 && e.status != 404 && e.status != 405 && e.status != 500))
    abort();       /* a refusal must say why, with a client-error status */
  return e.status;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  check(data, size);
  return 0;
}

#ifndef TC_LIBFUZZER
#include "fuzz-corpus-replay.h"

struct seed {
  const char *name;
  int expect;              /* 0 or the HTTP status */
  uint8_t path;            /* index into paths, | 0x80 for GET */
  const char *body;
};

static const struct seed seeds[] = {
  { "list", 0, 0, "{}" },
  { "list-empty", 0, 0, "" },
  { "list-get", 405, 0x80, "" },
  { "create", 0, 1, "{\"name\": \"vm1\", \"size\": 10737418240, \"pool\": \"rep3\", \"enc_key\": \"auto\"}" },
  { "create-pool-id", 0, 1, "{\"name\": \"vm1\", \"size\": 4096, \"pool\": 2}" },
  { "create-full", 0, 1, "{\"name\": \"vm1\", \"size\": 4096, \"owner\": \"alice\", \"owner_group\": \"ops\", "
    "\"reader_group\": \"staff\", \"enc_key\": \"none\"}" },
  { "create-snapshot", 0, 1, "{\"name\": \"vm1@s1\"}" },
  { "create-clone", 0, 1, "{\"name\": \"vm2\", \"parent\": \"vm1@s1\"}" },
  { "create-no-size", 400, 1, "{\"name\": \"vm1\"}" },
  { "create-neg-size", 400, 1, "{\"name\": \"vm1\", \"size\": -1}" },
  { "create-str-size", 400, 1, "{\"name\": \"vm1\", \"size\": \"10G\"}" },
  { "create-unknown", 400, 1, "{\"name\": \"vm1\", \"size\": 4096, \"colour\": 1}" },
  { "create-nul", 400, 1, "{\"name\": \"vm\\u00001\", \"size\": 4096}" },
  { "create-array", 400, 1, "[1, 2]" },
  { "create-bad-json", 400, 1, "{\"name\": " },
  { "create-trailing", 400, 1, "{\"name\": \"a\", \"size\": 1} x" },
  { "delete", 0, 2, "{\"name\": \"vm1\"}" },
  { "delete-no-name", 400, 2, "{}" },
  { "delete-empty-name", 400, 2, "{\"name\": \"\"}" },
  { "flatten", 0, 3, "{\"name\": \"vm2\"}" },
  { "modify", 0, 4, "{\"name\": \"vm1\", \"resize\": 8192, \"rename\": \"vm3\", \"readonly\": true, "
    "\"owner\": \"\", \"reader_group\": \"staff\"}" },
  { "modify-readonly-int", 400, 4, "{\"name\": \"vm1\", \"readonly\": 1}" },
  { "pools", 0, 5, "{}" },
  { "users", 0, 6, "" },
  { "user-set", 0, 7, "{\"name\": \"dave\", \"type\": \"admin\", \"groups\": [\"a\", \"b\"]}" },
  { "user-set-type", 400, 7, "{\"name\": \"dave\", \"type\": \"root\"}" },
  { "user-set-groups", 400, 7, "{\"name\": \"dave\", \"groups\": [1]}" },
  { "user-delete", 0, 8, "{\"name\": \"dave\"}" },
  { "status", 0, 9, "{}" },
  { "no-call", 404, 10, "{}" },
  { "slash", 404, 11, "{}" },
  { "kv-path", 404, 12, "{}" },
  { "empty-path", 404, 13, "" },
};

static uint8_t *
seed_bytes(const struct seed *s, size_t *size)
{
  size_t n = strlen(s->body);
  uint8_t *b = malloc(n + 1);
  if (!b)
    return NULL;
  b[0] = s->path;
  memcpy(b + 1, s->body, n);
  *size = n + 1;
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
    return fuzz_write_corpus("fuzz-admin-api", argv[2], nseeds, seed_name, seed_at);
  int failed = 0;
  for (size_t i = 0; i < nseeds; i++) {
    size_t size;
    uint8_t *b = seed_bytes(&seeds[i], &size);
    if (!b)
      return 1;
    int rc = check(b, size);
    if (rc != seeds[i].expect) {
      fprintf(stderr, "FAIL: %s: the parser says %d, expected %d\n", seeds[i].name, rc, seeds[i].expect);
      failed = 1;
    }
    free(b);
  }
  int ncorpus = fuzz_replay_corpus("admin-api");
  if (ncorpus < 0)
    return 1;
  /* Deterministic mutations of the seeds: bit flips, byte changes, cuts. */
  static const char alphabet[] = "{}[]\":,0123456789-.e\\u@ ntrufalsx\xff";
  uint64_t x = 0x9E3779B97F4A7C15ull;
  unsigned runs = 200000;
  for (unsigned k = 0; k < runs; k++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t size;
    uint8_t *b = seed_bytes(&seeds[x % nseeds], &size);
    if (!b)
      return 1;
    int flips = 1 + (int) (x >> 61);
    for (int f = 0; f < flips; f++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      size_t at = (x >> 8) % size;
      if (x % 3 == 0)
        b[at] ^= (uint8_t) (1u << (x >> 3) % 8);
      else
        b[at] = alphabet[(x >> 16) % (sizeof alphabet - 1)];
    }
    if (x % 13 == 0 && size > 1)
      size = 1 + (x >> 20) % (size - 1);
    check(b, size);
    free(b);
  }
  if (failed)
    return 1;
  printf("fuzz-admin-api: %zu seeds checked, %d corpus inputs, %u mutations, no failure\n", nseeds, ncorpus, runs);
  return 0;
}
#endif
