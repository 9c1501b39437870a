/* tromcho-osd internals shared by the osd_*.c files (not an API).
 *
 * One process = one store + one event loop thread. Everything below is
 * touched only on the loop thread, except what osd_kv.c hands over through
 * tc_evloop_submit (the KV watches and the lease keeper run elsewhere).
 *
 * The files, each using only those before it (osd/README.md):
 *   osd_decode   the pure request decoder (the fuzz target's subject)
 *   osd_metrics  the Prometheus series and the /metrics endpoint
 *   osd_objmap   a PG's object table
 *   osd_kv       registration, watches, the KV snapshot (users, images, map)
 *   osd_client   client connections and replies
 *   osd_peers    connections to the other OSDs, down marks
 *   osd_pg       the PGs this OSD leads, as the operations look them up
 *   osd_sync     the store's syncs on their own thread (group commit)
 *   osd_local    the primary's local writes, run after the fan-out went out
 *   osd_secondary  SEC_* operations from the local store, fencing (SEC_LOCK)
 *   osd_op       the base every in-flight operation shares
 *   osd_recovery   background copy of stale objects
 *   osd_peering  PG table changes, SEC_LIST + SEC_LOCK, activation
 *   osd_primary_write, osd_primary_read, osd_primary_sync, osd_scrub
 *                the client operations on the primary
 *   osd_partial  WRITE_PARTIAL and WRITE_IF, on top of osd_primary_write
 *   osd_describe DESCRIBE, SHOW_CONFIG
 *   osd_dispatch decode -> rights -> dispatch (the messenger's callback)
 *   osd_main     options, start, stop; wires the events below
 * A lower file tells peering what changed through struct osd_events,
 * never by calling it. */
#ifndef TROMCHO_OSD_H
#define TROMCHO_OSD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include "cluster_map.h"
#include "evloop.h"
#include "frame.h"
#include "kv_client.h"
#include "metrics.h"
#include "msgr.h"
#include "osd_proto.h"
#include "perms.h"
#include "store.h"
#include "tc_config.h"

/* ---- the operation decoder (osd_decode.c), pure: the fuzz target calls it ---- */

/* A request, checked against the protocol (osd_proto.h). */
struct osd_req {
  int op;
  uint64_t inode;
  uint64_t offset;          /* byte offset in the inode */
  uint32_t len;             /* data length of READ/WRITE/DELETE/SEC_* */
  uint64_t version;         /* SEC_WRITE/SEC_DELETE/SEC_WRITE_STABLE; READ: the fence revision */
  uint64_t inode_last;      /* SEC_LIST */
  uint32_t pg_count, pg;    /* SEC_LIST / SEC_LOCK filter (pg_count 0 = none) */
  uint64_t pool, epoch;     /* SEC_LOCK (inode = the pool's first inode) */
  uint64_t bitmap;          /* SEC_WRITE_STABLE */
  const uint8_t *data;      /* WRITE/SEC_WRITE/SEC_WRITE_STABLE payload data */
  uint64_t claim_osd;       /* SHOW_CONFIG, SEC_LOCK: the OSD the caller claims to be (0: none) */
  struct tc_osd_write_if cond;   /* WRITE_IF: what the sector must still hold */
  bool fua;                 /* TC_OSD_FLAG_FUA: durable before the reply (writes and deletes only) */
  uint64_t replay_version;  /* TC_OSD_FLAG_REPLAY: write only if the object's version is below (0: not a replay) */
};

/* Decode hdr + payload (hdr->len bytes). block_size: the store's object size.
 * Returns 0, or -EINVAL / -ENOTSUP with a reason in err. Never reads past
 * payload[hdr->len). */
/* The largest payload a request with this opcode may carry on an OSD of
 * this block size (osd_limits.c); 0 for operations without payload. */
uint32_t osd_request_max_payload(uint16_t opcode, uint32_t block_size);
int osd_req_decode(const struct tc_frame_hdr *hdr, const void *payload, uint32_t block_size,
                   struct osd_req *r, char *err, size_t errlen);

/* ---- object states of the PGs this OSD leads (osd_objmap.c) ---- */

struct osd_obj {
  uint64_t inode, offset;    /* offset = the object's first byte */
  uint64_t version;          /* newest version in the PG */
  uint8_t stale;             /* slots of the PG's set whose copy is older */
  uint8_t recovering;        /* a recovery of this object is in flight */
  uint8_t used;
  uint8_t inconsistent;      /* the last scrub found a bad sector it could not repair */
};

