/* The rights tables of the seed document, case by case (common/cluster/perms.c). */
#include <config.h>
#include <string.h>
#include "osd_ops.h"
#include "perms.h"
#include "tap.h"

/* The cluster the KV lookups answer about: pool 1 (creator group
 * "creators"), pool 2 (no creator group); images alice-img (inode 1/5,
 * owner alice, owner group devs, reader group auditors) and bob-img (1/6). */
static const struct tc_image_acl alice_img = { "alice", "devs", "auditors" };
static const struct tc_image_acl bob_img = { "bob", NULL, NULL };

static const struct tc_image_acl *
by_inode(void *ctx, uint64_t pool, uint64_t inode)
{
  if (pool == 1 && inode == 5) return &alice_img;
  if (pool == 1 && inode == 6) return &bob_img;
  return NULL;
}

static const struct tc_image_acl *
by_name(void *ctx, const char *name)
{
  if (!strcmp(name, "alice-img")) return &alice_img;
  if (!strcmp(name, "bob-img")) return &bob_img;
  return NULL;
}

static const char *
pool_cg(void *ctx, uint64_t pool, bool *exists)
{
  *exists = pool == 1 || pool == 2;
  return pool == 1 ? "creators" : NULL;
}

static const struct tc_kv_lookup lk = { NULL, by_inode, by_name, pool_cg };

