/* The metrics registry (common/util/metrics.c): registration rules, the
 * Prometheus text it renders (checked line by line against the format:
 * HELP/TYPE once per family, cumulative buckets, _sum and _count), the
 * file writer and the HTTP endpoint (a real GET over loopback). */
#include <config.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "metrics.h"
#include "tap.h"

static int hook_calls;
static struct tc_gauge *hook_gauge;
static void hook(void *arg) { (void) arg; hook_calls++; tc_gauge_set(hook_gauge, 42); }

struct thr { struct tc_counter *c; struct tc_histogram *h; };
static void *
bump(void *arg)
{
  struct thr *t = arg;
  for (int i = 0; i < 100000; i++) {
    tc_counter_inc(t->c);
    tc_histogram_observe(t->h, 0.001);
  }
  return NULL;
}

/* GET path from 127.0.0.1:port; the whole answer (caller frees). */
static char *
http_get(int port, const char *path)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *) &a, sizeof a) < 0)
    return NULL;
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
  if (write(fd, req, (size_t) n) != n) {
    close(fd);
    return NULL;
  }
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  ssize_t r;
  while (buf && (r = read(fd, buf + len, cap - 1 - len)) > 0)
    len += (size_t) r;
  close(fd);
  if (buf)
    buf[len] = 0;
  return buf;
}

int
main(void)
{
  struct tc_metrics *m = tc_metrics_new();
  CHECK(m, "registry");
  struct tc_counter *rd = tc_metrics_counter(m, "tc_ops_total", "Operations by type", "op=\"read\"");
  struct tc_counter *wr = tc_metrics_counter(m, "tc_ops_total", "Operations by type", "op=\"write\"");
  CHECK(rd && wr && rd != wr, "two series of one family");
  CHECK(tc_metrics_counter(m, "tc_ops_total", "x", "op=\"read\"") == rd, "same series twice is the same");
  CHECK(!tc_metrics_gauge(m, "tc_ops_total", "x", NULL), "a name keeps its type");
  CHECK(!tc_metrics_counter(m, "9bad", "x", NULL) && !tc_metrics_counter(m, "bad-name", "x", NULL), "bad names refused");
  CHECK(!tc_metrics_counter(m, "tc_x", "x", "op=read") && !tc_metrics_counter(m, "tc_x", "x", "op=\"a\"b") &&
        !tc_metrics_counter(m, "tc_x", "x", "=\"a\""), "bad label sets refused");
  CHECK(tc_metrics_counter(m, "tc_lbl_total", "x", "a=\"1\",b=\"q\\\"x\""), "two labels, escaped quote");
  double b[] = { 1, 0.5 };
  CHECK(!tc_metrics_histogram(m, "tc_h", "x", NULL, b, 2), "decreasing bounds refused");
  char esc[32];
  CHECK(tc_metrics_label_escape("a\"b\\c\nd", esc, sizeof esc) == 0 && !strcmp(esc, "a\\\"b\\\\c\\nd"), "escape: %s", esc);
  CHECK(tc_metrics_label_escape("abcdef", esc, 4) < 0, "escape too long refused");

  tc_counter_add(rd, 5);
  tc_counter_inc(wr);
  tc_counter_add(NULL, 3);   /* ignored */
  struct tc_gauge *g = tc_metrics_gauge(m, "tc_conns", "Open connections", NULL);
  tc_gauge_set(g, 7);
  tc_gauge_add(g, -2);
  CHECK(tc_gauge_get(g) == 5, "gauge add");
  double bb[] = { 0.001, 0.01, 0.1 };
  struct tc_histogram *h = tc_metrics_histogram(m, "tc_lat_seconds", "Latency", "op=\"read\"", bb, 3);
  CHECK(h, "histogram");
  tc_histogram_observe(h, 0.0005);
  tc_histogram_observe(h, 0.001);    /* le is inclusive */
  tc_histogram_observe(h, 0.05);
  tc_histogram_observe(h, 3);
  hook_gauge = tc_metrics_gauge(m, "tc_hooked", "Set by a render hook", NULL);
  CHECK(tc_metrics_on_render(m, hook, NULL) == 0, "hook");

  char *text;
  size_t len;
  CHECK(tc_metrics_render(m, &text, &len) == 0 && strlen(text) == len, "render");
  const char *want[] = {
    "# HELP tc_ops_total Operations by type\n# TYPE tc_ops_total counter\n"
    "tc_ops_total{op=\"read\"} 5\ntc_ops_total{op=\"write\"} 1\n",
    "# TYPE tc_conns gauge\ntc_conns 5\n",
    "tc_lat_seconds_bucket{op=\"read\",le=\"0.001\"} 2\n"
    "tc_lat_seconds_bucket{op=\"read\",le=\"0.01\"} 2\n"
    "tc_lat_seconds_bucket{op=\"read\",le=\"0.10000000000000001\"} 3\n"
    "tc_lat_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n",
    "tc_lat_seconds_count{op=\"read\"} 4\n",
    "# TYPE tc_lat_seconds histogram\n",
    "tc_hooked 42\n",
    "tc_lbl_total{a=\"1\",b=\"q\\\"x\"} 0\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    CHECK(strstr(text, want[i]), "rendered text holds:\n%s\n--- in:\n%s", want[i], text);
  CHECK(strstr(text, "tc_lat_seconds_sum{op=\"read\"} 3.05"), "sum");
  int ntype = 0;
  for (const char *p = text; (p = strstr(p, "# TYPE tc_ops_total ")); p++)
    ntype++;
  CHECK(ntype == 1 && hook_calls == 1, "TYPE once per family, hook called once");
  free(text);

  /* Updates from threads while rendering: no count lost. */
  struct thr t = { tc_metrics_counter(m, "tc_thr_total", "x", NULL), tc_metrics_histogram(m, "tc_thr_seconds", "x", NULL, NULL, 0) };
  pthread_t th[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, bump, &t);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  CHECK(tc_counter_get(t.c) == 400000, "threads: %llu", (unsigned long long) tc_counter_get(t.c));

  char path[] = "/tmp/test-metrics-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "temp file");
  close(fd);
  CHECK(tc_metrics_write_file(m, path) == 0, "write file");
  FILE *f = fopen(path, "r");
  char line[256];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    found |= !strcmp(line, "tc_thr_seconds_count 400000\n");
  if (f)
    fclose(f);
  unlink(path);
  CHECK(found, "the file holds the histogram count");
  CHECK(tc_metrics_write_file(m, "/nonexistent-dir/x") < 0, "unwritable path is an error");

  CHECK(!tc_metrics_http_start(m, "not-an-address", 0), "bad address refused");
  struct tc_metrics_http *hs = tc_metrics_http_start(m, "127.0.0.1", 0);
  CHECK(hs && tc_metrics_http_port(hs) > 0, "http endpoint");
  if (hs) {
    char *ans = http_get(tc_metrics_http_port(hs), "/metrics");
    CHECK(ans && strstr(ans, "200 OK") && strstr(ans, "text/plain; version=0.0.4") &&
          strstr(ans, "tc_ops_total{op=\"read\"} 5\n"), "GET /metrics: %s", ans ? ans : "(nothing)");
    free(ans);
    ans = http_get(tc_metrics_http_port(hs), "/other");
    CHECK(ans && strstr(ans, " 404 "), "GET /other is 404");
    free(ans);
    tc_metrics_http_stop(hs);
  }
  tc_metrics_free(m);
  return DONE();
}
