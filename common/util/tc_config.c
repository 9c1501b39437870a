/* Loading and reading the configuration (see config.h). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>
#include <unistd.h>
#include "tc_config.h"
#include "error.h"
#include "fullio.h"
#include "vector.h"

#define DEFAULT_CONFIG_PATH "/etc/tromcho/tromcho.conf"

struct tc_config {
  json_object *values;   /* option name -> normalized value (given ones only) */
  json_object *defaults; /* option name -> default value */
  char *path;
};

int64_t
tc_parse_size(const char *s)
{
  char *end;
  errno = 0;
  if (!s || !*s || *s == '-')
    return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s)
    return -1;
  int shift = 0;
  switch (toupper((unsigned char) *end)) {
  case 0: break;
  case 'K': shift = 10; break;
  case 'M': shift = 20; break;
  case 'G': shift = 30; break;
  case 'T': shift = 40; break;
  default: return -1;
  }
  if (*end) {
    end++;
    if (toupper((unsigned char) *end) == 'I') end++;
    if (toupper((unsigned char) *end) == 'B') end++;
    if (*end) return -1;
  }
  if (v > (unsigned long long) (INT64_MAX >> shift))
    return -1;
  return (int64_t) (v << shift);
}

/* Turn command-line text into a JSON value of the option's type. */
static json_object *
value_from_text(const struct tc_opt_def *o, const char *text)
{
  switch (o->type) {
  case TC_OPT_STRING:
    return json_object_new_string(text);
  case TC_OPT_INT: {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 0);
    if (!errno && end != text && *end == 0)
      return json_object_new_int64(v);
    int64_t sz = tc_parse_size(text);
    if (sz >= 0)
      return json_object_new_int64(sz);
    tc_error(EINVAL, "option %s: '%s' is not an integer", o->name, text);
    return NULL;
  }
  case TC_OPT_BOOL:
    if (!strcasecmp(text, "true") || !strcmp(text, "1") || !strcasecmp(text, "yes") || !strcasecmp(text, "on"))
      return json_object_new_boolean(1);
    if (!strcasecmp(text, "false") || !strcmp(text, "0") || !strcasecmp(text, "no") || !strcasecmp(text, "off"))
      return json_object_new_boolean(0);
    tc_error(EINVAL, "option %s: '%s' is not a boolean (true or false)", o->name, text);
    return NULL;
  case TC_OPT_LIST: {
    json_object *arr = json_object_new_array();
    if (!arr) {
      tc_error(ENOMEM, "option %s: out of memory", o->name);
      return NULL;
    }
    if (text[0] == '[') {
      json_object *parsed = json_tokener_parse(text);
      if (!parsed || !json_object_is_type(parsed, json_type_array)) {
        json_object_put(parsed);
        json_object_put(arr);
        tc_error(EINVAL, "option %s: '%s' is not a JSON array", o->name, text);
        return NULL;
      }
      json_object_put(arr);
      /* Every element must be a string, as in the file: a null here made
       * tc_config_list_get return NULL (found by fuzz-config). */
      for (size_t i = 0; i < json_object_array_length(parsed); i++)
        if (!json_object_is_type(json_object_array_get_idx(parsed, i), json_type_string)) {
          json_object_put(parsed);
          tc_error(EINVAL, "option %s: element %zu of '%s' is not a string", o->name, i, text);
          return NULL;
        }
      return parsed;
    }
    const char *p = text;
    while (*p) {
      const char *comma = strchr(p, ',');
      size_t n = comma ? (size_t) (comma - p) : strlen(p);
      if (n)
        json_object_array_add(arr, json_object_new_string_len(p, (int) n));
      p += n + (comma ? 1 : 0);
    }
    return arr;
  }
  case TC_OPT_OBJECT: {
    json_object *parsed = json_tokener_parse(text);
    if (!parsed || !json_object_is_type(parsed, json_type_object)) {
      json_object_put(parsed);
      tc_error(EINVAL, "option %s: '%s' is not a JSON object", o->name, text);
      return NULL;
    }
    return parsed;
  }
  }
  tc_error(EINVAL, "option %s: bad type", o->name);
  return NULL;
}

