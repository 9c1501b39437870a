/* tromcho pool-create, pool-ls, pool-rm: pools in /config/pools (see
 * common/cluster/pools.h), changed only by compare-and-swap transactions so that
 * two admins never lose each other's change. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"
#include "kv_client.h"
#include "pools.h"

#define CAS_TRIES 20

static void
pool_key(struct tc_kv *kv, char *buf, size_t size, const char *suffix)
{
  snprintf(buf, size, "%s%s", tc_kv_prefix(kv), suffix);
}

/* Read /config/pools: parsed, with its mod_revision (0: absent). */
static int
read_pools(struct tc_kv *kv, struct tc_pools *pools, int64_t *mod)
{
  char k[512];
  struct tc_kv_result r;
  pool_key(kv, k, sizeof k, "/config/pools");
  if (tc_kv_get(kv, k, 0, &r) < 0)
    return -1;
  *mod = r.n_kvs ? r.kvs[0].mod_revision : 0;
  int rv = tc_pools_parse(r.n_kvs ? (char *) r.kvs[0].value : NULL, pools);
  tc_kv_result_free(&r);
  return rv;
}

/* Write pools if /config/pools is still at mod; 1 written, 0 lost the race. */
static int
write_pools(struct tc_kv *kv, const struct tc_pools *pools, int64_t mod)
{
  char k[512];
  pool_key(kv, k, sizeof k, "/config/pools");
  char *text = tc_pools_encode(pools);
  if (!text)
    return tc_error(ENOMEM, "out of memory");
  struct tc_kv_cmp c = { .key = k, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = mod };
  struct tc_kv_op put = { .type = TC_KV_PUT, .key = k, .value = text };
  struct tc_kv_txn txn = { &c, 1, &put, 1, NULL, 0 };
  struct tc_kv_result r;
  int rv = tc_kv_txn(kv, &txn, &r);
  free(text);
  if (rv < 0)
    return -1;
  rv = r.succeeded;
  tc_kv_result_free(&r);
  return rv;
}

/* One change to the pool list, in a compare-and-swap loop: change(pools,
 * arg) edits the list read from the KV and returns 1 to write it, -1
 * (having printed why) to stop; the list is read again and the change
 * made again while somebody else's write comes between. done(arg) prints
 * the result once written. The exit status: 0 written, 1 not. */
static int
update_pools(const char *cmd, struct tc_config *cfg, int (*change)(struct tc_pools *pools, void *arg),
             void (*done)(void *arg), void *arg)
{
  struct tc_kv *kv = tc_kv_new_from_config(cfg);
  if (!kv) {
    fprintf(stderr, "tromcho %s: %s\n", cmd, tc_last_error());
    return 1;
  }
  int w = 0;
  for (int tries = 0; tries < CAS_TRIES && w == 0; tries++) {
    struct tc_pools pools;
    int64_t mod;
    if (read_pools(kv, &pools, &mod) < 0) {
      fprintf(stderr, "tromcho %s: %s\n", cmd, tc_last_error());
      w = -1;
      break;
    }
    w = change(&pools, arg);
    if (w == 1) {
      w = write_pools(kv, &pools, mod);
      /* 0: somebody else changed the pools meanwhile: read again. */
      if (w < 0)
        fprintf(stderr, "tromcho %s: %s\n", cmd, tc_last_error());
    }
    tc_pools_free(&pools);
  }
  tc_kv_free(kv);
  if (w == 0)
    fprintf(stderr, "tromcho %s: the pool list kept changing (%d tries); try again\n", cmd, CAS_TRIES);
  if (w != 1)
    return 1;
  done(arg);
  return 0;
}

static int
parse_uint(const char *cmd, const char *opt, const char *text, uint32_t *v)
{
  char *end;
  errno = 0;
  long long n = strtoll(text, &end, 10);
  if (errno || *end || end == text || n < 0 || n > UINT32_MAX) {
    fprintf(stderr, "tromcho %s: %s '%s' is not a non-negative integer\n", cmd, opt, text);
    return -1;
  }
  *v = (uint32_t) n;
  return 0;
}