struct osd_objmap {
  struct osd_obj *v;
  size_t cap, n;
};
struct osd_obj *osd_objmap_get(struct osd_objmap *m, uint64_t inode, uint64_t offset);
struct osd_obj *osd_objmap_add(struct osd_objmap *m, uint64_t inode, uint64_t offset);   /* NULL: ENOMEM */
void osd_objmap_free(struct osd_objmap *m);

/* ---- PGs ---- */

enum osd_pg_state { PG_PEERING = 1, PG_ACTIVE = 2, PG_INCOMPLETE = 3 };

struct osd_pg {
  uint64_t pool;
  uint32_t pg, pg_count, size, minsize;
  int state;
  uint64_t osd_set[TC_MAX_PG_SIZE];   /* as peered */
  uint8_t up;                          /* slots that took part in peering */
  uint64_t sig;                        /* what peering was based on */
  uint64_t epoch;                      /* bumps at each peering */
  uint64_t lock_rev;                   /* the /pg/config revision this peering locked at: its versions' base */
  int inflight;                        /* client ops in progress */
  int listings;                        /* SEC_LISTs outstanding */
  unsigned retry_at, retry_wait;       /* osd_peering_retry's backoff (o->ticks, s; 0: none) */
  int listing_failed;
  struct osd_objmap objs;
  size_t n_stale;                      /* objects with stale slots */
  size_t recovery_pos;                 /* where the background walk is */
  int my_slot;
  uint64_t instance;                   /* unique per PG struct (ops find theirs) */
  struct tc_osd_list_entry *lists[TC_MAX_PG_SIZE];   /* peering: each slot's listing */
  size_t nlist[TC_MAX_PG_SIZE];
  uint8_t listed;                      /* slots whose listing arrived */
  bool listing_started;
  int locks_pending;                   /* SEC_LOCKs outstanding (peering's first step) */
  uint8_t locked;                      /* slots that took this peering's lock */
  uint64_t pause_until_ms;             /* TROMCHO_OSD_PEERING_PAUSE_MS: list then (0: not paused) */
  /* background scrub (osd_scrub_sched.c) */
  size_t scrub_pos;                    /* next object slot of objs to scrub */
  double scrub_next;                   /* monotonic time the next pass starts */
  bool scrub_running;                  /* a pass is under way */
  int64_t scrub_last;                  /* wall time the last full pass ended (0: none) */
  uint64_t scrub_bad, scrub_repaired;  /* sectors found bad / repaired since peering */
  uint64_t scrub_objects;              /* objects scrubbed in the current pass */
  int scrub_pass_inflight;             /* this pass's object scrubs not answered yet */
  uint64_t scrub_pass_bad, scrub_pass_repaired;   /* sectors, this pass so far */
  uint64_t scrub_last_bad, scrub_last_repaired;   /* sectors, the last full pass */
  int64_t scrub_req_running;           /* next_scrub of the request this pass serves (0: scheduled) */
  int64_t scrub_req_done;              /* next_scrub of the last request a full pass served */
  size_t n_inconsistent;               /* objects with inconsistent set */
};

/* ---- peer OSDs (osd_peers.c) ---- */

struct osd_peer {
  uint64_t osd_num;
  struct tc_msgr_conn *conn;
  bool down;                 /* connection failed: not used until it re-registers or answers */
  int64_t state_rev;         /* mod_revision of /osd/state/<n> when marked down */
  bool dirty;                /* SEC_WRITEs since its last SEC_SYNC */
  uint32_t down_streak;      /* times marked down since its last handshake */
  uint64_t retry_tick;       /* o->ticks from which a probe may try it again */
};

/* ---- the ACL tables from the KV (osd_kv.c) ---- */

struct osd_user {
  char *name;
  bool admin;
  char **groups;             /* NULL-terminated */
  struct tc_user rec;
};
struct osd_image {
  uint64_t inode;
  bool readonly;             /* the record says so: client writes are refused (the fence) */
  bool retired;              /* its data is deleted (a re-key's old layer): client reads are refused */
  char *owner, *owner_group, *reader_group;
  struct tc_image_acl acl;
};

/* One snapshot of what the OSD knows from the KV; built on the KV side,
 * swapped in on the loop thread. */
