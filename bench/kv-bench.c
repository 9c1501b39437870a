/* Put and get throughput and latency of etcd v3 JSON API servers, with a
 * client light enough not to be the bottleneck (libcurl, one thread and one
 * persistent connection per client). Same load as kv-bench.py: put writes
 * distinct keys with VALUE-byte values, get reads them back; with several
 * servers, rounds alternate between them so all see the same background load.
 *
 *   kv-bench NAME=URL [NAME=URL]... [--ops N] [--conns 1,16] [--value B] [--rounds R]
 *            [--cacert F --cert F --key F] [--key-format FMT] [--value-format FMT]
 * --key-format and --value-format are printf formats of the op's index + 1
 * (one %d): e.g. the image records of bench/kv.sh's use_perms rows. */
#include <config.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>

static int value_size = 100;
/* Options shared by every worker (set before any starts). */
static const char *tls_ca, *tls_cert, *tls_key, *key_format, *value_format;

static double
now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
b64(const unsigned char *p, size_t n, char *out)
{
  static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t i, o = 0;
  for (i = 0; i + 3 <= n; i += 3) {
    unsigned v = (unsigned) p[i] << 16 | (unsigned) p[i + 1] << 8 | p[i + 2];
    out[o++] = t[v >> 18]; out[o++] = t[(v >> 12) & 63]; out[o++] = t[(v >> 6) & 63]; out[o++] = t[v & 63];
  }
  if (i < n) {
    unsigned v = (unsigned) p[i] << 16 | (i + 1 < n ? (unsigned) p[i + 1] << 8 : 0);
    out[o++] = t[v >> 18]; out[o++] = t[(v >> 12) & 63];
    out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
    out[o++] = '=';
  }
  out[o] = 0;
}

struct reply { char buf[4096]; size_t len; };

static size_t
on_data(char *p, size_t size, size_t n, void *opaque)
{
  struct reply *r = opaque;
  size_t len = size * n, room = sizeof r->buf - 1 - r->len;
  memcpy(r->buf + r->len, p, len < room ? len : room);
  r->len += len < room ? len : room;
  r->buf[r->len] = 0;
  return len;
}

struct job {
  const char *url;
  const char *op;
  int first, count, prefix;
  double *lat;
  int failed;
};

/* The formats come from the command line, by design. */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

