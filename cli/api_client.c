/* The CLI's admin API client (libcurl + json-c). */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "api_client.h"
#include "vector.h"

#define API_MAX_REPLY (64u << 20)

bool
cli_api_enabled(const struct tc_config *cfg)
{
  return tc_config_str(cfg, "api_url") != NULL;
}

void
cli_api_add(json_object *o, const char *k, const char *v)
{
  if (v)
    json_object_object_add(o, k, json_object_new_string(v));
}

struct buf {
  char *p;
  size_t n, cap;
  bool too_big;
};

static size_t
on_data(char *p, size_t size, size_t nmemb, void *opaque)
{
  struct buf *b = opaque;
  size_t n = size * nmemb;
  if (b->n + n > API_MAX_REPLY) {
    b->too_big = true;
    return 0;
  }
  if (tc_grow(&b->p, &b->cap, b->n + n + 1, 1, 4096) < 0)
    return 0;
  memcpy(b->p + b->n, p, n);
  b->n += n;
  b->p[b->n] = 0;
  return n;
}

int
cli_api_call(const char *cmd, const struct tc_config *cfg, const char *call, json_object *body,
             json_object **reply)
{
  *reply = NULL;
  const char *base = tc_config_str(cfg, "api_url");
  size_t blen = strlen(base);
  while (blen && base[blen - 1] == '/')
    blen--;
  char url[1024];
  if ((size_t) snprintf(url, sizeof url, "%.*s/api/v1/%s", (int) blen, base, call) >= sizeof url) {
    json_object_put(body);
    fprintf(stderr, "tromcho %s: option api_url is too long\n", cmd);
    return 1;
  }
  if (!body)
    body = json_object_new_object();
  const char *text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
  CURL *c = curl_easy_init();
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  struct buf b = { 0 };
  int rv = 1;
  if (!c || !hdr) {
    fprintf(stderr, "tromcho %s: out of memory\n", cmd);
    goto out;
  }
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  /* Connecting includes the TLS handshake: give a busy gateway time. */
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long) tc_config_int(cfg, "etcd_slow_timeout") * 2);
  /* Deleting or flattening a large image takes as long as it takes. */
  curl_easy_setopt(c, CURLOPT_TIMEOUT, (long) tc_config_int(cfg, "client_op_timeout") * 10);
  if (tc_config_str(cfg, "cert"))
    curl_easy_setopt(c, CURLOPT_SSLCERT, tc_config_str(cfg, "cert"));
  if (tc_config_str(cfg, "pkey"))
    curl_easy_setopt(c, CURLOPT_SSLKEY, tc_config_str(cfg, "pkey"));
  if (tc_config_str(cfg, "api_ca"))
    curl_easy_setopt(c, CURLOPT_CAINFO, tc_config_str(cfg, "api_ca"));
  CURLcode cr = curl_easy_perform(c);
  if (cr != CURLE_OK) {
    fprintf(stderr, "tromcho %s: admin API %s: %s\n", cmd, url,
            b.too_big ? "reply too large" : errbuf[0] ? errbuf : curl_easy_strerror(cr));
    goto out;
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  json_object *o = b.p ? json_tokener_parse(b.p) : NULL, *f;
  if (status != 200) {
    if (o && json_object_object_get_ex(o, "error", &f))
      fprintf(stderr, "tromcho %s: %s (HTTP %ld)\n", cmd, json_object_get_string(f), status);
    else
      fprintf(stderr, "tromcho %s: admin API %s: HTTP %ld\n", cmd, url, status);
    json_object_put(o);
    goto out;
  }
  if (!o) {
    fprintf(stderr, "tromcho %s: admin API %s: the reply is not JSON\n", cmd, url);
    goto out;
  }
  *reply = o;
  rv = 0;
out:
  free(b.p);
  curl_slist_free_all(hdr);
  if (c)
    curl_easy_cleanup(c);
  json_object_put(body);
  return rv;
}
