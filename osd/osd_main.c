/* tromcho-osd: one OSD daemon over one store (DESIGN.md section 4).
 *
 *   tromcho-osd [--config CONF] --osd_num N [--osd_data PATH] [options]
 *
 * Opens the store (the path osd-create recorded in /config/osd/<N>, or
 * --osd_data), listens on osd_network / bind_address, registers
 * /osd/state/<N> with a lease, watches the KV, and serves the OSD protocol
 * until SIGTERM or SIGINT. */
#include <config.h>
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include <json-c/json.h>
#include "tune.h"
#include "crypto.h"
#include "error.h"
#include "log.h"
#include "osd.h"

static void
usage(FILE *f)
{
  fprintf(f,
          "Usage: tromcho-osd [--config CONF] --osd_num N [--osd_data PATH] [--osd_meta PATH]\n"
          "                   [--osd_port P] [--bind_address A | --osd_network CIDR] [options]\n"
          "Runs OSD N over the store osd-create made (its path is read from the KV's\n"
          "/config/osd/<N> unless --osd_data is given). Stops cleanly on SIGTERM.\n"
          "Options (all programs' options are accepted; these matter here):\n"
          "  osd_num, osd_data, osd_meta, osd_port, bind_address, osd_network, etcd_address,\n"
          "  etcd_prefix, etcd_keepalive_timeout, use_perms, osd_cert, osd_pkey, osd_ca,\n"
          "  client_ca, mon_ca, proto_checksums, force_proto_checksums, log_level\n");
}

/* The first local IPv4 address inside one of the osd_network CIDRs. */
static int
pick_address(const struct tc_config *cfg, char *out, size_t outlen)
{
  int n = tc_config_list_len(cfg, "osd_network");
  if (n <= 0) {
    snprintf(out, outlen, "%s", tc_config_str(cfg, "bind_address"));
    return 0;
  }
  struct ifaddrs *ifs;
  if (getifaddrs(&ifs) < 0)
    return tc_error(errno, "osd_network: listing interfaces: %m");
  int found = 0;
  for (int i = 0; i < n && !found; i++) {
    char net[64];
    snprintf(net, sizeof net, "%s", tc_config_list_get(cfg, "osd_network", i));
    char *slash = strchr(net, '/');
    int bits = slash ? atoi(slash + 1) : 32;
    if (slash)
      *slash = 0;
    struct in_addr a;
    if (inet_pton(AF_INET, net, &a) != 1 || bits < 0 || bits > 32) {
      freeifaddrs(ifs);
      return tc_error(EINVAL, "option osd_network: '%s' is not an IPv4 CIDR like 10.0.0.0/24",
                      tc_config_list_get(cfg, "osd_network", i));
    }
    uint32_t mask = bits ? htonl(~0u << (32 - bits)) : 0;
    for (struct ifaddrs *p = ifs; p; p = p->ifa_next) {
      if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET)
        continue;
      struct in_addr x = ((struct sockaddr_in *) p->ifa_addr)->sin_addr;
      if ((x.s_addr & mask) == (a.s_addr & mask)) {
        inet_ntop(AF_INET, &x, out, (socklen_t) outlen);
        found = 1;
        break;
      }
    }
  }
  freeifaddrs(ifs);
  if (!found)
    return tc_error(EADDRNOTAVAIL, "option osd_network: no local address in any of the given networks");
  return 0;
}

/* Wait until the KV answers: a daemon started before its KV (or while it
 * is down) keeps trying and says so every 10 s, naming the address and the
 * cause, instead of exiting. Other errors (refused certificate, ...) end
 * it. SIGTERM still stops it: signals are not blocked yet. */
static int
wait_for_kv(struct osd *o)
{
  for (int n = 0;; n++) {
    struct tc_kv_result res;
    struct tc_kv_request req = { .type = TC_KV_REQ_OP,
                                 .op = { .type = TC_KV_RANGE, .key = o->prefix, .prefix = true, .count_only = true } };
    if (tc_kv_request(o->kv, &req, &res) == 0) {
      tc_kv_result_free(&res);
      if (n)
        tc_info("osd %" PRIu64 ": the KV at %s answers", o->osd_num, tc_kv_current_url(o->kv));
      return 0;
    }
    if (errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EHOSTUNREACH && errno != EAGAIN)
      return -1;
    if (n % 10 == 0)
      tc_warn("osd %" PRIu64 ": cannot reach the KV: %s; retrying", o->osd_num, tc_last_error());
    sleep(1);
  }
}

