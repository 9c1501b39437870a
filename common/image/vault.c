/* The Vault/OpenBao client: certificate login, token cache, key reads
 * (see vault.h). */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <curl/curl.h>
#include "error.h"
#include "log.h"
#include "vault.h"

#define MAX_REPLY (256 * 1024)
#define TIMEOUT_MS 10000L

struct tc_vault {
  const struct tc_config *cfg;
  pthread_mutex_t lock;        /* one request at a time; protects the token */
  char *token;                 /* NULL: not logged in */
  double token_born, token_ttl;   /* monotonic s; ttl 0: no expiry */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_rc;
static void curl_init(void) { curl_rc = curl_global_init(CURL_GLOBAL_ALL); }

static double
now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct tc_vault *
tc_vault_new(const struct tc_config *cfg)
{
  struct tc_vault *v = calloc(1, sizeof *v);
  if (!v) {
    tc_error(ENOMEM, "vault: out of memory");
    return NULL;
  }
  v->cfg = cfg;
  pthread_mutex_init(&v->lock, NULL);
  return v;
}

static void
drop_token(struct tc_vault *v)
{
  if (v->token) {
    tc_wipe(v->token, strlen(v->token));
    free(v->token);
    v->token = NULL;
  }
}

void
tc_vault_free(struct tc_vault *v)
{
  if (!v)
    return;
  drop_token(v);
  pthread_mutex_destroy(&v->lock);
  free(v);
}

/* A reply body; wiped when freed (it may hold a key or a token). */
struct body {
  char *p;
  size_t len, cap;
};

static size_t
body_write(char *data, size_t size, size_t nmemb, void *userdata)
{
  struct body *b = userdata;
  size_t n = size * nmemb;
  if (b->len + n + 1 > MAX_REPLY)
    return 0;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
      cap *= 2;
    /* Not realloc: the old block would be freed unwiped. */
    char *p = malloc(cap);
    if (!p)
      return 0;
    if (b->p) {
      memcpy(p, b->p, b->len);
      tc_wipe(b->p, b->cap);
      free(b->p);
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = 0;
  return n;
}

static void
body_free(struct body *b)
{
  if (b->p) {
    tc_wipe(b->p, b->cap);
    free(b->p);
  }
  memset(b, 0, sizeof *b);
}

/* One HTTPS request to {vault_url}{path}: a new connection each time, so the
 * certificate and key files are read again. *status = HTTP status. Returns 0,
 * or -1 (EHOSTUNREACH) when Vault could not be reached. */
static int
request(struct tc_vault *v, const char *image, const char *method, const char *path, const char *token,
        struct body *b, long *status)
{
  const char *url = tc_config_str(v->cfg, "vault_url");
  const char *ca = tc_config_str(v->cfg, "vault_ca");
  const char *cert = tc_config_str(v->cfg, "cert"), *pkey = tc_config_str(v->cfg, "pkey");
  pthread_once(&curl_once, curl_init);
  if (curl_rc != CURLE_OK)
    return tc_error(EIO, "image %s: Vault: curl_global_init: %s", image, curl_easy_strerror(curl_rc));
  size_t ulen = strlen(url) + strlen(path) + 1;
  char *full = malloc(ulen);
  CURL *e = curl_easy_init();
  struct curl_slist *hdrs = NULL, *h2 = NULL;
  char *hdr = NULL;
  int r = -1;
  if (!full || !e) {
    tc_error(ENOMEM, "image %s: Vault: out of memory", image);
    goto out;
  }
  /* vault_url may end with '/': don't double it. */
  size_t n = strlen(url);
  snprintf(full, ulen, "%.*s%s", (int) (n && url[n - 1] == '/' ? n - 1 : n), url, path);
  if (token) {
    size_t hl = strlen(token) + 32;
    if (!(hdr = malloc(hl))) {
      tc_error(ENOMEM, "image %s: Vault: out of memory", image);
      goto out;
    }
    snprintf(hdr, hl, "X-Vault-Token: %s", token);
    if (!(h2 = curl_slist_append(NULL, hdr))) {
      tc_error(ENOMEM, "image %s: Vault: out of memory", image);
      goto out;
    }
    hdrs = h2;
  }
  if (!strcmp(method, "POST")) {
    if (!(h2 = curl_slist_append(hdrs, "Content-Type: application/json"))) {
      tc_error(ENOMEM, "image %s: Vault: out of memory", image);
      goto out;
    }
    hdrs = h2;
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 2L);
  }
  curl_easy_setopt(e, CURLOPT_URL, full);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, TIMEOUT_MS);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 2 * TIMEOUT_MS);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  if (ca)
    curl_easy_setopt(e, CURLOPT_CAINFO, ca);
  if (cert && pkey) {
    curl_easy_setopt(e, CURLOPT_SSLCERT, cert);
    curl_easy_setopt(e, CURLOPT_SSLKEY, pkey);
  }
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, body_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
  CURLcode c = curl_easy_perform(e);
  if (c == CURLE_WRITE_ERROR) {
    tc_error(EPROTO, "image %s: Vault at %s: reply too large", image, url);
    goto out;
  }
  if (c == CURLE_PEER_FAILED_VERIFICATION || c == CURLE_SSL_CACERT_BADFILE || c == CURLE_SSL_CERTPROBLEM ||
      c == CURLE_SSL_CONNECT_ERROR) {
    tc_error(EACCES, "image %s: TLS with Vault at %s failed (vault_ca %s, certificate %s): %s", image, url,
             ca ? ca : "unset", cert ? cert : "none", curl_easy_strerror(c));
    goto out;
  }
  if (c != CURLE_OK) {
    tc_error(EHOSTUNREACH, "image %s: Vault at %s unreachable: %s", image, url, curl_easy_strerror(c));
    goto out;
  }
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
  r = 0;
