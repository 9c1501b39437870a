/* libFuzzer target: bytes as a JSON config file, through the same parser
 * tc_config_load_file uses (tc_config_load_buffer), and the same bytes as a
 * command-line option "NAME=VALUE" through tc_config_set. Any input must
 * give a config or a clean error (NULL/-1 with a message), never a crash, a
 * leak or undefined behaviour. Built only with ./configure --enable-fuzzing CC=clang;
 * run with tests/fuzz/run-fuzz.sh config SECONDS. */
#include <config.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tc_config.h"
#include "error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read back every option the way a daemon would, by its declared type. */
static void
read_all(struct tc_config *cfg, size_t size);

/* "NAME=VALUE" as `--NAME VALUE` on a command line. */
static void
fuzz_set(const uint8_t *data, size_t size)
{
  const uint8_t *eq = memchr(data, '=', size);
  if (!eq || eq - data >= 128 || memchr(data, 0, (size_t) (eq - data)))
    return;
  char name[128];
  memcpy(name, data, (size_t) (eq - data));
  name[eq - data] = 0;
  size_t vlen = size - (size_t) (eq - data) - 1;
  char *value = malloc(vlen + 1);
  if (!value)
    return;
  memcpy(value, eq + 1, vlen);
  value[vlen] = 0;   /* argv strings end at the first NUL */
  struct tc_config *cfg = tc_config_load_file(NULL);
  if (!cfg)
    abort();
  if (tc_config_set(cfg, name, value) < 0 && !tc_last_error()[0])
    abort();
  read_all(cfg, vlen);
  tc_config_free(cfg);
  free(value);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_set(data, size);
  struct tc_config *cfg = tc_config_load_buffer((const char *) data, size, "fuzz.conf");
  if (!cfg) {
    /* A refusal must say why. */
    if (!tc_last_error()[0])
      abort();
    return 0;
  }
  read_all(cfg, size);
  tc_config_free(cfg);
  return 0;
}

static void
read_all(struct tc_config *cfg, size_t size)
{
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
}