static void *
worker(void *arg)
{
  struct job *j = arg;
  CURL *h = curl_easy_init();
  char url[512], key[64], kb[128], *vb = malloc((size_t) value_size * 2 + 8), *body = malloc((size_t) value_size * 2 + 256);
  unsigned char *val = malloc((size_t) value_size + 1);
  struct reply r;
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  for (int i = 0; i < value_size; i++)
    val[i] = (unsigned char) rand();
  b64(val, (size_t) value_size, vb);
  snprintf(url, sizeof url, "%s/v3/kv/%s", j->url, strcmp(j->op, "put") == 0 ? "put" : "range");
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  if (tls_ca)
    curl_easy_setopt(h, CURLOPT_CAINFO, tls_ca);
  if (tls_cert)
    curl_easy_setopt(h, CURLOPT_SSLCERT, tls_cert);
  if (tls_key)
    curl_easy_setopt(h, CURLOPT_SSLKEY, tls_key);
  for (int i = 0; i < j->count; i++) {
    if (key_format)
      snprintf(key, sizeof key, key_format, j->first + i + 1);
    else
      snprintf(key, sizeof key, "/bench/%d/%08d", j->prefix, j->first + i);
    b64((const unsigned char *) key, strlen(key), kb);
    if (value_format) {
      char text[512];
      snprintf(text, sizeof text, value_format, j->first + i + 1);
      b64((const unsigned char *) text, strlen(text), vb);
    }
    if (strcmp(j->op, "put") == 0)
      snprintf(body, (size_t) value_size * 2 + 256, "{\"key\":\"%s\",\"value\":\"%s\"}", kb, vb);
    else
      snprintf(body, (size_t) value_size * 2 + 256, "{\"key\":\"%s\"}", kb);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    r.len = 0;
    double t = now();
    CURLcode rc = curl_easy_perform(h);
    j->lat[i] = now() - t;
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200 || (strcmp(j->op, "get") == 0 && !strstr(r.buf, "\"kvs\""))) {
      fprintf(stderr, "%s %s: %s, HTTP %ld: %s\n", j->op, key, curl_easy_strerror(rc), status, r.buf);
      j->failed = 1;
      break;
    }
  }
  curl_slist_free_all(hdr);
  curl_easy_cleanup(h);
  free(vb);
  free(body);
  free(val);
  return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
  const char *names[8], *urls[8];
  int nserv = 0, ops = 10000, rounds = 10;
  char conns_list[64] = "1,16";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--value") && i + 1 < argc) value_size = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--conns") && i + 1 < argc) snprintf(conns_list, sizeof conns_list, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--cacert") && i + 1 < argc) tls_ca = argv[++i];
    else if (!strcmp(argv[i], "--cert") && i + 1 < argc) tls_cert = argv[++i];
    else if (!strcmp(argv[i], "--key") && i + 1 < argc) tls_key = argv[++i];
    else if (!strcmp(argv[i], "--key-format") && i + 1 < argc) key_format = argv[++i];
    else if (!strcmp(argv[i], "--value-format") && i + 1 < argc) value_format = argv[++i];
    else if (strchr(argv[i], '=') && nserv < 8) {
      char *eq = strchr(argv[i], '=');
      *eq = 0;
      names[nserv] = argv[i];
      urls[nserv++] = eq + 1;
    } else {
      fprintf(stderr, "usage: kv-bench NAME=URL... [--ops N] [--conns 1,16] [--value B] [--rounds R]\n");
      return 1;
    }
  }
  /* a formatted value is at most 511 bytes: room for its base64 */
  if (value_format && value_size < 512)
    value_size = 512;
  if (!nserv || ops <= 0 || rounds <= 0 || value_size <= 0) {
    fprintf(stderr, "usage: kv-bench NAME=URL... [--ops N] [--conns 1,16] [--value B] [--rounds R]\n");
    return 1;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  printf("%-10s %-4s %5s %12s %12s %12s\n", "server", "op", "conns", "ops/s", "p50 ms", "p99 ms");
  for (char *c = strtok(conns_list, ","); c; c = strtok(NULL, ",")) {
    int conns = atoi(c);
    if (conns <= 0 || conns > 256)
      continue;
    int per_round = ops / rounds / conns * conns, per_conn = per_round / conns;
    const char *opnames[] = { "put", "get" };
    for (int o = 0; o < 2; o++) {
      double *lat[8], elapsed[8] = { 0 };
      for (int s = 0; s < nserv; s++)
        lat[s] = calloc((size_t) per_round * (size_t) rounds, sizeof(double));
      for (int r = 0; r < rounds; r++)
        for (int s = 0; s < nserv; s++) {
          pthread_t th[256];
          struct job jobs[256];
          double t0 = now();
          for (int k = 0; k < conns; k++) {
            jobs[k] = (struct job) { urls[s], opnames[o], r * per_round + k * per_conn, per_conn, conns,
                                     lat[s] + (size_t) r * per_round + (size_t) k * per_conn, 0 };
            pthread_create(&th[k], NULL, worker, &jobs[k]);
          }
          for (int k = 0; k < conns; k++) {
            pthread_join(th[k], NULL);
            if (jobs[k].failed)
              return 1;
          }
          elapsed[s] += now() - t0;
        }
      for (int s = 0; s < nserv; s++) {
        size_t n = (size_t) per_round * (size_t) rounds;
        qsort(lat[s], n, sizeof(double), cmp_double);
        printf("%-10s %-4s %5d %12.0f %12.3f %12.3f\n", names[s], opnames[o], conns, n / elapsed[s],
               lat[s][n / 2] * 1e3, lat[s][n * 99 / 100] * 1e3);
        fflush(stdout);
        free(lat[s]);
      }
    }
  }
  curl_global_cleanup();
  return 0;
}
