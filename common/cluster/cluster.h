/* The cluster client (DESIGN.md section 7): the object store of objstore.h
 * over the messenger, for the image layer.
 *
 * One I/O thread runs a tc_evloop with every OSD connection. submit() (any
 * thread) hands the operation to that loop, which routes it to the primary
 * OSD of its PG (tc_map_pg_of / tc_map_pg of the current cluster map) and
 * sends it. An operation that meets -EAGAIN (not the primary), a lost
 * connection or a PG without a primary waits, asks for a fresh map and is
 * sent again, until client_op_timeout seconds have passed: callers see an
 * error only when the cluster could not serve it for that long.
 *
 * The map comes from the KV: /config/pools, /pg/config and /osd/state/<n>,
 * kept fresh by watches; a refresh thread re-reads them when a watch fires
 * or an operation asks, and hands the new map to the loop.
 *
 * READ and BITMAP larger than TC_OSD_MAX_OP_BYTES are split (osd_proto.h).
 * SYNC goes to every OSD that acknowledged a WRITE or DELETE since the
 * previous SYNC (to every OSD in the map if one of them was lost meanwhile).
 *
 * Options: client_op_timeout, client_retry_interval, and the messenger's
 * (proto_checksums, cert, pkey, osd_ca, ...). */
#ifndef TROMCHO_CLUSTER_H
#define TROMCHO_CLUSTER_H
#include <stddef.h>
#include <stdint.h>
#include "cluster_map.h"
#include "kv_client.h"
#include "objstore.h"
#include "osd_proto.h"
#include "tc_config.h"

struct tc_cluster;

/* Load the map (blocking), start the watches and the I/O thread. kv and
 * cfg are borrowed and must outlive the cluster. NULL on error. */
struct tc_cluster *tc_cluster_new(const struct tc_config *cfg, struct tc_kv *kv);
/* Close every connection; operations still pending fail with ECANCELED. */
void tc_cluster_free(struct tc_cluster *c);

/* The object store for tc_image_new (ctx = the cluster). */
struct tc_objstore tc_cluster_objstore(struct tc_cluster *c);

/* The current map, referenced: release with tc_map_unref. Never NULL. */
struct tc_map *tc_cluster_map(struct tc_cluster *c);
/* Re-read the map now (blocking). */
int tc_cluster_refresh(struct tc_cluster *c);

/* Every object of inodes [first, last] (one pool) with its presence bitmap,
 * asking the primary of each PG of the pool (SEC_LIST). Fails with
 * ETIMEDOUT if some PG cannot answer within timeout_ms (0: client_op_timeout).
 * *out is malloc'd (caller frees), *n entries. */
int tc_cluster_list(struct tc_cluster *c, uint64_t first, uint64_t last, int timeout_ms,
                    struct tc_osd_list_entry **out, size_t *n);

/* Blocking helpers over the object store: run one operation and wait. */
int tc_cluster_run(struct tc_cluster *c, struct tc_objop *op);

/* Counters for tests and benchmarks. */
struct tc_cluster_stats {
  uint64_t ops, retries, reconnects, map_updates, syncs;
  uint64_t window_waits;       /* writes that waited for room in the write window */
};
void tc_cluster_stats(struct tc_cluster *c, struct tc_cluster_stats *st);

#endif
