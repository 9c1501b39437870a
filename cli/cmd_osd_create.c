/* tromcho osd-create: format a data file or block device as an OSD store.
 *
 * --osd_num is required for now: allocating a free OSD number in the KV
 * needs the KV client, and is added when it lands (see the usage text). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "commands.h"
#include "error.h"
#include "store.h"

#define DEFAULT_SIZE (8ull << 30)

static void
usage(FILE *f)
{
  fprintf(f,
          "Usage: tromcho osd-create --data PATH --osd_num N [--size 8G] [--block-size 128k]\n"
          "                          [--meta PATH] [--force]\n"
          "  --data PATH        data file (created sparse if absent) or block device\n"
          "  --osd_num N        this OSD's number, > 0 (required: automatic allocation from\n"
          "                     the KV store is not available yet)\n"
          "  --size SIZE        size of a new or grown data file (default 8G; default for an\n"
          "                     existing file or device: its size); at least 16M\n"
          "  --block-size SIZE  object size, a power of two from 4k to 1M (default 128k);\n"
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
  if (!tc_config_given(cfg, "osd_num")) {
    fprintf(stderr, "tromcho osd-create: --osd_num N is required (allocating an OSD number "
            "from the KV store is not available yet)\n");
    return 1;
  }
  int64_t osd_num = tc_config_int(cfg, "osd_num");
  if (osd_num <= 0) {
    fprintf(stderr, "tromcho osd-create: option osd_num: %" PRId64 " is not a positive number\n", osd_num);
    return 1;
  }
  int64_t bs = tc_config_int(cfg, "block_size");
  if (bs < TC_STORE_MIN_BLOCK_SIZE || bs > TC_STORE_MAX_BLOCK_SIZE || (bs & (bs - 1))) {
    fprintf(stderr, "tromcho osd-create: option block_size: %" PRId64
            " is not a power of two between 4k and 1M\n", bs);
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

  struct tc_store_format_opts o = {
    .data_path = data, .meta_path = meta, .size = size, .osd_num = (uint64_t) osd_num,
    .block_size = (uint32_t) bs, .force = force,
  };
  if (tc_store_format(&o) < 0) {
    fprintf(stderr, "tromcho osd-create: %s\n", tc_last_error());
    return 1;
  }
  struct tc_store *st;
  if (tc_store_open(&st, data, meta) < 0) {
    fprintf(stderr, "tromcho osd-create: formatted, but reopening failed: %s\n", tc_last_error());
    return 1;
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
