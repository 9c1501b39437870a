/* HMAC-SHA256 with a precomputed key (see crypto.h): the inner and outer
 * states are set up once; each message starts from a copy of them. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <nettle/hmac.h>
#include "crypto.h"
#include "error.h"

struct tc_hmac {
  struct hmac_sha256_ctx ctx;
};

int
tc_hmac_new(struct tc_hmac **out, const void *key, size_t keylen)
{
  struct tc_hmac *h = malloc(sizeof *h);
  *out = NULL;
  if (!h)
    return tc_error(ENOMEM, "hmac: out of memory");
  hmac_sha256_set_key(&h->ctx, keylen, key);
  *out = h;
  return 0;
}

void
tc_hmac_free(struct tc_hmac *h)
{
  if (!h)
    return;
  tc_wipe(h, sizeof *h);
  free(h);
}

void
tc_hmac2(const struct tc_hmac *h, const void *a, size_t alen, const void *b, size_t blen,
         uint8_t out[TC_SHA256_SIZE])
{
  struct hmac_sha256_ctx c = h->ctx;
  hmac_sha256_update(&c, alen, a);
  hmac_sha256_update(&c, blen, b);
  hmac_sha256_digest(&c, TC_SHA256_SIZE, out);
  tc_wipe(&c, sizeof c);
}
