/* fake-osd: stands in for an OSD in the KV until tromcho-osd exists:
 * writes /osd/state/<id> = {"addr", "port", "host", "block_size"} with a lease of
 * etcd_keepalive_timeout seconds and keeps it alive until killed. SIGTERM
 * or SIGINT revoke the lease (the OSD goes down at once); kill -9 leaves it
 * to expire.
 *   fake-osd --id N [--host H] [--port P] [--etcd_address URL] [--etcd_keepalive_timeout S]
 *            [--block_size B] (the object size it says its store has; default 128k) */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"
#include "kv_client.h"
#include "log.h"

static void
lost(void *arg, int64_t lease)
{
  tc_err("fake-osd: lease %" PRIx64 " lost", (uint64_t) lease);
  kill(getpid(), SIGTERM);
}

int
main(int argc, char **argv)
{
  tc_log_open("fake-osd", 0);
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg) {
    fprintf(stderr, "fake-osd: %s\n", tc_last_error());
    return 1;
  }
  long id = 0, port = 0;
  const char *host = "localhost";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--id") && i + 1 < argc)
      id = strtol(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--host") && i + 1 < argc)
      host = argv[++i];
    else if (!strcmp(argv[i], "--port") && i + 1 < argc)
      port = strtol(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "fake-osd: unknown argument '%s' (usage: fake-osd --id N [--host H] [--port P])\n", argv[i]);
      return 1;
    }
  }
  if (id <= 0) {
    fprintf(stderr, "fake-osd: --id N (N > 0) is required\n");
    return 1;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  struct tc_kv *kv = tc_kv_new_from_config(cfg);
  int64_t ttl = tc_config_int(cfg, "etcd_keepalive_timeout"), lease;
  if (!kv || tc_kv_lease_grant(kv, ttl, &lease) < 0) {
    fprintf(stderr, "fake-osd: %s\n", tc_last_error());
    return 1;
  }
  char key[512], val[512];
  snprintf(key, sizeof key, "%s/osd/state/%ld", tc_config_str(cfg, "etcd_prefix"), id);
  /* "lease": the KV's access filter lets an OSD write its state only with
   * the lease the record names (as tromcho-osd does). */
  snprintf(val, sizeof val,
           "{\"addr\": \"127.0.0.1\", \"port\": %ld, \"host\": \"%s\", \"state\": [\"up\"], \"block_size\": %" PRId64
           ", \"lease\": %" PRId64 "}",
           port ? port : 30000 + id, host, tc_config_int(cfg, "block_size"), lease);
  if (tc_kv_put(kv, key, 0, val, 0, lease, NULL) < 0) {
    fprintf(stderr, "fake-osd: %s\n", tc_last_error());
    return 1;
  }
  struct tc_kv_lease_keeper *k = tc_kv_lease_keeper_start(kv, lease, ttl, 0, lost, NULL);
  if (!k) {
    fprintf(stderr, "fake-osd: %s\n", tc_last_error());
    return 1;
  }
  tc_info("osd %ld on host %s up (lease %" PRIx64 ", ttl %" PRId64 " s)", id, host, (uint64_t) lease, ttl);
  int sig;
  sigwait(&set, &sig);
  tc_kv_lease_keeper_stop(k);
  tc_kv_lease_revoke(kv, lease);
  tc_kv_free(kv);
  tc_config_free(cfg);
  return 0;
}
