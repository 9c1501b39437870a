/* Crypto core: known answers, refusals, round trips. */
#include <config.h>
#include <errno.h>
#include <string.h>
#include "crypto.h"
#include "error.h"
#include "tap.h"

int
main(void)
{
  char msg[256];
  CHECK(tc_crypto_init() == 0, "tc_crypto_init: %s", tc_last_error());
  CHECK(tc_crypto_selftest(msg, sizeof msg) == 0, "%s", msg);

  /* Equal XTS key halves are refused. */
  uint8_t key[64];
  memset(key, 0x42, sizeof key);
  struct tc_xts *x = NULL;
  CHECK(tc_xts_new(&x, key) < 0 && errno == EINVAL, "XTS key with equal halves accepted");
  CHECK(strstr(tc_last_error(), "halves") != NULL, "message: %s", tc_last_error());
  return DONE();
}