int
main(void)
{
  static const char *const alice_groups[] = { "creators", NULL };
  static const char *const carol_groups[] = { "devs", NULL };
  static const char *const dave_groups[] = { "auditors", NULL };
  const struct tc_user alice_u = { "alice", false, alice_groups };
  const struct tc_user carol_u = { "carol", false, carol_groups };
  const struct tc_user dave_u = { "dave", false, dave_groups };
  const struct tc_user root_u = { "root", true, NULL };
  const struct tc_identity alice = { TC_ROLE_USER, "alice", &alice_u };
  const struct tc_identity carol = { TC_ROLE_USER, "carol", &carol_u };     /* owner group */
  const struct tc_identity dave = { TC_ROLE_USER, "dave", &dave_u };        /* reader group */
  const struct tc_identity eve = { TC_ROLE_USER, "eve", NULL };             /* no record */
  const struct tc_identity root = { TC_ROLE_USER, "root", &root_u };
  const struct tc_identity osd = { TC_ROLE_OSD, NULL, NULL };
  const struct tc_identity mon = { TC_ROLE_MON, NULL, NULL };
  const struct tc_identity anyone = { TC_ROLE_ANON, NULL, NULL };

  /* Image rights. */
  CHECK(tc_perm_image_read(&alice, &alice_img) && tc_perm_image_write(&alice, &alice_img), "owner rw");
  CHECK(tc_perm_image_read(&carol, &alice_img) && tc_perm_image_write(&carol, &alice_img), "owner group rw");
  CHECK(tc_perm_image_read(&dave, &alice_img) && !tc_perm_image_write(&dave, &alice_img), "reader group r");
  CHECK(!tc_perm_image_read(&eve, &alice_img) && !tc_perm_image_write(&eve, &alice_img), "stranger none");
  CHECK(!tc_perm_image_read(&alice, &bob_img), "alice cannot read bob's image");
  CHECK(tc_perm_image_write(&root, &bob_img) && tc_perm_image_read(&root, NULL), "admin all");
  CHECK(!tc_perm_image_read(&osd, &alice_img) && !tc_perm_image_read(&anyone, &alice_img), "non-users");
  CHECK(tc_perm_pool_create(&alice, "creators") && !tc_perm_pool_create(&carol, "creators") &&
        !tc_perm_pool_create(&alice, NULL) && tc_perm_pool_create(&root, NULL), "pool create");

  /* OSD data rights: every op for every identity. */
  static const int sec_ops[] = { TC_OP_SEC_READ, TC_OP_SEC_WRITE, TC_OP_SEC_WRITE_STABLE, TC_OP_SEC_SYNC,
                                 TC_OP_SEC_STABILIZE, TC_OP_SEC_ROLLBACK, TC_OP_SEC_DELETE,
                                 TC_OP_SEC_READ_BMP, TC_OP_SEC_LOCK };
  for (size_t i = 0; i < sizeof sec_ops / sizeof sec_ops[0]; i++) {
    CHECK(tc_perm_osd_op(&osd, sec_ops[i], NULL), "osd may %s", tc_osd_op_name(sec_ops[i]));
    CHECK(!tc_perm_osd_op(&root, sec_ops[i], &alice_img), "admin may not %s", tc_osd_op_name(sec_ops[i]));
    CHECK(!tc_perm_osd_op(&alice, sec_ops[i], &alice_img), "user may not %s", tc_osd_op_name(sec_ops[i]));
    CHECK(!tc_perm_osd_op(&mon, sec_ops[i], NULL), "mon may not %s", tc_osd_op_name(sec_ops[i]));
  }
  CHECK(tc_perm_osd_op(&dave, TC_OP_READ, &alice_img), "reader READ");
  CHECK(!tc_perm_osd_op(&dave, TC_OP_WRITE, &alice_img), "reader WRITE refused");
  CHECK(!tc_perm_osd_op(&dave, TC_OP_DELETE, &alice_img), "reader DELETE refused");
  CHECK(!tc_perm_osd_op(&dave, TC_OP_SCRUB, &alice_img), "reader SCRUB refused");
  CHECK(tc_perm_osd_op(&carol, TC_OP_WRITE, &alice_img) && tc_perm_osd_op(&carol, TC_OP_DELETE, &alice_img) &&
        tc_perm_osd_op(&carol, TC_OP_SCRUB, &alice_img), "owner group WRITE/DELETE/SCRUB");
  /* The partial-sector writes are writes (issue 18). */
  CHECK(!tc_perm_osd_op(&dave, TC_OP_WRITE_PARTIAL, &alice_img) && !tc_perm_osd_op(&dave, TC_OP_WRITE_IF, &alice_img),
        "reader WRITE_PARTIAL/WRITE_IF refused");
  CHECK(tc_perm_osd_op(&carol, TC_OP_WRITE_PARTIAL, &alice_img) && tc_perm_osd_op(&carol, TC_OP_WRITE_IF, &alice_img),
        "owner group WRITE_PARTIAL/WRITE_IF");
  CHECK(!tc_perm_osd_op(&osd, TC_OP_WRITE_PARTIAL, &alice_img) && !tc_perm_osd_op(&eve, TC_OP_WRITE_IF, &alice_img),
        "osd/stranger WRITE_PARTIAL/WRITE_IF refused");
  CHECK(!strcmp(tc_osd_op_name(TC_OP_WRITE_PARTIAL), "WRITE_PARTIAL") && !strcmp(tc_osd_op_name(TC_OP_WRITE_IF), "WRITE_IF"),
        "names of the partial writes");
  CHECK(!tc_perm_osd_op(&eve, TC_OP_READ, &alice_img), "stranger READ refused");
  CHECK(!tc_perm_osd_op(&alice, TC_OP_READ, NULL), "READ of an inode without image refused");
  CHECK(tc_perm_osd_op(&eve, TC_OP_SYNC, NULL) && tc_perm_osd_op(&eve, TC_OP_PING, NULL) &&
        tc_perm_osd_op(&eve, TC_OP_SHOW_CONFIG, NULL), "SYNC, PING, SHOW_CONFIG always");
  CHECK(tc_perm_osd_op(&root, TC_OP_DESCRIBE, NULL) && !tc_perm_osd_op(&alice, TC_OP_DESCRIBE, NULL),
        "DESCRIBE admin only");
  CHECK(tc_perm_osd_op(&root, TC_OP_SEC_LIST, NULL) && tc_perm_osd_op(&osd, TC_OP_SEC_LIST, NULL),
        "SEC_LIST unlimited for admin and osd");
  CHECK(!tc_perm_osd_op(&alice, TC_OP_SEC_LIST, NULL), "client SEC_LIST unlimited refused");
  CHECK(tc_perm_osd_op(&dave, TC_OP_SEC_LIST, &alice_img) && !tc_perm_osd_op(&eve, TC_OP_SEC_LIST, &alice_img),
        "client SEC_LIST limited to a readable image");
  CHECK(!tc_perm_osd_op(&osd, TC_OP_READ, &alice_img) && !tc_perm_osd_op(&mon, TC_OP_WRITE, &alice_img),
        "osd/mon no client data ops");
  CHECK(!tc_perm_osd_op(&root, 999, NULL), "unknown opcode refused");

  /* KV rights: clients. */
  const char *always[] = { "/config/global", "/config/node_placement", "/config/pools", "/pg/config",
                           "/osd/state/3", "/pg/state/1/7", "/index/maxid/1" };
  for (size_t i = 0; i < sizeof always / sizeof always[0]; i++) {
    CHECK(tc_perm_kv(&eve, always[i], TC_KV_READ, &lk, NULL), "client reads %s", always[i]);
    CHECK(!tc_perm_kv(&eve, always[i], TC_KV_WRITE, &lk, NULL), "client may not write %s", always[i]);
  }
  /* One exception to the seed's table (DESIGN.md 3): a client reads its
   * own record, so the client library learns its type and groups. */
  CHECK(tc_perm_kv(&eve, "/config/user/eve", TC_KV_READ, &lk, NULL), "client reads its own user record");
  CHECK(!tc_perm_kv(&eve, "/config/user/eve", TC_KV_WRITE, &lk, NULL), "client may not write its own record");
  CHECK(!tc_perm_kv(&eve, "/config/user/alice", TC_KV_READ, &lk, NULL), "client reads no other user record");
  CHECK(!tc_perm_kv(&eve, "/config/user/eve/x", TC_KV_READ, &lk, NULL), "client reads nothing below its record");
  CHECK(!tc_perm_kv(&anyone, "/config/user/", TC_KV_READ, &lk, NULL), "anyone reads no user record");
  CHECK(!tc_perm_kv(&eve, "/stats", TC_KV_READ, &lk, NULL), "client reads no /stats");
  CHECK(!tc_perm_kv(&eve, "/pg/history/1/1", TC_KV_READ, &lk, NULL), "client reads no pg history");
  CHECK(tc_perm_kv(&dave, "/config/inode/1/5", TC_KV_READ, &lk, NULL), "reader reads inode config");
  CHECK(tc_perm_kv(&dave, "/index/image/alice-img", TC_KV_READ, &lk, NULL), "reader reads index");
  CHECK(tc_perm_kv(&dave, "/inode/stats/1/5", TC_KV_READ, &lk, NULL), "reader reads inode stats");
  CHECK(!tc_perm_kv(&dave, "/config/inode/1/5", TC_KV_WRITE, &lk, &alice_img), "reader may not write inode");
  CHECK(!tc_perm_kv(&eve, "/config/inode/1/5", TC_KV_READ, &lk, NULL), "stranger reads no inode config");
  CHECK(!tc_perm_kv(&eve, "/index/image/alice-img", TC_KV_READ, &lk, NULL), "stranger reads no index");
  CHECK(tc_perm_kv(&alice, "/config/inode/1/5", TC_KV_WRITE, &lk, &alice_img), "owner modifies inode");
  CHECK(tc_perm_kv(&alice, "/config/inode/1/5", TC_KV_WRITE, &lk, NULL), "owner deletes inode");
  CHECK(!tc_perm_kv(&alice, "/config/inode/1/5", TC_KV_WRITE, &lk, &bob_img), "owner may not give it away");
  CHECK(!tc_perm_kv(&alice, "/config/inode/1/6", TC_KV_WRITE, &lk, &alice_img), "no write to bob's inode");
  const struct tc_image_acl alice_new = { "alice", NULL, NULL };
  CHECK(tc_perm_kv(&alice, "/config/inode/1/9", TC_KV_WRITE, &lk, &alice_new), "create in pool 1 (creator)");
  CHECK(!tc_perm_kv(&alice, "/config/inode/2/9", TC_KV_WRITE, &lk, &alice_new), "no create in pool 2");
  CHECK(!tc_perm_kv(&alice, "/config/inode/3/9", TC_KV_WRITE, &lk, &alice_new), "no create in missing pool");
  /* Inode keys only in canonical decimal: 1/281474976710661 (2^48+5)
   * would alias bob's 1/6 ... or alice's 1/5, read as an inode number. */
  static const char *const bad_keys[] = {
    "/config/inode/1/281474976710661", "/config/inode/1/281474976710656", "/config/inode/1/05",
    "/config/inode/01/5", "/config/inode/+1/5", "/config/inode/1/+5", "/config/inode/1/ 5",
    "/config/inode/1/5 ", "/config/inode/1/5/", "/config/inode/1/5x", "/config/inode/0/5",
    "/config/inode/1/0", "/config/inode/65536/5", "/config/inode/1/-5", "/config/inode/1//5",
    "/config/inode/18446744073709551617/5", "/config/inode/1/18446744073709551621", NULL };
  for (const char *const *k = bad_keys; *k; k++) {
    CHECK(!tc_perm_kv(&alice, *k, TC_KV_WRITE, &lk, &alice_new), "no create at a non-canonical key");
    CHECK(!tc_perm_kv(&alice, *k, TC_KV_READ, &lk, NULL), "no read at a non-canonical key");
    CHECK(!tc_perm_kv(&carol, *k, TC_KV_WRITE, &lk, &alice_img), "no modify at a non-canonical key");
  }
  CHECK(tc_perm_kv(&alice, "/config/inode/65535/281474976710655", TC_KV_READ, &lk, NULL) == false,
        "largest canonical key parses (no image there)");
  CHECK(!tc_perm_kv(&alice, "/index/maxid/01", TC_KV_WRITE, &lk, NULL), "maxid key canonical only");
  CHECK(tc_perm_kv(&alice, "/index/maxid/1", TC_KV_WRITE, &lk, NULL), "maxid of a pool alice creates in");
  CHECK(!tc_perm_kv(&carol, "/config/inode/1/9", TC_KV_WRITE, &lk, &alice_new), "no create for someone else");
  CHECK(tc_perm_kv(&alice, "/index/maxid/1", TC_KV_WRITE, &lk, NULL), "creator bumps maxid");
  CHECK(!tc_perm_kv(&carol, "/index/maxid/1", TC_KV_WRITE, &lk, NULL), "non-creator may not bump maxid");
  CHECK(tc_perm_kv(&alice, "/index/image/new", TC_KV_WRITE, &lk, &alice_new), "index of own new image");
  CHECK(!tc_perm_kv(&alice, "/index/image/bob-img", TC_KV_WRITE, &lk, &alice_new), "no overwrite of bob's index");
  CHECK(!tc_perm_kv(&alice, "/config/inode/1/x", TC_KV_READ, &lk, NULL), "malformed inode key refused");
  /* admins */
  CHECK(tc_perm_kv(&root, "/config/user/eve", TC_KV_WRITE, &lk, NULL), "admin writes /config/*");
  CHECK(tc_perm_kv(&root, "/osd/state/1", TC_KV_WRITE, &lk, NULL), "admin writes /osd/*");
  CHECK(tc_perm_kv(&root, "/pg/history/1/2", TC_KV_WRITE, &lk, NULL), "admin writes /pg/history/*");
  CHECK(tc_perm_kv(&root, "/stats", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&root, "/stats", TC_KV_WRITE, &lk, NULL),
        "admin reads /stats only");
  CHECK(tc_perm_kv(&root, "/pg/config", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&root, "/pg/config", TC_KV_WRITE, &lk, NULL),
        "admin reads /pg/config only");
  CHECK(tc_perm_kv(&root, "/mon/master", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&root, "/mon/master", TC_KV_WRITE, &lk, NULL),
        "admin reads /mon only");
  CHECK(!tc_perm_kv(&root, "/history/last_clean_pgs", TC_KV_WRITE, &lk, NULL), "admin no last_clean_pgs write");
  /* OSDs */
  CHECK(tc_perm_kv(&osd, "/pg/config", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&osd, "/pg/config", TC_KV_WRITE, &lk, NULL), "osd pg/config r");
  CHECK(tc_perm_kv(&osd, "/config/inode/1/5", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&osd, "/config/pools", TC_KV_WRITE, &lk, NULL), "osd /config r");
  CHECK(tc_perm_kv(&osd, "/osd/state/1", TC_KV_WRITE, &lk, NULL) && tc_perm_kv(&osd, "/pg/state/1/1", TC_KV_WRITE, &lk, NULL) &&
        tc_perm_kv(&osd, "/osd/stats/1", TC_KV_WRITE, &lk, NULL) && tc_perm_kv(&osd, "/pgstats/1/1", TC_KV_WRITE, &lk, NULL),
        "osd writes state, stats, pg state and pg stats (the filter: its own lease, PGs it leads)");
  CHECK(!tc_perm_kv(&osd, "/pgstats/1", TC_KV_WRITE, &lk, NULL) && !tc_perm_kv(&osd, "/pgstats/0/1", TC_KV_WRITE, &lk, NULL) &&
        !tc_perm_kv(&osd, "/pgstats/1/1/2", TC_KV_WRITE, &lk, NULL) && !tc_perm_kv(&osd, "/pgstats/01/1", TC_KV_WRITE, &lk, NULL) &&
        !tc_perm_kv(&osd, "/pgstats/1/01", TC_KV_WRITE, &lk, NULL) && !tc_perm_kv(&osd, "/pgstats/", TC_KV_WRITE, &lk, NULL),
        "osd writes /pgstats/<pool>/<pg> only, one spelling");
  CHECK(!tc_perm_kv(&osd, "/pg/history/1/1", TC_KV_WRITE, &lk, NULL) &&
        !tc_perm_kv(&osd, "/osd/other/1", TC_KV_WRITE, &lk, NULL) && !tc_perm_kv(&osd, "/osd/state/01", TC_KV_WRITE, &lk, NULL) &&
        !tc_perm_kv(&osd, "/osd/stats/0", TC_KV_WRITE, &lk, NULL) && !tc_perm_kv(&osd, "/pg/state/1", TC_KV_WRITE, &lk, NULL) &&
        !tc_perm_kv(&osd, "/pg/state/0/1", TC_KV_WRITE, &lk, NULL) && !tc_perm_kv(&osd, "/pg/state/1/1/2", TC_KV_WRITE, &lk, NULL),
        "osd writes nothing else (seed: /osd/*, /pg/history/*, /pgstats/*)");
  CHECK(tc_perm_kv(&osd, "/pg/history/1/1", TC_KV_READ, &lk, NULL) && tc_perm_kv(&osd, "/osd/stats/2", TC_KV_READ, &lk, NULL) &&
        tc_perm_kv(&osd, "/pgstats/1/1", TC_KV_READ, &lk, NULL), "osd still reads them");
  uint64_t n = 0, pl = 0;
  uint32_t pgn = 0;
  CHECK(tc_perm_osd_key("/osd/stats/12", &n, NULL, NULL) == TC_OSD_KEY_STATS && n == 12 &&
        tc_perm_osd_key("/osd/state/7", &n, NULL, NULL) == TC_OSD_KEY_STATE && n == 7 &&
        tc_perm_osd_key("/pg/state/3/0", NULL, &pl, &pgn) == TC_OSD_KEY_PG_STATE && pl == 3 && pgn == 0 &&
        tc_perm_osd_key("/pgstats/4/7", NULL, &pl, &pgn) == TC_OSD_KEY_PG_STATS && pl == 4 && pgn == 7 &&
        !tc_perm_osd_key("/pgstats/4", NULL, &pl, &pgn) && !tc_perm_osd_key("/pgstatsx/4/7", NULL, &pl, &pgn) &&
        !tc_perm_osd_key("/pg/state/3/", NULL, &pl, &pgn) && !tc_perm_osd_key("/osd/stats/", &n, NULL, NULL),
        "tc_perm_osd_key shapes");
  CHECK(!tc_perm_kv(&osd, "/stats", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&osd, "/mon/master", TC_KV_WRITE, &lk, NULL), "osd no mon keys");
  CHECK(!tc_perm_kv(&osd, "/index/image/alice-img", TC_KV_READ, &lk, NULL), "osd reads no index");
  /* monitors */
  CHECK(tc_perm_kv(&mon, "/pg/config", TC_KV_WRITE, &lk, NULL) && tc_perm_kv(&mon, "/stats", TC_KV_WRITE, &lk, NULL) &&
        tc_perm_kv(&mon, "/history/last_clean_pgs", TC_KV_WRITE, &lk, NULL) && tc_perm_kv(&mon, "/mon/master", TC_KV_WRITE, &lk, NULL) &&
        tc_perm_kv(&mon, "/pg/history/1/1", TC_KV_WRITE, &lk, NULL) && tc_perm_kv(&mon, "/inode/stats/1/5", TC_KV_WRITE, &lk, NULL) &&
        tc_perm_kv(&mon, "/pool/stats/1", TC_KV_WRITE, &lk, NULL), "mon rw");
  CHECK(tc_perm_kv(&mon, "/osd/state/1", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&mon, "/osd/state/1", TC_KV_WRITE, &lk, NULL), "mon osd r");
  CHECK(tc_perm_kv(&mon, "/config/pools", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&mon, "/config/pools", TC_KV_WRITE, &lk, NULL), "mon config r");
  CHECK(!tc_perm_kv(&mon, "/pg/state/1/1", TC_KV_READ, &lk, NULL), "mon no pg/state");
  CHECK(tc_perm_kv(&mon, "/pgstats/1/1", TC_KV_READ, &lk, NULL) && !tc_perm_kv(&mon, "/pgstats/1/1", TC_KV_WRITE, &lk, NULL),
        "mon reads pgstats (the PGs' reports it balances primaries by)");
  CHECK(!tc_perm_kv(&anyone, "/config/global", TC_KV_READ, &lk, NULL), "anonymous nothing");
  CHECK(!tc_perm_kv(&root, "relative/key", TC_KV_READ, &lk, NULL), "relative key refused");

  /* Range visibility. */
  CHECK(tc_perm_kv_prefix_visible(&eve, "/config/"), "client sees something under /config/");
  CHECK(tc_perm_kv_prefix_visible(&eve, "/osd/state/"), "client sees /osd/state/");
  CHECK(!tc_perm_kv_prefix_visible(&eve, "/mon/"), "client sees nothing under /mon/");
  CHECK(!tc_perm_kv_prefix_visible(&eve, "/config/user/"), "client sees no user records");
  CHECK(tc_perm_kv_prefix_visible(&osd, "/pg/"), "osd sees /pg/");
  CHECK(!tc_perm_kv_prefix_visible(&osd, "/index/"), "osd sees no /index/");

  /* API rights. */
  CHECK(tc_perm_api(&dave, "image/list", &alice_img, NULL) && !tc_perm_api(&eve, "image/list", &alice_img, NULL), "image/list");
  CHECK(tc_perm_api(&alice, "image/create", NULL, "creators") && !tc_perm_api(&carol, "image/create", NULL, "creators"), "image/create in pool");
  CHECK(tc_perm_api(&carol, "image/create", &alice_img, NULL) && !tc_perm_api(&dave, "image/create", &alice_img, NULL), "snapshot of owned image");
  CHECK(tc_perm_api(&alice, "image/delete", &alice_img, NULL) && !tc_perm_api(&dave, "image/delete", &alice_img, NULL), "image/delete");
  CHECK(tc_perm_api(&carol, "image/flatten", &alice_img, NULL) && tc_perm_api(&alice, "image/modify", &alice_img, NULL) &&
        !tc_perm_api(&alice, "image/modify", &bob_img, NULL), "flatten/modify");
  CHECK(!tc_perm_api(&alice, "user/create", NULL, NULL) && tc_perm_api(&root, "user/create", NULL, NULL), "admin-only calls");
  CHECK(!tc_perm_api(&osd, "image/list", NULL, NULL), "osd has no API rights");

  char buf[80];
  CHECK(!strcmp(tc_identity_str(&root, buf, sizeof buf), "admin root") &&
        !strcmp(tc_identity_str(&alice, buf, sizeof buf), "user alice"), "identity strings");
  return DONE();
}
