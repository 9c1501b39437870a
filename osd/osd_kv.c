/* The OSD and the KV: registration of /osd/state/<n> with a lease (kept
 * alive by the KV client's lease keeper thread), and watches of the keys
 * the OSD needs: /config/pools, /pg/config, /osd/state/, /config/user/ and
 * /config/inode/ (users and images for the rights checks), /pg/history/
 * (scrubs asked for: next_scrub). A watch event
 * only schedules a reload on the loop thread; the reload reads the six
 * prefixes (blocking, a few ms) and swaps in a new snapshot, so the loop
 * never sees a half-updated state. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <json-c/json.h>
#include "cleanup.h"
#include "error.h"
#include "image_meta.h"
#include "log.h"
#include "osd.h"
#include "inode_key.h"

void
osd_kvstate_free(struct osd_kvstate *s)
{
  if (!s)
    return;
  if (s->map)
    tc_map_unref(s->map);
  for (size_t i = 0; i < s->n_users; i++) {
    free(s->users[i].name);
    for (char **g = s->users[i].groups; g && *g; g++)
      free(*g);
    free(s->users[i].groups);
  }
  free(s->users);
  for (size_t i = 0; i < s->n_images; i++) {
    free(s->images[i].owner);
    free(s->images[i].owner_group);
    free(s->images[i].reader_group);
  }
  free(s->images);
  free(s->osd_ids);
  free(s->osd_revs);
  free(s->scrub_reqs);
  free(s);
}

static char *
key_of(struct osd *o, const char *suffix)
{
  size_t n = strlen(o->prefix) + strlen(suffix) + 1;
  char *k = malloc(n);
  if (k)
    snprintf(k, n, "%s%s", o->prefix, suffix);
  return k;
}

static int
get(struct osd *o, const char *suffix, bool prefix, struct tc_kv_result *res)
{
  CLEANUP_FREE char *k = key_of(o, suffix);
  if (!k)
    return tc_error(ENOMEM, "out of memory");
  memset(res, 0, sizeof *res);
  return prefix ? tc_kv_get_prefix(o->kv, k, 0, res) : tc_kv_get(o->kv, k, 0, res);
}

static json_object *
parse_obj(const uint8_t *v, size_t len)
{
  json_tokener *tok = json_tokener_new();
  if (!tok)
    return NULL;
  json_object *j = json_tokener_parse_ex(tok, (const char *) v, (int) len);
  if (json_tokener_get_error(tok) != json_tokener_success || !json_object_is_type(j, json_type_object)) {
    json_object_put(j);
    j = NULL;
  }
  json_tokener_free(tok);
  return j;
}

/* /config/user/<name>: {"type": "admin"|"client", "groups": [..]} */
static int
load_users(struct osd *o, struct osd_kvstate *s)
{
  struct tc_kv_result res;
  if (get(o, "/config/user/", true, &res) < 0)
    return -1;
  size_t plen = strlen(o->prefix) + strlen("/config/user/");
  s->users = calloc(res.n_kvs ? res.n_kvs : 1, sizeof *s->users);
  if (!s->users) {
    tc_kv_result_free(&res);
    return tc_error(ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < res.n_kvs; i++) {
    struct tc_kv_kv *kv = &res.kvs[i];
    if (kv->key_len <= plen)
      continue;
    json_object *j = parse_obj(kv->value, kv->value_len), *f;
    if (!j) {
      tc_warn("osd %" PRIu64 ": %s: not a JSON object; user ignored", o->osd_num, (char *) kv->key);
      continue;
    }
    struct osd_user *u = &s->users[s->n_users];
    u->name = strdup((char *) kv->key + plen);
    u->admin = json_object_object_get_ex(j, "type", &f) && json_object_is_type(f, json_type_string) &&
               !strcmp(json_object_get_string(f), "admin");
    size_t ng = json_object_object_get_ex(j, "groups", &f) && json_object_is_type(f, json_type_array)
                ? json_object_array_length(f) : 0;
    u->groups = calloc(ng + 1, sizeof *u->groups);
    if (!u->name || !u->groups) {
      free(u->name);
      free(u->groups);
      json_object_put(j);
      tc_kv_result_free(&res);
      return tc_error(ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t g = 0; g < ng; g++) {
      json_object *e = json_object_array_get_idx(f, g);
      if (json_object_is_type(e, json_type_string) && (u->groups[k] = strdup(json_object_get_string(e))))
        k++;
    }
    json_object_put(j);
    s->n_users++;
  }
  tc_kv_result_free(&res);
  for (size_t i = 0; i < s->n_users; i++) {
    struct osd_user *u = &s->users[i];
    u->rec.name = u->name;
    u->rec.admin = u->admin;
    u->rec.groups = (const char *const *) u->groups;
  }
  return 0;
}

static int
cmp_image(const void *a, const void *b)
{
  uint64_t x = ((const struct osd_image *) a)->inode, y = ((const struct osd_image *) b)->inode;
  return x < y ? -1 : x > y;
}

/* /config/inode/<pool>/<id> -> ACL by inode number. */
static int
load_images(struct osd *o, struct osd_kvstate *s)
{
  struct tc_kv_result res;
  if (get(o, "/config/inode/", true, &res) < 0)
    return -1;
  size_t plen = strlen(o->prefix) + strlen("/config/inode/");
  s->images = calloc(res.n_kvs ? res.n_kvs : 1, sizeof *s->images);
  if (!s->images) {
    tc_kv_result_free(&res);
    return tc_error(ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < res.n_kvs; i++) {
    struct tc_kv_kv *kv = &res.kvs[i];
    uint64_t pool, id;
    if (kv->key_len <= plen || tc_inode_key_parse((char *) kv->key + plen, kv->key_len - plen, &pool, &id) < 0) {
      tc_warn("osd %" PRIu64 ": ignoring %.*s: %s", o->osd_num, (int) kv->key_len, (char *) kv->key, tc_last_error());
      continue;
    }
    struct tc_image_meta m;
    memset(&m, 0, sizeof m);
    if (tc_image_meta_parse(&m, pool, id, (const char *) kv->value, kv->value_len) < 0) {
      tc_warn("osd %" PRIu64 ": %s: %s; image ignored", o->osd_num, (char *) kv->key, tc_last_error());
      continue;
    }
    struct osd_image *im = &s->images[s->n_images++];
    im->inode = TC_INODE(pool, id);
    im->readonly = m.readonly || m.retired;
    im->retired = m.retired;
    im->owner = m.owner ? strdup(m.owner) : NULL;
    im->owner_group = m.owner_group ? strdup(m.owner_group) : NULL;
    im->reader_group = m.reader_group ? strdup(m.reader_group) : NULL;
    tc_image_meta_clear(&m);
  }
  s->inode_rev = res.revision;
  tc_kv_result_free(&res);
  qsort(s->images, s->n_images, sizeof *s->images, cmp_image);
  /* Two records for one inode: no one gets access through either. */
  size_t k = 0;
  for (size_t i = 0; i < s->n_images;) {
    size_t j = i + 1;
    while (j < s->n_images && s->images[j].inode == s->images[i].inode)
      j++;
    if (j - i > 1) {
      tc_warn("osd %" PRIu64 ": %zu records map to inode %" PRIu64 "/%" PRIu64 ": access to it refused to everyone",
              o->osd_num, j - i, (uint64_t) TC_INODE_POOL(s->images[i].inode), (uint64_t) TC_INODE_ID(s->images[i].inode));
      for (size_t x = i; x < j; x++) {
        free(s->images[x].owner);
        free(s->images[x].owner_group);
        free(s->images[x].reader_group);
      }
    } else
      s->images[k++] = s->images[i];
    i = j;
  }
  s->n_images = k;
  for (size_t i = 0; i < s->n_images; i++) {
    s->images[i].acl.owner = s->images[i].owner;
    s->images[i].acl.owner_group = s->images[i].owner_group;
    s->images[i].acl.reader_group = s->images[i].reader_group;
  }
  return 0;
}

static int
load_map(struct osd *o, struct osd_kvstate *s)
{
  struct tc_kv_result pools, pgc, st;
  if (get(o, "/config/pools", false, &pools) < 0)
    return -1;
  if (get(o, "/pg/config", false, &pgc) < 0) {
    tc_kv_result_free(&pools);
    return -1;
  }
  if (get(o, "/osd/state/", true, &st) < 0) {
    tc_kv_result_free(&pools);
    tc_kv_result_free(&pgc);
    return -1;
  }
  size_t plen = strlen(o->prefix) + strlen("/osd/state/");
  size_t n = st.n_kvs;
  s->osd_ids = calloc(n + 1, sizeof *s->osd_ids);
  s->osd_revs = calloc(n + 1, sizeof *s->osd_revs);
  const char **vals = calloc(n + 1, sizeof *vals);
  size_t *lens = calloc(n + 1, sizeof *lens);
  int rc = -1;
  if (!s->osd_ids || !s->osd_revs || !vals || !lens) {
    tc_error(ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    char *end;
    const char *k = (const char *) st.kvs[i].key + plen;
    if (st.kvs[i].key_len <= plen)
      continue;
    uint64_t id = strtoull(k, &end, 10);
    if (*end || !id)
      continue;
    s->osd_ids[s->n_osds] = id;
    s->osd_revs[s->n_osds] = st.kvs[i].mod_revision;
    vals[s->n_osds] = (const char *) st.kvs[i].value;
    lens[s->n_osds] = st.kvs[i].value_len;
    s->n_osds++;
  }
  s->pgcfg_rev = pgc.n_kvs ? pgc.kvs[0].mod_revision : 0;
  s->map = tc_map_build(pools.n_kvs ? (const char *) pools.kvs[0].value : NULL,
                        pools.n_kvs ? pools.kvs[0].value_len : 0,
                        pgc.n_kvs ? (const char *) pgc.kvs[0].value : NULL, pgc.n_kvs ? pgc.kvs[0].value_len : 0,
                        s->osd_ids, vals, lens, s->n_osds);
  if (s->map)
    rc = 0;
out:
  free(vals);
  free(lens);
  tc_kv_result_free(&pools);
  tc_kv_result_free(&pgc);
  tc_kv_result_free(&st);
  return rc;
}

/* /pg/history/<pool>/<pg> records with a "next_scrub" (wall time). A key
 * not in canonical decimal or a value that is no such record is skipped. */
static int
load_scrub_reqs(struct osd *o, struct osd_kvstate *s)
{
  struct tc_kv_result h;
  if (get(o, "/pg/history/", true, &h) < 0)
    return -1;
  size_t plen = strlen(o->prefix) + strlen("/pg/history/");
  if (h.n_kvs && !(s->scrub_reqs = calloc(h.n_kvs, sizeof *s->scrub_reqs))) {
    tc_kv_result_free(&h);
    return tc_error(ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < h.n_kvs; i++) {
    if (h.kvs[i].key_len <= plen)
      continue;
    const char *k = (const char *) h.kvs[i].key + plen;
    char *end;
    if (*k < '1' || *k > '9')
      continue;
    uint64_t pool = strtoull(k, &end, 10);
    if (*end != '/' || !end[1] || (end[1] == '0' && end[2]) || end[1] < '0' || end[1] > '9')
      continue;
    unsigned long long pg = strtoull(end + 1, &end, 10);
    if (*end || pg > UINT32_MAX)
      continue;
    json_object *j = parse_obj(h.kvs[i].value, h.kvs[i].value_len), *f;
    if (j && json_object_object_get_ex(j, "next_scrub", &f) && json_object_is_type(f, json_type_int) &&
        json_object_get_int64(f) > 0)
      s->scrub_reqs[s->n_scrub_reqs++] = (struct osd_scrub_req) { pool, (uint32_t) pg, json_object_get_int64(f) };
    json_object_put(j);
  }
  tc_kv_result_free(&h);
  return 0;
}

int64_t
osd_scrub_requested(struct osd *o, uint64_t pool, uint32_t pg)
{
  for (size_t i = 0; o->ks && i < o->ks->n_scrub_reqs; i++)
    if (o->ks->scrub_reqs[i].pool == pool && o->ks->scrub_reqs[i].pg == pg)
      return o->ks->scrub_reqs[i].next_scrub;
  return 0;
}

int
osd_kv_reload(struct osd *o)
{
  struct osd_kvstate *s = calloc(1, sizeof *s);
  if (!s)
    return tc_error(ENOMEM, "out of memory");
  if (load_map(o, s) < 0 || load_users(o, s) < 0 || load_images(o, s) < 0 || load_scrub_reqs(o, s) < 0) {
    tc_warn("osd %" PRIu64 ": reading the KV: %s", o->osd_num, tc_last_error());
    osd_kvstate_free(s);
    return -1;
  }
  struct osd_kvstate *old = o->ks;
  o->ks = s;
  osd_kvstate_free(old);
  if (o->events.kv_changed)
    o->events.kv_changed(o);
  return 0;
}

const struct tc_user *
osd_user_find(struct osd *o, const char *name)
{
  if (!o->ks || !name)
    return NULL;
  for (size_t i = 0; i < o->ks->n_users; i++)
    if (!strcmp(o->ks->users[i].name, name))
      return &o->ks->users[i].rec;
  return NULL;
}

static struct osd_image *
image_find(struct osd *o, uint64_t inode)
{
  if (!o->ks)
    return NULL;
  size_t lo = 0, hi = o->ks->n_images;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    uint64_t v = o->ks->images[mid].inode;
    if (v == inode)
      return &o->ks->images[mid];
    if (v < inode)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const struct tc_image_acl *
osd_image_acl(struct osd *o, uint64_t inode)
{
  struct osd_image *im = image_find(o, inode);
  return im ? &im->acl : NULL;
}

bool
osd_image_readonly(struct osd *o, uint64_t inode)
{
  struct osd_image *im = image_find(o, inode);
  return im && im->readonly;
}

bool
osd_image_retired(struct osd *o, uint64_t inode)
{
  struct osd_image *im = image_find(o, inode);
  return im && im->retired;
}

bool
osd_is_up(struct osd *o, uint64_t osd_num)
{
  return osd_state_rev(o, osd_num) != 0;
}

int64_t
osd_state_rev(struct osd *o, uint64_t osd_num)
{
  if (!o->ks)
    return 0;
  for (size_t i = 0; i < o->ks->n_osds; i++)
    if (o->ks->osd_ids[i] == osd_num)
      return o->ks->osd_revs[i];
  return 0;
}

/* ---- watches: any event schedules one reload on the loop ---- */

static void
reload_on_loop(struct tc_evloop *loop, void *arg)
{
  struct osd *o = arg;
  o->reload_pending = 0;
  if (o->stopping)
    return;
  if (osd_kv_reload(o) < 0 && !o->reload_pending) {
    /* Retry later: the KV may be restarting. */
    o->reload_pending = 1;
    if (!tc_evloop_timer_add(loop, 500, reload_on_loop, o)) {
      o->reload_pending = 0;
      tc_err("osd %" PRIu64 ": cannot schedule a KV reload: %s", o->osd_num, tc_last_error());
    }
  }
}

static void
schedule_reload(struct tc_evloop *loop, void *arg)
{
  struct osd *o = arg;
  if (o->reload_pending || o->stopping)
    return;
  o->reload_pending = 1;
  /* Let a burst of events settle into one reload. */
  if (!tc_evloop_timer_add(loop, o->kv_settle_ms, reload_on_loop, o))
    reload_on_loop(loop, o);
}

static void
on_watch(void *arg, const struct tc_kv_watch_update *u)
{
  struct osd *o = arg;
  if (tc_evloop_submit(o->loop, schedule_reload, o) < 0)
    tc_err("osd %" PRIu64 ": a KV change could not reach the loop: %s", o->osd_num, tc_last_error());
}

/* ---- registration ---- */

static int register_state(struct osd *o);

static void
reregister_on_loop(struct tc_evloop *loop, void *arg)
{
  struct osd *o = arg;
  if (o->stopping)
    return;
  if (o->keeper) {
    tc_kv_lease_keeper_stop(o->keeper);
    o->keeper = NULL;
  }
  /* However short the gap, the PGs may have moved meanwhile: osd_lease_tick
   * lifts the fence with a new peering once a new lease is held. */
  o->lease_fenced = true;
  if (register_state(o) < 0) {
    tc_warn("osd %" PRIu64 ": registering again: %s (retrying)", o->osd_num, tc_last_error());
    if (!tc_evloop_timer_add(loop, 1000, reregister_on_loop, o))
      tc_err("osd %" PRIu64 ": cannot schedule registering again: %s", o->osd_num, tc_last_error());
  }
}

/* Self-fencing. The monitor moves the PGs of an OSD whose /osd/state
 * lease ran out, and the new primary may then take writes; an OSD cut off
 * from the KV learns that only when it reaches the KV again. So from the
 * moment its lease may have run out at the server
 * (tc_kv_lease_keeper_until_ms) until it holds one again, an OSD serves
 * no client I/O (-EAGAIN: the client reads the map again and retries) and
 * takes no data from any primary as a member (its own map may be stale);
 * before serving again, every PG it leads peers again, since a PG that
 * moved away and back meanwhile has writes its copy lacks. */
static bool
lease_alive(const struct osd *o)
{
  return tc_now_ms() < tc_kv_lease_keeper_until_ms(o->keeper);   /* 0 without a keeper */
}

bool
osd_lease_held(const struct osd *o)
{
  return !o->lease_fenced && lease_alive(o);
}

/* The beat the lease keeper renews on (tc_kv_lease_keeper_watch): each
 * tick of the loop, unless a store sync has not returned for three
 * leases (a disk that hangs: its OSD answers nothing durable, so it should
 * leave the map as a hung loop does; the background writeback keeps a
 * sync under load to tens or hundreds of milliseconds, store/store.md). */
void
osd_lease_beat(struct osd *o)
{
  uint64_t now = tc_now_ms(), oldest = osd_sync_oldest_ms(o);
  bool stuck = oldest && now > oldest && now - oldest > 3 * o->lease_ttl_ms;
  if (stuck && !o->sync_stuck)
    tc_err("osd %" PRIu64 ": the store's sync has not returned for %" PRIu64 " s: letting the lease lapse until it does",
           o->osd_num, (now - oldest) / 1000);
  else if (!stuck && o->sync_stuck)
    tc_warn("osd %" PRIu64 ": the store's syncs return again", o->osd_num);
  o->sync_stuck = stuck;
  if (!stuck)
    __atomic_store_n(&o->beat_ms, now, __ATOMIC_RELEASE);
}

void
osd_lease_tick(struct osd *o)
{
  bool held = lease_alive(o);
  if (!held && !o->lease_fenced) {
    tc_warn("osd %" PRIu64 ": the KV has not renewed the lease of /osd/state/%" PRIu64 " in time: serving no I/O"
            " until it does", o->osd_num, o->osd_num);
    o->lease_fenced = true;
  }
  if (o->m)
    tc_gauge_set(o->m->lease_held, held && !o->lease_fenced ? 1 : 0);
  if (held && o->lease_fenced) {
    tc_warn("osd %" PRIu64 ": holding a lease again (%" PRIu64 " requests refused without one): peering every PG"
            " this OSD leads before serving", o->osd_num, o->lease_refused);
    o->lease_fenced = false;
    o->lease_refused = 0;
    for (size_t i = 0; i < o->n_pgs; i++)
      osd_pg_repeer(o, &o->pgs[i]);
    if (o->m)
      tc_gauge_set(o->m->lease_held, 1);
  }
}

static void
on_lease_lost(void *arg, int64_t lease_id)
{
  struct osd *o = arg;
  tc_warn("osd %" PRIu64 ": lost the lease of /osd/state/%" PRIu64 "; registering again", o->osd_num, o->osd_num);
  if (tc_evloop_submit(o->loop, reregister_on_loop, o) < 0)
    tc_err("osd %" PRIu64 ": cannot register again: %s", o->osd_num, tc_last_error());
}

static int
register_state(struct osd *o)
{
  int64_t ttl = tc_config_int(o->cfg, "etcd_keepalive_timeout");
  if (ttl < 1)
    return tc_error(EINVAL, "option etcd_keepalive_timeout: %" PRId64 " is not a positive number of seconds", ttl);
  uint64_t sent = tc_now_ms();
  if (tc_kv_lease_grant(o->kv, ttl, &o->lease) < 0)
    return -1;
  char host[256] = "localhost", key[128], val[512];
  gethostname(host, sizeof host - 1);
  snprintf(key, sizeof key, "%s/osd/state/%" PRIu64, o->prefix, o->osd_num);
  json_object *j = json_object_new_object();
  json_object_object_add(j, "addr", json_object_new_string(o->addr));
  json_object_object_add(j, "port", json_object_new_int(o->port));
  json_object_object_add(j, "host", json_object_new_string(host));
  json_object_object_add(j, "pid", json_object_new_int((int) getpid()));
  json_object_object_add(j, "block_size", json_object_new_int64(o->info.block_size));
  /* The access filter lets this OSD write /osd/stats/<n> and /pg/state
   * only with this lease (gateway/kvfilter.c). */
  json_object_object_add(j, "lease", json_object_new_int64(o->lease));
  snprintf(val, sizeof val, "%s", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(j);
  if (tc_kv_put(o->kv, key, 0, val, 0, o->lease, NULL) < 0) {
    int err = errno;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    if (tc_kv_lease_revoke(o->kv, o->lease) < 0)
      tc_debug("osd %" PRIu64 ": revoking an unused lease: %s", o->osd_num, tc_last_error());
    o->lease = 0;
    return tc_error(err, "%s", msg);
  }
  o->keeper = tc_kv_lease_keeper_start(o->kv, o->lease, ttl, sent, on_lease_lost, o);
  if (!o->keeper)
    return -1;
  /* A loop that stops (a hung store call, a bug) while the keeper's thread
   * runs on would keep a dead OSD in the map: the lease lapses once the
   * loop has not ticked for a whole TTL, and the monitor moves its PGs. */
  o->lease_ttl_ms = (uint64_t) ttl * 1000;
  __atomic_store_n(&o->beat_ms, tc_now_ms(), __ATOMIC_RELEASE);
  tc_kv_lease_keeper_watch(o->keeper, &o->beat_ms, o->lease_ttl_ms);
  if (o->m && !o->lease_fenced)
    tc_gauge_set(o->m->lease_held, 1);
  tc_info("osd %" PRIu64 ": registered %s = %s", o->osd_num, key, val);
  return 0;
}

int
osd_kv_start(struct osd *o)
{
  static const struct { const char *k; bool prefix; } w[6] = {
    { "/config/pools", false }, { "/pg/config", false }, { "/osd/state/", true },
    { "/config/user/", true }, { "/config/inode/", true }, { "/pg/history/", true },
  };
  /* Watch first, then read: nothing changes unseen in between. */
  for (int i = 0; i < 6; i++) {
    CLEANUP_FREE char *k = key_of(o, w[i].k);
    if (!k)
      return tc_error(ENOMEM, "out of memory");
    o->watches[i] = tc_kv_watch(o->kv, k, 0, w[i].prefix, 0, on_watch, o);
    if (!o->watches[i])
      return -1;
  }
  /* A run killed a moment ago still holds /osd/state/<n> with its lease
   * until the lease expires, and the KV refuses this run's record (another
   * lease holds the number): wait for it, a TTL and a little more. */
  int64_t ttl = tc_config_int(o->cfg, "etcd_keepalive_timeout");
  uint64_t deadline = tc_now_ms() + (uint64_t) (ttl > 0 ? ttl + 5 : 5) * 1000;
  bool told = false;
  while (register_state(o) < 0) {
    if (tc_now_ms() > deadline || o->stopping)
      return -1;
    if (!told)
      tc_warn("osd %" PRIu64 ": cannot register: %s; an earlier run's lease may still hold it: retrying until it "
              "expires", o->osd_num, tc_last_error());
    told = true;
    usleep(500 * 1000);
  }
  return osd_kv_reload(o);
}

void
osd_kv_stop(struct osd *o)
{
  for (int i = 0; i < 6; i++)
    if (o->watches[i]) {
      tc_kv_watch_cancel(o->watches[i]);
      o->watches[i] = NULL;
    }
  if (o->keeper) {
    tc_kv_lease_keeper_stop(o->keeper);
    o->keeper = NULL;
  }
  if (o->lease && tc_kv_lease_revoke(o->kv, o->lease) < 0)
    tc_warn("osd %" PRIu64 ": revoking the lease: %s", o->osd_num, tc_last_error());
  o->lease = 0;
}
