/* Image records: parse, write, resolve keys (see image_meta.h). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cleanup.h"
#include "error.h"
#include "image_meta.h"
#include "inode_key.h"

void
tc_image_meta_clear(struct tc_image_meta *m)
{
  free(m->name);
  if (m->enc_key) {
    tc_wipe(m->enc_key, strlen(m->enc_key));
    free(m->enc_key);
  }
  free(m->owner);
  free(m->owner_group);
  free(m->reader_group);
  memset(m, 0, sizeof *m);
}

static json_object *
parse_object(const char *json, size_t len, const char *what)
{
  json_tokener *tok = json_tokener_new();
  if (!tok) {
    tc_error(ENOMEM, "%s: out of memory", what);
    return NULL;
  }
  if (len > INT32_MAX) {
    json_tokener_free(tok);
    tc_error(EINVAL, "%s: %zu bytes, too long", what, len);
    return NULL;
  }
  json_object *o = json_tokener_parse_ex(tok, json, (int) len);
  bool ok = o && json_tokener_get_error(tok) == json_tokener_success &&
            json_object_is_type(o, json_type_object);
  /* One object and nothing after it (whitespace aside): a record with a
   * second value appended is another spelling of it, refused. */
  size_t end = ok ? json_tokener_get_parse_end(tok) : 0;
  while (ok && end < len && strchr(" \t\r\n", json[end]) && json[end])
    end++;
  json_tokener_free(tok);
  if (!ok || end < len) {
    json_object_put(o);
    tc_error(EINVAL, "%s: %s", what, ok ? "more after the JSON object" : "not a JSON object");
    return NULL;
  }
  return o;
}

/* A non-negative integer field no larger than max; absent = 0. (json-c
 * reads anything above INT64_MAX as INT64_MAX: refused as too large, so
 * that no two spellings give one value.) */
static int
get_u64_max(json_object *o, const char *field, uint64_t max, uint64_t *v, const char *what)
{
  json_object *f;
  *v = 0;
  if (!json_object_object_get_ex(o, field, &f))
    return 0;
  if (!json_object_is_type(f, json_type_int) || json_object_get_int64(f) < 0)
    return tc_error(EINVAL, "%s: field %s must be a non-negative integer", what, field);
  int64_t x = json_object_get_int64(f);
  if (x == INT64_MAX || (uint64_t) x > max)
    return tc_error(EINVAL, "%s: field %s is out of range (at most %llu)", what, field,
                    (unsigned long long) (max < (uint64_t) INT64_MAX ? max : (uint64_t) INT64_MAX - 1));
  *v = (uint64_t) x;
  return 0;
}

static int
get_u64(json_object *o, const char *field, uint64_t *v, const char *what)
{
  return get_u64_max(o, field, UINT64_MAX, v, what);
}

/* An optional string field, copied. */
static int
get_str(json_object *o, const char *field, char **v, const char *what)
{
  json_object *f;
  *v = NULL;
  if (!json_object_object_get_ex(o, field, &f) || json_object_is_type(f, json_type_null))
    return 0;
  if (!json_object_is_type(f, json_type_string))
    return tc_error(EINVAL, "%s: field %s must be a string", what, field);
  if (!(*v = strdup(json_object_get_string(f))))
    return tc_error(ENOMEM, "%s: out of memory", what);
  return 0;
}

static int
get_bool(json_object *o, const char *field, bool *v, const char *what)
{
  json_object *f;
  if (!json_object_object_get_ex(o, field, &f))
    return 0;
  if (!json_object_is_type(f, json_type_boolean))
    return tc_error(EINVAL, "%s: field %s must be a boolean", what, field);
  *v = json_object_get_boolean(f);
  return 0;
}

static bool
is_hex_key(const char *s)
{
  if (strlen(s) != 2 * TC_XTS_KEY_SIZE)
    return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
      return false;
  return true;
}

