/* tromcho: the admin and user command line. */
#include <config.h>
#include <stdio.h>
#include <string.h>
#include "tune.h"
#include "commands.h"
#include "crypto.h"
#include "error.h"
#include "log.h"

static const struct tc_command commands[] = {
  { "cpubench", cmd_cpubench, "cpubench [--seconds S] [--json]   transport and image encryption speed of this CPU" },
  { "make-certs", cmd_make_certs, "make-certs --dir DIR [--days N] [--key-type ecdsa|ed25519|rsa] [--force]\n"
    "  make-certs user NAME [--admin] --dir DIR      CAs, OSD/gateway/admin certificates and tromcho.conf; user certificates\n"
    "  make-certs nbd --dir DIR [--tenant T] [--user U] [--host H]  TLS for the NBD hop, a CA per tenant (T defaults to U, U to admin):\n"
    "                  DIR/nbd-ca-T.crt, DIR/nbd-server-T/, DIR/nbd-client-T/" },
  { "selftest", cmd_selftest, "selftest                          crypto known-answer self-test" },
  { "pool-create", cmd_pool_create, "pool-create NAME --pg-size N --pg-count N [--pg-minsize N] [--block-size 128k] [--creator-group G] [--failure-domain host|osd]" },
  { "pool-ls", cmd_pool_ls, "pool-ls [--json]                  pools with their PG counts and state" },
  { "pool-rm", cmd_pool_rm, "pool-rm NAME                      remove a pool" },
  { "osd-create", cmd_osd_create, "osd-create --data PATH [--osd_num N] [--size 8G] [--block-size 128k] [--meta PATH] [--force]\n"
    "                                    format a data file or device as an OSD store (--osd_num: allocated in the KV when absent)" },
  { "create", cmd_image_create, "create NAME -s SIZE [--pool P] [--enc_key auto|none|HEX|vault:ID] [--integrity] [--owner U]\n"
    "       [--owner_group G] [--reader_group G] [--parent NAME@SNAP]   create an image (or a clone)" },
  { "ls", cmd_image_ls, "ls [--json]                       images you may read: size, used, layers, encryption" },
  { "info", cmd_image_info, "info NAME [--json]                one image's record" },
  { "modify", cmd_image_modify, "modify NAME [--resize SIZE] [--rename NEW] [--readonly|--readwrite] [--owner U]\n"
    "       [--owner_group G] [--reader_group G]                      change an image\n"
    "       modify NAME --rekey auto|HEX|vault:ID|resume              re-encrypt it online with a new key" },
  { "snap-create", cmd_image_snap_create, "snap-create NAME@SNAP [--enc_key auto|none|HEX|vault:ID]\n"
    "                                   snapshot an image (--enc_key: its new top layer's own key; the snapshot keeps the old)" },
  { "clone", cmd_image_clone, "clone NAME@SNAP NEW [--enc_key auto|none|HEX|vault:ID] [--integrity] [--pool P]  a new image over a snapshot\n"
    "                                    (default key: the snapshot's)" },
  { "flatten", cmd_image_flatten, "flatten NAME                      copy the parents' data in, re-encrypted; drop the parent" },
  { "rm", cmd_image_rm, "rm NAME [--shred]                 delete an image (or NAME@SNAP) and its data (--shred: destroy its KV-held key first)" },
  { "dd", cmd_dd, "dd [if=FILE|iimg=IMAGE] [of=FILE|oimg=IMAGE] [bs=1M] [count=N] [skip=N] [seek=N]\n"
    "       [iflag=direct] [oflag=direct] [conv=notrunc] [iodepth=8]   copy data" },
  { "status", cmd_status, "status [--json]                   health, OSDs, PG states, recovery, client I/O, capacity, scrub" },
  { "scrub", cmd_scrub, "scrub [--pool P] [--pg N] [--osd N] [--wait] [--timeout S] [--json]\n"
                        "                                  ask for a scrub now (admin); --wait: report bad and repaired sectors" },
  { "describe", cmd_describe, "describe [--pool P] [--osd N] [--object-state degraded,inconsistent,incomplete] [--json]\n"
                              "                                  objects that are not clean, from every OSD (admin)" },
  { NULL, NULL, NULL }
};

static void
usage(FILE *f)
{
  fprintf(f, "Usage: tromcho [OPTIONS] COMMAND [ARGS]\n\nCommands:\n");
  for (const struct tc_command *c = commands; c->name; c++)
    fprintf(f, "  %s\n", c->usage);
  fprintf(f, "\n");
  tc_config_print_help(f);
}

int
main(int argc, char **argv)
{
  tc_tune_malloc();
  tc_log_open("tromcho", 0);
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
    else if (!strcmp(argv[i], "--version")) {
      printf("tromcho %s\n", PACKAGE_VERSION);
      return 0;
    }
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg) {
    fprintf(stderr, "tromcho: %s\n", tc_last_error());
    return 1;
  }
  if (tc_log_configure(cfg, NULL) < 0) {
    fprintf(stderr, "tromcho: %s\n", tc_last_error());
    tc_config_free(cfg);
    return 1;
  }
  if (argc < 2) {
    usage(stderr);
    tc_config_free(cfg);
    return 1;
  }
  if (tc_crypto_init() < 0) {
    fprintf(stderr, "tromcho: %s\n", tc_last_error());
    tc_config_free(cfg);
    return 1;
  }
  int status = 1;
  const struct tc_command *c;
  for (c = commands; c->name; c++)
    if (strcmp(c->name, argv[1]) == 0)
      break;
  if (c->name)
    status = c->run(argc - 1, argv + 1, cfg);
  else
    fprintf(stderr, "tromcho: unknown command '%s' (see tromcho --help)\n", argv[1]);
  tc_config_free(cfg);
  return status;
}