/* Check a value read from the JSON file; returns a new normalized value. */
static json_object *
value_from_json(const struct tc_opt_def *o, json_object *v, const char *where)
{
  enum json_type t = json_object_get_type(v);
  switch (o->type) {
  case TC_OPT_STRING:
    if (t == json_type_string)
      return json_object_get(v);
    break;
  case TC_OPT_INT:
    if (t == json_type_int)
      return json_object_new_int64(json_object_get_int64(v));
    if (t == json_type_string)   /* "128k" is accepted, as on the command line */
      return value_from_text(o, json_object_get_string(v));
    break;
  case TC_OPT_BOOL:
    if (t == json_type_boolean)
      return json_object_get(v);
    break;
  case TC_OPT_LIST:
    if (t == json_type_string)
      return value_from_text(o, json_object_get_string(v));
    if (t == json_type_array) {
      for (size_t i = 0; i < json_object_array_length(v); i++)
        if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string)) {
          tc_error(EINVAL, "%s: option %s: element %zu is not a string", where, o->name, i);
          return NULL;
        }
      return json_object_get(v);
    }
    break;
  case TC_OPT_OBJECT:
    if (t == json_type_object)
      return json_object_get(v);
    break;
  }
  tc_error(EINVAL, "%s: option %s must be a %s, not %s", where, o->name,
           tc_opt_type_name(o->type), json_type_to_name(t));
  return NULL;
}

static struct tc_config *
config_new(void)
{
  struct tc_config *cfg = calloc(1, sizeof *cfg);
  if (!cfg) {
    tc_error(ENOMEM, "config: out of memory");
    return NULL;
  }
  cfg->values = json_object_new_object();
  cfg->defaults = json_object_new_object();
  if (!cfg->values || !cfg->defaults) {
    tc_config_free(cfg);
    tc_error(ENOMEM, "config: out of memory");
    return NULL;
  }
  for (const struct tc_opt_def *o = tc_options; o->name; o++) {
    if (!o->defval)
      continue;
    json_object *v = value_from_text(o, o->defval);
    if (!v) {  /* a bad default is a bug in tc_options.c */
      tc_config_free(cfg);
      return NULL;
    }
    json_object_object_add(cfg->defaults, o->name, v);
  }
  return cfg;
}

void
tc_config_free(struct tc_config *cfg)
{
  if (!cfg)
    return;
  json_object_put(cfg->values);
  json_object_put(cfg->defaults);
  free(cfg->path);
  free(cfg);
}

struct tc_config *
tc_config_dup(const struct tc_config *cfg)
{
  struct tc_config *c = calloc(1, sizeof *c);
  if (!c || json_object_deep_copy(cfg->values, &c->values, NULL) < 0 ||
      json_object_deep_copy(cfg->defaults, &c->defaults, NULL) < 0 ||
      (cfg->path && !(c->path = strdup(cfg->path)))) {
    tc_config_free(c);
    tc_error(ENOMEM, "config: out of memory");
    return NULL;
  }
  return c;
}

