/* One /v3/watch stream: the created reply, then the events of the watched
 * range from start_revision on, read from the store's history (so a replay
 * and live events are one path: nothing lost, nothing twice), as
 * newline-delimited {"result": ...} objects like etcd's grpc-gateway. */
#ifndef TROMCHO_WATCH_H
#define TROMCHO_WATCH_H
#include <stdbool.h>
#include <sys/types.h>
#include "kvexec.h"

struct watch_stream;

/* Takes over req's key and range_end. fd: the client's socket, polled to
 * notice a disconnect. stopping: set at shutdown. */
struct watch_stream *watch_new(struct kvs *s, const struct caller *who, struct kv_watch_req *req,
                               int fd, const volatile bool *stopping);
/* libmicrohttpd content reader: blocks (in the connection's thread) until
 * there is something to send. */
ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max);
void watch_free(void *cls);

#endif
