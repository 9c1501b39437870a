/* tromcho modify, flatten, rm: change, flatten and delete images. */
#include <config.h>
#include <stdio.h>
#include <string.h>
#include "api_client.h"
#include "cli_progress.h"
#include "cli_util.h"
#include "commands.h"
#include "image_admin.h"

/* A call on one image through the admin API (api_url); body may hold more. */
static int
name_call(const char *cmd, const struct tc_config *cfg, const char *call, const char *name, json_object *b)
{
  json_object *reply;
  if (!b)
    b = json_object_new_object();
  cli_api_add(b, "name", name);
  if (cli_api_call(cmd, cfg, call, b, &reply))
    return 1;
  json_object_put(reply);
  return 0;
}

/* modify NAME --rekey auto|HEX|vault:ID|resume: re-encrypt the image
 * online with a new key (image_admin.h), showing progress; a run that was
 * killed is continued by any later one. */
static int
modify_rekey(const char *name, const char *spec, bool others, struct tc_config *cfg)
{
  if (others) {
    fprintf(stderr, "tromcho modify: --rekey goes alone (change the rest in another modify)\n");
    return 1;
  }
  if (cli_api_enabled(cfg)) {
    fprintf(stderr, "tromcho modify: --rekey runs in this process for as long as the copy takes: run it without "
            "api_url\n");
    return 1;
  }
  struct tc_client *cl = cli_client("modify", cfg);
  if (!cl)
    return 1;
  struct cli_progress pr;
  cli_progress_start(&pr, "rekey", 0);
  int r = tc_admin_rekey(cl, name, strcmp(spec, "resume") ? spec : NULL, cli_progress_cb, &pr);
  cli_progress_end(&pr);
  tc_client_free(cl);
  if (r < 0)
    return cli_fail("modify");
  printf("Image %s re-keyed\n", name);
  return 0;
}

int
cmd_image_modify(int argc, char **argv, struct tc_config *cfg)
{
  const char *resize = NULL, *rekey = NULL, *pos[1];
  bool ro = false, rw = false;
  struct tc_admin_modify_opts o = { .readonly = -1 };
  int npos;
  const struct cli_opt opts[] = {
    { "--resize", NULL, &resize, NULL }, { "--rename", NULL, &o.rename, NULL },
    { "--readonly", NULL, NULL, &ro }, { "--readwrite", NULL, NULL, &rw },
    { "--owner", NULL, &o.owner, NULL }, { "--owner_group", NULL, &o.owner_group, NULL },
    { "--reader_group", NULL, &o.reader_group, NULL }, { "--rekey", NULL, &rekey, NULL }, { 0 },
  };
  if (cli_parse("modify", argc, argv, opts, pos, 1, &npos) < 0)
    return 1;
  if (npos != 1) {
    fprintf(stderr, "tromcho modify: give the image name: modify NAME [--resize SIZE] [--rename NEW] ...\n");
    return 1;
  }
  if (ro && rw) {
    fprintf(stderr, "tromcho modify: --readonly and --readwrite contradict each other\n");
    return 1;
  }
  o.readonly = ro ? 1 : rw ? 0 : -1;
  if (resize && cli_size("modify", "--resize", resize, &o.resize) < 0)
    return 1;
  if (rekey)
    return modify_rekey(pos[0], rekey, resize || o.rename || ro || rw || o.owner || o.owner_group ||
                        o.reader_group, cfg);
  if (cli_api_enabled(cfg)) {
    json_object *b = json_object_new_object();
    if (o.resize)
      json_object_object_add(b, "resize", json_object_new_int64((int64_t) o.resize));
    cli_api_add(b, "rename", o.rename);
    if (o.readonly >= 0)
      json_object_object_add(b, "readonly", json_object_new_boolean(o.readonly));
    cli_api_add(b, "owner", o.owner);
    cli_api_add(b, "owner_group", o.owner_group);
    cli_api_add(b, "reader_group", o.reader_group);
    if (name_call("modify", cfg, "image/modify", pos[0], b))
      return 1;
    printf("Image %s modified\n", o.rename ? o.rename : pos[0]);
    return 0;
  }
  struct tc_client *cl = cli_client("modify", cfg);
  if (!cl)
    return 1;
  int r = tc_admin_modify(cl, pos[0], &o);
  tc_client_free(cl);
  if (r < 0)
    return cli_fail("modify");
  printf("Image %s modified\n", o.rename ? o.rename : pos[0]);
  return 0;
}

int
cmd_image_flatten(int argc, char **argv, struct tc_config *cfg)
{
  const char *pos[1];
  int npos;
  const struct cli_opt opts[] = { { 0 } };
  if (cli_parse("flatten", argc, argv, opts, pos, 1, &npos) < 0)
    return 1;
  if (npos != 1) {
    fprintf(stderr, "tromcho flatten: give the image name: flatten NAME\n");
    return 1;
  }
  if (cli_api_enabled(cfg)) {
    if (name_call("flatten", cfg, "image/flatten", pos[0], NULL))
      return 1;
    printf("Image %s flattened\n", pos[0]);
    return 0;
  }
  struct tc_client *cl = cli_client("flatten", cfg);
  if (!cl)
    return 1;
  struct cli_progress pr;
  cli_progress_start(&pr, "flatten", 0);
  int r = tc_admin_flatten_progress(cl, pos[0], cli_progress_cb, &pr);
  cli_progress_end(&pr);
  tc_client_free(cl);
  if (r < 0)
    return cli_fail("flatten");
  printf("Image %s flattened\n", pos[0]);
  return 0;
}

int
cmd_image_rm(int argc, char **argv, struct tc_config *cfg)
{
  const char *pos[1];
  bool shred = false;
  int npos;
  const struct cli_opt opts[] = { { "--shred", NULL, NULL, &shred }, { 0 } };
  if (cli_parse("rm", argc, argv, opts, pos, 1, &npos) < 0)
    return 1;
  if (npos != 1) {
    fprintf(stderr, "tromcho rm: give the image name: rm NAME [--shred]\n");
    return 1;
  }
  if (cli_api_enabled(cfg)) {
    if (name_call("rm", cfg, "image/delete", pos[0], NULL))
      return 1;
    printf("Image %s deleted\n", pos[0]);
    return 0;
  }
  struct tc_client *cl = cli_client("rm", cfg);
  if (!cl)
    return 1;
  struct cli_progress pr;
  cli_progress_start(&pr, "rm", 0);
  int64_t rev = 0;
  int r = tc_admin_delete_shred_progress(cl, pos[0], shred, &rev, cli_progress_cb, &pr);
  cli_progress_end(&pr);
  tc_client_free(cl);
  if (r < 0)
    return cli_fail("rm");
  if (shred && rev)
    printf("Key of %s shredded at KV revision %lld (the KV's history keeps older values until it is compacted "
           "at or after it: etcdctl compact %lld)\n", pos[0], (long long) rev, (long long) rev);
  printf("Image %s deleted\n", pos[0]);
  return 0;
}
