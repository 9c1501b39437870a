/* SHA-256, HMAC-SHA256, HKDF-SHA256 and X25519 through Nettle. */
#include <config.h>
#include <errno.h>
#include <string.h>
#include <nettle/sha2.h>
#include <nettle/hmac.h>
#include <nettle/hkdf.h>
#include <nettle/curve25519.h>
#include "crypto.h"
#include "error.h"

void
tc_sha256(const void *data, size_t len, uint8_t out[TC_SHA256_SIZE])
{
  struct sha256_ctx c;
  sha256_init(&c);
  sha256_update(&c, len, data);
  sha256_digest(&c, TC_SHA256_SIZE, out);
}

void
tc_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
               uint8_t out[TC_SHA256_SIZE])
{
  struct hmac_sha256_ctx c;
  hmac_sha256_set_key(&c, keylen, key);
  hmac_sha256_update(&c, len, data);
  hmac_sha256_digest(&c, TC_SHA256_SIZE, out);
  tc_wipe(&c, sizeof c);
}

void
tc_hkdf_extract(const void *salt, size_t saltlen, const void *ikm, size_t ikmlen,
                uint8_t prk[TC_SHA256_SIZE])
{
  static const uint8_t zeros[TC_SHA256_SIZE];
  struct hmac_sha256_ctx c;
  /* RFC 5869: an absent salt is HashLen zero bytes. */
  if (!salt || !saltlen) {
    salt = zeros;
    saltlen = sizeof zeros;
  }
  hmac_sha256_set_key(&c, saltlen, salt);
  hkdf_extract(&c, (nettle_hash_update_func *) hmac_sha256_update,
               (nettle_hash_digest_func *) hmac_sha256_digest, TC_SHA256_SIZE,
               ikmlen, ikm, prk);
  tc_wipe(&c, sizeof c);
}

int
tc_hkdf_expand(const uint8_t prk[TC_SHA256_SIZE], const void *info, size_t infolen,
               void *out, size_t outlen)
{
  if (outlen > 255 * TC_SHA256_SIZE)
    return tc_error(EINVAL, "HKDF-SHA256: %zu bytes asked, at most %d", outlen, 255 * TC_SHA256_SIZE);
  struct hmac_sha256_ctx c;
  hmac_sha256_set_key(&c, TC_SHA256_SIZE, prk);
  hkdf_expand(&c, (nettle_hash_update_func *) hmac_sha256_update,
              (nettle_hash_digest_func *) hmac_sha256_digest, TC_SHA256_SIZE,
              infolen, info, outlen, out);
  tc_wipe(&c, sizeof c);
  return 0;
}

int
tc_x25519(uint8_t out[TC_X25519_SIZE], const uint8_t scalar[TC_X25519_SIZE],
          const uint8_t point[TC_X25519_SIZE])
{
  static const uint8_t zeros[TC_X25519_SIZE];
  curve25519_mul(out, scalar, point);
  if (tc_memeq_ct(out, zeros, TC_X25519_SIZE))
    return tc_error(EINVAL, "X25519: peer share is a low-order point");
  return 0;
}

void
tc_x25519_base(uint8_t out[TC_X25519_SIZE], const uint8_t scalar[TC_X25519_SIZE])
{
  curve25519_mul_g(out, scalar);
}
