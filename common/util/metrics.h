/* Prometheus metrics shared by every daemon and front end: counters,
 * gauges and fixed-bucket histograms in one registry, rendered in the
 * Prometheus text exposition format 0.0.4 (served over HTTP by
 * metrics_http.c, or written to a file).
 *
 * Registration (tc_metrics_counter/gauge/histogram) takes the registry's
 * lock and may run at any time; updates (tc_counter_add, tc_gauge_set,
 * tc_histogram_observe) are lock-free atomics, safe from any thread, and
 * never fail. A series is one (family name, label set): registering the
 * same pair twice returns the same series, so call sites may look a series
 * up once and keep the pointer for the registry's lifetime.
 *
 * Names follow Prometheus: [a-zA-Z_:][a-zA-Z0-9_:]*; counters end in
 * _total by convention (not enforced). labels is the text between the
 * braces, already quoted, e.g. `op="read"` (NULL or "" for none); label
 * values are the caller's and must be escaped by it (tc_metrics_label_escape). */
#ifndef TROMCHO_METRICS_H
#define TROMCHO_METRICS_H
#include <stddef.h>
#include <stdint.h>

struct tc_metrics;
struct tc_counter;
struct tc_gauge;
struct tc_histogram;

/* NULL: out of memory (errno set, message in tc_last_error). */
struct tc_metrics *tc_metrics_new(void);
void tc_metrics_free(struct tc_metrics *m);

/* Find or create a series. NULL with an error when the name or labels are
 * malformed, the name is registered with another type (or, for a
 * histogram, other buckets), or memory runs out. */
struct tc_counter *tc_metrics_counter(struct tc_metrics *m, const char *name, const char *help, const char *labels);
struct tc_gauge *tc_metrics_gauge(struct tc_metrics *m, const char *name, const char *help, const char *labels);
/* bounds: nb upper bounds, strictly increasing, finite (the +Inf bucket is
 * implicit); copied. NULL bounds = tc_metrics_latency_bounds. */
struct tc_histogram *tc_metrics_histogram(struct tc_metrics *m, const char *name, const char *help,
                                          const char *labels, const double *bounds, size_t nb);

/* Latency buckets in seconds, 50 µs to 10 s (what an OSD operation, a
 * client request or an HTTP call takes). */
extern const double tc_metrics_latency_bounds[];
extern const size_t tc_metrics_latency_nbounds;

/* Updates: NULL is accepted and ignored (a series that failed to register
 * costs its metric, not the operation). */
void tc_counter_add(struct tc_counter *c, uint64_t n);
static inline void tc_counter_inc(struct tc_counter *c) { tc_counter_add(c, 1); }
uint64_t tc_counter_get(const struct tc_counter *c);
void tc_gauge_set(struct tc_gauge *g, int64_t v);
void tc_gauge_add(struct tc_gauge *g, int64_t delta);
int64_t tc_gauge_get(const struct tc_gauge *g);
void tc_histogram_observe(struct tc_histogram *h, double v);
/* Seconds since a CLOCK_MONOTONIC start (tc_metrics_now). */
double tc_metrics_now(void);
static inline void tc_histogram_since(struct tc_histogram *h, double start)
{ tc_histogram_observe(h, tc_metrics_now() - start); }

/* Called at each rendering, before the text is made (for gauges that are
 * cheaper to compute on demand). Runs on the rendering thread. */
int tc_metrics_on_render(struct tc_metrics *m, void (*fn)(void *arg), void *arg);

/* The whole registry as Prometheus text: *out (caller frees),
 * NUL-terminated, *len without the NUL. 0 or -1 (out of memory). */
int tc_metrics_render(struct tc_metrics *m, char **out, size_t *len);
/* Render to path atomically (a temporary file renamed over it), for front
 * ends scraped by node_exporter's textfile collector. 0 or -1. */
int tc_metrics_write_file(struct tc_metrics *m, const char *path);

/* A label value escaped for the text format (\\, \", \n) into buf; false
 * if it does not fit. */
int tc_metrics_label_escape(const char *value, char *buf, size_t len);

/* ---- the /metrics HTTP endpoint (metrics_http.c, libmicrohttpd) ---- */
struct tc_metrics_http;
/* Serve GET /metrics (and nothing else: 404) on address:port with its own
 * thread. address: a numeric IPv4 or IPv6 address (NULL: 127.0.0.1);
 * port 0: any free port (tc_metrics_http_port tells which). NULL with an
 * error naming the address when it cannot listen. */
struct tc_metrics_http *tc_metrics_http_start(struct tc_metrics *m, const char *address, int port);
int tc_metrics_http_port(const struct tc_metrics_http *h);
void tc_metrics_http_stop(struct tc_metrics_http *h);

#endif
