/* The admin API's request parser: path -> call, JSON body -> fields, with
 * unknown or mistyped fields refused by name. */
#include <config.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "admin_req.h"

#define API_PREFIX "/api/v1/"

static const char *const call_names[AC_NONE] = {
  [AC_IMAGE_LIST] = "image/list", [AC_IMAGE_CREATE] = "image/create", [AC_IMAGE_DELETE] = "image/delete",
  [AC_IMAGE_FLATTEN] = "image/flatten", [AC_IMAGE_MODIFY] = "image/modify", [AC_POOL_LIST] = "pool/list",
  [AC_USER_LIST] = "user/list", [AC_USER_SET] = "user/set", [AC_USER_DELETE] = "user/delete",
  [AC_STATUS] = "status",
};

/* The fields each call takes (NULL-terminated). */
static const char *const fields_none[] = { NULL };
static const char *const fields_name[] = { "name", NULL };
static const char *const fields_create[] = { "name", "size", "pool", "enc_key", "owner", "owner_group",
                                             "reader_group", "parent", NULL };
static const char *const fields_modify[] = { "name", "resize", "rename", "readonly", "owner", "owner_group",
                                             "reader_group", NULL };
static const char *const fields_user_set[] = { "name", "type", "groups", NULL };

static const char *const *const call_fields[AC_NONE] = {
  [AC_IMAGE_LIST] = fields_none, [AC_IMAGE_CREATE] = fields_create, [AC_IMAGE_DELETE] = fields_name,
  [AC_IMAGE_FLATTEN] = fields_name, [AC_IMAGE_MODIFY] = fields_modify, [AC_POOL_LIST] = fields_none,
  [AC_USER_LIST] = fields_none, [AC_USER_SET] = fields_user_set, [AC_USER_DELETE] = fields_name,
  [AC_STATUS] = fields_none,
};

void
admin_err_set(struct admin_err *e, int status, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  e->status = status;
}

enum admin_call
admin_call_of(const char *path, const char **call_name)
{
  *call_name = NULL;
  if (strncmp(path, API_PREFIX, strlen(API_PREFIX)) != 0)
    return AC_NONE;
  const char *c = path + strlen(API_PREFIX);
  for (int i = 0; i < AC_NONE; i++)
    if (strcmp(c, call_names[i]) == 0) {
      *call_name = call_names[i];
      return (enum admin_call) i;
    }
  return AC_NONE;
}

void
admin_req_free(struct admin_req *r)
{
  free(r->name); free(r->pool); free(r->enc_key); free(r->parent); free(r->rename); free(r->type);
  free(r->owner); free(r->owner_group); free(r->reader_group);
  if (r->groups)
    for (char **g = r->groups; *g; g++)
      free(*g);
  free(r->groups);
  memset(r, 0, sizeof *r);
  r->readonly = -1;
}

/* A string field into *out (copied); -1 with e set on a wrong type. */
static int
get_string(const struct admin_req *r, json_object *v, const char *field, char **out, struct admin_err *e)
{
  if (!json_object_is_type(v, json_type_string)) {
    admin_err_set(e, 400, "%s: field %s must be a string", r->call_name, field);
    return -1;
  }
  const char *s = json_object_get_string(v);
  if ((size_t) json_object_get_string_len(v) != strlen(s)) {
    admin_err_set(e, 400, "%s: field %s contains a NUL byte", r->call_name, field);
    return -1;
  }
  if (!(*out = strdup(s))) {
    admin_err_set(e, 500, "%s: out of memory", r->call_name);
    return -1;
  }
  return 0;
}

static int
get_size(const struct admin_req *r, json_object *v, const char *field, uint64_t *out, struct admin_err *e)
{
  int64_t n;
  if (!json_object_is_type(v, json_type_int) || (n = json_object_get_int64(v)) <= 0 || n == INT64_MAX) {
    admin_err_set(e, 400, "%s: field %s must be a positive integer (bytes)", r->call_name, field);
    return -1;
  }
  *out = (uint64_t) n;
  return 0;
}

