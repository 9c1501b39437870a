/* tromcho-gateway: the control plane. Serves the etcd v3 JSON API from its
 * embedded store (or as a filtering proxy to etcd) and runs the monitor. */
#include <config.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "admin_api.h"
#include "http.h"
#include "kvstore.h"
#include "lease.h"
#include "monitor.h"
#include "proxy.h"
#include "crypto.h"
#include "error.h"
#include "log.h"
#include "tc_config.h"

struct bootstrap {
  char key[400];
  bool written;
};

static int
bootstrap_fn(struct kvs_txn *tx, void *arg, struct kv_err *err)
{
  struct bootstrap *b = arg;
  struct kv_rec cur;
  int had = kvs_get(tx, (const uint8_t *) b->key, strlen(b->key), &cur, err);
  if (had != 0)
    return had < 0 ? -1 : 0;
  static const char val[] = "{\"type\":\"admin\"}";
  if (kvs_put(tx, (const uint8_t *) b->key, strlen(b->key), (const uint8_t *) val, sizeof val - 1, 0, err) < 0)
    return -1;
  b->written = true;
  return 0;
}

/* gateway_bootstrap_admin: the first administrator, written straight into
 * the embedded store before the API opens; an existing record is kept. */
static int
bootstrap_admin(struct tc_config *cfg, struct kvs *s)
{
  const char *name = tc_config_str(cfg, "gateway_bootstrap_admin");
  if (!name)
    return 0;
  struct bootstrap b = { "", false };
  if (!*name || strchr(name, '/') ||
      (size_t) snprintf(b.key, sizeof b.key, "%s/config/user/%s", tc_config_str(cfg, "etcd_prefix"), name) >=
      sizeof b.key)
    return tc_error(EINVAL, "option gateway_bootstrap_admin: '%s' is not a user name", name);
  struct kv_err err;
  if (kvs_write(s, bootstrap_fn, NULL, &b, &err) < 0)
    return tc_error(EIO, "option gateway_bootstrap_admin: writing %s: %s", b.key, err.msg);
  if (b.written)
    tc_info("%s = {\"type\":\"admin\"}: user %s is the first administrator", b.key, name);
  return 0;
}

/* The same through the proxy: created in etcd if absent. */
static int
bootstrap_admin_proxy(struct tc_config *cfg, struct kvproxy *px)
{
  const char *name = tc_config_str(cfg, "gateway_bootstrap_admin");
  if (!name)
    return 0;
  char key[400];
  if (!*name || strchr(name, '/') ||
      (size_t) snprintf(key, sizeof key, "%s/config/user/%s", tc_config_str(cfg, "etcd_prefix"), name) >= sizeof key)
    return tc_error(EINVAL, "option gateway_bootstrap_admin: '%s' is not a user name", name);
  int w = kvproxy_bootstrap_admin(px, key);
  if (w < 0)
    return tc_error(EIO, "option gateway_bootstrap_admin: writing %s to etcd: %s", key, tc_last_error());
  if (w)
    tc_info("%s = {\"type\":\"admin\"}: user %s is the first administrator", key, name);
  return 0;
}

static void
usage(FILE *f)
{
  fprintf(f, "Usage: tromcho-gateway [--config PATH] [--OPTION VALUE]...\n\n"
          "Serves the etcd v3 JSON API (/v3/kv/*, /v3/watch, /v3/lease/*, /health,\n"
          "/version) on gateway_address from an embedded store in gateway_data, and\n"
          "runs the monitor. Stops cleanly on SIGTERM or SIGINT.\n\n"
          "Options of the gateway:\n"
          "  --gateway_address HOST:PORT    where the KV API listens (default 127.0.0.1:2379)\n"
          "  --gateway_data DIR             folder of the store (default /var/lib/tromcho/gateway)\n"
          "  --gateway_store_size SIZE      largest size the store may reach (default 64G)\n"
          "  --gateway_max_request_bytes N  largest put or txn body (default 16M; others 64 KiB)\n"
          "  --gateway_threads N            worker threads of the KV API (default 8)\n"
          "  --gateway_max_connections N    KV API connections at most (default 4096)\n"
          "  --gateway_max_connections_per_addr N  from one address (default 256)\n"
          "  --gateway_idle_timeout S       handshake, headers, idle between requests (default 60)\n"
          "  --gateway_request_timeout S    a request from its headers to its reply (default 60)\n"
          "  --gateway_max_body_memory SIZE  large bodies in memory together (default 256M)\n"
          "  --gateway_max_txn_ops N        most operations per txn branch (default 128, as etcd)\n"
          "  --gateway_watch_progress_interval S  progress replies to quiet watches (default 600)\n"
          "  --gateway_meta_sync BOOL       two flushes per commit (default true; false: one)\n"
          "  --gateway_api_address HOST:PORT  where the admin HTTPS API listens (default 127.0.0.1:8379;\n"
          "                                 served when server_cert/server_pkey are set)\n"
          "  --gateway_bootstrap_admin NAME make NAME the first administrator if it has no record\n"
          "  --antietcd_cert, --antietcd_key  serve HTTPS; with use_perms client certificates\n"
          "                                 (client_ca, osd_ca, mon_ca) decide who may do what\n"
          "  --etcd_proxy JSON              {\"urls\": [...], \"cert\", \"key\", \"ca\"}: keep the data in etcd,\n"
          "                                 serve and filter the same API here (no gateway_data)\n"
          "  --use_antietcd BOOL            serve the KV here (default true); false: only the monitor\n"
          "                                 (and admin API) against etcd_address\n"
          "  --log_level LEVEL              error, warn, info or debug\n\n");
  tc_config_print_help(f);
}