out:
  if (e)
    curl_easy_cleanup(e);
  curl_slist_free_all(hdrs);
  if (hdr) {
    tc_wipe(hdr, strlen(hdr));
    free(hdr);
  }
  free(full);
  return r;
}

/* Take a login or renew reply as the cached token. */
static int
take_auth(struct tc_vault *v, const char *image, struct body *b, const char *what)
{
  char *token;
  int64_t ttl;
  if (tc_vault_parse_auth(b->p ? b->p : "", b->len, &token, &ttl) < 0)
    return tc_error(errno, "image %s: Vault %s: %s", image, what, tc_last_error());
  drop_token(v);
  v->token = token;
  v->token_born = now_s();
  v->token_ttl = (double) ttl;
  return 0;
}

static int
login(struct tc_vault *v, const char *image)
{
  const char *cert = tc_config_str(v->cfg, "cert"), *pkey = tc_config_str(v->cfg, "pkey");
  drop_token(v);
  if (!cert || !pkey)
    return tc_error(EINVAL, "image %s: its key is in Vault, and Vault login needs this client's certificate "
                    "(options cert and pkey)", image);
  struct body b = { 0 };
  long status = 0;
  if (request(v, image, "POST", "/v1/auth/cert/login", NULL, &b, &status) < 0)
    return -1;
  int r;
  if (status == 200)
    r = take_auth(v, image, &b, "login");
  else {
    char errs[256];
    tc_vault_parse_errors(b.p ? b.p : "", b.len, errs, sizeof errs);
    r = tc_error(EACCES, "image %s: Vault refused the login with certificate %s (HTTP %ld%s%s)", image, cert,
                 status, *errs ? ": " : "", errs);
  }
  body_free(&b);
  if (r == 0)
    tc_debug("vault: logged in with %s", cert);
  return r;
}

/* Renew the token once two thirds of its TTL have passed; log in again when
 * it has expired or renewal fails. */
static int
fresh_token(struct tc_vault *v, const char *image)
{
  if (!v->token)
    return login(v, image);
  if (v->token_ttl <= 0)
    return 0;
  double age = now_s() - v->token_born;
  /* Expired (with a margin for the request's own time): a new login. */
  if (age >= v->token_ttl - (v->token_ttl < 10 ? v->token_ttl / 10 : 1))
    return login(v, image);
  if (age < v->token_ttl * 2 / 3)
    return 0;
  struct body b = { 0 };
  long status = 0;
  int r = request(v, image, "POST", "/v1/auth/token/renew-self", v->token, &b, &status);
  if (r == 0 && status == 200 && take_auth(v, image, &b, "token renewal") == 0)
    tc_debug("vault: token renewed");
  else
    r = login(v, image);
  body_free(&b);
  return r;
}

/* Characters allowed in a secret ID: Vault path segments. */
static bool
valid_id(const char *id)
{
  if (!*id || strlen(id) > 512 || *id == '/')
    return false;
  for (const char *p = id; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          strchr("-_./+=@", *p)))
      return false;
  return !strstr(id, "..");
}

int
tc_vault_get_key(struct tc_vault *v, const char *image, const char *id, uint8_t key[TC_XTS_KEY_SIZE])
{
  if (!tc_config_str(v->cfg, "vault_url"))
    return tc_error(EINVAL, "image %s: its key is in Vault (vault:%s), but vault_url is not set", image, id);
  if (!valid_id(id))
    return tc_error(EINVAL, "image %s: vault:%s is not a valid secret ID", image, id);
  size_t plen = strlen(id) + 16;
  char *path = malloc(plen);
  if (!path)
    return tc_error(ENOMEM, "image %s: out of memory", image);
  snprintf(path, plen, "/v1/secret/%s", id);
  int r = -1;
  pthread_mutex_lock(&v->lock);
  /* A 403 with a cached token may mean it was revoked: log in once more. */
  for (int attempt = 0; attempt < 2; attempt++) {
    bool cached = v->token != NULL;
    if (fresh_token(v, image) < 0)
      break;
    struct body b = { 0 };
    long status = 0;
    if (request(v, image, "GET", path, v->token, &b, &status) < 0) {
      body_free(&b);
      break;
    }
    char errs[256];
    if (status != 200)
      tc_vault_parse_errors(b.p ? b.p : "", b.len, errs, sizeof errs);
    if (status == 200)
      r = tc_vault_parse_secret(b.p ? b.p : "", b.len, image, id, key);
    else if (status == 403 && cached && attempt == 0) {
      drop_token(v);
      body_free(&b);
      continue;
    }
    else if (status == 403)
      tc_error(EACCES, "image %s: Vault denied reading secret %s (403%s%s)", image, id, *errs ? ": " : "", errs);
    else if (status == 404)
      tc_error(ENOENT, "image %s: Vault has no secret %s (404)", image, id);
    else
      tc_error(EPROTO, "image %s: Vault answered HTTP %ld for secret %s%s%s", image, status, id, *errs ? ": " : "",
               errs);
    body_free(&b);
    break;
  }
  pthread_mutex_unlock(&v->lock);
  free(path);
  return r;
}