/* Parse one JSON config text into cfg; name is used in messages. */
static int
config_parse(struct tc_config *cfg, const char *buf, size_t len, const char *name)
{
  if (len > INT32_MAX)
    return tc_error(EFBIG, "config file %s: %zu bytes is too large", name, len);
  json_tokener *tok = json_tokener_new();
  if (!tok)
    return tc_error(ENOMEM, "config file %s: out of memory", name);
  json_object *root = json_tokener_parse_ex(tok, buf, (int) len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t off = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  if (!root || jerr != json_tokener_success) {
    /* Report the line of the error. */
    int line = 1;
    for (size_t i = 0; i < off && i < len; i++)
      line += buf[i] == '\n';
    json_object_put(root);
    return tc_error(EINVAL, "config file %s: line %d: invalid JSON: %s", name, line,
                    jerr == json_tokener_success ? "incomplete" : json_tokener_error_desc(jerr));
  }
  /* Anything but whitespace after the object is an error too. */
  for (size_t i = off; i < len; i++)
    if (!isspace((unsigned char) buf[i])) {
      json_object_put(root);
      return tc_error(EINVAL, "config file %s: trailing text after the JSON object", name);
    }
  if (!json_object_is_type(root, json_type_object)) {
    json_object_put(root);
    return tc_error(EINVAL, "config file %s: must hold a JSON object", name);
  }
  json_object_object_foreach(root, key, val) {
    const struct tc_opt_def *o = tc_option_find(key);
    if (!o) {
      tc_error(EINVAL, "config file %s: unknown option '%s'", name, key);
      json_object_put(root);  /* key points into root: free it after the message */
      return -1;
    }
    json_object *nv = value_from_json(o, val, name);
    if (!nv) {
      json_object_put(root);
      return -1;
    }
    json_object_object_add(cfg->values, key, nv);
  }
  json_object_put(root);
  free(cfg->path);
  cfg->path = strdup(name);
  if (!cfg->path)
    return tc_error(ENOMEM, "config: out of memory");
  return 0;
}

static int
config_read_file(struct tc_config *cfg, const char *path, int must_exist)
{
  size_t len;
  char *buf = tc_read_file(path, 64u << 20, &len);
  if (!buf) {
    if (!must_exist && errno == ENOENT)
      return 0;
    return tc_error(errno, "config file %s: %s", path, errno == EFBIG ? "larger than 64 MiB" : strerror(errno));
  }
  int r = config_parse(cfg, buf, len, path);
  free(buf);
  return r;
}

struct tc_config *
tc_config_load_file(const char *path)
{
  struct tc_config *cfg = config_new();
  if (!cfg)
    return NULL;
  if (path && config_read_file(cfg, path, 1) < 0) {
    tc_config_free(cfg);
    return NULL;
  }
  return cfg;
}

struct tc_config *
tc_config_load_buffer(const char *buf, size_t len, const char *name)
{
  struct tc_config *cfg = config_new();
  if (!cfg)
    return NULL;
  if (config_parse(cfg, buf, len, name ? name : "(buffer)") < 0) {
    tc_config_free(cfg);
    return NULL;
  }
  return cfg;
}

int
tc_config_set(struct tc_config *cfg, const char *name, const char *value)
{
  const struct tc_opt_def *o = tc_option_find(name);
  if (!o)
    return tc_error(EINVAL, "unknown option '%s'", name);
  json_object *v = value_from_text(o, value);
  if (!v)
    return -1;
  json_object_object_add(cfg->values, name, v);
  return 0;
}

/* "--name" or "--name=value" -> the option name (copied into buf). */
static const char *
arg_option_name(const char *arg, char *buf, size_t bufsz, const char **value)
{
  *value = NULL;
  if (strncmp(arg, "--", 2) != 0 || !arg[2])
    return NULL;
  const char *name = arg + 2;
  const char *eq = strchr(name, '=');
  size_t n = eq ? (size_t) (eq - name) : strlen(name);
  if (n >= bufsz)
    return NULL;
  memcpy(buf, name, n);
  buf[n] = 0;
  /* Accept dashes for underscores: --etcd-address. */
  for (char *p = buf; *p; p++)
    if (*p == '-')
      *p = '_';
  if (eq)
    *value = eq + 1;
  return buf;
}

struct tc_config *
tc_config_load(int *argc, char **argv)
{
  const char *path = getenv("TROMCHO_CONFIG");
  int explicit_path = path != NULL;
  char name[128];
  const char *value;

  /* Find --config first: the command line wins over the file. */
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--") == 0)
      break;
    if (!arg_option_name(argv[i], name, sizeof name, &value) || strcmp(name, "config") != 0)
      continue;
    if (!value) {
      if (i + 1 >= *argc) {
        tc_error(EINVAL, "option --config needs a value");
        return NULL;
      }
      value = argv[i + 1];
    }
    path = value;
    explicit_path = 1;
  }
  struct tc_config *cfg = config_new();
  if (!cfg)
    return NULL;
  if (config_read_file(cfg, path ? path : DEFAULT_CONFIG_PATH, explicit_path) < 0) {
    tc_config_free(cfg);
    return NULL;
  }
  /* Apply and remove known options; keep everything else in order. */
  int out = 1;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      while (i < *argc)
        argv[out++] = argv[i++];
      break;
    }
    const char *n = arg_option_name(argv[i], name, sizeof name, &value);
    int is_config = n && strcmp(n, "config") == 0;
    const struct tc_opt_def *o = n ? tc_option_find(n) : NULL;
    if (!is_config && !o) {
      argv[out++] = argv[i];
      continue;
    }
    if (!value) {
      if (i + 1 >= *argc) {
        tc_error(EINVAL, "option --%s needs a value", n);
        tc_config_free(cfg);
        return NULL;
      }
      value = argv[++i];
    }
    if (!is_config && tc_config_set(cfg, n, value) < 0) {
      tc_config_free(cfg);
      return NULL;
    }
  }
  *argc = out;
  argv[out] = NULL;
  return cfg;
}

