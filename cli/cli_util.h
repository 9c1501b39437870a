/* Helpers shared by the image commands: argument parsing, sizes, errors. */
#ifndef TROMCHO_CLI_UTIL_H
#define TROMCHO_CLI_UTIL_H
#include <stdbool.h>
#include <stdint.h>
#include "client.h"
#include "tc_config.h"

struct cli_opt {
  const char *name;          /* "--pool" */
  const char *alias;         /* "-s" or NULL */
  const char **value;        /* option with a value, or NULL */
  bool *flag;                /* flag without a value, or NULL */
};

/* Parse argv[1..] (argv[0] = the command): options from opts (--name V,
 * --name=V, -s V), the rest into pos[] (at most maxpos). Prints a message
 * naming the bad argument and returns -1 on error. */
int cli_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts, const char **pos, int maxpos,
              int *npos);
/* "10G", "512M", "4096" -> bytes; -1 with a message naming what on error. */
int cli_size(const char *cmd, const char *what, const char *s, uint64_t *out);
/* 1536 -> "1.5 KiB" into buf. */
const char *cli_human(uint64_t bytes, char *buf, size_t len);
/* Print "tromcho CMD: <last error>" and return 1. */
int cli_fail(const char *cmd);
/* A client for the command, or NULL after printing why. */
struct tc_client *cli_client(const char *cmd, const struct tc_config *cfg);
/* Number of layers of an image (1 = no parent), following the records. */
int cli_layers(struct tc_client *cl, const struct tc_image_meta *m);

#endif