/* The setup the options describe, refused with the option named when it
 * cannot run as asked. serve_kv: use_antietcd. */
static int
check_setup(struct tc_config *cfg, bool serve_kv)
{
  if (tc_config_given(cfg, "etcd_proxy")) {
    /* The seed's "Mon as an etcd proxy": the KV API here, the data in etcd. */
    if (!serve_kv)
      return tc_error(EINVAL, "option etcd_proxy is set but use_antietcd is false: the proxy is the KV API "
                      "this gateway serves (use_antietcd true)");
    static const char *const store_only[] = { "gateway_data", "gateway_store_size", "gateway_meta_sync", NULL };
    for (const char *const *o = store_only; *o; o++)
      if (tc_config_given(cfg, *o))
        return tc_error(EINVAL, "option %s is set but etcd_proxy keeps the data in etcd: there is no embedded "
                        "store", *o);
    return 0;
  }
  if (serve_kv)
    return 0;
  /* use_antietcd false: the KV is another gateway (or etcd); this one runs
   * the monitor and/or the admin API against it (the seed's "Mon with a
   * separate Antietcd proxy"). */
  if (!tc_config_given(cfg, "etcd_address"))
    return tc_error(EINVAL, "option use_antietcd is false: this gateway serves no KV, so it needs "
                    "etcd_address (the KV its monitor and admin API use)");
  if (!tc_config_bool(cfg, "gateway_monitor") && !tc_config_str(cfg, "server_cert"))
    return tc_error(EINVAL, "option use_antietcd is false and gateway_monitor is false (and no admin API, "
                    "server_cert): this gateway would have nothing to run");
  static const char *const kv_only[] = { "antietcd_cert", "antietcd_key", "gateway_address", "gateway_data",
                                         "gateway_store_size", "gateway_meta_sync", "gateway_bootstrap_admin", NULL };
  for (const char *const *o = kv_only; *o; o++)
    if (tc_config_given(cfg, *o))
      return tc_error(EINVAL, "option %s is set but use_antietcd is false: this gateway serves no KV", *o);
  return 0;
}

