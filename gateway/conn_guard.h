/* The KV API's connections, accepted by a thread of ours and handed to
 * libmicrohttpd's fixed worker pool (MHD_add_connection), so that we choose
 * who gets in and who goes (gateway/README.md, "Limits against hostile
 * peers"):
 *  - at most max_conns connections, max_per_addr from one source address;
 *  - at a cap, the connection that has not authenticated, has no request
 *    under way and has been silent longest (the kernel's TCP_INFO) is closed
 *    to make room; a connection that presented a valid certificate is never
 *    closed for room, so OSDs' and monitors' connections survive a flood;
 *    only when no connection can go is the new one closed;
 *  - a connection with no request under way (TLS handshake, headers, idle
 *    between requests) is closed after idle_timeout seconds whether or not
 *    bytes trickle in; a request (its body and handling) after
 *    request_timeout seconds; a streaming reply (a watch) has no deadline. */
#ifndef TROMCHO_CONN_GUARD_H
#define TROMCHO_CONN_GUARD_H
#include <stdbool.h>
#include <stdint.h>
#include <microhttpd.h>

struct conn_guard_limits {
  int max_conns, max_per_addr;
  int idle_timeout_s, request_timeout_s;
};

/* Counters since start (for /metrics). */
struct conn_guard_stats {
  uint64_t accepted, refused, evicted, idle_closed, request_closed;
  int open, authenticated;
};

struct conn_guard;
struct conn_slot;

/* NULL with tc_last_error() set. Raises RLIMIT_NOFILE for max_conns if it
 * may; fails naming the option if it cannot. */
struct conn_guard *conn_guard_new(const struct conn_guard_limits *lim);
/* Accept on listen_fd into d (started with MHD_USE_NO_LISTEN_SOCKET and
 * conn_guard_notify as its MHD_OPTION_NOTIFY_CONNECTION). -1 on error. */
int conn_guard_start(struct conn_guard *g, int listen_fd, struct MHD_Daemon *d);
/* Stop accepting (before MHD_stop_daemon); closes listen_fd. */
void conn_guard_stop(struct conn_guard *g);
void conn_guard_free(struct conn_guard *g);

/* MHD_OPTION_NOTIFY_CONNECTION callback; cls is the guard. */
void conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);

/* The slot of a connection (NULL if unknown), and its request phases. */
struct conn_slot *conn_guard_slot(struct MHD_Connection *conn);
void conn_guard_request_begin(struct conn_guard *g, struct conn_slot *s);
void conn_guard_authenticated(struct conn_guard *g, struct conn_slot *s);
void conn_guard_streaming(struct conn_guard *g, struct conn_slot *s);
void conn_guard_request_end(struct conn_guard *g, struct conn_slot *s);

void conn_guard_get_stats(struct conn_guard *g, struct conn_guard_stats *st);

#endif
