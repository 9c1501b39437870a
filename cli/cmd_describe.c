/* tromcho describe: the objects of the cluster that are not clean, as the
 * seed's `describe` lists them: DESCRIBE (administrators only, checked by
 * each OSD from the caller's certificate) sent to every OSD that is up;
 * each answers for the PGs it leads: "degraded" (a member's copy is older,
 * stale_osds names it), "inconsistent" (the last scrub found a bad sector
 * it could not repair), "incomplete" (fewer than pg_minsize members). An
 * OSD that refuses (EPERM) makes the command fail with "permission denied";
 * one that does not answer is named and left out. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "cli_util.h"
#include "cluster.h"
#include "commands.h"
#include "error.h"
#include "osd_call.h"

/* Whether object e's state words include one of the comma-separated words
 * of want (NULL: any). */
static bool
state_wanted(json_object *e, const char *want)
{
  json_object *st;
  if (!want)
    return true;
  if (!json_object_object_get_ex(e, "state", &st) || !json_object_is_type(st, json_type_array))
    return false;
  for (size_t k = 0; k < json_object_array_length(st); k++) {
    const char *w = json_object_get_string(json_object_array_get_idx(st, k));
    size_t wl = strlen(w);
    for (const char *p = want; p && *p;) {
      const char *c = strchr(p, ',');
      size_t l = c ? (size_t) (c - p) : strlen(p);
      if (l == wl && !strncmp(p, w, l))
        return true;
      p = c ? c + 1 : NULL;
    }
  }
  return false;
}

static int64_t
get_int(json_object *e, const char *k)
{
  json_object *f;
  return json_object_object_get_ex(e, k, &f) ? json_object_get_int64(f) : 0;
}

static void
print_ids(json_object *e, const char *k)
{
  json_object *a;
  if (!json_object_object_get_ex(e, k, &a) || !json_object_is_type(a, json_type_array))
    return;
  for (size_t i = 0; i < json_object_array_length(a); i++)
    printf("%s%" PRId64, i ? "," : "", json_object_get_int64(json_object_array_get_idx(a, i)));
}