struct osd_kvstate {
  struct tc_map *map;
  struct osd_user *users;
  size_t n_users;
  struct osd_image *images;  /* sorted by inode */
  size_t n_images;
  int64_t inode_rev;         /* the KV revision /config/inode/ was read at */
  int64_t pgcfg_rev;         /* /pg/config's mod_revision: orders SEC_LOCKs */
  uint64_t *osd_ids;         /* /osd/state keys present and their mod_revision */
  int64_t *osd_revs;
  size_t n_osds;
  struct osd_scrub_req *scrub_reqs;   /* /pg/history/<pool>/<pg> with a next_scrub */
  size_t n_scrub_reqs;
};
/* A scrub asked for through /pg/history/<pool>/<pg> = {"next_scrub": T}
 * (tromcho scrub; admins and monitors may write the key): the PG's primary
 * scrubs it once at or after wall time T, unless a pass for T ran. */
#define OSD_SCRUB_REQUEST_GRACE 600   /* s: a new leader of a PG serves requests this recent */
struct osd_scrub_req {
  uint64_t pool;
  uint32_t pg;
  int64_t next_scrub;
};

void osd_kvstate_free(struct osd_kvstate *s);

struct osd;
/* Upward notifications, set once by osd_main.c: the KV snapshot, the peer
 * table and the in-flight operations tell peering what changed through
 * these, so that no file calls the layer above it. */
struct osd_events {
  void (*kv_changed)(struct osd *o);                       /* a new KV snapshot is in */
  void (*peer_changed)(struct osd *o, uint64_t osd_num);   /* a peer went down or came back */
  void (*pg_idle)(struct osd *o, struct osd_pg *pg);       /* a PG's last client op ended */
};

/* SEC_LOCK on a secondary: only the connection that locked a PG last may
 * send SEC_WRITEs of that PG (a deposed primary is fenced off). Locks are
 * ordered by the KV revision of the PG configuration the primary peered
 * at: an older one is refused, so a primary that peered on a map the
 * cluster has left cannot take a PG from the one the newer map chose. */
struct osd_lock {
  uint64_t pool;
  uint32_t pg;
  uint64_t epoch;              /* the holder's /pg/config revision */
  uint64_t primary;            /* the OSD the holder said it is (0: not said) */
  struct osd_client *holder;   /* referenced */
};

struct osd {
  struct tc_config *cfg;
  struct osd_events events;
  struct tc_evloop *loop;
  struct tc_msgr *msgr;
  struct tc_kv *kv;
  struct tc_store *store;
  struct tc_store_info info;
  struct osd_syncer *syncer;   /* osd_sync.c: the thread that runs the store's syncs */
  uint64_t osd_num;
  bool use_perms;
  int port;
  char addr[64];
  char *data_path;
  const char *prefix;        /* etcd_prefix */

  struct osd_kvstate *ks;    /* current */
  struct osd_pg *pgs;        /* PGs this OSD leads */
  size_t n_pgs, pgs_cap;
  struct osd_peer *peers;
  size_t n_peers, peers_cap;

  /* KV side */
  struct tc_kv_watch *watches[6];
  int reload_pending;        /* loop thread: a reload is scheduled */
  uint64_t kv_settle_ms;     /* option osd_kv_settle */
  uint64_t unknown_reload_ms; /* loop thread: last reload forced by an unknown image or user */
  uint64_t fence_reload_ms;   /* loop thread: last reload forced by a READ's fence revision */
  uint64_t lock_reload_ms;    /* loop thread: last reload forced by a SEC_LOCK (osd_secondary.c) */
  uint64_t erofs;             /* client writes refused on a read-only inode */
  int64_t lease;
  struct tc_kv_lease_keeper *keeper;
  bool lease_fenced;          /* loop thread: no I/O until the lease is back and the PGs peered again (osd_kv.c) */
  uint64_t lease_refused;     /* requests refused for it, this time */
  uint64_t beat_ms;           /* atomic: the loop's last tick; the keeper renews only while it moves */
  uint64_t lease_ttl_ms;      /* etcd_keepalive_timeout */
  bool sync_stuck;            /* loop thread: a store sync has run for 3 leases (no beat meanwhile) */