/* The data (and meta) path of OSD n as osd-create recorded it. */
static int
data_path_from_kv(struct osd *o, char **data, char **meta)
{
  char key[128];
  snprintf(key, sizeof key, "%s/config/osd/%" PRIu64, o->prefix, o->osd_num);
  struct tc_kv_result res;
  memset(&res, 0, sizeof res);
  if (tc_kv_get(o->kv, key, 0, &res) < 0)
    return tc_error(errno, "reading %s from the KV: %s", key, tc_last_error());
  if (!res.n_kvs) {
    tc_kv_result_free(&res);
    return tc_error(ENOENT, "osd %" PRIu64 " has no data path: %s does not exist (run `tromcho osd-create` "
                    "or give --osd_data PATH)", o->osd_num, key);
  }
  json_object *j = json_tokener_parse((const char *) res.kvs[0].value), *f;
  tc_kv_result_free(&res);
  if (!j || !json_object_object_get_ex(j, "data", &f) || !json_object_is_type(f, json_type_string)) {
    json_object_put(j);
    return tc_error(EINVAL, "%s: not a JSON object with a \"data\" path", key);
  }
  *data = strdup(json_object_get_string(f));
  if (json_object_object_get_ex(j, "meta", &f) && json_object_is_type(f, json_type_string))
    *meta = strdup(json_object_get_string(f));
  json_object_put(j);
  return *data ? 0 : tc_error(ENOMEM, "out of memory");
}

static void
on_signal(struct tc_evloop *loop, int fd, uint32_t ev, void *arg)
{
  struct signalfd_siginfo si;
  if (read(fd, &si, sizeof si) > 0) {
    tc_info("osd: signal %u: stopping", si.ssi_signo);
    tc_evloop_stop(loop);
  }
}

static void
on_tick(struct tc_evloop *loop, void *arg)
{
  struct osd *o = arg;
  o->tick = NULL;
  if (o->stopping)
    return;
  osd_lease_beat(o);
  osd_lease_tick(o);
  ++o->ticks;
  osd_peers_probe(o);
  if (o->ticks % 5 == 0)
    osd_peering_retry(o);
  if (!o->lease_fenced) {   /* a primary that may be deposed pushes and repairs nothing */
    osd_recovery_kick(o);
    osd_scrub_tick(o);
  }
  osd_stats_tick(o);
  o->tick = tc_evloop_timer_add(loop, 1000, on_tick, o);
  if (!o->tick)
    tc_err("osd %" PRIu64 ": cannot schedule the next tick: %s", o->osd_num, tc_last_error());
}

/* The messenger's per-operation frame limit: the protocol's maximum. */
static uint32_t
request_limit(const struct tc_frame_hdr *h, void *arg)
{
  const struct osd *o = arg;
  return osd_request_max_payload(h->opcode, o->info.block_size);
}

/* A client's WRITE sealed under its own key is kept sealed: its
 * SEC_WRITEs pass the bytes on as they came (msgr.h, "Own keys"). */
static int
keep_sealed(const struct tc_frame_hdr *h, void *arg)
{
  (void) arg;
  return h->opcode == TC_OP_WRITE;
}

