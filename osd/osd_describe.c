/* DESCRIBE (the OSD's state as JSON, for admins) and SHOW_CONFIG (what a
 * client or a peer needs to know about this OSD). */
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
    json_object_object_add(p, "clean", json_object_new_boolean(pg->state == PG_ACTIVE && !pg->n_stale &&
                                                               __builtin_popcount(pg->up) == (int) pg->size));
    json_object_array_add(pgs, p);
  }
  json_object_object_add(j, "pgs", pgs);
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

