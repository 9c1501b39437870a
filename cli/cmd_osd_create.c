/* tromcho osd-create: format a data file or block device as an OSD store.
 *
 * Without --osd_num the next OSD number is allocated in the KV (a
 * compare-and-swap on /index/maxid/osd). The data path is recorded in the
 * KV as /config/osd/<N> {"data", "meta", "host"} so that `tromcho-osd
 * --osd_num N` finds it; with --osd_num that happens only when
 * etcd_address is given (a store can be prepared without a KV). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json.h>
#include "commands.h"
#include "error.h"
#include "kv_client.h"
#include "pools.h"
#include "store.h"

#define DEFAULT_SIZE (8ull << 30)

static void
usage(FILE *f)
{
  fprintf(f,
          "Usage: tromcho osd-create --data PATH [--osd_num N] [--size 8G] [--block-size 128k]\n"
          "                          [--meta PATH] [--force] [--etcd_address URL]\n"
          "  --data PATH        data file (created sparse if absent; its last 64th, at\n"
          "                     most 1 GiB, is written with zeros) or block device\n"
          "  --osd_num N        this OSD's number, > 0 (default: the next free number,\n"
          "                     allocated in the KV; the path is then recorded in\n"
          "                     /config/osd/<N> for tromcho-osd)\n"
          "  --size SIZE        size of a new or grown data file (default 8G; default for an\n"
          "                     existing file or device: its size); at least 16M\n"
          "  --block-size SIZE  object size, a power of two from 4k to 256k (default 128k);\n"
          "                     fixed for the life of the store\n"
          "  --meta PATH        metadata file (default PATH.meta; required for a block device)\n"
          "  --force            erase an existing store or other data on PATH\n");
}

/* A command option that a global declaration in tc_options.c may have
 * taken out of argv first: look for it in cfg too. */
static const char *
global_str(struct tc_config *cfg, const char *name)
{
  const struct tc_opt_def *o = tc_option_find(name);
  return o && o->type == TC_OPT_STRING && tc_config_given(cfg, name) ? tc_config_str(cfg, name) : NULL;
}

/* The next OSD number: compare-and-swap on <prefix>/index/maxid/osd. */
static int
alloc_osd_num(struct tc_kv *kv, const char *prefix, uint64_t *out)
{
  char key[256];
  snprintf(key, sizeof key, "%s/index/maxid/osd", prefix);
  for (int attempt = 0; attempt < 100; attempt++) {
    struct tc_kv_result res;
    memset(&res, 0, sizeof res);
    if (tc_kv_get(kv, key, 0, &res) < 0)
      return -1;
    uint64_t cur = 0;
    int64_t mod = 0;
    if (res.n_kvs) {
      char *end;
      cur = strtoull((const char *) res.kvs[0].value, &end, 10);
      mod = res.kvs[0].mod_revision;
      if (*end) {
        tc_kv_result_free(&res);
        return tc_error(EINVAL, "%s: '%s' is not a number", key, "value");
      }
    }
    tc_kv_result_free(&res);
    char val[32];
    snprintf(val, sizeof val, "%" PRIu64, cur + 1);
    struct tc_kv_cmp cmp = { .key = key, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = mod };
    struct tc_kv_op put = { .type = TC_KV_PUT, .key = key, .value = val };
    struct tc_kv_txn txn = { .cmp = &cmp, .n_cmp = 1, .success = &put, .n_success = 1 };
    memset(&res, 0, sizeof res);
    if (tc_kv_txn(kv, &txn, &res) < 0)
      return -1;
    bool ok = res.succeeded;
    tc_kv_result_free(&res);
    if (ok) {
      *out = cur + 1;
      return 0;
    }
  }
  return tc_error(EAGAIN, "%s: too many concurrent allocations", key);
}

/* Record where OSD n's store is: <prefix>/config/osd/<n>. */
static int
record_osd(struct tc_kv *kv, const char *prefix, uint64_t n, const char *data, const char *meta)
{
  char key[256], host[256] = "localhost";
  snprintf(key, sizeof key, "%s/config/osd/%" PRIu64, prefix, n);
  gethostname(host, sizeof host - 1);
  char *rdata = realpath(data, NULL), *rmeta = meta ? realpath(meta, NULL) : NULL;
  json_object *j = json_object_new_object();
  json_object_object_add(j, "data", json_object_new_string(rdata ? rdata : data));
  if (meta)
    json_object_object_add(j, "meta", json_object_new_string(rmeta ? rmeta : meta));
  json_object_object_add(j, "host", json_object_new_string(host));
  int rc = tc_kv_put(kv, key, 0, json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE), 0, 0, NULL);
  json_object_put(j);
  free(rdata);
  free(rmeta);
  return rc;
}