int
main(int argc, char **argv)
{
  tc_tune_malloc();
  if (tc_crypto_init() < 0) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    return 1;
  }
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      tc_config_print_help(stdout);
      tc_config_free(cfg);
      return 0;
    }
    fprintf(stderr, "tromcho-osd: unknown argument '%s'\n", argv[i]);
    usage(stderr);
    tc_config_free(cfg);
    return 1;
  }
  if (tc_log_configure(cfg, "tromcho-osd") < 0) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    tc_config_free(cfg);
    return 1;
  }

  struct osd *o = calloc(1, sizeof *o);
  int rc = 1;
  char *meta = NULL;
  int sfd = -1;
  if (!o) {
    fprintf(stderr, "tromcho-osd: out of memory\n");
    tc_config_free(cfg);
    return 1;
  }
  o->cfg = cfg;
  o->events = (struct osd_events) {
    .kv_changed = osd_peering_kv_changed,
    .peer_changed = osd_peering_peer_changed,
    .pg_idle = osd_peering_pg_idle,
  };
  o->prefix = tc_config_str(cfg, "etcd_prefix");
  o->use_perms = tc_config_bool(cfg, "use_perms");
  /* A test hook, not an option: behave as an OSD built before FUA (ignore
   * the flag), so the tests reach the senders' fall-backs (osd_proto.h). */
  const char *ignore_fua = getenv("TROMCHO_OSD_IGNORE_FUA");
  o->ignore_fua = ignore_fua && *ignore_fua && strcmp(ignore_fua, "0") != 0;
  if (o->ignore_fua)
    tc_warn("TROMCHO_OSD_IGNORE_FUA: FUA writes are served as plain ones (a test hook)");
  /* A test hook too: a pause between peering's lock and list steps
   * (tests/test-osd-balance-move.sh writes through a deposed primary in it). */
  const char *pause = getenv("TROMCHO_OSD_PEERING_PAUSE_MS");
  if (pause && *pause) {
    char *end;
    unsigned long long ms = strtoull(pause, &end, 10);
    if (*end || ms > 60000) {
      fprintf(stderr, "tromcho-osd: TROMCHO_OSD_PEERING_PAUSE_MS: '%s' is not 0..60000 (ms)\n", pause);
      goto out;
    }
    o->peering_pause_ms = ms;
    if (ms)
      tc_warn("TROMCHO_OSD_PEERING_PAUSE_MS: peering holds each PG %llu ms between lock and list (a test hook)", ms);
  }
  int64_t settle = tc_config_int(cfg, "osd_kv_settle");
  if (settle < 0 || settle > 60000) {
    fprintf(stderr, "tromcho-osd: option osd_kv_settle: %" PRId64 " ms is out of range (0..60000)\n", settle);
    goto out;
  }
  o->kv_settle_ms = (uint64_t) settle;
  int64_t poll;
  if (tc_config_int_in(cfg, "idle_poll_us", 0, TC_IDLE_POLL_US_MAX, &poll) < 0) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    goto out;
  }
  /* Before any thread starts: the store's and the KV client's threads
   * inherit the policy (tune.h). */
  if (tc_config_bool(cfg, "sched_batch") && tc_tune_sched_batch() < 0)
    tc_warn("tromcho-osd: %s", tc_last_error());
  if (!tc_config_given(cfg, "osd_num") || tc_config_int(cfg, "osd_num") <= 0) {
    fprintf(stderr, "tromcho-osd: --osd_num N (a positive number) is required\n");
    goto out;
  }
  o->osd_num = (uint64_t) tc_config_int(cfg, "osd_num");
  /* The OSD reaches the KV as an OSD: etcd_client_cert if given, else its
   * own osd_cert, never a user's cert (a shared config may name one). */
  if (!tc_config_str(cfg, "etcd_client_cert") && tc_config_str(cfg, "osd_cert") && tc_config_str(cfg, "osd_pkey") &&
      (tc_config_set(cfg, "etcd_client_cert", tc_config_str(cfg, "osd_cert")) < 0 ||
       tc_config_set(cfg, "etcd_client_key", tc_config_str(cfg, "osd_pkey")) < 0)) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    goto out;
  }
  if (!(o->kv = tc_kv_new_from_config(cfg))) {
    fprintf(stderr, "tromcho-osd: KV client: %s\n", tc_last_error());
    goto out;
  }
  if (wait_for_kv(o) < 0) {
    fprintf(stderr, "tromcho-osd: osd %" PRIu64 ": %s\n", o->osd_num, tc_last_error());
    goto out;
  }
  if (tc_config_str(cfg, "osd_data")) {
    o->data_path = strdup(tc_config_str(cfg, "osd_data"));
    if (tc_config_str(cfg, "osd_meta"))
      meta = strdup(tc_config_str(cfg, "osd_meta"));
  }
  else if (data_path_from_kv(o, &o->data_path, &meta) < 0) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    goto out;
  }
  if (!o->data_path) {
    fprintf(stderr, "tromcho-osd: out of memory\n");
    goto out;
  }
  if (tc_store_open(&o->store, o->data_path, meta) < 0) {
    fprintf(stderr, "tromcho-osd: osd %" PRIu64 ": %s\n", o->osd_num, tc_last_error());
    goto out;
  }
  tc_store_get_info(o->store, &o->info);
  if (o->info.osd_num != o->osd_num) {
    fprintf(stderr, "tromcho-osd: %s belongs to osd %" PRIu64 ", not osd %" PRIu64 "\n", o->data_path,
            o->info.osd_num, o->osd_num);
    goto out;
  }
  if (o->info.block_size > TC_OSD_MAX_OP_BYTES) {
    fprintf(stderr, "tromcho-osd: %s: block size %" PRIu32 " is over the protocol's %u\n", o->data_path,
            o->info.block_size, TC_OSD_MAX_OP_BYTES);
    goto out;
  }
  if (pick_address(cfg, o->addr, sizeof o->addr) < 0) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    goto out;
  }
  if (!(o->loop = tc_evloop_new()) || !(o->msgr = tc_msgr_new_from_config(o->loop, cfg, TC_MSGR_AS_OSD))) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    goto out;
  }
  tc_evloop_set_poll_us(o->loop, (unsigned) poll);
  tc_msgr_set_callbacks(o->msgr, osd_on_request, osd_on_conn, o);
  tc_msgr_set_request_limit(o->msgr, request_limit, o);
  tc_msgr_set_keep_sealed(o->msgr, keep_sealed, o);
  /* A peer that leaves our SEC_* requests unanswered for three leases
   * (hung but registered, or cut off from us alone) is marked down, so
   * writes go on without it; as long as a stuck store sync may keep it
   * registered (osd_lease_beat). */
  int64_t ttl = tc_config_int(cfg, "etcd_keepalive_timeout");
  if (ttl > 0 && ttl <= 3600 && tc_msgr_set_call_timeout(o->msgr, (int) (3 * ttl * 1000)) < 0) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    goto out;
  }
  /* With use_perms every peer proves who it is: anonymous ones are refused
   * at the handshake, before they can hold a byte of the OSD's memory. */
  if (o->use_perms)
    tc_msgr_set_allowed_roles(o->msgr, TC_ROLES_ALL & ~TC_ROLE_BIT(TC_ROLE_ANON));
  if (tc_msgr_listen(o->msgr, o->addr, (int) tc_config_int(cfg, "osd_port")) < 0) {
    fprintf(stderr, "tromcho-osd: listening on %s: %s\n", o->addr, tc_last_error());
    goto out;
  }
  o->port = tc_msgr_listen_port(o->msgr);
  sigset_t ss;
  sigemptyset(&ss);
  sigaddset(&ss, SIGTERM);
  sigaddset(&ss, SIGINT);
  sigprocmask(SIG_BLOCK, &ss, NULL);
  signal(SIGPIPE, SIG_IGN);
  sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0 || tc_evloop_add_fd(o->loop, sfd, EPOLLIN, on_signal, o) < 0) {
    fprintf(stderr, "tromcho-osd: signalfd: %s\n", strerror(errno));
    goto out;
  }
  if (osd_sync_start(o) < 0 || osd_metrics_start(o) < 0) {
    fprintf(stderr, "tromcho-osd: osd %" PRIu64 ": %s\n", o->osd_num, tc_last_error());
    goto out;
  }
  if (osd_kv_start(o) < 0) {
    fprintf(stderr, "tromcho-osd: osd %" PRIu64 ": %s\n", o->osd_num, tc_last_error());
    goto out;
  }
  tc_info("osd %" PRIu64 ": serving %s (block size %" PRIu32 ") on %s:%d%s", o->osd_num, o->data_path,
          o->info.block_size, o->addr, o->port, o->use_perms ? " with use_perms" : "");
  printf("osd %" PRIu64 " listening on %s:%d\n", o->osd_num, o->addr, o->port);
  fflush(stdout);
  if (!(o->tick = tc_evloop_timer_add(o->loop, 1000, on_tick, o))) {
    fprintf(stderr, "tromcho-osd: %s\n", tc_last_error());
    goto out;
  }
  if (tc_evloop_run(o->loop) < 0)
    tc_err("osd %" PRIu64 ": event loop: %s", o->osd_num, tc_last_error());
  else
    rc = 0;
