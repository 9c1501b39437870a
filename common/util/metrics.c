/* The metrics registry and its Prometheus text renderer (see metrics.h). */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "error.h"
#include "metrics.h"

enum kind { K_COUNTER, K_GAUGE, K_HISTOGRAM };

struct tc_counter { _Atomic uint64_t v; };
struct tc_gauge { _Atomic int64_t v; };
struct tc_histogram {
  size_t nb;
  const double *bounds;          /* the family's */
  _Atomic uint64_t *counts;      /* nb + 1 (the last: above every bound) */
  _Atomic double sum;
};

struct series {
  struct series *next;
  char *labels;                  /* "" for none */
  union {
    struct tc_counter c;
    struct tc_gauge g;
    struct tc_histogram h;
  } u;
};

struct family {
  struct family *next;
  char *name, *help;
  enum kind kind;
  double *bounds;                /* histograms */
  size_t nb;
  struct series *first, **tail;
};

#define MAX_HOOKS 8
struct tc_metrics {
  pthread_mutex_t lock;
  struct family *first, **tail;
  struct { void (*fn)(void *); void *arg; } hooks[MAX_HOOKS];
  size_t nhooks;
};

const double tc_metrics_latency_bounds[] = {
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10
};
const size_t tc_metrics_latency_nbounds = sizeof tc_metrics_latency_bounds / sizeof tc_metrics_latency_bounds[0];

struct tc_metrics *
tc_metrics_new(void)
{
  struct tc_metrics *m = calloc(1, sizeof *m);
  if (!m) {
    tc_error(ENOMEM, "metrics: out of memory");
    return NULL;
  }
  pthread_mutex_init(&m->lock, NULL);
  m->tail = &m->first;
  return m;
}

void
tc_metrics_free(struct tc_metrics *m)
{
  if (!m)
    return;
  while (m->first) {
    struct family *f = m->first;
    m->first = f->next;
    while (f->first) {
      struct series *s = f->first;
      f->first = s->next;
      if (f->kind == K_HISTOGRAM)
        free(s->u.h.counts);
      free(s->labels);
      free(s);
    }
    free(f->name);
    free(f->help);
    free(f->bounds);
    free(f);
  }
  pthread_mutex_destroy(&m->lock);
  free(m);
}

static bool
valid_name(const char *n)
{
  if (!n || !*n || (*n >= '0' && *n <= '9'))
    return false;
  for (; *n; n++)
    if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') || *n == '_' || *n == ':'))
      return false;
  return true;
}

/* labels: name="value"[,name="value"]... with escapes inside the quotes. */
static bool
valid_labels(const char *l)
{
  while (*l) {
    const char *start = l;
    while ((*l >= 'a' && *l <= 'z') || (*l >= 'A' && *l <= 'Z') || (*l >= '0' && *l <= '9') || *l == '_')
      l++;
    if (l == start || (*start >= '0' && *start <= '9') || *l++ != '=' || *l++ != '"')
      return false;
    while (*l && *l != '"') {
      if (*l == '\n')
        return false;
      if (*l == '\\' && !*++l)
        return false;
      l++;
    }
    if (*l++ != '"')
      return false;
    if (*l == ',')
      l++;
    else if (*l)
      return false;
  }
  return true;
}

