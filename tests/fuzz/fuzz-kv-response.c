/* libFuzzer target: bytes as a KV server's answer, through the KV client's
 * decoders (tc_kv_decode for each request kind, the error mapping) and the
 * /config/pools and /pg/config parsers. Any input must give a result or a
 * clean error, never a crash, a leak or undefined behaviour; a /pg/config
 * that parses must survive encode -> parse -> encode unchanged.
 * Built only with ./configure --enable-fuzzing CC=clang. */
#include <config.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "kv_json.h"
#include "pools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = 0;

  json_tokener *tok = json_tokener_new_ex(64);
  json_object *body = tok ? json_tokener_parse_ex(tok, text, (int) size) : NULL;
  json_tokener_free(tok);
  static const struct tc_kv_request reqs[] = {
    { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_RANGE } },
    { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_PUT } },
    { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_DELETE } },
    { .type = TC_KV_REQ_TXN },
    { .type = TC_KV_REQ_LEASE_GRANT },
    { .type = TC_KV_REQ_LEASE_KEEPALIVE, .lease_id = 1 },
    { .type = TC_KV_REQ_LEASE_REVOKE, .lease_id = 1 },
  };
  if (body && json_object_is_type(body, json_type_object)) {
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
      struct tc_kv_result res;
      if (tc_kv_decode(&reqs[i], body, &res) == 0) {
        for (size_t k = 0; k < res.n_kvs; k++)
          if (!res.kvs[k].key || !res.kvs[k].value || res.kvs[k].value[res.kvs[k].value_len] != 0)
            abort();
        tc_kv_result_free(&res);
      }
      else if (!tc_last_error()[0])
        abort();
    }
    char msg[256];
    (void) tc_kv_error_errno(body, 400, msg, sizeof msg);
  }
  json_object_put(body);

  struct tc_pools pools;
  if (tc_pools_parse(text, &pools) == 0) {
    for (size_t i = 0; i < pools.n; i++)
      if (tc_pool_validate(&pools.v[i]) < 0)
        abort();
    tc_pools_free(&pools);
  }

  struct tc_pg_config pg, pg2;
  if (tc_pg_config_parse(text, &pg) == 0) {
    char *a = tc_pg_config_encode(&pg);
    if (a) {
      if (tc_pg_config_parse(a, &pg2) < 0)
        abort();
      char *b = tc_pg_config_encode(&pg2);
      if (b && strcmp(a, b))
        abort();
      free(b);
      tc_pg_config_free(&pg2);
    }
    free(a);
    tc_pg_config_free(&pg);
  }
  free(text);
  return 0;
}
