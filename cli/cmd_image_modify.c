/* tromcho modify, flatten, rm: change, flatten and delete images. */
#include <config.h>
#include <stdio.h>
#include <string.h>
#include "cli_progress.h"
#include "cli_util.h"
#include "commands.h"
#include "image_admin.h"

int
cmd_image_modify(int argc, char **argv, struct tc_config *cfg)
{
  const char *resize = NULL, *pos[1];
  bool ro = false, rw = false;
  struct tc_admin_modify_opts o = { .readonly = -1 };
  int npos;
  const struct cli_opt opts[] = {
    { "--resize", NULL, &resize, NULL }, { "--rename", NULL, &o.rename, NULL },
    { "--readonly", NULL, NULL, &ro }, { "--readwrite", NULL, NULL, &rw },
    { "--owner", NULL, &o.owner, NULL }, { "--owner_group", NULL, &o.owner_group, NULL },
    { "--reader_group", NULL, &o.reader_group, NULL }, { NULL },
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
  const struct cli_opt opts[] = { { NULL } };
  if (cli_parse("flatten", argc, argv, opts, pos, 1, &npos) < 0)
    return 1;
  if (npos != 1) {
    fprintf(stderr, "tromcho flatten: give the image name: flatten NAME\n");
    return 1;
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
  int npos;
  const struct cli_opt opts[] = { { NULL } };
  if (cli_parse("rm", argc, argv, opts, pos, 1, &npos) < 0)
    return 1;
  if (npos != 1) {
    fprintf(stderr, "tromcho rm: give the image name: rm NAME\n");
    return 1;
  }
  struct tc_client *cl = cli_client("rm", cfg);
  if (!cl)
    return 1;
  struct cli_progress pr;
  cli_progress_start(&pr, "rm", 0);
  int r = tc_admin_delete_progress(cl, pos[0], cli_progress_cb, &pr);
  cli_progress_end(&pr);
  tc_client_free(cl);
  if (r < 0)
    return cli_fail("rm");
  printf("Image %s deleted\n", pos[0]);
  return 0;
}
