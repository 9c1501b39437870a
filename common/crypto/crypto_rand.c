/* Randomness and secret handling. */
#include <config.h>
#include <errno.h>
#include <string.h>
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include "crypto.h"
#include "error.h"

int
tc_random(void *buf, size_t len)
{
  int r = gnutls_rnd(GNUTLS_RND_KEY, buf, len);
  if (r < 0)
    return tc_error(EIO, "random: gnutls_rnd: %s", gnutls_strerror(r));
  return 0;
}

void
tc_wipe(void *p, size_t len)
{
  explicit_bzero(p, len);
}

int
tc_memeq_ct(const void *a, const void *b, size_t len)
{
  const volatile uint8_t *x = a, *y = b;
  uint8_t d = 0;
  for (size_t i = 0; i < len; i++)
    d |= x[i] ^ y[i];
  return d == 0;
}