static int
get_groups(struct admin_req *r, json_object *v, struct admin_err *e)
{
  if (!json_object_is_type(v, json_type_array)) {
    admin_err_set(e, 400, "%s: field groups must be a list of strings", r->call_name);
    return -1;
  }
  size_t n = json_object_array_length(v);
  if (!(r->groups = calloc(n + 1, sizeof *r->groups))) {
    admin_err_set(e, 500, "%s: out of memory", r->call_name);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    if (get_string(r, json_object_array_get_idx(v, i), "groups", &r->groups[i], e) < 0)
      return -1;
  return 0;
}

static int
get_field(struct admin_req *r, const char *k, json_object *v, struct admin_err *e)
{
  if (!strcmp(k, "name")) return get_string(r, v, k, &r->name, e);
  if (!strcmp(k, "pool")) {
    if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) > 0) {
      char b[24];
      snprintf(b, sizeof b, "%lld", (long long) json_object_get_int64(v));
      if ((r->pool = strdup(b)))
        return 0;
      admin_err_set(e, 500, "%s: out of memory", r->call_name);
      return -1;
    }
    return get_string(r, v, k, &r->pool, e);
  }
  if (!strcmp(k, "enc_key")) return get_string(r, v, k, &r->enc_key, e);
  if (!strcmp(k, "parent")) return get_string(r, v, k, &r->parent, e);
  if (!strcmp(k, "rename")) return get_string(r, v, k, &r->rename, e);
  if (!strcmp(k, "type")) return get_string(r, v, k, &r->type, e);
  if (!strcmp(k, "owner")) return get_string(r, v, k, &r->owner, e);
  if (!strcmp(k, "owner_group")) return get_string(r, v, k, &r->owner_group, e);
  if (!strcmp(k, "reader_group")) return get_string(r, v, k, &r->reader_group, e);
  if (!strcmp(k, "size")) return get_size(r, v, k, &r->size, e);
  if (!strcmp(k, "resize")) return get_size(r, v, k, &r->resize, e);
  if (!strcmp(k, "groups")) return get_groups(r, v, e);
  if (!strcmp(k, "readonly")) {
    if (!json_object_is_type(v, json_type_boolean)) {
      admin_err_set(e, 400, "%s: field readonly must be true or false", r->call_name);
      return -1;
    }
    r->readonly = json_object_get_boolean(v);
    return 0;
  }
  admin_err_set(e, 400, "%s: unknown field %.100s", r->call_name, k);
  return -1;
}

/* Whether the call needs a name, and checks the call's own constraints. */
static int
check_required(const struct admin_req *r, struct admin_err *e)
{
  switch (r->call) {
  case AC_IMAGE_CREATE: case AC_IMAGE_DELETE: case AC_IMAGE_FLATTEN: case AC_IMAGE_MODIFY:
  case AC_USER_SET: case AC_USER_DELETE:
    if (!r->name || !*r->name) {
      admin_err_set(e, 400, "%s: field name is required", r->call_name);
      return -1;
    }
    break;
  default:
    break;
  }
  if (r->call == AC_USER_SET && r->type && strcmp(r->type, "client") && strcmp(r->type, "admin")) {
    admin_err_set(e, 400, "%s: field type must be client or admin, not '%.60s'", r->call_name, r->type);
    return -1;
  }
  if (r->call == AC_IMAGE_CREATE && !r->size && !r->parent && !strchr(r->name, '@')) {
    admin_err_set(e, 400, "%s: image %.100s: field size is required (or parent, or NAME@SNAP for a snapshot)",
                  r->call_name, r->name);
    return -1;
  }
  return 0;
}

int
admin_req_parse(const char *method, const char *path, const char *body, size_t len,
                struct admin_req *r, struct admin_err *e)
{
  memset(r, 0, sizeof *r);
  r->readonly = -1;
  r->call = admin_call_of(path, &r->call_name);
  if (r->call == AC_NONE) {
    admin_err_set(e, 404, "unknown path %.200s: not an admin API call (see /api/v1/...)", path);
    return -1;
  }
  if (strcmp(method, "POST") != 0) {
    admin_err_set(e, 405, "%s: method %.20s not allowed: use POST", r->call_name, method);
    return -1;
  }
  while (len && (body[len - 1] == ' ' || body[len - 1] == '\n' || body[len - 1] == '\r' || body[len - 1] == '\t'))
    len--;
  if (!len)
    return check_required(r, e);
  if (len > INT_MAX) {
    admin_err_set(e, 400, "%s: request body too large", r->call_name);
    return -1;
  }
  json_tokener *tok = json_tokener_new();
  if (!tok) {
    admin_err_set(e, 500, "%s: out of memory", r->call_name);
    return -1;
  }
  json_object *o = json_tokener_parse_ex(tok, body, (int) len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t used = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  if (!o || jerr != json_tokener_success || used != len) {
    admin_err_set(e, 400, "%s: the body is not valid JSON (%s)", r->call_name,
                  jerr != json_tokener_success ? json_tokener_error_desc(jerr) : "trailing bytes");
    json_object_put(o);
    return -1;
  }
  if (!json_object_is_type(o, json_type_object)) {
    admin_err_set(e, 400, "%s: the body must be a JSON object", r->call_name);
    json_object_put(o);
    return -1;
  }
  const char *const *allowed = call_fields[r->call];
  json_object_object_foreach(o, k, v) {
    bool ok = false;
    for (const char *const *f = allowed; *f; f++)
      if (!strcmp(*f, k))
        ok = true;
    if (!ok) {
      admin_err_set(e, 400, "%s: unknown field %.100s", r->call_name, k);
      goto bad;
    }
    if (get_field(r, k, v, e) < 0)
      goto bad;
  }
  json_object_put(o);
  if (check_required(r, e) < 0) {
    admin_req_free(r);
    return -1;
  }
  return 0;
bad:
  json_object_put(o);
  admin_req_free(r);
  return -1;
}
