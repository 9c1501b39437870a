/* monitor-run: just the monitor (gateway/monitor.h) against a KV, until
 * SIGTERM or SIGINT; for tests before and besides tromcho-gateway.
 *   monitor-run [--etcd_address URL] [--etcd_mon_ttl S] [--log_level L] */
#include <config.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "monitor.h"

int
main(int argc, char **argv)
{
  tc_log_open("monitor-run", 0);
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg) {
    fprintf(stderr, "monitor-run: %s\n", tc_last_error());
    return 1;
  }
  if (argc > 1) {
    fprintf(stderr, "monitor-run: unknown argument '%s' (usage: monitor-run [--etcd_address URL] [--etcd_mon_ttl S])\n",
            argv[1]);
    tc_config_free(cfg);
    return 1;
  }
  if (tc_log_configure(cfg, NULL) < 0) {
    fprintf(stderr, "monitor-run: %s\n", tc_last_error());
    tc_config_free(cfg);
    return 1;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  /* Block before starting threads so only sigwait sees them. */
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  struct tc_monitor *m = tc_monitor_start(cfg);
  if (!m) {
    fprintf(stderr, "monitor-run: %s\n", tc_last_error());
    tc_config_free(cfg);
    return 1;
  }
  int sig;
  sigwait(&set, &sig);
  tc_info("monitor-run: signal %d, stopping", sig);
  tc_monitor_stop(m);
  tc_config_free(cfg);
  return 0;
}
