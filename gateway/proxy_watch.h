/* One /v3/watch stream through the proxy: an etcd watch (the KV client's,
 * with prev_kv) per stream, its events queued (at most
 * PROXY_WATCH_MAX_BYTES, all together PROXY_WATCHES_MAX_BYTES; beyond, the etcd watch is dropped and started
 * again from the first event not queued once the client has caught up, as
 * etcd does with a slow watcher) and filtered for the watcher as they are
 * sent, with the rights of that moment read from etcd. The reply is the
 * embedded gateway's: created, then events, or canceled with
 * compact_revision. */
#ifndef TROMCHO_PROXY_WATCH_H
#define TROMCHO_PROXY_WATCH_H
#include <stdbool.h>
#include <sys/types.h>
#include <microhttpd.h>
#include "proxy.h"
#include "watch_park.h"

#define PROXY_WATCH_MAX_BYTES (2 << 20)
/* ... and by all of them together. */
#define PROXY_WATCHES_MAX_BYTES ((size_t) 256 << 20)

struct proxy_watch;

/* Takes over req's key and range_end. NULL with err set. */
struct proxy_watch *kvproxy_watch_new(struct kvproxy *px, const struct caller *who, struct kv_watch_req *req,
                                      struct MHD_Connection *conn, struct watch_park *park,
                                      const volatile bool *stopping, int64_t progress_ms, struct kv_err *err);
ssize_t kvproxy_watch_read(void *cls, uint64_t pos, char *buf, size_t max);
void kvproxy_watch_free(void *cls);
void kvproxy_watch_on_free(struct proxy_watch *w, void (*fn)(void *arg), void *arg);

#endif
