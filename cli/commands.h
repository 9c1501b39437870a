/* The tromcho command line: one function per subcommand. Each gets the
 * arguments after the subcommand name (argv[0] = the subcommand) with the
 * tromcho options already taken out into cfg. Returns the exit status. */
#ifndef TROMCHO_COMMANDS_H
#define TROMCHO_COMMANDS_H
#include "tc_config.h"

struct tc_command {
  const char *name;
  int (*run)(int argc, char **argv, struct tc_config *cfg);
  const char *usage;
};

int cmd_make_certs(int argc, char **argv, struct tc_config *cfg);
int cmd_cpubench(int argc, char **argv, struct tc_config *cfg);
int cmd_selftest(int argc, char **argv, struct tc_config *cfg);
int cmd_pool_create(int argc, char **argv, struct tc_config *cfg);
int cmd_pool_ls(int argc, char **argv, struct tc_config *cfg);
int cmd_pool_rm(int argc, char **argv, struct tc_config *cfg);
int cmd_osd_create(int argc, char **argv, struct tc_config *cfg);

int cmd_image_create(int argc, char **argv, struct tc_config *cfg);
int cmd_image_snap_create(int argc, char **argv, struct tc_config *cfg);
int cmd_image_clone(int argc, char **argv, struct tc_config *cfg);
int cmd_image_ls(int argc, char **argv, struct tc_config *cfg);
int cmd_image_info(int argc, char **argv, struct tc_config *cfg);
int cmd_image_modify(int argc, char **argv, struct tc_config *cfg);
int cmd_image_flatten(int argc, char **argv, struct tc_config *cfg);
int cmd_image_rm(int argc, char **argv, struct tc_config *cfg);
int cmd_dd(int argc, char **argv, struct tc_config *cfg);
int cmd_status(int argc, char **argv, struct tc_config *cfg);
int cmd_scrub(int argc, char **argv, struct tc_config *cfg);
int cmd_describe(int argc, char **argv, struct tc_config *cfg);

#endif
