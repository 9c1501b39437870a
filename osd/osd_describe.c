/* DESCRIBE (the OSD's state as JSON, for admins: counters, led PGs, peers,
 * and the objects of its PGs that are not clean, as the seed's DESCRIBE
 * lists them) and SHOW_CONFIG (what a client or a peer needs to know about
 * this OSD). */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "osd.h"

static void
reply_json(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, json_object *j)
{
  const char *s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
  size_t len = strlen(s);
  char *copy = malloc(len ? len : 1);
  if (!copy) {
    json_object_put(j);
    osd_reply(c, hdr, -ENOMEM, 0, 0, NULL, 0);
    return;
  }
  memcpy(copy, s, len);
  json_object_put(j);
  osd_reply(c, hdr, 0, 0, 0, copy, (uint32_t) len);
}

#define DESCRIBE_MAX_OBJECTS 4096   /* keeps the reply well under a frame's limit */

/* Slots of pg whose copy cannot be had now: no member, or a member that
 * is down or unreachable (every object of the PG lacks that copy). */
static uint8_t
missing_slots(struct osd *o, const struct osd_pg *pg)
{
  uint8_t m = 0;
  for (uint32_t s = 0; s < pg->size && s < TC_MAX_PG_SIZE; s++) {
    uint64_t id = pg->osd_set[s];
    if (!id || (id != o->osd_num && !osd_peer_usable(o, id)))
      m |= (uint8_t) (1u << s);
  }
  return m;
}

/* The objects of pg that are not clean: "degraded" (a member's copy is
 * older, or its member is down: which OSDs in stale_osds), "inconsistent"
 * (the last scrub found a bad sector it could not repair), "incomplete"
 * (the PG has fewer than pg_minsize members). Adds to *n; stops at
 * DESCRIBE_MAX_OBJECTS. */
static void
unclean_objects(struct osd *o, const struct osd_pg *pg, json_object *arr, size_t *n)
{
  uint8_t missing = missing_slots(o, pg);
  for (size_t i = 0; i < pg->objs.cap && *n < DESCRIBE_MAX_OBJECTS; i++) {
    const struct osd_obj *ob = &pg->objs.v[i];
    uint8_t lacking = ob->stale | missing;
    if (!ob->used || !ob->version || (!lacking && !ob->inconsistent && pg->state != PG_INCOMPLETE))
      continue;
    json_object *e = json_object_new_object(), *st = json_object_new_array();
    json_object_object_add(e, "pool", json_object_new_int64((int64_t) pg->pool));
    json_object_object_add(e, "pg", json_object_new_int64(pg->pg));
    json_object_object_add(e, "inode", json_object_new_int64((int64_t) ob->inode));
    json_object_object_add(e, "offset", json_object_new_int64((int64_t) ob->offset));
    json_object_object_add(e, "version", json_object_new_int64((int64_t) ob->version));
    if (pg->state == PG_INCOMPLETE)
      json_object_array_add(st, json_object_new_string("incomplete"));
    if (lacking) {
      json_object *so = json_object_new_array();
      json_object_array_add(st, json_object_new_string("degraded"));
      for (uint32_t s = 0; s < pg->size && s < TC_MAX_PG_SIZE; s++)
        if ((lacking >> s & 1) && pg->osd_set[s])
          json_object_array_add(so, json_object_new_int64((int64_t) pg->osd_set[s]));
      json_object_object_add(e, "stale_osds", so);
    }
    if (ob->inconsistent)
      json_object_array_add(st, json_object_new_string("inconsistent"));
    json_object_object_add(e, "state", st);
    json_object *set = json_object_new_array();
    for (uint32_t s = 0; s < pg->size && s < TC_MAX_PG_SIZE; s++)
      json_object_array_add(set, json_object_new_int64((int64_t) pg->osd_set[s]));
    json_object_object_add(e, "osd_set", set);
    json_object_array_add(arr, e);
    (*n)++;
  }
}

static const char *
pg_state_name(int s)
{
  return s == PG_ACTIVE ? "active" : s == PG_PEERING ? "peering" : "incomplete";
}

