/* Helpers shared by the image commands (see cli_util.h). */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "cli_util.h"
#include "error.h"
#include "kv_client.h"

int
cli_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts, const char **pos, int maxpos,
          int *npos)
{
  *npos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || !a[1]) {
      if (*npos == maxpos) {
        fprintf(stderr, "tromcho %s: unexpected argument '%s' (see tromcho --help)\n", cmd, a);
        return -1;
      }
      pos[(*npos)++] = a;
      continue;
    }
    const char *eq = strchr(a, '=');
    size_t nl = eq ? (size_t) (eq - a) : strlen(a);
    const struct cli_opt *o;
    for (o = opts; o->name; o++) {
      /* --enc_key and --enc-key are the same option */
      bool same = strlen(o->name) == nl;
      for (size_t k = 0; same && k < nl; k++)
        same = o->name[k] == a[k] || (o->name[k] == '_' && a[k] == '-') || (o->name[k] == '-' && a[k] == '_' && k > 1);
      if (same || (o->alias && strlen(o->alias) == nl && !strncmp(o->alias, a, nl)))
        break;
    }
    if (!o->name) {
      fprintf(stderr, "tromcho %s: unknown option '%.*s' (see tromcho --help)\n", cmd, (int) nl, a);
      return -1;
    }
    if (o->flag) {
      if (eq) {
        fprintf(stderr, "tromcho %s: option %s takes no value\n", cmd, o->name);
        return -1;
      }
      *o->flag = true;
    }
    else if (eq)
      *o->value = eq + 1;
    else if (i + 1 < argc)
      *o->value = argv[++i];
    else {
      fprintf(stderr, "tromcho %s: option %s needs a value\n", cmd, o->name);
      return -1;
    }
  }
  return 0;
}

int
cli_size(const char *cmd, const char *what, const char *s, uint64_t *out)
{
  int64_t v = tc_parse_size(s);
  if (v <= 0 || v % 4096) {
    fprintf(stderr, "tromcho %s: %s '%s' is not a positive size in whole 4 KiB sectors (e.g. 10G, 512M, 4096)\n",
            cmd, what, s);
    return -1;
  }
  *out = (uint64_t) v;
  return 0;
}

const char *
cli_human(uint64_t b, char *buf, size_t len)
{
  static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
  double v = (double) b;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, len, "%" PRIu64 " B", b);
  else if (v == (double) (uint64_t) v)
    snprintf(buf, len, "%.0f %s", v, units[u]);
  else
    snprintf(buf, len, "%.1f %s", v, units[u]);
  return buf;
}

int
cli_fail(const char *cmd)
{
  fprintf(stderr, "tromcho %s: %s\n", cmd, tc_last_error());
  return 1;
}

struct tc_client *
cli_client(const char *cmd, const struct tc_config *cfg)
{
  struct tc_client *cl = tc_client_new(cfg);
  if (!cl)
    cli_fail(cmd);
  return cl;
}

int
cli_layers(struct tc_client *cl, const struct tc_image_meta *m)
{
  int n = 1;
  uint64_t pool = m->parent_pool, id = m->parent_id;
  char key[256];
  while (id && n < 64) {
    struct tc_kv_result res = { 0 };
    tc_client_key(cl, key, sizeof key, "/config/inode/%" PRIu64 "/%" PRIu64, pool, id);
    if (tc_kv_get(tc_client_kv(cl), key, 0, &res) < 0 || !res.n_kvs) {
      tc_kv_result_free(&res);
      break;
    }
    struct tc_image_meta p;
    int r = tc_image_meta_parse(&p, pool, id, (const char *) res.kvs[0].value, res.kvs[0].value_len);
    tc_kv_result_free(&res);
    if (r < 0)
      break;
    n++;
    pool = p.parent_pool;
    id = p.parent_id;
    tc_image_meta_clear(&p);
  }
  return n;
}