static json_object *
config_get(const struct tc_config *cfg, const char *name, enum tc_opt_type type)
{
  const struct tc_opt_def *o = tc_option_find(name);
  if (!o || o->type != type) {
    fprintf(stderr, "tromcho: internal error: option %s read as %s\n", name, tc_opt_type_name(type));
    abort();
  }
  json_object *v;
  if (json_object_object_get_ex(cfg->values, name, &v))
    return v;
  if (json_object_object_get_ex(cfg->defaults, name, &v))
    return v;
  return NULL;
}

const char *
tc_config_str(const struct tc_config *cfg, const char *name)
{
  json_object *v = config_get(cfg, name, TC_OPT_STRING);
  return v ? json_object_get_string(v) : NULL;
}

int64_t
tc_config_int(const struct tc_config *cfg, const char *name)
{
  json_object *v = config_get(cfg, name, TC_OPT_INT);
  return v ? json_object_get_int64(v) : 0;
}

int
tc_config_int_in(const struct tc_config *cfg, const char *name, int64_t min, int64_t max, int64_t *out)
{
  int64_t v = tc_config_int(cfg, name);
  if (v < min || v > max)
    return tc_error(EINVAL, "option %s: %" PRId64 " is out of range (%" PRId64 "..%" PRId64 ")", name, v, min, max);
  *out = v;
  return 0;
}

bool
tc_config_bool(const struct tc_config *cfg, const char *name)
{
  json_object *v = config_get(cfg, name, TC_OPT_BOOL);
  return v ? json_object_get_boolean(v) : false;
}

int
tc_config_list_len(const struct tc_config *cfg, const char *name)
{
  json_object *v = config_get(cfg, name, TC_OPT_LIST);
  return v ? (int) json_object_array_length(v) : 0;
}

const char *
tc_config_list_get(const struct tc_config *cfg, const char *name, int i)
{
  json_object *v = config_get(cfg, name, TC_OPT_LIST);
  if (!v || i < 0 || (size_t) i >= json_object_array_length(v))
    return NULL;
  return json_object_get_string(json_object_array_get_idx(v, i));
}

json_object *
tc_config_obj(const struct tc_config *cfg, const char *name)
{
  return config_get(cfg, name, TC_OPT_OBJECT);
}

bool
tc_config_given(const struct tc_config *cfg, const char *name)
{
  return json_object_object_get_ex(cfg->values, name, NULL);
}

const char *
tc_config_path(const struct tc_config *cfg)
{
  return cfg->path;
}

void
tc_config_print_help(void *fp)
{
  FILE *f = fp;
  fprintf(f, "Options (in the JSON config file, or --name value on the command line):\n");
  fprintf(f, "  --config PATH  config file (default $TROMCHO_CONFIG or %s)\n", DEFAULT_CONFIG_PATH);
  for (const struct tc_opt_def *o = tc_options; o->name; o++)
    fprintf(f, "  --%s (%s, default %s)\n      %s\n", o->name, tc_opt_type_name(o->type),
            o->defval ? (*o->defval ? o->defval : "\"\"") : "unset", o->help);
}
