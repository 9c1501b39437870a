/* Watches waiting for the store without holding a worker thread: the
 * content reader suspends its connection (MHD_suspend_connection) and one
 * thread resumes it when the store passes the revision the watch waits for,
 * when its client hung up, or at its progress deadline. */
#ifndef TROMCHO_WATCH_PARK_H
#define TROMCHO_WATCH_PARK_H
#include <stdbool.h>
#include <stdint.h>
#include <microhttpd.h>
#include "kvstore.h"

struct watch_park;

/* One parked watch; lives in the watch stream, linked while parked. */
struct park_entry {
  struct park_entry *prev, *next;
  struct MHD_Connection *conn;
  int fd;                 /* the client's socket, peeked for a hang-up */
  int64_t rev;            /* resume once the store reaches it */
  int64_t wake_ms;        /* or at this monotonic time (0: never) */
  bool parked;
  bool wake_pending;      /* woken while not parked: do not park next time */
};

/* s NULL (proxy mode): no store to follow; streams are woken one by one
 * with watch_park_wake. */
struct watch_park *watch_park_start(struct kvs *s);
/* Resume e now if parked, else make its next suspend return at once. Any
 * thread (the KV client's loop, for the proxy's watches). */
void watch_park_wake(struct watch_park *p, struct park_entry *e);
/* From the content reader of e->conn, with nothing to send: suspend it.
 * false when the park is stopping (the reader ends the stream instead). */
bool watch_park_suspend(struct watch_park *p, struct park_entry *e);
/* A stream being freed: forget e if it is still parked. */
void watch_park_forget(struct watch_park *p, struct park_entry *e);
/* Resume every parked watch and refuse new ones (before MHD_stop_daemon). */
void watch_park_stop(struct watch_park *p);
void watch_park_free(struct watch_park *p);
/* Watches parked now (for /metrics). */
int watch_park_count(struct watch_park *p);
/* The watcher at fd hung up (a peek at its socket, never blocks). */
bool watch_peer_gone(int fd);

#endif
