/* bench/kv-client: put and get throughput and latency through the KV
 * client, at 1 and 16 concurrent callers (blocking calls, one thread each),
 * against any KV URL (etcd or tromcho-gateway). Prints a table (or JSON).
 *   kv-client [--etcd_address URL] [--seconds S] [--threads 1,16]
 *             [--value-size N] [--keys N] [--json]
 * Keys go under <etcd_prefix>/bench/ and are deleted at the end. */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "kv_client.h"
#include "log.h"
#include "vector.h"

struct worker {
  struct tc_kv *kv;
  int id, op, nkeys;
  double seconds;
  const char *prefix, *value;
  double *lat;          /* microseconds */
  size_t n, cap;
  long errors;
  pthread_t th;
};

static double
now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *
run(void *arg)
{
  struct worker *w = arg;
  double end = now_s() + w->seconds;
  char key[256];
  for (long i = 0;; i++) {
    double t0 = now_s();
    if (t0 >= end)
      break;
    snprintf(key, sizeof key, "%s/bench/%d/%ld", w->prefix, w->id, i % w->nkeys);
    int r;
    if (w->op == 0)
      r = tc_kv_put(w->kv, key, 0, w->value, 0, 0, NULL);
    else {
      struct tc_kv_result res;
      r = tc_kv_get(w->kv, key, 0, &res);
      tc_kv_result_free(&res);
    }
    double t1 = now_s();
    if (r < 0) {
      if (!w->errors++)
        fprintf(stderr, "kv-client: %s\n", tc_last_error());
      continue;
    }
    if (tc_grow(&w->lat, &w->cap, w->n + 1, sizeof *w->lat, 4096) < 0)
      break;
    w->lat[w->n++] = (t1 - t0) * 1e6;
  }
  return NULL;
}

static int
cmp_d(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
  tc_log_open("kv-client", 0);
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg) {
    fprintf(stderr, "kv-client: %s\n", tc_last_error());
    return 1;
  }
  double seconds = 3;
  int threads[8] = { 1, 16 }, nthreads = 2, vsize = 100, nkeys = 1000, json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--value-size") && i + 1 < argc)
      vsize = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
      nkeys = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json"))
      json = 1;
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      nthreads = 0;
      for (char *s = strtok(argv[++i], ","); s && nthreads < 8; s = strtok(NULL, ","))
        threads[nthreads++] = atoi(s);
    }
    else {
      fprintf(stderr, "kv-client: unknown argument '%s' (usage: kv-client [--etcd_address URL] [--seconds S] "
                      "[--threads 1,16] [--value-size N] [--keys N] [--json])\n", argv[i]);
      return 1;
    }
  }
  if (seconds <= 0 || vsize < 0 || nkeys < 1) {
    fprintf(stderr, "kv-client: --seconds, --value-size and --keys must be positive\n");
    return 1;
  }
  struct tc_kv *kv = tc_kv_new_from_config(cfg);
  if (!kv) {
    fprintf(stderr, "kv-client: %s\n", tc_last_error());
    return 1;
  }
  char *value = malloc((size_t) vsize + 1);
  memset(value, 'v', (size_t) vsize);
  value[vsize] = 0;
  const char *prefix = tc_kv_prefix(kv);
  if (!json)
    printf("KV %s, value %d bytes, %d keys per caller, %.1f s per row\n\n"
           "%-4s %8s %10s %10s %10s %10s %10s %7s\n", tc_kv_current_url(kv), vsize, nkeys, seconds,
           "op", "callers", "ops", "ops/s", "avg us", "p50 us", "p99 us", "errors");
  else
    printf("[");
  int first = 1;
  for (int op = 0; op < 2; op++)
    for (int t = 0; t < nthreads; t++) {
      int n = threads[t] > 0 ? threads[t] : 1;
      struct worker *w = calloc((size_t) n, sizeof *w);
      for (int i = 0; i < n; i++) {
        w[i] = (struct worker) { .kv = kv, .id = i, .op = op, .nkeys = nkeys, .seconds = seconds,
                                 .prefix = prefix, .value = value };
        pthread_create(&w[i].th, NULL, run, &w[i]);
      }
      size_t total = 0;
      long errors = 0;
      for (int i = 0; i < n; i++) {
        pthread_join(w[i].th, NULL);
        total += w[i].n;
        errors += w[i].errors;
      }
      double *all = malloc((total ? total : 1) * sizeof *all), sum = 0;
      size_t k = 0;
      for (int i = 0; i < n; i++) {
        memcpy(all + k, w[i].lat, w[i].n * sizeof *all);
        k += w[i].n;
        free(w[i].lat);
      }
      free(w);
      qsort(all, total, sizeof *all, cmp_d);
      for (size_t i = 0; i < total; i++)
        sum += all[i];
      double p50 = total ? all[total / 2] : 0, p99 = total ? all[total * 99 / 100] : 0;
      double avg = total ? sum / (double) total : 0;
      const char *name = op == 0 ? "put" : "get";
      if (json)
        printf("%s\n {\"op\": \"%s\", \"callers\": %d, \"ops\": %zu, \"ops_per_s\": %.0f, \"avg_us\": %.0f, "
               "\"p50_us\": %.0f, \"p99_us\": %.0f, \"errors\": %ld}", first ? "" : ",", name, n, total,
               (double) total / seconds, avg, p50, p99, errors);
      else
        printf("%-4s %8d %10zu %10.0f %10.0f %10.0f %10.0f %7ld\n", name, n, total, (double) total / seconds, avg,
               p50, p99, errors);
      fflush(stdout);
      first = 0;
      free(all);
    }
  if (json)
    printf("\n]\n");
  char bk[256];
  snprintf(bk, sizeof bk, "%s/bench/", prefix);
  tc_kv_delete(kv, bk, 0, true, NULL);
  free(value);
  tc_kv_free(kv);
  tc_config_free(cfg);
  return 0;
}