int
tc_image_meta_parse(struct tc_image_meta *m, uint64_t pool, uint64_t id, const char *json, size_t len)
{
  char what[96];
  memset(m, 0, sizeof *m);
  snprintf(what, sizeof what, "image record /config/inode/%llu/%llu", (unsigned long long) pool,
           (unsigned long long) id);
  json_object *o = parse_object(json, len, what);
  if (!o)
    return -1;
  m->pool = pool;
  m->id = id;
  int r = get_str(o, "name", &m->name, what);
  if (r == 0) r = get_u64(o, "size", &m->size, what);
  if (r == 0) r = get_u64_max(o, "parent_pool", TC_POOL_MAX, &m->parent_pool, what);
  if (r == 0) r = get_u64_max(o, "parent_id", TC_INODE_ID_MAX, &m->parent_id, what);
  if (r == 0) r = get_str(o, "enc_key", &m->enc_key, what);
  if (r == 0) r = get_str(o, "owner", &m->owner, what);
  if (r == 0) r = get_str(o, "owner_group", &m->owner_group, what);
  if (r == 0) r = get_str(o, "reader_group", &m->reader_group, what);
  if (r == 0) r = get_u64_max(o, "next_pool", TC_POOL_MAX, &m->next_pool, what);
  if (r == 0) r = get_u64_max(o, "next_id", TC_INODE_ID_MAX, &m->next_id, what);
  if (r == 0) r = get_u64_max(o, "rekey_from", TC_INODE_ID_MAX, &m->rekey_from, what);
  if (r == 0) r = get_u64(o, "rekey_done", &m->rekey_done, what);
  json_object *f;
  if (r == 0) r = get_bool(o, "hidden", &m->hidden, what);
  if (r == 0) r = get_bool(o, "retired", &m->retired, what);
  if (r == 0 && m->next_id && !m->next_pool)
    m->next_pool = pool;
  /* A pool without an id, progress without a re-key: nothing (0, 0), as
   * tc_image_meta_json writes it. */
  if (!m->next_id)
    m->next_pool = 0;
  if (!m->parent_id)
    m->parent_pool = 0;
  if (!m->rekey_from)
    m->rekey_done = 0;
  if (r == 0 && json_object_object_get_ex(o, "integrity", &f)) {
    if (!json_object_is_type(f, json_type_boolean))
      r = tc_error(EINVAL, "%s: field integrity must be a boolean", what);
    else
      m->integrity = json_object_get_boolean(f);
  }
  if (r == 0 && m->integrity && !m->enc_key)
    r = tc_error(EINVAL, "%s: integrity needs an enc_key", what);
  if (r == 0 && json_object_object_get_ex(o, "readonly", &f)) {
    if (!json_object_is_type(f, json_type_boolean))
      r = tc_error(EINVAL, "%s: field readonly must be a boolean", what);
    else
      m->readonly = json_object_get_boolean(f);
  }
  if (r == 0 && !m->name)
    r = tc_error(EINVAL, "%s: no name", what);
  if (r == 0 && m->size % 4096)
    r = tc_error(EINVAL, "%s: size %llu is not a multiple of 4096", what, (unsigned long long) m->size);
  if (r == 0 && m->parent_id && !m->parent_pool)
    m->parent_pool = pool;   /* Vitastor: parent in the same pool unless said */
  if (r == 0 && m->enc_key && !is_hex_key(m->enc_key) && strncmp(m->enc_key, "vault:", 6) != 0 &&
      strcmp(m->enc_key, TC_KEY_SHREDDED) != 0)
    r = tc_error(EINVAL, "%s: enc_key is neither 128 hex digits nor vault:<ID>", what);
  json_object_put(o);
  if (r < 0) {
    KEEP_ERRNO;
    tc_image_meta_clear(m);
  }
  return r;
}