int
cmd_describe(int argc, char **argv, struct tc_config *cfg)
{
  bool json = false;
  const char *pool_s = NULL, *osd_s = NULL, *state_s = NULL, *timeout_s = NULL, *pos[1];
  int npos;
  const struct cli_opt opts[] = {
    { "--json", NULL, NULL, &json }, { "--pool", NULL, &pool_s, NULL }, { "--osd", NULL, &osd_s, NULL },
    { "--object-state", NULL, &state_s, NULL }, { "--timeout", NULL, &timeout_s, NULL }, { 0 }
  };
  if (cli_parse("describe", argc, argv, opts, pos, 0, &npos) < 0)
    return 1;
  for (const char *p = state_s; p && *p;) {
    static const char *const known[] = { "degraded", "inconsistent", "incomplete", NULL };
    const char *c = strchr(p, ',');
    size_t l = c ? (size_t) (c - p) : strlen(p);
    bool ok = false;
    for (int k = 0; known[k]; k++)
      ok |= strlen(known[k]) == l && !strncmp(known[k], p, l);
    if (!ok) {
      fprintf(stderr, "tromcho describe: --object-state: unknown state '%.*s' (degraded, inconsistent, incomplete)\n",
              (int) l, p);
      return 1;
    }
    p = c ? c + 1 : NULL;
  }
  int timeout_ms = timeout_s ? (int) (atof(timeout_s) * 1000) : 10000;
  uint64_t want_osd = osd_s ? strtoull(osd_s, NULL, 10) : 0;
  if (osd_s && !want_osd) {
    fprintf(stderr, "tromcho describe: --osd: '%s' is no OSD number\n", osd_s);
    return 1;
  }
  struct tc_client *cl = cli_client("describe", cfg);
  if (!cl)
    return 1;
  if (tc_cluster_refresh(tc_client_cluster(cl)) < 0) {
    int r = cli_fail("describe");
    tc_client_free(cl);
    return r;
  }
  struct tc_map *m = tc_cluster_map(tc_client_cluster(cl));
  uint64_t want_pool = 0;
  if (pool_s) {
    const struct tc_pool_info *p = tc_map_pool_by_name(m, pool_s);
    if (!p)
      p = tc_map_pool(m, strtoull(pool_s, NULL, 10));
    if (!p) {
      fprintf(stderr, "tromcho describe: no pool '%s'\n", pool_s);
      tc_map_unref(m);
      tc_client_free(cl);
      return 1;
    }
    want_pool = p->id;
  }
  size_t n = 0;
  struct tc_osd_addr *osds = calloc(m->n_osds + 1, sizeof *osds);
  struct cli_osd_reply *r = calloc(m->n_osds + 1, sizeof *r);
  json_object *root = json_object_new_object(), *objs = json_object_new_array(), *jo = json_object_new_array();
  if (!osds || !r || !root || !objs || !jo) {
    fprintf(stderr, "tromcho describe: out of memory\n");
    free(osds);
    free(r);
    json_object_put(root);
    json_object_put(objs);
    json_object_put(jo);
    tc_map_unref(m);
    tc_client_free(cl);
    return 1;
  }
  for (size_t i = 0; i < m->n_osds; i++)
    if (!want_osd || m->osds[i].id == want_osd)
      osds[n++] = m->osds[i];
  int rc = 0;
  if (want_osd && !n) {
    fprintf(stderr, "tromcho describe: osd %" PRIu64 " is not up\n", want_osd);
    rc = 1;
  }
  else if (cli_osd_call_all(tc_client_config(cl), osds, n, TC_OP_DESCRIBE, timeout_ms, r) < 0)
    rc = cli_fail("describe");
  size_t shown = 0, unanswered = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    if (r[i].status == -EPERM) {
      fprintf(stderr, "tromcho describe: osd %" PRIu64 ": DESCRIBE: permission denied (administrators only)\n",
              r[i].osd);
      rc = 1;
      break;
    }
    json_object *d = r[i].status == 0 && r[i].payload ? json_tokener_parse(r[i].payload) : NULL, *a;
    if (!d) {
      fprintf(stderr, "tromcho describe: osd %" PRIu64 ": no answer: %s\n", r[i].osd,
              r[i].status < 0 ? strerror(-r[i].status) : "not JSON");
      unanswered++;
      continue;
    }
    if (json_object_object_get_ex(d, "objects", &a) && json_object_is_type(a, json_type_array))
      for (size_t k = 0; k < json_object_array_length(a); k++) {
        json_object *e = json_object_array_get_idx(a, k);
        if ((want_pool && (uint64_t) get_int(e, "pool") != want_pool) || !state_wanted(e, state_s))
          continue;
        json_object_array_add(objs, json_object_get(e));
        shown++;
      }
    json_object_object_del(d, "objects");
    json_object_array_add(jo, d);
  }
  if (!rc && json) {
    json_object_object_add(root, "objects", json_object_get(objs));
    json_object_object_add(root, "osds", json_object_get(jo));
    json_object_object_add(root, "unanswered_osds", json_object_new_int64((int64_t) unanswered));
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
  }
  else if (!rc) {
    if (shown)
      printf("%-5s %-5s %-20s %-12s %-8s %-26s %s\n", "POOL", "PG", "INODE", "OFFSET", "VERSION", "STATE",
             "OSD SET (STALE)");
    for (size_t k = 0; k < shown; k++) {
      json_object *e = json_object_array_get_idx(objs, k), *st;
      uint64_t inode = (uint64_t) get_int(e, "inode");
      char states[128] = "";
      if (json_object_object_get_ex(e, "state", &st))
        for (size_t w = 0; w < json_object_array_length(st); w++) {
          size_t l = strlen(states);
          snprintf(states + l, sizeof states - l, "%s%s", l ? "," : "",
                   json_object_get_string(json_object_array_get_idx(st, w)));
        }
      printf("%-5" PRId64 " %-5" PRId64 " %" PRIu64 ":%-18" PRIu64 " %-12" PRId64 " %-8" PRId64 " %-26s ",
             get_int(e, "pool"), get_int(e, "pg"), inode >> 48, inode & (((uint64_t) 1 << 48) - 1), get_int(e, "offset"),
             get_int(e, "version"), states);
      print_ids(e, "osd_set");
      if (json_object_object_get_ex(e, "stale_osds", &st)) {
        printf(" (");
        print_ids(e, "stale_osds");
        printf(")");
      }
      printf("\n");
    }
    printf("%zu unclean objects%s", shown, unanswered ? "" : "\n");
    if (unanswered)
      printf(" (%zu OSDs did not answer)\n", unanswered);
  }
  cli_osd_replies_free(r, n);
  free(r);
  free(osds);
  json_object_put(objs);
  json_object_put(jo);
  json_object_put(root);
  tc_map_unref(m);
  tc_client_free(cl);
  return rc;
}
