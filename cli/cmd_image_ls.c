/* tromcho ls, info: the images the user may read, human or --json. */
#include <config.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "api_client.h"
#include "cli_util.h"
#include "cluster.h"
#include "commands.h"
#include "error.h"
#include "image_admin.h"

#define USAGE_TIMEOUT_MS 5000

struct usage {
  uint64_t *inodes, *bytes;
  size_t n, cap;
  uint64_t *pools_done;     /* pools listed (or tried) */
  bool *pools_ok;
  size_t npools;
  int pool_errno;           /* why the last pool listing failed */
};

static void
usage_cb(void *opaque, uint64_t inode, uint64_t bytes)
{
  struct usage *u = opaque;
  if (u->n == u->cap) {
    size_t nc = u->cap ? 2 * u->cap : 64;
    uint64_t *a = realloc(u->inodes, nc * sizeof *a);
    if (!a)
      return;
    u->inodes = a;
    uint64_t *b = realloc(u->bytes, nc * sizeof *b);
    if (!b)
      return;
    u->bytes = b;
    u->cap = nc;
  }
  u->inodes[u->n] = inode;
  u->bytes[u->n++] = bytes;
}

/* Bytes stored by the image's own inode; -1 if the pool could not be listed. */
static int64_t
used_of(struct tc_client *cl, struct usage *u, const struct tc_image_meta *m)
{
  size_t p;
  for (p = 0; p < u->npools; p++)
    if (u->pools_done[p] == m->pool)
      break;
  if (p == u->npools) {
    uint64_t *a = realloc(u->pools_done, (p + 1) * sizeof *a);
    bool *b = a ? realloc(u->pools_ok, (p + 1) * sizeof *b) : NULL;
    if (a)
      u->pools_done = a;
    if (!b)
      return -1;
    u->pools_ok = b;
    u->pools_done[p] = m->pool;
    u->pools_ok[p] = tc_admin_usage(cl, m->pool, USAGE_TIMEOUT_MS, usage_cb, u) == 0;
    u->npools++;
    u->pool_errno = errno;
  }
  uint64_t inode = TC_INODE(m->pool, m->id);
  if (!u->pools_ok[p]) {
    /* Users may only list their images one by one (the OSD rights table). */
    if (u->pool_errno != EPERM && u->pool_errno != EACCES)
      return -1;
    size_t before = u->n;
    if (tc_admin_usage_range(cl, inode, inode, USAGE_TIMEOUT_MS, usage_cb, u) < 0)
      return -1;
    return u->n > before ? (int64_t) u->bytes[u->n - 1] : 0;
  }
  for (size_t i = 0; i < u->n; i++)
    if (u->inodes[i] == inode)
      return (int64_t) u->bytes[i];
  return 0;
}

static void
usage_free(struct usage *u)
{
  free(u->inodes);
  free(u->bytes);
  free(u->pools_done);
  free(u->pools_ok);
}

static const char *
parent_name(struct tc_client *cl, const struct tc_image_meta *m, char *buf, size_t len)
{
  if (!m->parent_id)
    return NULL;
  char key[256];
  struct tc_kv_result res = { 0 };
  snprintf(buf, len, "%" PRIu64 "/%" PRIu64, m->parent_pool, m->parent_id);
  tc_client_key(cl, key, sizeof key, "/config/inode/%" PRIu64 "/%" PRIu64, m->parent_pool, m->parent_id);
  if (tc_kv_get(tc_client_kv(cl), key, 0, &res) == 0 && res.n_kvs) {
    struct tc_image_meta p;
    if (tc_image_meta_parse(&p, m->parent_pool, m->parent_id, (const char *) res.kvs[0].value,
                            res.kvs[0].value_len) == 0) {
      snprintf(buf, len, "%s", p.name);
      tc_image_meta_clear(&p);
    }
  }
  tc_kv_result_free(&res);
  return buf;
}