static struct series *
series_get(struct tc_metrics *m, const char *name, const char *help, const char *labels, enum kind kind,
           const double *bounds, size_t nb)
{
  if (!labels)
    labels = "";
  if (!valid_name(name))
    return tc_error(EINVAL, "metrics: '%s' is not a valid metric name", name ? name : "(null)"), NULL;
  if (!valid_labels(labels))
    return tc_error(EINVAL, "metrics: %s: '%s' is not a valid label set", name, labels), NULL;
  if (kind == K_HISTOGRAM) {
    if (!bounds) {
      bounds = tc_metrics_latency_bounds;
      nb = tc_metrics_latency_nbounds;
    }
    for (size_t i = 0; i < nb; i++)
      if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1]))
        return tc_error(EINVAL, "metrics: %s: bucket bounds must be finite and increasing", name), NULL;
  }
  pthread_mutex_lock(&m->lock);
  struct family *f;
  for (f = m->first; f; f = f->next)
    if (!strcmp(f->name, name))
      break;
  if (f && (f->kind != kind || (kind == K_HISTOGRAM && (f->nb != nb || memcmp(f->bounds, bounds, nb * sizeof *bounds))))) {
    pthread_mutex_unlock(&m->lock);
    return tc_error(EINVAL, "metrics: %s is already registered with another type or other buckets", name), NULL;
  }
  if (!f) {
    if (!(f = calloc(1, sizeof *f)) || !(f->name = strdup(name)) || !(f->help = strdup(help ? help : "")) ||
        (kind == K_HISTOGRAM && !(f->bounds = malloc((nb ? nb : 1) * sizeof *bounds)))) {
      if (f) {
        free(f->name);
        free(f->help);
        free(f);
      }
      pthread_mutex_unlock(&m->lock);
      return tc_error(ENOMEM, "metrics: %s: out of memory", name), NULL;
    }
    f->kind = kind;
    if (kind == K_HISTOGRAM) {
      memcpy(f->bounds, bounds, nb * sizeof *bounds);
      f->nb = nb;
    }
    f->tail = &f->first;
    *m->tail = f;
    m->tail = &f->next;
  }
  struct series *s;
  for (s = f->first; s; s = s->next)
    if (!strcmp(s->labels, labels))
      break;
  if (!s) {
    if (!(s = calloc(1, sizeof *s)) || !(s->labels = strdup(labels)) ||
        (kind == K_HISTOGRAM && !(s->u.h.counts = calloc(f->nb + 1, sizeof *s->u.h.counts)))) {
      if (s)
        free(s->labels);
      free(s);
      pthread_mutex_unlock(&m->lock);
      return tc_error(ENOMEM, "metrics: %s: out of memory", name), NULL;
    }
    if (kind == K_HISTOGRAM) {
      s->u.h.nb = f->nb;
      s->u.h.bounds = f->bounds;
    }
    *f->tail = s;
    f->tail = &s->next;
  }
  pthread_mutex_unlock(&m->lock);
  return s;
}

struct tc_counter *
tc_metrics_counter(struct tc_metrics *m, const char *name, const char *help, const char *labels)
{
  struct series *s = series_get(m, name, help, labels, K_COUNTER, NULL, 0);
  return s ? &s->u.c : NULL;
}

struct tc_gauge *
tc_metrics_gauge(struct tc_metrics *m, const char *name, const char *help, const char *labels)
{
  struct series *s = series_get(m, name, help, labels, K_GAUGE, NULL, 0);
  return s ? &s->u.g : NULL;
}

struct tc_histogram *
tc_metrics_histogram(struct tc_metrics *m, const char *name, const char *help, const char *labels,
                     const double *bounds, size_t nb)
{
  struct series *s = series_get(m, name, help, labels, K_HISTOGRAM, bounds, nb);
  return s ? &s->u.h : NULL;
}

void
tc_counter_add(struct tc_counter *c, uint64_t n)
{
  if (c)
    atomic_fetch_add_explicit(&c->v, n, memory_order_relaxed);
}

uint64_t
tc_counter_get(const struct tc_counter *c)
{
  return c ? atomic_load_explicit(&c->v, memory_order_relaxed) : 0;
}

void
tc_gauge_set(struct tc_gauge *g, int64_t v)
{
  if (g)
    atomic_store_explicit(&g->v, v, memory_order_relaxed);
}

void
tc_gauge_add(struct tc_gauge *g, int64_t delta)
{
  if (g)
    atomic_fetch_add_explicit(&g->v, delta, memory_order_relaxed);
}

int64_t
tc_gauge_get(const struct tc_gauge *g)
{
  return g ? atomic_load_explicit(&g->v, memory_order_relaxed) : 0;
}

void
tc_histogram_observe(struct tc_histogram *h, double v)
{
  if (!h || isnan(v))
    return;
  size_t i = 0;
  while (i < h->nb && v > h->bounds[i])
    i++;
  atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
  double old = atomic_load_explicit(&h->sum, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&h->sum, &old, old + v, memory_order_relaxed, memory_order_relaxed))
    ;
}

double
tc_metrics_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int
tc_metrics_on_render(struct tc_metrics *m, void (*fn)(void *arg), void *arg)
{
  pthread_mutex_lock(&m->lock);
  if (m->nhooks == MAX_HOOKS) {
    pthread_mutex_unlock(&m->lock);
    return tc_error(ENOSPC, "metrics: more than %d render hooks", MAX_HOOKS);
  }
  m->hooks[m->nhooks].fn = fn;
  m->hooks[m->nhooks].arg = arg;
  m->nhooks++;
  pthread_mutex_unlock(&m->lock);
  return 0;
}

int
tc_metrics_label_escape(const char *value, char *buf, size_t len)
{
  size_t o = 0;
  for (; *value; value++) {
    const char *rep = *value == '\\' ? "\\\\" : *value == '"' ? "\\\"" : *value == '\n' ? "\\n" : NULL;
    size_t n = rep ? 2 : 1;
    if (o + n >= len)
      return -1;
    if (rep)
      memcpy(buf + o, rep, 2);
    else
      buf[o] = *value;
    o += n;
  }
  if (o >= len)
    return -1;
  buf[o] = 0;
  return 0;
}

