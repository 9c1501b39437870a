/* One /v3/watch stream: the created reply, then the events of the watched
 * range from start_revision on, read from the store's history (so a replay
 * and live events are one path: nothing lost, nothing twice), as
 * newline-delimited {"result": ...} objects like etcd's grpc-gateway. */
#ifndef TROMCHO_WATCH_H
#define TROMCHO_WATCH_H
#include <stdbool.h>
#include <sys/types.h>
#include <microhttpd.h>
#include "kvexec.h"
#include "watch_park.h"

struct watch_stream;

/* Takes over req's key and range_end. conn: the client's connection, whose
 * socket is peeked to notice a disconnect; park: where the stream waits
 * for the store (suspended, without a thread). stopping: set at shutdown. progress_ms: with
 * progress_notify, a quiet watch gets a progress reply (header only) this
 * often, like etcd's (10 minutes there). */
struct watch_stream *watch_new(struct kvs *s, const struct caller *who, struct kv_watch_req *req,
                               struct MHD_Connection *conn, struct watch_park *park,
                               const volatile bool *stopping, int64_t progress_ms);
/* libmicrohttpd content reader: with nothing to send, parks the connection
 * and returns 0 (MHD calls it again once resumed). */
ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max);
void watch_free(void *cls);
/* Call fn(arg) when the stream is freed (the metrics' count of watches). */
void watch_on_free(struct watch_stream *w, void (*fn)(void *arg), void *arg);

#endif
