/* Every configuration option of every tromcho program. Names follow the
 * seed document (Vitastor) wherever the concept is the same. */
#include <config.h>
#include <stddef.h>
#include <string.h>
#include "tc_config.h"

const struct tc_opt_def tc_options[] = {
  /* general */
  { "log_level", TC_OPT_STRING, "info", "error, warn, info or debug" },
  { "etcd_prefix", TC_OPT_STRING, "/tromcho", "prefix of every key in the KV store" },
  /* control plane */
  { "etcd_address", TC_OPT_LIST, "http://127.0.0.1:2379", "KV endpoints (etcd or tromcho-gateway), http:// or https://" },
  { "etcd_ca", TC_OPT_STRING, NULL, "CA that the KV server's certificate must chain to" },
  { "etcd_client_cert", TC_OPT_STRING, NULL, "client certificate for the KV (default: cert or osd_cert)" },
  { "etcd_client_key", TC_OPT_STRING, NULL, "key of etcd_client_cert" },
  { "use_antietcd", TC_OPT_BOOL, "true", "tromcho-gateway: true: serve the KV API (embedded store); false: run only the monitor (and admin API) against etcd_address" },
  { "antietcd_cert", TC_OPT_STRING, NULL, "TLS certificate of the gateway's KV API" },
  { "antietcd_key", TC_OPT_STRING, NULL, "key of antietcd_cert" },
  { "etcd_proxy", TC_OPT_OBJECT, NULL, "run the gateway as a filtering proxy to etcd: {urls, cert, key, ca}" },
  { "mon_etcd_client_cert", TC_OPT_STRING, NULL, "certificate the monitor uses for the KV" },
  { "mon_etcd_client_key", TC_OPT_STRING, NULL, "key of mon_etcd_client_cert" },
  { "gateway_address", TC_OPT_STRING, "127.0.0.1:2379", "address:port the gateway's KV API listens on" },
  { "gateway_data", TC_OPT_STRING, "/var/lib/tromcho/gateway", "folder of the gateway's embedded store" },
  { "etcd_quick_timeout", TC_OPT_INT, "1000", "KV client: time to connect (TCP and TLS) to an endpoint, ms" },
  { "etcd_slow_timeout", TC_OPT_INT, "5000", "KV client: how long a server may stay silent in a request before the next endpoint is tried, ms" },
  { "etcd_mon_ttl", TC_OPT_INT, "5", "monitor: TTL of the /mon/master lease, s (a standby takes over after it)" },
  { "etcd_keepalive_timeout", TC_OPT_INT, "10", "TTL of an OSD's /osd/state lease, s" },
  { "gateway_bootstrap_admin", TC_OPT_STRING, NULL, "user NAME: at start, if the embedded store has no /config/user/NAME, write {\"type\":\"admin\"} there (the first administrator, without opening the KV to anyone)" },
  { "gateway_monitor", TC_OPT_BOOL, "true", "run the monitor inside the gateway (false: a KV service only)" },
  { "gateway_store_size", TC_OPT_INT, "64G", "largest size the gateway's embedded store may grow to (LMDB map size)" },
  { "gateway_max_request_bytes", TC_OPT_INT, "16M", "largest request body the gateway's KV API accepts (a put's or txn's; other requests take at most 64 KiB)" },
  { "gateway_max_body_memory", TC_OPT_INT, "256M", "request bodies over 64 KiB the gateway's KV API holds in memory at once, together (more get 429 until some finish)" },
  { "gateway_threads", TC_OPT_INT, "8", "worker threads serving the gateway's KV API connections (a fixed pool: no thread per connection)" },
  { "gateway_max_connections", TC_OPT_INT, "4096", "connections the gateway's KV API holds at most; at the cap, the unauthenticated idle connection silent longest is closed to make room (certificate-authenticated ones never), else the new one" },
  { "gateway_max_connections_per_addr", TC_OPT_INT, "256", "connections the gateway's KV API holds at most from one source address (the same choice at the cap)" },
  { "gateway_idle_timeout", TC_OPT_INT, "60", "seconds a KV API connection may go without a request under way (TLS handshake, headers, idle between requests), trickling bytes or not" },
  { "gateway_request_timeout", TC_OPT_INT, "60", "seconds a KV API request may take from its headers to its reply (receiving its body included; watch streams excepted)" },
  { "gateway_max_txn_ops", TC_OPT_INT, "128", "most compares or operations per txn branch (etcd's --max-txn-ops)" },
  { "gateway_watch_progress_interval", TC_OPT_INT, "600", "seconds between progress replies to a quiet watch with progress_notify (as etcd)" },
  { "gateway_meta_sync", TC_OPT_BOOL, "true", "flush the store twice per commit (false: once, the rest every second; a power loss may then undo the last second of writes, kill -9 loses nothing)" },
  { "server_cert", TC_OPT_STRING, NULL, "TLS certificate of the admin HTTPS API" },
  { "server_pkey", TC_OPT_STRING, NULL, "key of server_cert" },
  { "gateway_api_address", TC_OPT_STRING, "127.0.0.1:8379", "address:port the gateway's admin HTTPS API listens on (served when server_cert is set)" },
  { "api_url", TC_OPT_STRING, NULL, "CLI: send image commands to the gateway's admin API at this https:// URL instead of the KV" },
  { "api_ca", TC_OPT_STRING, NULL, "CLI: CA the admin API's server_cert must chain to (default: the system's)" },
  /* identities and rights */
  { "use_perms", TC_OPT_BOOL, "false", "enforce users' access rights" },
  { "cert", TC_OPT_STRING, NULL, "this client's certificate (CN = user name)" },
  { "pkey", TC_OPT_STRING, NULL, "key of cert" },
  { "osd_cert", TC_OPT_STRING, NULL, "OSD certificate" },
  { "osd_pkey", TC_OPT_STRING, NULL, "key of osd_cert" },
  { "osd_ca", TC_OPT_STRING, NULL, "CA of OSD certificates" },
  { "client_ca", TC_OPT_STRING, NULL, "CA of user certificates" },
  { "mon_ca", TC_OPT_STRING, NULL, "CA of monitor certificates" },
  /* data plane transport */
  { "proto_checksums", TC_OPT_STRING, "payload", "none, payload or gcm" },
  { "force_proto_checksums", TC_OPT_STRING, "", "refuse peers weaker than this mode (empty: allow any)" },
  { "osd_network", TC_OPT_LIST, NULL, "networks OSDs listen on (CIDR)" },
  { "bind_address", TC_OPT_STRING, "127.0.0.1", "address an OSD listens on" },
  { "msgr_max_inflight_ops", TC_OPT_INT, "256", "operations in flight per connection before senders wait" },
  { "msgr_max_inflight_bytes", TC_OPT_INT, "67108864", "bytes in flight per connection before senders wait" },
  { "handshake_timeout", TC_OPT_INT, "10", "seconds a handshake may take" },
  /* limits against hostile peers (a server's accepted connections, DESIGN.md section 5) */
  { "msgr_max_conns", TC_OPT_INT, "1024", "accepted connections at most (more are closed at once)" },
  { "msgr_max_conns_per_addr", TC_OPT_INT, "64", "accepted connections at most from one source address" },
  { "msgr_conn_budget", TC_OPT_INT, "16M", "request payload bytes one connection may hold (receiving or unanswered) before reading pauses" },
  { "msgr_process_budget", TC_OPT_INT, "256M", "request payload bytes all connections together may hold before reading pauses" },
  { "msgr_frame_timeout", TC_OPT_INT, "30", "seconds a half-received frame may stall before the connection is closed" },
  { "msgr_idle_timeout", TC_OPT_INT, "600", "seconds a client (non-OSD) connection with nothing in flight may stay silent before it is closed" },
  /* cluster client */
  { "rekey_rate", TC_OPT_INT, "0", "tromcho modify --rekey: at most this many MiB/s of the old layer copied (0: no limit), so the re-key leaves the cluster to its users" },
  { "client_op_timeout", TC_OPT_INT, "120", "cluster client: seconds an operation keeps retrying (OSD lost, PG moving) before it fails; a request an OSD leaves unanswered on a silent connection is retried after this or four etcd_keepalive_timeout, whichever is shorter" },
  { "client_retry_interval", TC_OPT_INT, "100", "cluster client: ms between retries of an operation that waits for an OSD or a new map" },
  { "idle_poll_us", TC_OPT_INT, "200", "tromcho-osd and the cluster client (nbdkit tromcho, tromcho-fuse, the CLI): microseconds an event loop, and a caller waiting alone for its I/O, keep looking for work (yielding the CPU to any thread that has some) before they sleep; on a VM the wake-up of a sleeping vCPU is most of a 4 KiB round trip. The longest window: each loop polls less while its idle periods last longer than this (a trickle of requests, where polling only burns CPU) and more again when they are shorter (0..10000; 0: sleep at once, for hosts where idle CPU matters more than latency)" },
  { "sched_batch", TC_OPT_BOOL, "true", "tromcho-osd and the cluster client (nbdkit tromcho, tromcho-fuse, the CLI): the threads that serve I/O (the OSD's, the client's I/O thread, the threads waiting for their I/O: nbdkit's and FUSE's workers) run under Linux's SCHED_BATCH policy: a thread woken with work does not preempt the thread running on that CPU but runs at its next wait or the next scheduler tick, so a loop finishes its batch of replies before the threads it woke take the CPU (through nbdkit on 2 vCPUs, 4 KiB at queue depth 32: 15-20% more reads and about 10% more writes a second; a flush after each write about 10% more). false: the default policy, for hosts where other busy programs share the CPUs and each wake-up must run at once" },
  { "client_max_dirty_bytes", TC_OPT_INT, "32M", "cluster client: the write window: bytes of writes in flight plus unsynced ones kept for replay after an OSD loss; a write waits for room, a background sync starts at half" },
  /* image encryption */
  { "vault_url", TC_OPT_STRING, NULL, "Vault/OpenBao base URL for vault:<ID> keys" },
  { "vault_ca", TC_OPT_STRING, NULL, "CA of the Vault server" },
  /* OSD store */
  { "osd_num", TC_OPT_INT, NULL, "this OSD's number (osd-create: allocated in the KV when absent)" },
  { "block_size", TC_OPT_INT, "131072", "object size of a new OSD store (power of two, 4k..256k), fixed at osd-create" },
  /* OSD daemon */
  { "osd_data", TC_OPT_STRING, NULL, "tromcho-osd: the store's data file or device (default: what osd-create recorded in /config/osd/<osd_num>)" },
  { "osd_meta", TC_OPT_STRING, NULL, "tromcho-osd: the store's metadata file (default: osd_data + .meta)" },
  { "osd_port", TC_OPT_INT, "0", "tromcho-osd: TCP port to listen on (0: any free port, published in /osd/state)" },
  { "osd_stats_interval", TC_OPT_INT, "5", "tromcho-osd: seconds between writes of /osd/stats/<n> and the changed /pg/state/<pool>/<pg> of the PGs it leads (one txn, with its registration lease)" },
  { "scrub_interval", TC_OPT_INT, "604800", "tromcho-osd: seconds between two scrubs of each PG it leads (first passes spread over the interval; 0: no scheduled scrub, tromcho scrub still works)" },
  { "scrub_rate", TC_OPT_INT, "8", "tromcho-osd: objects the scrub (scheduled or asked for by tromcho scrub) checks per second at most, so client I/O keeps most of the disk" },
  /* metrics (tromcho-osd(8), METRICS) */
  { "metrics_port", TC_OPT_INT, "0", "TCP port of the Prometheus /metrics endpoint of tromcho-osd, nbdkit tromcho and tromcho-fuse (0: none)" },
  { "metrics_address", TC_OPT_STRING, "127.0.0.1", "numeric address the /metrics endpoint listens on" },
  { "osd_kv_settle", TC_OPT_INT, "20", "tromcho-osd: ms a burst of KV watch events settles before the OSD reloads users, images and the map (a request for an image it does not know yet reloads at once)" },
  { NULL, 0, NULL, NULL }
};

const struct tc_opt_def *
tc_option_find(const char *name)
{
  for (const struct tc_opt_def *o = tc_options; o->name; o++)
    if (strcmp(o->name, name) == 0)
      return o;
  return NULL;
}

const char *
tc_opt_type_name(enum tc_opt_type type)
{
  switch (type) {
  case TC_OPT_STRING: return "string";
  case TC_OPT_INT: return "integer";
  case TC_OPT_BOOL: return "boolean";
  case TC_OPT_LIST: return "list of strings";
  case TC_OPT_OBJECT: return "object";
  }
  return "?";
}