/* The monitor's /inode/stats/<pool>/<id> of the image (raw_used, read,
 * write, delete: count, bytes, iops, bps), or NULL when absent or not
 * readable (a user may read it for the images they may read). */
static json_object *
inode_stats(struct tc_client *cl, const struct tc_image_meta *m)
{
  char k[256];
  struct tc_kv_result r = { 0 };
  tc_client_key(cl, k, sizeof k, "/inode/stats/%" PRIu64 "/%" PRIu64, m->pool, m->id);
  json_object *j = NULL;
  if (tc_kv_get(tc_client_kv(cl), k, 0, &r) == 0 && r.n_kvs)
    j = json_tokener_parse((const char *) r.kvs[0].value);
  tc_kv_result_free(&r);
  return j;
}

static json_object *
meta_json(struct tc_client *cl, struct usage *u, const struct tc_image_meta *m, bool writable)
{
  char pbuf[256];
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int64_t used = used_of(cl, u, m);
  const char *parent = parent_name(cl, m, pbuf, sizeof pbuf);
  json_object_object_add(o, "name", json_object_new_string(m->name));
  json_object_object_add(o, "pool_id", json_object_new_int64((int64_t) m->pool));
  json_object_object_add(o, "inode", json_object_new_int64((int64_t) m->id));
  json_object_object_add(o, "size", json_object_new_int64((int64_t) m->size));
  json_object_object_add(o, "used", used >= 0 ? json_object_new_int64(used) : NULL);
  json_object_object_add(o, "layers", json_object_new_int(cli_layers(cl, m)));
  json_object_object_add(o, "parent", parent ? json_object_new_string(parent) : NULL);
  json_object_object_add(o, "encrypted", json_object_new_boolean(m->enc_key != NULL));
  json_object_object_add(o, "key_source", m->enc_key ? json_object_new_string(strncmp(m->enc_key, "vault:", 6) ? "kv" : "vault") : NULL);
  json_object_object_add(o, "integrity", json_object_new_boolean(m->integrity));
  json_object_object_add(o, "readonly", json_object_new_boolean(m->readonly));
  json_object_object_add(o, "writable", json_object_new_boolean(writable));
  json_object_object_add(o, "owner", m->owner ? json_object_new_string(m->owner) : NULL);
  json_object_object_add(o, "owner_group", m->owner_group ? json_object_new_string(m->owner_group) : NULL);
  json_object_object_add(o, "reader_group", m->reader_group ? json_object_new_string(m->reader_group) : NULL);
  json_object_object_add(o, "stats", inode_stats(cl, m));
  return o;
}

struct ls_ctx {
  struct tc_client *cl;
  struct usage u;
  json_object *arr;
};

static int
ls_cb(void *opaque, const struct tc_image_meta *m, bool writable)
{
  struct ls_ctx *c = opaque;
  json_object *o = meta_json(c->cl, &c->u, m, writable);
  if (!o || json_object_array_add(c->arr, o) < 0) {
    json_object_put(o);
    return tc_error(ENOMEM, "ls: out of memory");
  }
  return 0;
}

static const char *
jstr(json_object *o, const char *k)
{
  json_object *f;
  return json_object_object_get_ex(o, k, &f) && f ? json_object_get_string(f) : NULL;
}

static int64_t
jint(json_object *o, const char *k)
{
  json_object *f;
  return json_object_object_get_ex(o, k, &f) && f ? json_object_get_int64(f) : -1;
}

static const char *jstr(json_object *o, const char *k);
static int64_t jint(json_object *o, const char *k);

