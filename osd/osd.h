/* tromcho-osd internals shared by the osd_*.c files (not an API).
 *
 * One process = one store + one event loop thread. Everything below is
 * touched only on the loop thread, except what osd_kv.c hands over through
 * tc_evloop_submit (the KV watches and the lease keeper run elsewhere). */
#ifndef TROMCHO_OSD_H
#define TROMCHO_OSD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cluster_map.h"
#include "evloop.h"
#include "frame.h"
#include "kv_client.h"
#include "msgr.h"
#include "osd_proto.h"
#include "perms.h"
#include "store.h"
#include "tc_config.h"

/* ---- the operation decoder (osd_ops.c), pure: the fuzz target calls it ---- */

/* A request, checked against the protocol (osd_proto.h). */
struct osd_req {
  int op;
  uint64_t inode;
  uint64_t offset;          /* byte offset in the inode */
  uint32_t len;             /* data length of READ/WRITE/DELETE/SEC_* */
  uint64_t version;         /* SEC_WRITE/SEC_DELETE/SEC_WRITE_STABLE */
  uint64_t inode_last;      /* SEC_LIST */
  uint32_t pg_count, pg;    /* SEC_LIST / SEC_LOCK filter (pg_count 0 = none) */
  uint64_t pool, epoch;     /* SEC_LOCK (inode = the pool's first inode) */
  uint64_t bitmap;          /* SEC_WRITE_STABLE */
  const uint8_t *data;      /* WRITE/SEC_WRITE/SEC_WRITE_STABLE payload data */
  uint64_t claim_osd;       /* SHOW_CONFIG: the OSD the caller claims to be (0: none) */
};

/* Decode hdr + payload (hdr->len bytes). block_size: the store's object size.
 * Returns 0, or -EINVAL / -ENOTSUP with a reason in err. Never reads past
 * payload[hdr->len). */
int osd_req_decode(const struct tc_frame_hdr *hdr, const void *payload, uint32_t block_size,
                   struct osd_req *r, char *err, size_t errlen);

/* ---- object states of the PGs this OSD leads (osd_objmap.c) ---- */

struct osd_obj {
  uint64_t inode, offset;    /* offset = the object's first byte */
  uint64_t version;          /* newest version in the PG */
  uint8_t stale;             /* slots of the PG's set whose copy is older */
  uint8_t recovering;        /* a recovery of this object is in flight */
  uint8_t used;
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
  int inflight;                        /* client ops in progress */
  int listings;                        /* SEC_LISTs outstanding */
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
  int locks_pending;                   /* SEC_LOCKs outstanding after listing */
};

/* ---- peer OSDs (osd_peers.c) ---- */

struct osd_peer {
  uint64_t osd_num;
  struct tc_msgr_conn *conn;
  bool down;                 /* connection failed: not used until it re-registers or answers */
  int64_t state_rev;         /* mod_revision of /osd/state/<n> when marked down */
  bool dirty;                /* SEC_WRITEs since its last SEC_SYNC */
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
  uint64_t *osd_ids;         /* /osd/state keys present and their mod_revision */
  int64_t *osd_revs;
  size_t n_osds;
};
void osd_kvstate_free(struct osd_kvstate *s);

/* SEC_LOCK on a secondary: only the connection that locked a PG last may
 * send SEC_WRITEs of that PG (a deposed primary is fenced off). */
struct osd_lock {
  uint64_t pool;
  uint32_t pg;
  uint64_t epoch;
  struct osd_client *holder;   /* referenced */
};

struct osd {
  struct tc_config *cfg;
  struct tc_evloop *loop;
  struct tc_msgr *msgr;
  struct tc_kv *kv;
  struct tc_store *store;
  struct tc_store_info info;
  uint64_t osd_num;
  bool use_perms;
  int port;
  char addr[64];
  char *data_path;
  const char *prefix;        /* etcd_prefix */

  struct osd_kvstate *ks;    /* current */
  struct osd_pg *pgs;        /* PGs this OSD leads */
  size_t n_pgs;
  struct osd_peer *peers;
  size_t n_peers;

  /* KV side */
  struct tc_kv_watch *watches[5];
  int reload_pending;        /* loop thread: a reload is scheduled */
  int64_t lease;
  struct tc_kv_lease_keeper *keeper;
  int lease_lost;

  struct tc_timer *tick;
  int recovery_inflight;
  int recovery_kick_pending;
  int scrub_inflight;
  int stopping;
  uint64_t instances;        /* PG instance counter */
  struct osd_lock *locks;
  size_t n_locks;