  struct tc_timer *tick;
  int recovery_inflight;
  int recovery_kick_pending;
  int scrub_inflight;
  int stopping;
  uint64_t instances;        /* PG instance counter */
  uint64_t epochs;           /* peering epoch counter (every PG's peerings) */
  unsigned ticks;            /* seconds ticked (osd_main.c) */
  /* Peers lost (marked down) while holding SEC_WRITEs not yet synced
   * there, counted: a kill -9 takes such writes with it (osd_peers.c). */
  uint64_t unsynced_lost;
  struct osd_lock *locks;
  size_t n_locks, locks_cap;
  struct osd_local_write *lw_head, *lw_tail;   /* osd_local.c: local writes not yet run */
  bool lw_scheduled;                           /* their run is deferred to the round's end */
  bool ignore_fua;           /* TROMCHO_OSD_IGNORE_FUA (tests): answer as an OSD from before FUA */
  uint64_t peering_pause_ms; /* TROMCHO_OSD_PEERING_PAUSE_MS (tests): hold peering between lock and list */

  /* counters */
  uint64_t ops, eperm, eagain, recovered, repaired;
  uint64_t replays_skipped;   /* REPLAY writes the object held already (osd_primary_write.c) */
  uint64_t scrubbed, scrub_bad;              /* background and on-demand scrubs */

  /* stats in the KV (osd_stats.c) and the scrub schedule (osd_scrub_sched.c) */
  int stats_inflight;                        /* a stats txn is on its way */
  struct stats_put *stats_put;               /* that txn's buffers: ours until the loop hears its answer */
  char **pg_state_sent;                      /* last /pg/state value written, per led PG (by key) */
  char **pg_state_keys;
  size_t n_pg_state_sent;
  int64_t stats_lease;                       /* the lease the sent values were written with */
  double stats_t0;                           /* when the counters below were last sampled */
  uint64_t last_rd_ops, last_wr_ops, last_rd_bytes, last_wr_bytes, last_recovered;
  struct osd_inode_stat *istats;             /* client I/O by inode, as primary (open addressing) */
  size_t istats_cap, n_istats;
  json_object *inodes_last;                  /* the "inodes" of /osd/stats as last built */
  struct osd_metrics *m;
};

/* Client operations on one inode this OSD served as primary, since start. */
struct osd_inode_stat {
  uint64_t inode;            /* 0: free slot */
  uint64_t read_ops, read_bytes, write_ops, write_bytes, delete_ops, delete_bytes;
};

/* ---- the Prometheus series and the /metrics endpoint (osd_metrics.c) ---- */

#define OSD_OP_SLOTS 41      /* opcodes 0..TC_OP_SEC_LOCK */
struct osd_metrics {
  struct tc_metrics *reg;
  struct tc_metrics_http *http;
  struct tc_counter *ops[OSD_OP_SLOTS], *errors[OSD_OP_SLOTS];
  struct tc_histogram *latency[OSD_OP_SLOTS];
  struct tc_counter *read_bytes, *write_bytes, *eperm, *decode_errors;
  struct tc_counter *recovered, *scrubbed, *scrub_bad, *scrub_repaired, *lease_refused, *sec_forwarded;
  struct tc_gauge *pgs[4], *degraded_objects, *recovery_inflight, *connections, *peers_down;
  struct tc_gauge *store_used, *store_objects, *store_checksum_errors, *lease_held;
  struct tc_histogram *store_sync;   /* one store commit on the sync thread */
};
/* Register every series; serve /metrics when metrics_port is set. 0 or -1. */
int osd_metrics_start(struct osd *o);
void osd_metrics_stop(struct osd *o);
/* A request of this opcode arrived (bytes: its data in or asked out). */
void osd_metrics_request(struct osd *o, int op, uint64_t bytes_in, uint64_t bytes_out);
/* A reply with this status to an operation of this opcode, started at t0
 * (tc_metrics_now; 0: not timed). */
void osd_metrics_reply(struct osd *o, int op, int status, double t0);
/* The process's OSD (one a process), for replies that do not carry it. */
extern struct osd *osd_metrics_current;

/* ---- client connections and replies (osd_client.c) ---- */

/* A client connection as the ops see it: replies to a connection that
 * closed meanwhile are dropped (the client retries). */
