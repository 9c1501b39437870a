/* Parsing Vault's replies (see vault.h). Bytes from the network: every
 * field is type-checked, and copies of secrets are wiped. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "error.h"
#include "image_meta.h"
#include "vault.h"

static json_object *
parse(const char *body, size_t len)
{
  if (len > 1 << 20)
    return NULL;
  json_tokener *tok = json_tokener_new();
  if (!tok)
    return NULL;
  json_object *o = json_tokener_parse_ex(tok, body, (int) len);
  bool ok = o && json_tokener_get_error(tok) == json_tokener_success && json_object_is_type(o, json_type_object);
  json_tokener_free(tok);
  if (!ok) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

int
tc_vault_parse_auth(const char *body, size_t len, char **token, int64_t *ttl)
{
  *token = NULL;
  *ttl = 0;
  json_object *o = parse(body, len), *auth, *t, *d;
  if (!o)
    return tc_error(EPROTO, "Vault's login reply is not a JSON object");
  int r = 0;
  if (!json_object_object_get_ex(o, "auth", &auth) || !json_object_is_type(auth, json_type_object) ||
      !json_object_object_get_ex(auth, "client_token", &t) || !json_object_is_type(t, json_type_string) ||
      json_object_get_string_len(t) == 0 || json_object_get_string_len(t) > 4096)
    r = tc_error(EPROTO, "Vault's login reply has no auth.client_token");
  else if (json_object_object_get_ex(auth, "lease_duration", &d) && !json_object_is_type(d, json_type_null) &&
           (!json_object_is_type(d, json_type_int) || json_object_get_int64(d) < 0))
    r = tc_error(EPROTO, "Vault's login reply: auth.lease_duration is not a non-negative integer");
  else {
    if (json_object_object_get_ex(auth, "lease_duration", &d) && json_object_is_type(d, json_type_int))
      *ttl = json_object_get_int64(d);
    if (!(*token = strdup(json_object_get_string(t))))
      r = tc_error(ENOMEM, "Vault login: out of memory");
  }
  json_object_put(o);
  return r;
}

static bool
is_hex(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F')))
      return false;
  return true;
}

int
tc_vault_parse_secret(const char *body, size_t len, const char *image, const char *id,
                      uint8_t key[TC_XTS_KEY_SIZE])
{
  json_object *o = parse(body, len), *data, *k;
  if (!o)
    return tc_error(EPROTO, "image %s: Vault's reply for secret %s is not a JSON object", image, id);
  int r;
  if (!json_object_object_get_ex(o, "data", &data) || !json_object_is_type(data, json_type_object))
    r = tc_error(EPROTO, "image %s: Vault's reply for secret %s has no data", image, id);
  else if (!json_object_object_get_ex(data, "key", &k))
    r = tc_error(EINVAL, "image %s: Vault secret %s has no field key", image, id);
  else if (!json_object_is_type(k, json_type_string))
    r = tc_error(EINVAL, "image %s: Vault secret %s: field key is not a string", image, id);
  else {
    const char *s = json_object_get_string(k);
    size_t n = (size_t) json_object_get_string_len(k);
    if (n != 2 * TC_XTS_KEY_SIZE || !is_hex(s, n))
      r = tc_error(EINVAL, "image %s: Vault secret %s: field key must be 128 hex digits (it has %zu characters%s)",
                   image, id, n, is_hex(s, n) ? "" : ", not all hex");
    else if (tc_image_key_resolve(NULL, image, s, key) < 0)
      r = tc_error(EINVAL, "image %s: Vault secret %s: %s", image, id,
                   strstr(tc_last_error(), "halves") ? "key rejected: its two halves are equal" : tc_last_error());
    else
      r = 0;
    /* json-c keeps its own copy of the string: wipe it before freeing. */
    tc_wipe((char *) s, n);
  }
  json_object_put(o);
  return r;
}

void
tc_vault_parse_errors(const char *body, size_t len, char *buf, size_t buflen)
{
  json_object *o = parse(body, len), *errs;
  size_t used = 0;
  if (buflen)
    buf[0] = 0;
  if (o && json_object_object_get_ex(o, "errors", &errs) && json_object_is_type(errs, json_type_array)) {
    size_t n = json_object_array_length(errs);
    for (size_t i = 0; i < n && used + 1 < buflen; i++) {
      json_object *e = json_object_array_get_idx(errs, i);
      if (!json_object_is_type(e, json_type_string))
        continue;
      int w = snprintf(buf + used, buflen - used, "%s%s", used ? "; " : "", json_object_get_string(e));
      if (w < 0)
        break;
      used += (size_t) w < buflen - used ? (size_t) w : buflen - used - 1;
    }
  }
  /* Printable ASCII only: the text goes into messages and logs. */
  for (size_t i = 0; i < used; i++)
    if ((unsigned char) buf[i] < 0x20 || (unsigned char) buf[i] > 0x7e)
      buf[i] = '?';
  json_object_put(o);
}