/* ls through the admin API (api_url): what image/list returns. */
static int
ls_via_api(const struct tc_config *cfg, bool json)
{
  json_object *reply, *arr;
  if (cli_api_call("ls", cfg, "image/list", NULL, &reply))
    return 1;
  if (!json_object_object_get_ex(reply, "images", &arr) || !json_object_is_type(arr, json_type_array)) {
    fprintf(stderr, "tromcho ls: the admin API's reply has no images list\n");
    json_object_put(reply);
    return 1;
  }
  if (json)
    printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
  else {
    printf("%-24s %5s %10s %10s %s\n", "NAME", "POOL", "SIZE", "ENCRYPTED", "FLAGS");
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
      json_object *o = json_object_array_get_idx(arr, i);
      char s1[32];
      const char *name = jstr(o, "name"), *enc = jstr(o, "encryption"), *ro = jstr(o, "readonly"),
                 *wr = jstr(o, "writable");
      int64_t size = jint(o, "size");
      printf("%-24s %5" PRId64 " %10s %10s %s\n", name ? name : "?", jint(o, "pool"),
             cli_human(size > 0 ? (uint64_t) size : 0, s1, sizeof s1), enc && strcmp(enc, "none") ? "yes" : "no",
             ro && !strcmp(ro, "true") ? "RO" : wr && !strcmp(wr, "true") ? "-" : "r");
    }
  }
  json_object_put(reply);
  return 0;
}

