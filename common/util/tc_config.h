/* The configuration: one JSON file plus `--name value` overrides.
 *
 * Every option is declared once in tc_options.c with its type, default
 * and help. Loading refuses an unknown option or a value of the wrong type
 * with a message that names the option (and the file). */
#ifndef TROMCHO_CONFIG_H
#define TROMCHO_CONFIG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

enum tc_opt_type {
  TC_OPT_STRING,   /* JSON string */
  TC_OPT_INT,      /* JSON integer; on the command line also 4k, 8M, 2G */
  TC_OPT_BOOL,     /* JSON boolean; on the command line true/false/1/0/yes/no */
  TC_OPT_LIST,     /* JSON array of strings or one string; on the command line comma-separated */
  TC_OPT_OBJECT,   /* JSON object; on the command line JSON text */
};

struct tc_opt_def {
  const char *name;
  enum tc_opt_type type;
  const char *defval;    /* as it would be written on the command line; NULL = unset */
  const char *help;
};

/* The table of all options, terminated by a NULL name. */
extern const struct tc_opt_def tc_options[];
const struct tc_opt_def *tc_option_find(const char *name);
const char *tc_opt_type_name(enum tc_opt_type type);

struct tc_config;

/* Load the config. The file is --config PATH from argv, else $TROMCHO_CONFIG,
 * else /etc/tromcho/tromcho.conf (which may be absent). Then every
 * `--name value` / `--name=value` of a known option in argv overrides it.
 * Arguments that are not tromcho options are left, in order, in argv
 * (argc is updated) for the program to parse.
 * Returns NULL on error with tc_last_error() naming the problem. */
struct tc_config *tc_config_load(int *argc, char **argv);
/* Load from an explicit file (NULL = none), no command line. */
struct tc_config *tc_config_load_file(const char *path);
/* Load from JSON text in memory (len bytes, need not be NUL-terminated);
 * name stands for the file in messages (tc_config_path returns it). */
struct tc_config *tc_config_load_buffer(const char *buf, size_t len, const char *name);
void tc_config_free(struct tc_config *cfg);
/* A copy to change apart from the original (caller frees). */
struct tc_config *tc_config_dup(const struct tc_config *cfg);

/* Set one option from text, as from the command line (checks type). */
int tc_config_set(struct tc_config *cfg, const char *name, const char *value);

/* Getters: the value given, else the default. Asking for an undeclared
 * option or the wrong type is a programming error and aborts. */
const char *tc_config_str(const struct tc_config *cfg, const char *name);   /* NULL if unset */
int64_t tc_config_int(const struct tc_config *cfg, const char *name);
/* The integer option name if it lies in min..max; else -1 with
 * tc_last_error() naming the option, its value and the range. */
int tc_config_int_in(const struct tc_config *cfg, const char *name, int64_t min, int64_t max, int64_t *out);
bool tc_config_bool(const struct tc_config *cfg, const char *name);
/* Number of strings in a list option, and the i-th. */
int tc_config_list_len(const struct tc_config *cfg, const char *name);
const char *tc_config_list_get(const struct tc_config *cfg, const char *name, int i);
/* Borrowed JSON object (NULL if unset). */
json_object *tc_config_obj(const struct tc_config *cfg, const char *name);
/* Whether the option was given in the file or on the command line. */
bool tc_config_given(const struct tc_config *cfg, const char *name);
/* The path of the file that was loaded, or NULL. */
const char *tc_config_path(const struct tc_config *cfg);

/* Parse "4096", "4k", "128K", "8M", "2G", "1T" into bytes; -1 on error. */
int64_t tc_parse_size(const char *s);

/* Print every option with its type, default and help to f. */
void tc_config_print_help(void *f);

#endif
