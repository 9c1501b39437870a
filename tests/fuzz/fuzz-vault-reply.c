/* libFuzzer target: bytes as Vault's answer, through the Vault client's
 * reply parsers (login/renew auth, KV v1 secret, errors). Any input must
 * give a result or a clean error, never a crash, a leak or undefined
 * behaviour. Built only with ./configure --enable-fuzzing CC=clang. */
#include <config.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "crypto.h"
#include "vault.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = 0;
  char *token = NULL;
  int64_t ttl;
  if (tc_vault_parse_auth(text, size, &token, &ttl) == 0 && (!token || !*token || ttl < 0))
    abort();
  free(token);
  uint8_t key[TC_XTS_KEY_SIZE];
  if (tc_vault_parse_secret(text, size, "img", "id", key) == 0 && !memcmp(key, key + 32, 32))
    abort();
  char errs[64];
  tc_vault_parse_errors(text, size, errs, sizeof errs);
  if (strlen(errs) >= sizeof errs)
    abort();
  free(text);
  return 0;
}
