/* libFuzzer target: what clients, OSDs and the gateway read back from the
 * KV about images and OSDs (common/cluster/image_meta.c, inode_key.c,
 * perms.c). The first byte picks the parser, the rest is its input:
 *   0  a /config/inode value (tc_image_meta_parse): an accepted record is
 *      written back (tc_image_meta_json) and must parse to the same fields;
 *   1  a /index/image value (tc_image_index_parse): an accepted one names
 *      a pool and an inode id in range;
 *   2  a key "/config/inode/<pool>/<id>" (tc_inode_key_parse_full) and
 *   3  a key the OSDs write, /osd/state|stats/<n> or /pg/state/<pool>/<pg>
 *      (tc_perm_osd_key): one spelling per key, so an accepted key printed
 *      back from its numbers must be the same bytes (a second spelling of
 *      one inode would alias another user's image);
 *   4  an enc_key (tc_image_key_resolve): accepted only as 128 hex digits
 *      with two different halves.
 * Anything else must give a clean error, never a crash, a leak or
 * undefined behaviour. Run with tests/fuzz/run-fuzz.sh image-meta SECONDS;
 * without --enable-fuzzing it is a unit test over its seed corpus
 * (replay-main.c). */
#include <config.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "crypto.h"
#include "image_meta.h"
#include "inode_key.h"
#include "perms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
str_eq(const char *a, const char *b)
{
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void
image_record(const char *s, size_t len)
{
  struct tc_image_meta m;
  if (tc_image_meta_parse(&m, 3, 77, s, len) < 0)
    return;
  if (!m.name || m.size % 4096 || m.pool != 3 || m.id != 77 || (m.integrity && !m.enc_key))
    abort();
  char *json = tc_image_meta_json(&m);
  if (!json)
    abort();
  struct tc_image_meta m2;
  if (tc_image_meta_parse(&m2, 3, 77, json, strlen(json)) < 0)
    abort();   /* what we write, we must read */
  if (!str_eq(m.name, m2.name) || m.size != m2.size || m.parent_pool != m2.parent_pool ||
      m.parent_id != m2.parent_id || m.readonly != m2.readonly || m.integrity != m2.integrity ||
      !str_eq(m.enc_key, m2.enc_key) || !str_eq(m.owner, m2.owner) || !str_eq(m.owner_group, m2.owner_group) ||
      !str_eq(m.reader_group, m2.reader_group) || m.next_pool != m2.next_pool || m.next_id != m2.next_id ||
      m.hidden != m2.hidden || m.retired != m2.retired || m.rekey_from != m2.rekey_from ||
      m.rekey_done != m2.rekey_done)
    abort();
  free(json);
  tc_image_meta_clear(&m);
  tc_image_meta_clear(&m2);
}

static void
index_record(const char *s, size_t len)
{
  uint64_t pool = 0, id = 0;
  if (tc_image_index_parse(s, len, &pool, &id) == 0 && (!pool || pool > TC_POOL_MAX || !id || id > TC_INODE_ID_MAX))
    abort();
}

static void
inode_key(const char *s, size_t len)
{
  static const char prefix[] = "/config/inode/";
  uint64_t pool, id;
  if (tc_inode_key_parse_full(s, len, prefix, &pool, &id) < 0)
    return;
  if (!pool || pool > TC_POOL_MAX || !id || id > TC_INODE_ID_MAX)
    abort();
  char back[64];
  int n = snprintf(back, sizeof back, "%s%" PRIu64 "/%" PRIu64, prefix, pool, id);
  if (n < 0 || (size_t) n != len || memcmp(back, s, len) != 0)
    abort();
}

static void
osd_key(const char *s)
{
  uint64_t osd = 0, pool = 0;
  uint32_t pg = 0;
  int kind = tc_perm_osd_key(s, &osd, &pool, &pg);
  char back[96];
  switch (kind) {
  case 0:
    return;
  case TC_OSD_KEY_STATE:
  case TC_OSD_KEY_STATS:
    if (!osd)
      abort();
    snprintf(back, sizeof back, "/osd/%s/%" PRIu64, kind == TC_OSD_KEY_STATE ? "state" : "stats", osd);
    break;
  case TC_OSD_KEY_PG_STATE:
  case TC_OSD_KEY_PG_STATS:
    if (!pool || pool > TC_POOL_MAX)
      abort();
    snprintf(back, sizeof back, "%s%" PRIu64 "/%" PRIu32, kind == TC_OSD_KEY_PG_STATE ? "/pg/state/" : "/pgstats/",
             pool, pg);
    break;
  default:
    abort();
  }
  if (strcmp(back, s) != 0)
    abort();
}

static void
enc_key(const char *s, size_t len)
{
  uint8_t key[TC_XTS_KEY_SIZE];
  if (tc_image_key_resolve(NULL, "fuzz", s, key) < 0)
    return;
  if (len != 2 * TC_XTS_KEY_SIZE || memcmp(key, key + 32, 32) == 0)
    abort();
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < TC_XTS_KEY_SIZE; i++) {
    char hi = (char) (s[2 * i] | 0x20), lo = (char) (s[2 * i + 1] | 0x20);   /* either case */
    if (hi != hex[key[i] >> 4] || lo != hex[key[i] & 15])
      abort();
  }
  tc_wipe(key, sizeof key);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1 || size > 65536)
    return 0;
  /* The parsers take NUL-terminated strings (keys) or buffers (JSON): give
   * them a copy with a NUL after it, the way the KV client hands values on. */
  size_t len = size - 1;
  char *s = malloc(len + 1);
  if (!s)
    abort();
  memcpy(s, data + 1, len);
  s[len] = 0;
  switch (data[0] % 5) {
  case 0: image_record(s, len); break;
  case 1: index_record(s, len); break;
  case 2: if (!memchr(s, 0, len)) inode_key(s, len); break;
  case 3: if (!memchr(s, 0, len)) osd_key(s); break;
  default: if (!memchr(s, 0, len)) enc_key(s, len); break;
  }
  free(s);
  return 0;
}