/* pool-create's change: the pool (arg) added under the lowest free id. */
static int
add_pool(struct tc_pools *pools, void *arg)
{
  struct tc_pool *p = arg;
  const struct tc_pool *same = tc_pools_find_name(pools, p->name);
  if (same) {
    fprintf(stderr, "tromcho pool-create: a pool named '%s' already exists (id %u)\n", p->name, same->id);
    return -1;
  }
  uint32_t id = 1;
  for (size_t i = 0; i < pools->n; i++)
    if (pools->v[i].id == id)
      id++;
  if (id > TC_POOL_MAX_ID) {
    fprintf(stderr, "tromcho pool-create: no free pool id (all %d are used)\n", TC_POOL_MAX_ID);
    return -1;
  }
  struct tc_pool *v = realloc(pools->v, (pools->n + 1) * sizeof *v);
  if (!v) {
    fprintf(stderr, "tromcho pool-create: out of memory\n");
    return -1;
  }
  pools->v = v;
  p->id = id;
  struct tc_pool *n = &v[pools->n++];
  *n = *p;
  n->name = strdup(p->name);
  n->creator_group = p->creator_group ? strdup(p->creator_group) : NULL;
  if (!n->name || (p->creator_group && !n->creator_group)) {
    fprintf(stderr, "tromcho pool-create: out of memory\n");
    return -1;
  }
  return 1;
}

static void
added_pool(void *arg)
{
  const struct tc_pool *p = arg;
  printf("Pool %s created with id %u\n", p->name, p->id);
}

struct pool_rm {
  const char *name;
  uint32_t id;   /* the removed pool's */
};

/* pool-rm's change: the pool named arg->name taken out. */
static int
remove_pool(struct tc_pools *pools, void *arg)
{
  struct pool_rm *rm = arg;
  const struct tc_pool *p = tc_pools_find_name(pools, rm->name);
  if (!p) {
    fprintf(stderr, "tromcho pool-rm: no pool named '%s'\n", rm->name);
    return -1;
  }
  rm->id = p->id;
  size_t i = (size_t) (p - pools->v);
  free(pools->v[i].name);
  free(pools->v[i].creator_group);
  memmove(&pools->v[i], &pools->v[i + 1], (pools->n - i - 1) * sizeof *pools->v);
  pools->n--;
  return 1;
}

static void
removed_pool(void *arg)
{
  const struct pool_rm *rm = arg;
  printf("Pool %s (id %u) removed\n", rm->name, rm->id);
}

int
cmd_pool_create(int argc, char **argv, struct tc_config *cfg)
{
  static const char usage[] = "usage: pool-create NAME --pg-size N --pg-minsize N --pg-count N "
                              "[--block-size 128k] [--creator-group G] [--failure-domain host|osd]";
  struct tc_pool p = { .block_size = 128 << 10, .failure_domain = TC_FD_HOST };
  bool have_size = false, have_min = false, have_count = false;
  /* --block-size is also a config option (an OSD store's object size), so
   * the config loader takes it off the command line before we see it. */
  if (tc_config_given(cfg, "block_size"))
    p.block_size = (uint64_t) tc_config_int(cfg, "block_size");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' && !p.name) {
      p.name = argv[i];
      continue;
    }
    if (i + 1 >= argc || a[0] != '-') {
      fprintf(stderr, "tromcho pool-create: unexpected argument '%s' (%s)\n", a, usage);
      return 1;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--pg-size")) {
      if (parse_uint("pool-create", a, v, &p.pg_size) < 0)
        return 1;
      have_size = true;
    }
    else if (!strcmp(a, "--pg-minsize")) {
      if (parse_uint("pool-create", a, v, &p.pg_minsize) < 0)
        return 1;
      have_min = true;
    }
    else if (!strcmp(a, "--pg-count")) {
      if (parse_uint("pool-create", a, v, &p.pg_count) < 0)
        return 1;
      have_count = true;
    }
    else if (!strcmp(a, "--block-size")) {
      int64_t bs = tc_parse_size(v);
      if (bs < 0) {
        fprintf(stderr, "tromcho pool-create: --block-size '%s' is not a size (e.g. 128k)\n", v);
        return 1;
      }
      p.block_size = (uint64_t) bs;
    }
    else if (!strcmp(a, "--creator-group"))
      p.creator_group = (char *) v;
    else if (!strcmp(a, "--failure-domain")) {
      if (!strcmp(v, "host"))
        p.failure_domain = TC_FD_HOST;
      else if (!strcmp(v, "osd"))
        p.failure_domain = TC_FD_OSD;
      else {
        fprintf(stderr, "tromcho pool-create: --failure-domain '%s' is neither host nor osd\n", v);
        return 1;
      }
    }
    else {
      fprintf(stderr, "tromcho pool-create: unknown option '%s' (%s)\n", a, usage);
      return 1;
    }
  }
  if (!p.name || !have_size || !have_count) {
    fprintf(stderr, "tromcho pool-create: %s%s%s (%s)\n", !p.name ? "NAME is required" : "",
            p.name && !have_size ? "--pg-size is required" : "",
            p.name && have_size && !have_count ? "--pg-count is required" : "", usage);
    return 1;
  }
  /* --block-size is also the global option block_size (osd-create's), which
   * the config loader takes out of argv before we see it. */
  if (tc_config_given(cfg, "block_size"))
    p.block_size = (uint64_t) tc_config_int(cfg, "block_size");
  if (!have_min)
    p.pg_minsize = p.pg_size > 1 ? p.pg_size - 1 : 1;
  p.id = 1;
  if (tc_pool_validate(&p) < 0) {
    fprintf(stderr, "tromcho pool-create: %s\n", tc_last_error());
    return 1;
  }
  return update_pools("pool-create", cfg, add_pool, added_pool, &p);
}