  /* counters */
  uint64_t ops, eperm, eagain, recovered, repaired;
};

/* A client connection as the ops see it: replies to a connection that
 * closed meanwhile are dropped (the client retries). */
struct osd_client {
  int refs;
  struct tc_msgr_conn *c;    /* NULL once closed */
};
struct osd_client *osd_client_get(struct tc_msgr_conn *c);   /* takes a reference */
void osd_client_put(struct osd_client *cl);
/* Answer req (reply view of osd_proto.h); payload is the reply's (freed). */
void osd_client_reply(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t bitmap,
                      uint64_t version, void *payload, uint32_t len);
/* Answer a SCRUB: status = sectors found bad or -errno. */
void osd_client_reply_scrub(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t repaired);
void osd_on_conn(struct tc_msgr_conn *c, int event, int err, void *arg);
void osd_locks_free(struct osd *o);

/* osd_kv.c */
int osd_kv_start(struct osd *o);
void osd_kv_stop(struct osd *o);
/* Load everything now (loop thread, blocking) and apply it. */
int osd_kv_reload(struct osd *o);
const struct tc_user *osd_user_find(struct osd *o, const char *name);
const struct tc_image_acl *osd_image_acl(struct osd *o, uint64_t inode);
bool osd_is_up(struct osd *o, uint64_t osd_num);
int64_t osd_state_rev(struct osd *o, uint64_t osd_num);

/* osd_ops.c: the messenger's request callback */
void osd_on_request(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, void *payload, void *arg);
void osd_reply(struct tc_msgr_conn *c, const struct tc_frame_hdr *req, int status, uint64_t bitmap,
               uint64_t version, void *payload, uint32_t len);

/* List the local objects matching a SEC_LIST request (caller frees). */
int osd_list_local(struct osd *o, const struct osd_req *r, struct tc_osd_list_entry **out, size_t *n);

/* osd_peers.c */
struct osd_peer *osd_peer_get(struct osd *o, uint64_t osd_num);
/* A connection to the peer, connecting if needed; NULL if it is down. */
struct tc_msgr_conn *osd_peer_conn(struct osd *o, uint64_t osd_num);
void osd_peer_mark_down(struct osd *o, uint64_t osd_num, int err);
bool osd_peer_usable(struct osd *o, uint64_t osd_num);
void osd_peers_check(struct osd *o);   /* clear down marks of re-registered peers */
void osd_peers_close(struct osd *o);

/* osd_primary.c: client operations on the primary */
struct osd_pg *osd_pg_find(struct osd *o, uint64_t pool, uint32_t pg);
/* The PG that serves (inode, offset) if this OSD is its active primary;
 * else NULL and *err = -EAGAIN (or -EINVAL for an unknown pool). */
struct osd_pg *osd_pg_for(struct osd *o, uint64_t inode, uint64_t offset, int *err);
void osd_primary_write(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                       const struct osd_req *r, void *payload);
void osd_primary_read(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                      const struct osd_req *r);
void osd_primary_sync(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr);
void osd_pg_op_done(struct osd *o, struct osd_pg *pg);

/* osd_peering.c */
void osd_peering_update(struct osd *o);        /* after a map change */
void osd_pg_repeer(struct osd *o, struct osd_pg *pg);
void osd_pg_drop_all(struct osd *o);
/* The slots of pg whose copies are current and reachable now. */
uint8_t osd_pg_good_slots(struct osd *o, struct osd_pg *pg, const struct osd_obj *ob);

/* osd_recovery.c */
void osd_recovery_kick(struct osd *o);
/* Recover this object first (a client touched it). */
void osd_recovery_now(struct osd *o, struct osd_pg *pg, struct osd_obj *ob);
/* Local store helpers */
int osd_store_replace(struct osd *o, uint64_t inode, uint64_t obj_offset, uint64_t bitmap,
                      const uint8_t *data, uint64_t version);

/* osd_scrub.c */
void osd_scrub_object(struct osd *o, struct osd_client *cl, const struct tc_frame_hdr *hdr,
                      const struct osd_req *r);

/* Sectors of an object (block_size / 4096, <= 64). */
static inline uint32_t osd_spb(const struct osd *o) { return o->info.block_size / TC_STORE_SECTOR; }
static inline uint64_t osd_obj_start(const struct osd *o, uint64_t off)
{ return off - off % o->info.block_size; }

#endif