out:
  __atomic_store_n(&o->stopping, 1, __ATOMIC_RELEASE);
  if (o->store)
    osd_local_drain(o);   /* nothing queued should be left; never after the store closed */
  osd_sync_stop(o);   /* answers the syncs in flight while their connections still exist */
  if (o->kv)
    osd_kv_stop(o);
  if (o->tick)
    tc_evloop_timer_cancel(o->loop, o->tick);
  osd_peers_close(o);
  if (o->msgr)
    tc_msgr_free(o->msgr);
  osd_pg_drop_all(o);
  osd_locks_free(o);
  if (o->store && tc_store_close(o->store) < 0) {
    tc_err("osd %" PRIu64 ": closing the store: %s", o->osd_num, tc_last_error());
    rc = 1;
  }
  /* The KV client first: its thread ends, so no answer (a stats txn)
   * reaches the loop once it is freed. */
  if (o->kv)
    tc_kv_free(o->kv);
  o->kv = NULL;
  osd_metrics_stop(o);
  osd_stats_stop(o);   /* after tc_kv_free: no answer can come any more */
  if (sfd >= 0) {
    tc_evloop_del_fd(o->loop, sfd);
    close(sfd);
  }
  if (o->loop)
    tc_evloop_free(o->loop);
  osd_kvstate_free(o->ks);
  free(o->peers);
  free(o->data_path);
  free(meta);
  free(o);
  tc_config_free(cfg);
  if (rc == 0)
    tc_info("osd: stopped");
  return rc;
}