int
cmd_pool_rm(int argc, char **argv, struct tc_config *cfg)
{
  if (argc != 2 || argv[1][0] == '-') {
    fprintf(stderr, "tromcho pool-rm: usage: pool-rm NAME\n");
    return 1;
  }
  struct pool_rm rm = { .name = argv[1] };
  return update_pools("pool-rm", cfg, remove_pool, removed_pool, &rm);
}

int
cmd_pool_ls(int argc, char **argv, struct tc_config *cfg)
{
  bool json = false;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--json"))
      json = true;
    else {
      fprintf(stderr, "tromcho pool-ls: unknown argument '%s' (usage: pool-ls [--json])\n", argv[i]);
      return 1;
    }
  struct tc_kv *kv = tc_kv_new_from_config(cfg);
  if (!kv) {
    fprintf(stderr, "tromcho pool-ls: %s\n", tc_last_error());
    return 1;
  }
  struct tc_pools pools;
  struct tc_pg_config pgc = { 0 };
  struct tc_kv_result r;
  int64_t mod;
  char k[512];
  pool_key(kv, k, sizeof k, "/pg/config");
  if (read_pools(kv, &pools, &mod) < 0 || tc_kv_get(kv, k, 0, &r) < 0) {
    fprintf(stderr, "tromcho pool-ls: %s\n", tc_last_error());
    tc_kv_free(kv);
    return 1;
  }
  if (tc_pg_config_parse(r.n_kvs ? (char *) r.kvs[0].value : NULL, &pgc) < 0)
    fprintf(stderr, "tromcho pool-ls: warning: %s\n", tc_last_error());
  tc_kv_result_free(&r);
  json_object *arr = json_object_new_array();
  if (!json)
    printf("%-4s %-20s %7s %10s %8s %10s %-8s %8s %8s %8s  %s\n", "ID", "NAME", "PG_SIZE", "PG_MINSIZE",
           "PG_COUNT", "BLOCK", "FD", "PLACED", "ACTIVE", "DEGRADED", "STATE");
  for (size_t i = 0; i < pools.n; i++) {
    const struct tc_pool *p = &pools.v[i];
    const struct tc_placement *pl = tc_pg_config_find(&pgc, p->id);
    uint32_t placed = 0, active = 0, degraded = 0;
    for (uint32_t pg = 0; pl && pg < pl->pg_count && pg < p->pg_count; pg++) {
      uint32_t members = 0;
      for (uint32_t j = 0; j < pl->pg_size; j++)
        members += pl->osd_set[(size_t) pg * pl->pg_size + j] != 0;
      placed += members > 0;
      active += pl->primary[pg] != 0;
      degraded += members < p->pg_size;
    }
    /* not placed: the monitor has not placed it (yet); inactive: some PG
     * has fewer than pg_minsize OSDs; degraded: some PG lacks a replica. */
    const char *state = !pl || placed < p->pg_count ? "not placed"
                        : active < p->pg_count     ? "inactive"
                        : degraded                 ? "degraded"
                                                   : "active";
    if (json) {
      json_object *o = tc_pool_to_json(p);
      json_object_object_add(o, "id", json_object_new_int64(p->id));
      json_object_object_add(o, "pgs_placed", json_object_new_int64(placed));
      json_object_object_add(o, "pgs_active", json_object_new_int64(active));
      json_object_object_add(o, "pgs_degraded", json_object_new_int64(degraded));
      json_object_object_add(o, "state", json_object_new_string(state));
      json_object_array_add(arr, o);
    }
    else {
      char bs[32];
      if (p->block_size % (1 << 20) == 0)
        snprintf(bs, sizeof bs, "%" PRIu64 "M", p->block_size >> 20);
      else
        snprintf(bs, sizeof bs, "%" PRIu64 "k", p->block_size >> 10);
      printf("%-4u %-20s %7u %10u %8u %10s %-8s %8u %8u %8u  %s\n", p->id, p->name, p->pg_size, p->pg_minsize,
             p->pg_count, bs, p->failure_domain == TC_FD_OSD ? "osd" : "host", placed, active, degraded, state);
    }
  }
  if (json)
    printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
  json_object_put(arr);
  tc_pg_config_free(&pgc);
  tc_pools_free(&pools);
  tc_kv_free(kv);
  return 0;
}