struct osd_client {
  int refs;
  struct tc_msgr_conn *c;    /* NULL once closed */
  /* o->unsynced_lost when this client's last SYNC was answered (or its
   * first request came): a SYNC finding it behind answers -EAGAIN, so the
   * client writes its unsynced writes again (osd_primary_sync.c). */
  uint64_t lost_seen;
  bool lost_seen_set;
  /* o->unsynced_lost at its first replayed write (TC_OSD_FLAG_REPLAY)
   * since its last SYNC: the losses up to there are what it is writing
   * again, so that SYNC need not send it back to replay once more. */
  uint64_t replay_floor;
  bool replayed;
};
struct osd_client *osd_client_get(struct tc_msgr_conn *c);   /* takes a reference */
void osd_client_put(struct osd_client *cl);
/* Answer req (reply view of osd_proto.h); payload is the reply's (freed). */
void osd_client_reply(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t bitmap,
                      uint64_t version, void *payload, uint32_t len);
/* Answer a SCRUB: status = sectors found bad or -errno. */
void osd_client_reply_scrub(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t repaired);
/* The same on a connection (operations answered at once). */
void osd_reply(struct tc_msgr_conn *c, const struct tc_frame_hdr *req, int status, uint64_t bitmap,
               uint64_t version, void *payload, uint32_t len);
/* A reply without payload carrying header flags (TC_OSD_FLAG_FUA: durable). */
void osd_client_reply_flags(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t version,
                            uint16_t flags);
void osd_on_conn(struct tc_msgr_conn *c, int event, int err, void *arg);

/* ---- the KV (osd_kv.c) ---- */
int osd_kv_start(struct osd *o);
void osd_kv_stop(struct osd *o);
/* Load everything now (loop thread, blocking), swap it in, tell
 * events.kv_changed. */
int osd_kv_reload(struct osd *o);
/* Whether this OSD certainly holds its /osd/state lease now and serves
 * (self-fencing, osd_kv.c). Loop thread. */
bool osd_lease_held(const struct osd *o);
/* Each tick: start the fence once the lease may have run out; lift it,
 * peering every led PG again, once a lease is held again. */
void osd_lease_tick(struct osd *o);
/* Each tick, first: tell the lease keeper the OSD lives (osd_kv.c). */
void osd_lease_beat(struct osd *o);
const struct tc_user *osd_user_find(struct osd *o, const char *name);
const struct tc_image_acl *osd_image_acl(struct osd *o, uint64_t inode);
/* Whether inode's record is read-only (client writes to it are refused). */
bool osd_image_readonly(struct osd *o, uint64_t inode);
/* Whether inode's record says retired (client reads get -ESTALE). */
bool osd_image_retired(struct osd *o, uint64_t inode);
/* The next_scrub asked for pool/pg in /pg/history (0: none). */
int64_t osd_scrub_requested(struct osd *o, uint64_t pool, uint32_t pg);
bool osd_is_up(struct osd *o, uint64_t osd_num);
int64_t osd_state_rev(struct osd *o, uint64_t osd_num);

/* ---- connections to the peer OSDs (osd_peers.c) ---- */
struct osd_peer *osd_peer_get(struct osd *o, uint64_t osd_num);
/* A connection to the peer, connecting if needed; NULL if it is down. */
struct tc_msgr_conn *osd_peer_conn(struct osd *o, uint64_t osd_num);
/* Mark it down (tells events.peer_changed). */
void osd_peer_mark_down(struct osd *o, uint64_t osd_num, int err);
bool osd_peer_usable(struct osd *o, uint64_t osd_num);
void osd_peers_check(struct osd *o);   /* clear down marks of re-registered peers */
void osd_peers_probe(struct osd *o);   /* each tick: probe down peers still registered */
void osd_peers_close(struct osd *o);

/* ---- the PGs this OSD leads (osd_pg.c) ---- */
/* The PG (pool, pg) this OSD leads, in any state; NULL if it leads none. */
struct osd_pg *osd_pg_find(struct osd *o, uint64_t pool, uint32_t pg);
/* The same, if it is still the PG struct of that instance (not dropped and
 * re-added since). */
struct osd_pg *osd_pg_instance(struct osd *o, uint64_t pool, uint32_t pg, uint64_t instance);
/* The PG that serves (inode, offset) if this OSD is its active primary;
 * else NULL and *err = -EAGAIN (or -ENOENT for an unknown pool). */
struct osd_pg *osd_pg_for(struct osd *o, uint64_t inode, uint64_t offset, int *err);
/* The slots of pg whose copies are current and reachable now. */
uint8_t osd_pg_good_slots(struct osd *o, struct osd_pg *pg, const struct osd_obj *ob);
/* Slot's copy of the object (obj_offset = its first byte) missed a write. */
void osd_pg_mark_stale(struct osd_pg *pg, uint64_t inode, uint64_t obj_offset, int slot);