int
main(int argc, char **argv)
{
  tc_log_open("tromcho-gateway", 0);
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--version")) {
      printf("tromcho-gateway %s\n", PACKAGE_VERSION);
      return 0;
    }
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg) {
    fprintf(stderr, "tromcho-gateway: %s\n", tc_last_error());
    return 1;
  }
  if (argc > 1) {
    fprintf(stderr, "tromcho-gateway: unknown argument '%s' (see --help)\n", argv[1]);
    tc_config_free(cfg);
    return 1;
  }
  if (tc_log_configure(cfg, NULL) < 0) {
    fprintf(stderr, "tromcho-gateway: %s\n", tc_last_error());
    tc_config_free(cfg);
    return 1;
  }
  /* The admin API verifies certificates and its client speaks to OSDs. */
  if (tc_config_str(cfg, "server_cert") && tc_crypto_init() < 0) {
    fprintf(stderr, "tromcho-gateway: %s\n", tc_last_error());
    tc_config_free(cfg);
    return 1;
  }

  /* Threads inherit this mask: only main takes SIGTERM/SIGINT (sigwait). */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  int status = 1;
  struct leases *l = NULL;
  struct kv_server *srv = NULL;
  struct tc_monitor *mon = NULL;
  struct admin_api *api = NULL;
  struct kvs *s = NULL;
  struct kvproxy *px = NULL;
  bool meta_sync = tc_config_bool(cfg, "gateway_meta_sync");
  /* What to run (the seed's setups, DESIGN.md section 3); options that do
   * not apply to it are refused, never ignored. */
  bool serve_kv = tc_config_bool(cfg, "use_antietcd");
  if (check_setup(cfg, serve_kv) < 0)
    goto fail;
  if (serve_kv && tc_config_given(cfg, "etcd_proxy")) {
    struct kv_backend b = { NULL, NULL, NULL };
    if (!(px = kvproxy_new(cfg)) || bootstrap_admin_proxy(cfg, px) < 0)
      goto fail;
    b.px = px;
    if (!(srv = kv_server_start(cfg, &b)))
      goto fail;
    tc_info("KV API on %s://%s%s, a filtering proxy to etcd at %s", kv_server_https(srv) ? "https" : "http",
            kv_server_address(srv), tc_config_bool(cfg, "use_perms") ? " (use_perms: client certificates required)" : "",
            tc_kv_current_url(kvproxy_kv(px)));
  }
  else if (serve_kv) {
    if (!(s = kvs_open(tc_config_str(cfg, "gateway_data"), tc_config_int(cfg, "gateway_store_size"))))
      goto fail;
    struct kv_backend b = { NULL, NULL, NULL };
    if (kvs_set_meta_sync(s, meta_sync) < 0 || bootstrap_admin(cfg, s) < 0 || !(l = leases_start(s)))
      goto fail;
    b.s = s;
    b.l = l;
    if (!(srv = kv_server_start(cfg, &b)))
      goto fail;
    tc_info("KV API on %s://%s%s, store in %s at revision %lld", kv_server_https(srv) ? "https" : "http",
            kv_server_address(srv), tc_config_bool(cfg, "use_perms") ? " (use_perms: client certificates required)" : "",
            tc_config_str(cfg, "gateway_data"), (long long) kvs_revision(s));
  }
  else
    tc_info("use_antietcd false: no KV API here; the monitor%s reaches the KV at %s",
            tc_config_str(cfg, "server_cert") ? " and the admin API" : "", tc_config_list_get(cfg, "etcd_address", 0));
  /* The monitor reaches the KV through etcd_address: by default, this
   * gateway's own API. */
  if (srv && !tc_config_given(cfg, "etcd_address")) {
    const char *scheme = kv_server_https(srv) ? "https" : "http";
    char url[300];
    snprintf(url, sizeof url, "%s://%s", scheme, kv_server_address(srv));
    if (tc_config_set(cfg, "etcd_address", url) < 0)
      goto fail;
  }
  /* The embedded monitor reaches the KV as a monitor, never as a user:
   * with use_perms it needs mon_etcd_client_cert (chaining to mon_ca). */
  if (tc_config_bool(cfg, "gateway_monitor") && tc_config_bool(cfg, "use_perms")) {
    const char *mc = tc_config_str(cfg, "mon_etcd_client_cert"), *mk = tc_config_str(cfg, "mon_etcd_client_key");
    if (!mc || !mk) {
      tc_error(EINVAL, "use_perms with the embedded monitor (gateway_monitor) needs mon_etcd_client_cert "
               "and mon_etcd_client_key: the monitor reaches the KV as itself");
      goto fail;
    }
    if (tc_config_set(cfg, "etcd_client_cert", mc) < 0 || tc_config_set(cfg, "etcd_client_key", mk) < 0)
      goto fail;
  }
  if (tc_config_bool(cfg, "gateway_monitor") && !(mon = tc_monitor_start(cfg)))
    goto fail;
  if (admin_api_start(cfg, &api) < 0)
    goto fail;
  /* Wait for a signal; without meta_sync, flush what the commits left every second. */
  int sig;
  for (;;) {
    struct timespec second = { 1, 0 };
    sig = sigtimedwait(&set, NULL, &second);
    if (sig > 0)
      break;
    if (s && !meta_sync && kvs_sync(s) < 0)
      tc_warn("%s", tc_last_error());
  }
  tc_info("signal %d: stopping", sig);
  status = 0;
  goto stop;
fail:
  fprintf(stderr, "tromcho-gateway: %s\n", tc_last_error());
stop:
  admin_api_stop(api);
  if (mon)
    tc_monitor_stop(mon);
  kv_server_stop(srv);
  leases_stop(l);
  kvs_close(s);
  kvproxy_free(px);
  tc_config_free(cfg);
  return status;
}
