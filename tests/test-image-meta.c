/* Image records: parsing, writing, key resolution and refusals. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "image_meta.h"
#include "tap.h"

#define KEY "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" \
            "f0e0d0c0b0a090807060504030201000ffeeddccbbaa99887766554433221100"

static int
parse(struct tc_image_meta *m, const char *json)
{
  return tc_image_meta_parse(m, 1, 7, json, strlen(json));
}

int
main(void)
{
  struct tc_image_meta m;
  CHECK(tc_crypto_init() == 0, "crypto init");
  CHECK(parse(&m, "{\"name\":\"vm1\",\"size\":1073741824,\"parent_id\":3,\"enc_key\":\"" KEY "\","
                  "\"owner\":\"alice\",\"reader_group\":\"ops\",\"readonly\":true}") == 0,
        "parse: %s", tc_last_error());
  CHECK(!strcmp(m.name, "vm1") && m.size == 1ULL << 30 && m.parent_pool == 1 && m.parent_id == 3 &&
        m.readonly && !strcmp(m.owner, "alice") && !m.owner_group && !strcmp(m.reader_group, "ops"),
        "fields");
  char *js = tc_image_meta_json(&m);
  struct tc_image_meta m2;
  CHECK(js && tc_image_meta_parse(&m2, 1, 7, js, strlen(js)) == 0 && !strcmp(m2.name, "vm1") &&
        m2.size == m.size && m2.parent_id == 3 && m2.readonly && !strcmp(m2.enc_key, KEY), "round trip");
  tc_image_meta_clear(&m2);
  free(js);
  uint8_t key[64];
  CHECK(tc_image_key_resolve(NULL, "vm1", m.enc_key, key) == 0 && key[0] == 0 && key[1] == 1 && key[63] == 0,
        "hex key resolves");
  tc_image_meta_clear(&m);

  CHECK(parse(&m, "{\"name\":\"x\",\"size\":\"big\"}") < 0 && strstr(tc_last_error(), "size"), "bad size type: %s", tc_last_error());
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":1000}") < 0 && strstr(tc_last_error(), "multiple of 4096"), "unaligned size");
  CHECK(parse(&m, "{\"size\":4096}") < 0 && strstr(tc_last_error(), "no name"), "no name");
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096,\"enc_key\":\"abc\"}") < 0 && strstr(tc_last_error(), "enc_key"), "short key");
  CHECK(parse(&m, "[1,2]") < 0 && strstr(tc_last_error(), "/config/inode/1/7"), "not an object names the key");
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096,\"readonly\":1}") < 0 && strstr(tc_last_error(), "readonly"), "readonly type");
  /* One spelling per record: nothing after the object, no number json-c
   * would clamp, no pool or inode id out of range (TC_INODE would wrap
   * it into another pool's inode). */
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096} {}") < 0 && strstr(tc_last_error(), "more after"),
        "a second value after the record: %s", tc_last_error());
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096}\n ") == 0, "whitespace after the record");
  tc_image_meta_clear(&m);
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096,\"parent_id\":3,\"parent_pool\":65537}") < 0 &&
        strstr(tc_last_error(), "parent_pool is out of range"), "parent_pool above 65535: %s", tc_last_error());
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096,\"parent_id\":281474976710656}") < 0 &&
        strstr(tc_last_error(), "parent_id"), "parent_id of 2^48");
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096,\"next_id\":99999999999999999999}") < 0, "next_id past 2^64");
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096,\"rekey_from\":2,\"rekey_done\":9223372036854775807}") < 0 &&
        strstr(tc_last_error(), "rekey_done"), "rekey_done that json-c clamps");
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":9223372036854775808}") < 0, "size past INT64_MAX");
  CHECK(parse(&m, "{\"name\":\"x\",\"size\":4096,\"parent_pool\":2,\"next_pool\":3,\"rekey_done\":8192}") == 0 &&
        m.parent_pool == 0 && m.next_pool == 0 && m.rekey_done == 0, "a pool without its id means nothing");
  tc_image_meta_clear(&m);
  CHECK(tc_image_key_resolve(NULL, "x", "vault:tromcho/x", key) < 0 && errno == ENOTSUP, "vault: resolved by the client (tc_client_key_resolve), not here");
  char eq[129];
  memset(eq, 'a', 128);
  eq[128] = 0;
  CHECK(tc_image_key_resolve(NULL, "x", eq, key) < 0 && strstr(tc_last_error(), "halves"), "equal halves");
  CHECK(tc_image_key_resolve(NULL, "x", KEY "00", key) < 0, "long key");
  char gen[129];
  CHECK(tc_image_key_generate(gen) == 0 && strlen(gen) == 128 && tc_image_key_resolve(NULL, "x", gen, key) == 0,
        "generated key resolves");

  uint64_t pool, id;
  CHECK(tc_image_index_parse("{\"id\":5,\"pool_id\":2}", 20, &pool, &id) == 0 && pool == 2 && id == 5, "index");
  CHECK(tc_image_index_parse("{\"id\":5}", 8, &pool, &id) < 0, "index without pool");
  CHECK(TC_INODE(2, 5) == (2ULL << 48 | 5) && TC_INODE_POOL(TC_INODE(2, 5)) == 2 && TC_INODE_ID(TC_INODE(2, 5)) == 5,
        "inode numbers");
  return DONE();
}