/* HELP text escapes \ and newlines only. */
static void
put_help(FILE *f, const char *help)
{
  for (; *help; help++)
    if (*help == '\\')
      fputs("\\\\", f);
    else if (*help == '\n')
      fputs("\\n", f);
    else
      fputc(*help, f);
}

static void
put_series(FILE *f, const char *name, const char *suffix, const char *labels, const char *extra)
{
  bool any = *labels || extra;
  fprintf(f, "%s%s%s%s%s%s%s ", name, suffix, any ? "{" : "", labels, *labels && extra ? "," : "",
          extra ? extra : "", any ? "}" : "");
}

static void
render_family(FILE *f, const struct family *fam)
{
  static const char *const types[] = { "counter", "gauge", "histogram" };
  fprintf(f, "# HELP %s ", fam->name);
  put_help(f, fam->help);
  fprintf(f, "\n# TYPE %s %s\n", fam->name, types[fam->kind]);
  for (const struct series *s = fam->first; s; s = s->next) {
    switch (fam->kind) {
    case K_COUNTER:
      put_series(f, fam->name, "", s->labels, NULL);
      fprintf(f, "%llu\n", (unsigned long long) tc_counter_get(&s->u.c));
      break;
    case K_GAUGE:
      put_series(f, fam->name, "", s->labels, NULL);
      fprintf(f, "%lld\n", (long long) tc_gauge_get(&s->u.g));
      break;
    case K_HISTOGRAM: {
      /* Buckets are cumulative in the format; the count is the +Inf bucket. */
      uint64_t cum = 0;
      char le[48];
      for (size_t i = 0; i <= fam->nb; i++) {
        cum += atomic_load_explicit(&s->u.h.counts[i], memory_order_relaxed);
        if (i < fam->nb)
          snprintf(le, sizeof le, "le=\"%.17g\"", fam->bounds[i]);
        else
          snprintf(le, sizeof le, "le=\"+Inf\"");
        put_series(f, fam->name, "_bucket", s->labels, le);
        fprintf(f, "%llu\n", (unsigned long long) cum);
      }
      put_series(f, fam->name, "_sum", s->labels, NULL);
      fprintf(f, "%.17g\n", atomic_load_explicit(&s->u.h.sum, memory_order_relaxed));
      put_series(f, fam->name, "_count", s->labels, NULL);
      fprintf(f, "%llu\n", (unsigned long long) cum);
      break;
    }
    }
  }
}

int
tc_metrics_render(struct tc_metrics *m, char **out, size_t *len)
{
  /* Hooks run unlocked: they may register series. */
  pthread_mutex_lock(&m->lock);
  size_t nh = m->nhooks;
  pthread_mutex_unlock(&m->lock);
  for (size_t i = 0; i < nh; i++)
    m->hooks[i].fn(m->hooks[i].arg);
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f)
    return tc_error(ENOMEM, "metrics: rendering: out of memory");
  pthread_mutex_lock(&m->lock);
  for (const struct family *fam = m->first; fam; fam = fam->next)
    render_family(f, fam);
  pthread_mutex_unlock(&m->lock);
  if (fclose(f) != 0 || !buf) {
    free(buf);
    return tc_error(ENOMEM, "metrics: rendering: out of memory");
  }
  *out = buf;
  *len = n;
  return 0;
}

int
tc_metrics_write_file(struct tc_metrics *m, const char *path)
{
  char *text, tmp[4096];
  size_t len;
  if ((size_t) snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long) getpid()) >= sizeof tmp)
    return tc_error(ENAMETOOLONG, "metrics file %s: path too long", path);
  if (tc_metrics_render(m, &text, &len) < 0)
    return -1;
  FILE *f = fopen(tmp, "w");
  if (!f) {
    int e = errno;
    free(text);
    return tc_error(e, "metrics file %s: %s", tmp, strerror(e));
  }
  size_t w = fwrite(text, 1, len, f);
  free(text);
  int closed = fclose(f);
  if (w != len || closed != 0) {
    int e = errno ? errno : EIO;
    unlink(tmp);
    return tc_error(e, "metrics file %s: writing failed: %s", tmp, strerror(e));
  }
  if (rename(tmp, path) < 0) {
    int e = errno;
    unlink(tmp);
    return tc_error(e, "metrics file %s: rename: %s", path, strerror(e));
  }
  return 0;
}
