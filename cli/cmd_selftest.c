/* tromcho selftest: the crypto known-answer tests, with a readable line. */
#include <config.h>
#include <stdio.h>
#include "commands.h"
#include "crypto.h"

int
cmd_selftest(int argc, char **argv, struct tc_config *cfg)
{
  char msg[256];
  if (argc > 1) {
    fprintf(stderr, "tromcho selftest: unexpected argument '%s'\n", argv[1]);
    return 1;
  }
  int r = tc_crypto_selftest(msg, sizeof msg);
  printf("%s\n", msg);
  return r < 0 ? 1 : 0;
}