/* ---- the store's syncs off the loop (osd_sync.c) ---- */
/* cb(o, arg, err) runs on the loop once every write and delete the store
 * took before the call is durable (err 0) or the sync failed (errno). One
 * commit answers every sync asked for while the previous one ran. */
typedef void (*osd_sync_cb)(struct osd *o, void *arg, int err);
int osd_sync_start(struct osd *o);
/* Finish the syncs asked for and answer them (loop thread, loop stopped). */
void osd_sync_stop(struct osd *o);
int osd_sync_async(struct osd *o, osd_sync_cb cb, void *arg);
/* When the oldest sync not yet answered was asked (tc_now_ms()), 0 if
 * none: the loop's tick stops its lease's beat while a sync is stuck. */
uint64_t osd_sync_oldest_ms(struct osd *o);

/* ---- the primary's local writes, after the fan-out (osd_local.c) ---- */
/* A write or delete of the local store, queued by the primary after it
 * handed the SEC_WRITEs to the messenger: the messenger writes them to the
 * sockets at the end of the loop's round, and the local writes run right
 * after that (a deferred call), so the secondaries work while the local
 * store does. Queued writes run in order, before the next round's events;
 * whatever reads or replaces local objects first runs them
 * (osd_local_drain), so it sees every write the loop ordered. */
struct osd_local_write {
  struct osd_local_write *next;
  bool is_delete;
  uint64_t inode, offset, version;
  uint32_t len;
  const void *data;          /* borrowed: lives until done */
  /* After the store call: err 0 or an errno (tc_last_error() says why). */
  void (*done)(struct osd *o, struct osd_local_write *lw, int err);
};
void osd_local_queue(struct osd *o, struct osd_local_write *lw);
/* Run every queued local write now, in order (loop thread). */
void osd_local_drain(struct osd *o);

/* ---- the secondary: SEC_* operations and fencing (osd_secondary.c) ---- */
void osd_secondary_op(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr,
                      const struct osd_req *r);
void osd_locks_free(struct osd *o);
/* List the local objects matching a SEC_LIST request (caller frees *out). */
int osd_list_local(struct osd *o, const struct osd_req *r, struct tc_osd_list_entry **out, size_t *n);
/* Replace a whole object in the local store: the sectors in bitmap from
 * data, none other, at version (recovery and repair). */
int osd_store_replace(struct osd *o, uint64_t inode, uint64_t obj_offset, uint64_t bitmap,
                      const uint8_t *data, uint64_t version);

/* ---- in-flight operations (osd_op.c) ---- */

/* The first member of every in-flight operation (write, read, scrub,
 * recovery, sync). */
struct osd_op_base {
  struct osd *o;
  struct osd_client *cl;       /* who asked (referenced); NULL for recovery */
  struct tc_frame_hdr hdr;     /* its request: the reply echoes it */
  uint64_t pool, instance;     /* the PG it runs in (instance 0: none) */
  uint32_t pgn;
  uint64_t epoch;              /* the PG's peering epoch when it began */
  bool counted;                /* in pg->inflight: a client op peering waits for */
  uint64_t inode, offset;      /* what it is about */
  double t0;                   /* when it began (the latency histograms) */
  bool background;             /* a scheduled scrub (no client to answer) */
};
/* Allocate a zeroed op of size bytes whose first member is a struct
 * osd_op_base, and fill the base: takes a reference on cl (may be NULL),
 * copies hdr (may be NULL), counts a client op in pg->inflight (pg may be
 * NULL). NULL: out of memory. */
void *osd_op_new(size_t size, struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                 struct osd_pg *pg, uint64_t inode, uint64_t offset);
/* The op's PG if it is still the PG struct the op began in, else NULL. */
struct osd_pg *osd_op_pg(const struct osd_op_base *b);
/* Release what the base holds (PG count, client reference) and free op
 * (NULL is fine). The op's own allocations are its caller's to free first. */
void osd_op_free(void *op);

/* ---- recovery (osd_recovery.c) ---- */
void osd_recovery_kick(struct osd *o);
/* Recover this object first (a client touched it). */
void osd_recovery_now(struct osd *o, struct osd_pg *pg, struct osd_obj *ob);

