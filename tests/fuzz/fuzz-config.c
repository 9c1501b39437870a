/* libFuzzer target: bytes as a JSON config file, through the same parser
 * tc_config_load_file uses (tc_config_load_buffer). Any input must give a
 * config or a clean error (NULL with a message), never a crash, a leak or
 * undefined behaviour. Built only with ./configure --enable-fuzzing CC=clang;
 * run with tests/fuzz/run-fuzz.sh config SECONDS. */
#include <config.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tc_config.h"
#include "error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct tc_config *cfg = tc_config_load_buffer((const char *) data, size, "fuzz.conf");
  if (!cfg) {
    /* A refusal must say why. */
    if (!tc_last_error()[0])
      abort();
    return 0;
  }
  /* Read back every option the way a daemon would, by its declared type. */
  for (const struct tc_opt_def *o = tc_options; o->name; o++) {
    switch (o->type) {
    case TC_OPT_STRING: {
      const char *v = tc_config_str(cfg, o->name);
      /* A value from the input cannot outgrow the input. */
      if (v && tc_config_given(cfg, o->name) && strlen(v) > size)
        abort();
      break;
    }
    case TC_OPT_INT:
      (void) tc_config_int(cfg, o->name);
      break;
    case TC_OPT_BOOL:
      (void) tc_config_bool(cfg, o->name);
      break;
    case TC_OPT_LIST:
      for (int i = 0; i < tc_config_list_len(cfg, o->name); i++)
        if (!tc_config_list_get(cfg, o->name, i))
          abort();
      break;
    case TC_OPT_OBJECT:
      (void) tc_config_obj(cfg, o->name);
      break;
    }
    (void) tc_config_given(cfg, o->name);
  }
  tc_config_free(cfg);
  return 0;
}
