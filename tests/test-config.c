/* The config loader: file + command line, unknown options and wrong types
 * refused with a message that names the option. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tc_config.h"
#include "error.h"
#include "tap.h"

static char path[64];

static void
write_conf(const char *text)
{
  FILE *f = fopen(path, "w");
  if (!f) { perror(path); exit(1); }
  fputs(text, f);
  fclose(f);
}

int
main(void)
{
  snprintf(path, sizeof path, "/tmp/test-config.%d.conf", (int) getpid());
  struct tc_config *cfg;

  write_conf("{\"etcd_address\": [\"http://10.0.0.1:2379\"], \"use_perms\": true, \"msgr_max_inflight_ops\": 64}");
  char a0[] = "prog", a1[] = "--config", a2[64], a3[] = "--use_perms", a4[] = "false",
       a5[] = "--msgr-max-inflight-bytes=1M", a6[] = "positional", a7[] = "--other";
  snprintf(a2, sizeof a2, "%s", path);
  char *argv[] = { a0, a1, a2, a3, a4, a5, a6, a7, NULL };
  int argc = 8;
  cfg = tc_config_load(&argc, argv);
  CHECK(cfg != NULL, "load: %s", tc_last_error());
  if (cfg) {
    CHECK(tc_config_list_len(cfg, "etcd_address") == 1, "etcd_address length");
    CHECK(!strcmp(tc_config_list_get(cfg, "etcd_address", 0), "http://10.0.0.1:2379"), "etcd_address value");
    CHECK(tc_config_bool(cfg, "use_perms") == false, "command line overrides the file");
    CHECK(tc_config_int(cfg, "msgr_max_inflight_ops") == 64, "int from file");
    CHECK(tc_config_int(cfg, "msgr_max_inflight_bytes") == 1048576, "size suffix from the command line");
    int64_t v = -7;
    CHECK(tc_config_int_in(cfg, "msgr_max_inflight_ops", 1, 64, &v) == 0 && v == 64, "int in range (its upper end)");
    v = -7;
    CHECK(tc_config_int_in(cfg, "msgr_max_inflight_ops", 1, 63, &v) < 0 && v == -7 &&
          strstr(tc_last_error(), "option msgr_max_inflight_ops: 64 is out of range (1..63)"),
          "int out of range: refused by name, value and range");
    CHECK(!strcmp(tc_config_str(cfg, "proto_checksums"), "payload"), "default value");
    CHECK(argc == 3 && !strcmp(argv[1], "positional") && !strcmp(argv[2], "--other"),
          "unknown arguments left for the program (argc=%d)", argc);
    tc_config_free(cfg);
  }

  write_conf("{\"etcd_adress\": \"http://x\"}");
  cfg = tc_config_load_file(path);
  CHECK(cfg == NULL && strstr(tc_last_error(), "unknown option 'etcd_adress'"),
        "typo in an option name: %s", tc_last_error());
  tc_config_free(cfg);

  write_conf("{\"use_perms\": \"maybe\"}");
  cfg = tc_config_load_file(path);
  CHECK(cfg == NULL && strstr(tc_last_error(), "use_perms") && strstr(tc_last_error(), "boolean"),
        "wrong type: %s", tc_last_error());
  tc_config_free(cfg);

  write_conf("{\"use_perms\": true,\n \"cert\": }");
  cfg = tc_config_load_file(path);
  CHECK(cfg == NULL && strstr(tc_last_error(), "line 2"), "bad JSON names the line: %s", tc_last_error());
  tc_config_free(cfg);

  cfg = tc_config_load_file("/nonexistent/tromcho.conf");
  CHECK(cfg == NULL && strstr(tc_last_error(), "/nonexistent/tromcho.conf"), "missing file: %s", tc_last_error());
  tc_config_free(cfg);

  cfg = tc_config_load_file(NULL);
  CHECK(cfg && tc_config_set(cfg, "msgr_max_inflight_ops", "lots") < 0 &&
        strstr(tc_last_error(), "msgr_max_inflight_ops"), "bad integer: %s", tc_last_error());
  CHECK(cfg && tc_config_set(cfg, "no_such_option", "1") < 0, "unknown option via set");
  tc_config_free(cfg);

  CHECK(tc_parse_size("128k") == 131072 && tc_parse_size("8G") == 8LL << 30 &&
        tc_parse_size("4KiB") == 4096 && tc_parse_size("x") == -1 && tc_parse_size("-1") == -1,
        "tc_parse_size");
  unlink(path);
  /* In-memory text (tc_config_load_buffer, the fuzz target's entry):
   * no NUL terminator needed, the name stands for the file in messages. */
  {
    static const char text[] = "{\"use_perms\": true, \"msgr_max_inflight_ops\": \"4k\"}XXXX";
    cfg = tc_config_load_buffer(text, sizeof text - 5, "mem.conf");
    CHECK(cfg != NULL, "load_buffer: %s", tc_last_error());
    if (cfg) {
      CHECK(tc_config_bool(cfg, "use_perms") && tc_config_int(cfg, "msgr_max_inflight_ops") == 4096, "buffer values");
      CHECK(!strcmp(tc_config_path(cfg), "mem.conf"), "buffer name");
      tc_config_free(cfg);
    }
    CHECK(tc_config_load_buffer(text, sizeof text - 1, "mem.conf") == NULL &&
          strstr(tc_last_error(), "mem.conf: trailing text"), "trailing text: %s", tc_last_error());
    static const char bad[] = "{\n\"use_perms\": tru }";
    CHECK(tc_config_load_buffer(bad, sizeof bad - 1, "bad.conf") == NULL && errno == EINVAL &&
          strstr(tc_last_error(), "bad.conf: line 2"), "bad JSON: %s", tc_last_error());
    static const char nul[] = "{\"use_perms\": true}\0{\"use_perms\": false}";
    CHECK(tc_config_load_buffer(nul, sizeof nul - 1, "nul.conf") == NULL, "text after a NUL byte accepted");
  }
  /* A list given as JSON text must hold strings only, from the file and
   * from the command line (fuzz-config found "[null]" accepted). */
  {
    static const char text[] = "{\"etcd_address\": \"[null]\"}";
    CHECK(tc_config_load_buffer(text, sizeof text - 1, "list.conf") == NULL && errno == EINVAL &&
          strstr(tc_last_error(), "etcd_address: element 0"), "list of null accepted: %s", tc_last_error());
    cfg = tc_config_load_file(NULL);
    CHECK(cfg != NULL, "empty config: %s", tc_last_error());
    if (cfg) {
      CHECK(tc_config_set(cfg, "etcd_address", "[\"http://a:1\", 5]") < 0 && errno == EINVAL,
            "--etcd_address with a number accepted");
      CHECK(tc_config_set(cfg, "etcd_address", "[\"http://a:1\", \"http://b:2\"]") == 0 &&
            tc_config_list_len(cfg, "etcd_address") == 2, "JSON list of strings: %s", tc_last_error());
      tc_config_free(cfg);
    }
  }
  return DONE();
}