int
cmd_image_ls(int argc, char **argv, struct tc_config *cfg)
{
  bool json = false;
  const char *pos[1];
  int npos;
  const struct cli_opt opts[] = { { "--json", NULL, NULL, &json }, { 0 } };
  if (cli_parse("ls", argc, argv, opts, pos, 0, &npos) < 0)
    return 1;
  if (cli_api_enabled(cfg))
    return ls_via_api(cfg, json);
  struct ls_ctx c = { .cl = cli_client("ls", cfg), .arr = json_object_new_array() };
  if (!c.cl || !c.arr) {
    json_object_put(c.arr);
    tc_client_free(c.cl);
    return 1;
  }
  int r = tc_client_list(c.cl, ls_cb, &c);
  if (r == 0 && json)
    printf("%s\n", json_object_to_json_string_ext(c.arr, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
  else if (r == 0) {
    printf("%-24s %5s %10s %10s %6s %9s %s\n", "NAME", "POOL", "SIZE", "USED", "LAYERS", "ENCRYPTED", "FLAGS");
    for (size_t i = 0; i < json_object_array_length(c.arr); i++) {
      json_object *o = json_object_array_get_idx(c.arr, i);
      char s1[32], s2[32];
      int64_t used = jint(o, "used");
      const char *flags = !strcmp(jstr(o, "readonly"), "true") ? "RO" : strcmp(jstr(o, "writable"), "true") ? "r" : "-";
      printf("%-24s %5" PRId64 " %10s %10s %6" PRId64 " %9s %s\n", jstr(o, "name"), jint(o, "pool_id"),
             cli_human((uint64_t) jint(o, "size"), s1, sizeof s1), used >= 0 ? cli_human((uint64_t) used, s2, sizeof s2) : "?",
             jint(o, "layers"), !strcmp(jstr(o, "encrypted"), "true") ? "yes" : "no", flags);
    }
  }
  json_object_put(c.arr);
  usage_free(&c.u);
  tc_client_free(c.cl);
  return r < 0 ? cli_fail("ls") : 0;
}

int
cmd_image_info(int argc, char **argv, struct tc_config *cfg)
{
  bool json = false;
  const char *pos[1];
  int npos;
  const struct cli_opt opts[] = { { "--json", NULL, NULL, &json }, { 0 } };
  if (cli_parse("info", argc, argv, opts, pos, 1, &npos) < 0)
    return 1;
  if (npos != 1) {
    fprintf(stderr, "tromcho info: give the image name: info NAME\n");
    return 1;
  }
  struct tc_client *cl = cli_client("info", cfg);
  if (!cl)
    return 1;
  struct tc_image_meta m;
  bool writable;
  if (tc_client_stat(cl, pos[0], &m, &writable) < 0) {
    int r = cli_fail("info");
    tc_client_free(cl);
    return r;
  }
  struct usage u = { 0 };
  json_object *o = meta_json(cl, &u, &m, writable);
  if (!o) {
    tc_error(ENOMEM, "info: out of memory");
    tc_image_meta_clear(&m);
    usage_free(&u);
    tc_client_free(cl);
    return cli_fail("info");
  }
  /* A re-key in progress (tromcho modify --rekey): the copy's watermark. */
  uint64_t rk_done = m.rekey_from ? (m.parent_id == m.rekey_from ? m.rekey_done : m.size) : 0;
  if (rk_done > m.size)
    rk_done = m.size;
  const char *rk_phase = m.parent_id == m.rekey_from ? "copying" : "deleting the old layer";
  if (m.rekey_from) {
    json_object *rk = json_object_new_object();
    json_object_object_add(rk, "copied", json_object_new_int64((int64_t) rk_done));
    json_object_object_add(rk, "total", json_object_new_int64((int64_t) m.size));
    json_object_object_add(rk, "phase", json_object_new_string(rk_phase));
    json_object_object_add(o, "rekey", rk);
  }
  if (json)
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
  else {
    char s[32];
    int64_t used = jint(o, "used");
    printf("name:         %s\n", m.name);
    printf("pool:         %" PRIu64 "\n", m.pool);
    printf("inode:        %" PRIu64 " (0x%" PRIx64 ")\n", m.id, TC_INODE(m.pool, m.id));
    printf("size:         %s (%" PRIu64 " bytes)\n", cli_human(m.size, s, sizeof s), m.size);
    printf("used:         %s\n", used >= 0 ? cli_human((uint64_t) used, s, sizeof s) : "? (OSDs unreachable)");
    printf("layers:       %" PRId64 "\n", jint(o, "layers"));
    printf("parent:       %s\n", jstr(o, "parent") ? jstr(o, "parent") : "-");
    printf("encrypted:    %s\n", m.enc_key ? (strncmp(m.enc_key, "vault:", 6) ? "yes (key in the KV)" : "yes (key in Vault)") : "no");
    printf("integrity:    %s\n", m.integrity ? "yes (every sector authenticated)" : "no");
    printf("readonly:     %s\n", m.readonly ? "yes" : "no");
    if (m.rekey_from)
      printf("rekey:        %" PRIu64 "%% (%" PRIu64 "/%" PRIu64 ", %s; resume: tromcho modify %s --rekey resume)\n",
             m.size ? rk_done * 100 / m.size : 100, rk_done, m.size, rk_phase, m.name);
    else
      printf("rekey:        -\n");
    printf("writable:     %s\n", writable ? "yes" : "no");
    printf("owner:        %s\n", m.owner ? m.owner : "-");
    printf("owner_group:  %s\n", m.owner_group ? m.owner_group : "-");
    printf("reader_group: %s\n", m.reader_group ? m.reader_group : "-");
    json_object *st, *x, *r;
    if (json_object_object_get_ex(o, "stats", &st) && st) {
      char s2[32];
      printf("raw used:     %s (every copy, from the monitor's /inode/stats)\n",
             cli_human((uint64_t) jint(st, "raw_used"), s, sizeof s));
      const char *kinds[3] = { "read", "write", "delete" };
      for (int k = 0; k < 3; k++)
        if (json_object_object_get_ex(st, kinds[k], &x))
          printf("%-13s %" PRId64 " %ss, %s; now %.0f op/s, %s/s\n", k == 0 ? "io:" : "", jint(x, "count"), kinds[k],
                 cli_human((uint64_t) jint(x, "bytes"), s, sizeof s),
                 json_object_object_get_ex(x, "iops", &r) ? json_object_get_double(r) : 0,
                 cli_human((uint64_t) jint(x, "bps"), s2, sizeof s2));
    }
  }
  json_object_put(o);
  usage_free(&u);
  tc_image_meta_clear(&m);
  tc_client_free(cl);
  return 0;
}
