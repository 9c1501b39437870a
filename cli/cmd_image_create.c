/* tromcho create, snap-create, clone: new images, snapshots and clones. */
#include <config.h>
#include <stdio.h>
#include <string.h>
#include "api_client.h"
#include "cli_util.h"
#include "commands.h"
#include "image_admin.h"

/* create and clone through the admin API (api_url). */
static int
create_via_api(const char *cmd, const struct tc_config *cfg, const struct tc_admin_create_opts *o)
{
  json_object *b = json_object_new_object(), *reply;
  cli_api_add(b, "name", o->name);
  if (o->size)
    json_object_object_add(b, "size", json_object_new_int64((int64_t) o->size));
  cli_api_add(b, "pool", o->pool);
  cli_api_add(b, "enc_key", o->enc_key);
  cli_api_add(b, "owner", o->owner);
  cli_api_add(b, "owner_group", o->owner_group);
  cli_api_add(b, "reader_group", o->reader_group);
  cli_api_add(b, "parent", o->parent);
  if (cli_api_call(cmd, cfg, "image/create", b, &reply))
    return 1;
  json_object_put(reply);
  return 0;
}

int
cmd_image_create(int argc, char **argv, struct tc_config *cfg)
{
  const char *size = NULL, *pos[1];
  struct tc_admin_create_opts o = { 0 };
  int npos;
  const struct cli_opt opts[] = {
    { "--size", "-s", &size, NULL }, { "--pool", "-p", &o.pool, NULL }, { "--enc_key", NULL, &o.enc_key, NULL },
    { "--owner", NULL, &o.owner, NULL }, { "--owner_group", NULL, &o.owner_group, NULL },
    { "--reader_group", NULL, &o.reader_group, NULL }, { "--parent", NULL, &o.parent, NULL },
    { "--integrity", NULL, NULL, &o.integrity }, { 0 },
  };
  if (cli_parse("create", argc, argv, opts, pos, 1, &npos) < 0)
    return 1;
  if (npos != 1) {
    fprintf(stderr, "tromcho create: give the image name: create NAME -s SIZE\n");
    return 1;
  }
  o.name = pos[0];
  if (size && cli_size("create", "size", size, &o.size) < 0)
    return 1;
  if (!size && !o.parent) {
    fprintf(stderr, "tromcho create: -s SIZE is required\n");
    return 1;
  }
  if (cli_api_enabled(cfg)) {
    if (create_via_api("create", cfg, &o))
      return 1;
    printf("Image %s created\n", o.name);
    return 0;
  }
  struct tc_client *cl = cli_client("create", cfg);
  if (!cl)
    return 1;
  int r = tc_admin_create(cl, &o);
  tc_client_free(cl);
  if (r < 0)
    return cli_fail("create");
  printf("Image %s created\n", o.name);
  return 0;
}

int
cmd_image_snap_create(int argc, char **argv, struct tc_config *cfg)
{
  const char *pos[1], *enc_key = NULL;
  int npos;
  const struct cli_opt opts[] = { { "--enc_key", NULL, &enc_key, NULL }, { 0 } };
  if (cli_parse("snap-create", argc, argv, opts, pos, 1, &npos) < 0)
    return 1;
  if (npos != 1) {
    fprintf(stderr, "tromcho snap-create: give the snapshot: snap-create NAME@SNAP\n");
    return 1;
  }
  if (cli_api_enabled(cfg)) {
    json_object *b = json_object_new_object(), *reply;
    cli_api_add(b, "name", pos[0]);
    if (cli_api_call("snap-create", cfg, "image/create", b, &reply))
      return 1;
    json_object_put(reply);
    printf("Snapshot %s created\n", pos[0]);
    return 0;
  }
  struct tc_client *cl = cli_client("snap-create", cfg);
  if (!cl)
    return 1;
  int r = tc_admin_snapshot_key(cl, pos[0], enc_key);
  tc_client_free(cl);
  if (r < 0)
    return cli_fail("snap-create");
  printf("Snapshot %s created\n", pos[0]);
  return 0;
}

int
cmd_image_clone(int argc, char **argv, struct tc_config *cfg)
{
  const char *pos[2];
  struct tc_admin_create_opts o = { 0 };
  int npos;
  const struct cli_opt opts[] = {
    { "--pool", "-p", &o.pool, NULL }, { "--enc_key", NULL, &o.enc_key, NULL },
    { "--owner", NULL, &o.owner, NULL }, { "--owner_group", NULL, &o.owner_group, NULL },
    { "--reader_group", NULL, &o.reader_group, NULL }, { "--integrity", NULL, NULL, &o.integrity }, { 0 },
  };
  if (cli_parse("clone", argc, argv, opts, pos, 2, &npos) < 0)
    return 1;
  if (npos != 2) {
    fprintf(stderr, "tromcho clone: give the snapshot and the new name: clone NAME@SNAP NEW\n");
    return 1;
  }
  o.parent = pos[0];
  o.name = pos[1];
  if (cli_api_enabled(cfg)) {
    if (create_via_api("clone", cfg, &o))
      return 1;
    printf("Image %s cloned from %s\n", o.name, o.parent);
    return 0;
  }
  struct tc_client *cl = cli_client("clone", cfg);
  if (!cl)
    return 1;
  int r = tc_admin_create(cl, &o);
  tc_client_free(cl);
  if (r < 0)
    return cli_fail("clone");
  printf("Image %s cloned from %s\n", o.name, o.parent);
  return 0;
}