/* ---- peering (osd_peering.c) ---- */
void osd_peering_update(struct osd *o);        /* after a map change */
void osd_pg_repeer(struct osd *o, struct osd_pg *pg);
/* Every few seconds: a PG that peered without a member that is usable now
 * (its SEC_LIST or SEC_LOCK failed: a blip, a member whose view of the KV
 * lagged behind ours) peers again to take it back, backing off to once a
 * minute while the member keeps refusing. */
void osd_peering_retry(struct osd *o);
/* The member in slot answered a SEC_WRITE/SEC_DELETE of b's PG with -EBUSY: another
 * connection took the PG's lock there (a primary peering on an older map
 * whose SEC_LOCK came in late, or a connection of ours that was replaced).
 * Peer again (once per peering), which takes the lock back unless the
 * holder's PG configuration is newer than ours. */
void osd_pg_lock_lost(const struct osd_op_base *b, int slot);
void osd_pg_drop_all(struct osd *o);
/* The events (struct osd_events) peering handles. */
void osd_peering_kv_changed(struct osd *o);
void osd_peering_peer_changed(struct osd *o, uint64_t osd_num);
void osd_peering_pg_idle(struct osd *o, struct osd_pg *pg);

/* ---- client operations on the primary (osd_primary_*.c, osd_scrub.c) ---- */
/* WRITE or DELETE; takes *payload over (sets it to NULL) when it keeps it,
 * and sealed (the payload as the client sealed it under its own key, or
 * NULL: msgr.h, "Own keys") always. */
void osd_primary_write(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                       const struct osd_req *r, void **payload, struct tc_msgr_sealed *sealed);
void osd_primary_read(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                      const struct osd_req *r);
void osd_primary_sync(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr);
/* WRITE_PARTIAL and WRITE_IF (osd_partial.c): the stored sectors read and
 * patched or checked, then a WRITE of whole sectors, in one loop turn. */
void osd_primary_write_partial(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                               const struct osd_req *r);
void osd_scrub_object(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                      const struct osd_req *r);
/* A background scrub of one object of pg (no client): 0 started (counted
 * in o->scrub_inflight until it ends, its findings added to the PG's
 * scrub_bad/scrub_repaired), -1 not now (the object is stale or being
 * recovered, or out of memory). */
int osd_scrub_background(struct osd *o, struct osd_pg *pg, const struct osd_obj *ob);

/* ---- the scrub schedule (osd_scrub_sched.c) ---- */
/* Once a second: start the scrubs the schedule and the throttle allow. */
void osd_scrub_tick(struct osd *o);

/* ---- state and stats in the KV (osd_stats.c) ---- */
/* Every osd_stats_interval seconds: /osd/stats/<n> and the changed
 * /pg/state/<pool>/<pg> of the PGs this OSD leads, in one txn with its
 * registration lease. */
void osd_stats_tick(struct osd *o);
/* Count an allowed client READ, WRITE, WRITE_PARTIAL, WRITE_IF or DELETE
 * against its inode (reported in /osd/stats/<n> "inodes"). */
void osd_inode_stats_count(struct osd *o, const struct osd_req *r);
/* The /pg/state words of a led PG ("active", "degraded", ...) as JSON. */
json_object *osd_pg_state_json(struct osd *o, const struct osd_pg *pg);
/* At shutdown, after the KV client is freed: the unanswered put and the sent cache. */
void osd_stats_stop(struct osd *o);
void osd_stats_free(struct osd *o);

/* ---- DESCRIBE, SHOW_CONFIG (osd_describe.c) ---- */
void osd_describe(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr);
void osd_show_config(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr);

/* ---- the messenger's request callback (osd_dispatch.c) ---- */
void osd_on_request(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, void *payload, void *arg);

/* A store read's presence bits (one bit a sector, LSB first) as a bitmap. */
static inline uint64_t
osd_present_bits(const uint8_t *b, uint32_t n)
{
  uint64_t v = 0;
  for (uint32_t i = 0; i < n && i < 64; i++)
    if (b[i / 8] >> (i % 8) & 1)
      v |= 1ull << i;
  return v;
}

/* Sectors of an object (block_size / 4096, <= 64). */
static inline uint32_t osd_spb(const struct osd *o) { return o->info.block_size / TC_STORE_SECTOR; }
static inline uint64_t osd_obj_start(const struct osd *o, uint64_t off)
{ return off - off % o->info.block_size; }

#endif