int
cmd_osd_create(int argc, char **argv, struct tc_config *cfg)
{
  const char *data = NULL, *meta = NULL, *size_s = NULL;
  int force = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--force"))
      force = 1;
    else if (!strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    else if ((!strcmp(a, "--data") || !strcmp(a, "--meta") || !strcmp(a, "--size")) && i + 1 < argc) {
      const char **dst = a[2] == 'd' ? &data : a[2] == 'm' ? &meta : &size_s;
      *dst = argv[++i];
    }
    else {
      fprintf(stderr, "tromcho osd-create: unknown or incomplete argument '%s'\n", a);
      usage(stderr);
      return 1;
    }
  }
  if (!data)
    data = global_str(cfg, "data");
  if (!meta)
    meta = global_str(cfg, "meta");
  if (!data) {
    fprintf(stderr, "tromcho osd-create: --data PATH is required\n");
    return 1;
  }
  int64_t osd_num = tc_config_given(cfg, "osd_num") ? tc_config_int(cfg, "osd_num") : 0;
  if (tc_config_given(cfg, "osd_num") && osd_num <= 0) {
    fprintf(stderr, "tromcho osd-create: option osd_num: %" PRId64 " is not a positive number\n", osd_num);
    return 1;
  }
  int64_t bs = tc_config_int(cfg, "block_size");
  /* The store takes up to 1M; an OSD serves up to what one operation carries. */
  if (bs < TC_STORE_MIN_BLOCK_SIZE || bs > TC_POOL_MAX_BLOCK_SIZE || (bs & (bs - 1))) {
    fprintf(stderr, "tromcho osd-create: option block_size: %" PRId64
            " is not a power of two between 4k and 256k (the largest object an OSD serves)\n", bs);
    return 1;
  }
  uint64_t size = 0;
  if (size_s) {
    int64_t v = tc_parse_size(size_s);
    if (v <= 0) {
      fprintf(stderr, "tromcho osd-create: --size '%s' is not a size (e.g. 8G)\n", size_s);
      return 1;
    }
    size = (uint64_t) v;
  }
  else {
    struct stat st;
    if (stat(data, &st) < 0 || (S_ISREG(st.st_mode) && st.st_size == 0))
      size = DEFAULT_SIZE;   /* a new file */
  }

  /* A KV when a number must be allocated or etcd_address names one. */
  struct tc_kv *kv = NULL;
  const char *prefix = tc_config_str(cfg, "etcd_prefix");
  if (!osd_num || tc_config_given(cfg, "etcd_address")) {
    uint64_t n = 0;
    if (!(kv = tc_kv_new_from_config(cfg)) || (!osd_num && alloc_osd_num(kv, prefix, &n) < 0)) {
      fprintf(stderr, "tromcho osd-create: allocating an OSD number in the KV (%s): %s; "
              "give --osd_num N to format without a KV\n", tc_config_list_get(cfg, "etcd_address", 0),
              tc_last_error());
      if (kv)
        tc_kv_free(kv);
      return 1;
    }
    if (!osd_num)
      osd_num = (int64_t) n;
  }

  struct tc_store_format_opts o = {
    .data_path = data, .meta_path = meta, .size = size, .osd_num = (uint64_t) osd_num,
    .block_size = (uint32_t) bs, .force = force,
  };
  if (tc_store_format(&o) < 0) {
    fprintf(stderr, "tromcho osd-create: %s\n", tc_last_error());
    if (kv)
      tc_kv_free(kv);
    return 1;
  }
  struct tc_store *st;
  if (tc_store_open(&st, data, meta) < 0) {
    fprintf(stderr, "tromcho osd-create: formatted, but reopening failed: %s\n", tc_last_error());
    if (kv)
      tc_kv_free(kv);
    return 1;
  }
  if (kv) {
    int rc = record_osd(kv, prefix, (uint64_t) osd_num, data, meta);
    tc_kv_free(kv);
    if (rc < 0) {
      fprintf(stderr, "tromcho osd-create: formatted osd %" PRId64 ", but recording it in the KV failed: %s\n",
              osd_num, tc_last_error());
      tc_store_close(st);
      return 1;
    }
  }
  struct tc_store_info info;
  tc_store_get_info(st, &info);
  tc_store_close(st);
  char uuid[37];
  const uint8_t *u = info.uuid;
  snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  printf("osd_num=%" PRIu64 " uuid=%s size=%" PRIu64 " block_size=%" PRIu32 " data_offset=%" PRIu64 " data=%s\n",
         info.osd_num, uuid, info.size, info.block_size, info.data_offset, data);
  return 0;
}
