/* The cluster client's internals, shared by its files (not installed, not
 * for other layers): cluster.c (life), cluster_refresh.c (the map),
 * cluster_conn.c (connections), cluster_dispatch.c (routing, retry,
 * completion), cluster_replay.c (replaying the unsynced-write log of
 * unsynced_log.c),
 * cluster_list.c (listing). Everything here but the map for other threads,
 * the refresh thread's flags and the stats is owned by the I/O thread. */
#ifndef TROMCHO_CLUSTER_INT_H
#define TROMCHO_CLUSTER_INT_H
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/uio.h>
#include "cluster.h"
#include "msgr.h"
#include "image_meta.h"
#include "osd_proto.h"
#include "unsynced_log.h"

/* A connection to one OSD, kept while the cluster lives. */
struct osd_link {
  uint64_t id;
  char *host;
  int port;
  struct tc_msgr_conn *conn;   /* NULL: not connected */
  uint64_t last_connect;       /* ms: reconnect at most every RECONNECT_MS */
  bool timed_out;              /* the last connection closed on a timeout (a silent OSD), none up since */
  struct tc_cluster *cl;
  struct osd_link *next;
};

#define RECONNECT_MS 500

enum sreq_kind { SR_DATA, SR_SYNC, SR_LIST };

struct cop;

/* One message to one OSD: a part of an operation. */
struct sreq {
  struct tc_msgr_req req;      /* reinitialised before each send */
  struct cop *cop;
  enum sreq_kind kind;
  uint64_t off;                /* DATA: byte offset in the inode */
  uint32_t len;                /* DATA: bytes */
  uint64_t osd;                /* SYNC: the target; else where it was last sent */
  uint32_t pg;                 /* LIST: the PG */
  int last_err;                /* why it was last retried */
  void *rbuf;                  /* READ: where the data goes; BITMAP: scratch (owned) */
  struct iovec iov;            /* WRITE: the data */
  struct iovec iov_if[2];      /* WRITE_IF: the condition, then the data */
  struct tc_osd_write_if cond;
  STAILQ_ENTRY(sreq) wnext;    /* the wait list */
  struct tc_ulog_entry *rec;   /* DATA writes: the log record, reserved before sending */
  bool saved;                  /* a scratch WRITE: rec->data holds its bytes, and the
                                * buffer's slice may be sealed (restored before a resend) */
  bool from_rec;               /* a transformed WRITE: rec->data holds its bytes (made
                                * at submit) and is what is sent, never sealed in place */
};


/* One operation of the object store, or a listing. */
struct cop {
  struct tc_cluster *cl;
  struct tc_objop *op;         /* NULL: a listing */
  uint64_t deadline;
  int pending;
  int error;
  bool resync;                 /* SYNC: a target was lost, sync everything again */
  bool all_round;              /* SYNC: this round syncs every OSD (after a replay) */
  uint64_t sync_seq;           /* SYNC: the log entries it covers (seq <= this) */
  int replay_pending;          /* SYNC: replayed writes still in flight */
  uint32_t replay_fenced;      /* SYNC: replayed writes whose inode was fenced since (not written again) */
  bool internal;               /* a replay: op is ours, free it when done */
  bool fua_sync;               /* a FUA write some OSD answered as a plain one
                                * (built before FUA): SYNC before completing */
  bool counted;                /* a write counted in writes_inflight */
  bool poll_held;              /* SYNC: tc_evloop_poll_hold taken (loop thread) */
  uint64_t win_bytes;          /* a write's bytes in the write window */
  uint64_t replay_version;     /* a replayed write: the version of its first reply (TC_OSD_FLAG_REPLAY) */
  STAILQ_ENTRY(cop) hnext;     /* the held list (writes), or the drain list (replays) */
  int nparts;
  struct sreq *parts;
  /* listing */
  uint64_t first, last;
  struct tc_osd_list_entry *ents;
  size_t nents, cap;
  pthread_mutex_t *wlock;      /* blocking waiter (listing) */
  pthread_cond_t *wcond;
  bool *wdone;
};

struct tc_cluster {
  const struct tc_config *cfg;
  struct tc_kv *kv;
  char *prefix;
  uint64_t op_timeout_ms, retry_ms;
  bool sched_batch;              /* option sched_batch: the I/O thread under SCHED_BATCH */

  struct tc_evloop *loop;
  pthread_t io_thread;
  bool io_started;
  struct tc_msgr *msgr;