void
osd_describe(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr)
{
  struct tc_store_stats st;
  json_object *j = json_object_new_object(), *pgs = json_object_new_array();
  json_object_object_add(j, "osd_num", json_object_new_int64((int64_t) o->osd_num));
  if (tc_store_stats(o->store, &st) == 0) {
    json_object_object_add(j, "objects", json_object_new_int64((int64_t) st.objects));
    json_object_object_add(j, "used_bytes", json_object_new_int64((int64_t) st.used_bytes));
    json_object_object_add(j, "checksum_errors", json_object_new_int64((int64_t) st.checksum_errors));
  }
  json_object_object_add(j, "ops", json_object_new_int64((int64_t) o->ops));
  json_object_object_add(j, "eperm", json_object_new_int64((int64_t) o->eperm));
  json_object_object_add(j, "recovered", json_object_new_int64((int64_t) o->recovered));
  json_object_object_add(j, "replays_skipped", json_object_new_int64((int64_t) o->replays_skipped));
  json_object_object_add(j, "repaired", json_object_new_int64((int64_t) o->repaired));
  json_object_object_add(j, "recovery_inflight", json_object_new_int(o->recovery_inflight));
  for (size_t i = 0; i < o->n_pgs; i++) {
    struct osd_pg *pg = &o->pgs[i];
    json_object *p = json_object_new_object();
    json_object_object_add(p, "pool", json_object_new_int64((int64_t) pg->pool));
    json_object_object_add(p, "pg", json_object_new_int64(pg->pg));
    json_object_object_add(p, "state", json_object_new_string(pg_state_name(pg->state)));
    json_object_object_add(p, "objects", json_object_new_int64((int64_t) pg->objs.n));
    json_object_object_add(p, "degraded", json_object_new_int64((int64_t) pg->n_stale));
    json_object_object_add(p, "inconsistent", json_object_new_int64((int64_t) pg->n_inconsistent));
    json_object_object_add(p, "clean", json_object_new_boolean(pg->state == PG_ACTIVE && !pg->n_stale &&
                                                               __builtin_popcount(pg->up) == (int) pg->size));
    json_object_array_add(pgs, p);
  }
  json_object_object_add(j, "pgs", pgs);
  json_object *objs = json_object_new_array();
  size_t nobj = 0;
  for (size_t i = 0; i < o->n_pgs; i++)
    unclean_objects(o, &o->pgs[i], objs, &nobj);
  json_object_object_add(j, "objects", objs);
  if (nobj >= DESCRIBE_MAX_OBJECTS)
    json_object_object_add(j, "objects_truncated", json_object_new_boolean(true));
  json_object *peers = json_object_new_array();
  for (size_t i = 0; i < o->n_peers; i++) {
    json_object *p = json_object_new_object();
    json_object_object_add(p, "osd", json_object_new_int64((int64_t) o->peers[i].osd_num));
    json_object_object_add(p, "down", json_object_new_boolean(o->peers[i].down));
    if (o->peers[i].conn) {
      struct tc_msgr_stats ms;
      tc_msgr_conn_stats(o->peers[i].conn, &ms);
      json_object_object_add(p, "inflight_ops", json_object_new_int64((int64_t) ms.inflight_ops));
      json_object_object_add(p, "waiting", json_object_new_int64((int64_t) ms.waiting));
      json_object_object_add(p, "frames_out", json_object_new_int64((int64_t) ms.frames_out));
      json_object_object_add(p, "frames_in", json_object_new_int64((int64_t) ms.frames_in));
    }
    json_object_array_add(peers, p);
  }
  json_object_object_add(j, "peers", peers);
  reply_json(c, hdr, j);
}

void
osd_show_config(struct osd *o, struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr)
{
  json_object *j = json_object_new_object(), *pools = json_object_new_array(), *prim = json_object_new_array();
  json_object_object_add(j, "osd_num", json_object_new_int64((int64_t) o->osd_num));
  json_object_object_add(j, "block_size", json_object_new_int64(o->info.block_size));
  if (o->ks && o->ks->map)
    for (size_t i = 0; i < o->ks->map->n_pools; i++)
      json_object_array_add(pools, json_object_new_int64((int64_t) o->ks->map->pools[i].id));
  for (size_t i = 0; i < o->n_pgs; i++) {
    json_object *p = json_object_new_array();
    json_object_array_add(p, json_object_new_int64((int64_t) o->pgs[i].pool));
    json_object_array_add(p, json_object_new_int64(o->pgs[i].pg));
    json_object_array_add(prim, p);
  }
  json_object_object_add(j, "pools", pools);
  json_object_object_add(j, "primary_pgs", prim);
  reply_json(c, hdr, j);
}