char *
tc_image_meta_json(const struct tc_image_meta *m)
{
  json_object *o = json_object_new_object();
  if (!o) {
    tc_error(ENOMEM, "image record: out of memory");
    return NULL;
  }
  json_object_object_add(o, "name", json_object_new_string(m->name ? m->name : ""));
  json_object_object_add(o, "size", json_object_new_int64((int64_t) m->size));
  if (m->parent_id) {
    json_object_object_add(o, "parent_pool", json_object_new_int64((int64_t) m->parent_pool));
    json_object_object_add(o, "parent_id", json_object_new_int64((int64_t) m->parent_id));
  }
  if (m->readonly)
    json_object_object_add(o, "readonly", json_object_new_boolean(1));
  if (m->enc_key)
    json_object_object_add(o, "enc_key", json_object_new_string(m->enc_key));
  if (m->integrity)
    json_object_object_add(o, "integrity", json_object_new_boolean(1));
  if (m->owner)
    json_object_object_add(o, "owner", json_object_new_string(m->owner));
  if (m->owner_group)
    json_object_object_add(o, "owner_group", json_object_new_string(m->owner_group));
  if (m->reader_group)
    json_object_object_add(o, "reader_group", json_object_new_string(m->reader_group));
  if (m->next_id) {
    json_object_object_add(o, "next_pool", json_object_new_int64((int64_t) m->next_pool));
    json_object_object_add(o, "next_id", json_object_new_int64((int64_t) m->next_id));
  }
  if (m->hidden)
    json_object_object_add(o, "hidden", json_object_new_boolean(1));
  if (m->retired)
    json_object_object_add(o, "retired", json_object_new_boolean(1));
  if (m->rekey_from) {
    json_object_object_add(o, "rekey_from", json_object_new_int64((int64_t) m->rekey_from));
    json_object_object_add(o, "rekey_done", json_object_new_int64((int64_t) m->rekey_done));
  }
  char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  json_object_put(o);
  if (!s)
    tc_error(ENOMEM, "image record: out of memory");
  return s;
}

int
tc_image_index_parse(const char *json, size_t len, uint64_t *pool, uint64_t *id)
{
  json_object *o = parse_object(json, len, "image index record");
  if (!o)
    return -1;
  int r = get_u64(o, "pool_id", pool, "image index record");
  if (r == 0)
    r = get_u64(o, "id", id, "image index record");
  if (r == 0 && (!*pool || !*id || *pool >= 1 << 16 || *id >= 1ULL << TC_POOL_SHIFT))
    r = tc_error(EINVAL, "image index record: pool_id and id must be set and in range");
  json_object_put(o);
  return r;
}

static int
unhex(const char *hex, uint8_t *out, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    int v = 0;
    for (int k = 0; k < 2; k++) {
      char c = hex[2 * i + k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return -1;
    }
    out[i] = (uint8_t) v;
  }
  return 0;
}

int
tc_image_key_resolve(const struct tc_config *cfg, const char *image, const char *enc_key,
                     uint8_t key[TC_XTS_KEY_SIZE])
{
  if (strcmp(enc_key, TC_KEY_SHREDDED) == 0)
    return tc_error(EKEYREVOKED, "image %s: its key was shredded (rm --shred): its data cannot be read", image);
  if (strncmp(enc_key, "vault:", 6) == 0) {
    /* Vault needs a client's login and token cache: the image layer's
     * tc_client_key_resolve (vault.c) answers these. */
    (void) cfg;
    return tc_error(ENOTSUP, "image %s: its key is kept in Vault (%s): resolve it through a client "
                    "(tc_client_key_resolve)", image, enc_key);
  }
  if (!is_hex_key(enc_key) || unhex(enc_key, key, TC_XTS_KEY_SIZE) < 0)
    return tc_error(EINVAL, "image %s: enc_key must be 128 hex digits", image);
  if (tc_memeq_ct(key, key + 32, 32)) {
    tc_wipe(key, TC_XTS_KEY_SIZE);
    return tc_error(EINVAL, "image %s: enc_key rejected: its two halves are equal", image);
  }
  return 0;
}

int
tc_image_key_generate(char hex[2 * TC_XTS_KEY_SIZE + 1])
{
  uint8_t key[TC_XTS_KEY_SIZE];
  do {
    if (tc_random(key, sizeof key) < 0)
      return -1;
  } while (tc_memeq_ct(key, key + 32, 32));
  for (int i = 0; i < TC_XTS_KEY_SIZE; i++)
    snprintf(hex + 2 * i, 3, "%02x", key[i]);
  tc_wipe(key, sizeof key);
  return 0;
}