  /* loop thread only */
  struct tc_map *map;
  struct osd_link *links;
  STAILQ_HEAD(, sreq) waiting;   /* parked until the next map or the retry timer */
  struct tc_timer *retry_timer;
  uint64_t *dirty;             /* OSDs written since the last SYNC */
  size_t ndirty, dirty_cap;
  bool dirty_lost;             /* dirty could not grow: the next SYNC syncs every OSD */
  /* The connection to an OSD of dirty closed: it may have restarted and
   * lost what it acknowledged unsynced, and its new self would sync
   * without it; the next SYNC replays the log first (cluster_conn.c). */
  bool unsynced_lost;
  /* Acknowledged writes not yet covered by a SYNC, oldest first: replayed
   * when an OSD that took some of them is lost before the SYNC. */
  struct tc_ulog log;
  uint64_t max_dirty;
  bool auto_syncing;
  bool stopping;
  /* A replay's barrier (cluster_replay.c): a replay waits (drain) until no
   * write is in flight, and writes submitted while one is draining or
   * replaying wait (held) until all are done, so that no replayed write,
   * older than any write in flight, can land over a newer one. */
  unsigned writes_inflight;    /* writes started and not complete */
  int replaying;               /* replays draining or in flight */
  STAILQ_HEAD(, cop) held;     /* writes waiting for the replays */
  STAILQ_HEAD(, cop) drain;    /* replays (their SYNCs) waiting for no write in flight */

  /* The write window (cluster_window.c), under win_lock: bytes of writes
   * submitted and not complete, plus the log's, under max_dirty. */
  pthread_mutex_t win_lock;
  pthread_cond_t win_cond;
  uint64_t win_inflight;       /* bytes of writes entered and not complete */
  uint64_t win_log;            /* log.mem as the loop last saw it */
  uint64_t win_peak;           /* the fullest the window was after an entry */
  unsigned win_waiters;
  bool win_kicked;             /* a sync request on its way to the loop */
  bool win_syncing;            /* a background sync runs (auto_syncing) */
  bool win_stop;

  /* the map for other threads */
  pthread_mutex_t map_lock;
  struct tc_map *shared_map;

  /* refresh thread */
  pthread_t refresh_thread;
  bool refresh_started;
  pthread_mutex_t refresh_lock;
  pthread_cond_t refresh_cond;
  bool refresh_wanted, refresh_stop;
  struct tc_kv_watch *watches[3];

  pthread_mutex_t stats_lock;
  struct tc_cluster_stats stats;
};

#define STAT_INC(cl, f) do { pthread_mutex_lock(&(cl)->stats_lock); (cl)->stats.f++; \
                             pthread_mutex_unlock(&(cl)->stats_lock); } while (0)

/* cluster_refresh.c */
struct tc_map *cluster_load_map(struct tc_cluster *cl);
void cluster_request_refresh(struct tc_cluster *cl);
void *cluster_refresh_main(void *arg);
void cluster_watch_cb(void *arg, const struct tc_kv_watch_update *u);

/* cluster_conn.c */
struct tc_msgr_conn *cluster_link_get(struct tc_cluster *cl, uint64_t id);
void cluster_links_update(struct tc_cluster *cl);
bool cluster_link_timed_out(const struct tc_cluster *cl, uint64_t id);
void cluster_links_free(struct tc_cluster *cl);

/* cluster_dispatch.c */
void cluster_sreq_dispatch(struct sreq *sr);
void cluster_sreq_wait(struct sreq *sr, int err);
void cluster_dispatch_waiting(struct tc_cluster *cl);
void cluster_cop_start(struct tc_evloop *loop, void *arg);
void cluster_cop_start_sync(struct cop *cop, bool all);
void cluster_cop_free(struct cop *cop);

/* cluster_replay.c */
void cluster_replay_then_sync(struct cop *sync);
bool cluster_replay_holds(struct cop *cop);
void cluster_replay_write_done(struct tc_cluster *cl);
void cluster_replay_cancel(struct tc_cluster *cl);
void cluster_auto_sync(struct tc_cluster *cl);

/* cluster_window.c */
void cluster_window_init(struct tc_cluster *cl);
void cluster_window_destroy(struct tc_cluster *cl);
uint64_t cluster_window_enter(struct tc_cluster *cl, uint64_t bytes);
void cluster_window_done(struct tc_cluster *cl, uint64_t bytes);
void cluster_window_undo(struct tc_cluster *cl, uint64_t bytes);
void cluster_window_figures(struct tc_cluster *cl, uint64_t *peak, uint64_t *waits);
void cluster_window_syncing(struct tc_cluster *cl, bool syncing);
void cluster_window_stop(struct tc_cluster *cl);

#endif
