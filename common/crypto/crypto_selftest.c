/* Known-answer self-test of every primitive, run by tc_crypto_init() and
 * printed by `./appliance up`. Vectors: NIST GCM test case 14, RFC 7748
 * section 6.1, RFC 5869 test case 1, and an XTS round trip. The full
 * vector sets are in tests/test-crypto.c. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <gnutls/gnutls.h>
#include "crypto.h"
#include "error.h"

static int
unhex(const char *hex, uint8_t *out, size_t outlen)
{
  for (size_t i = 0; i < outlen; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1)
      return -1;
    out[i] = (uint8_t) v;
  }
  return 0;
}

static int
check(const char *name, const uint8_t *got, const char *want_hex, size_t len)
{
  uint8_t want[128];
  if (len > sizeof want || unhex(want_hex, want, len) < 0 || memcmp(got, want, len) != 0)
    return tc_error(EPROTO, "crypto self-test failed: %s", name);
  return 0;
}

static int
selftest_gcm(void)
{
  uint8_t key[32] = { 0 }, nonce[12] = { 0 }, buf[16] = { 0 }, tag[16];
  struct tc_gcm *g;
  if (tc_gcm_new(&g, key) < 0)
    return -1;
  struct iovec io = { buf, sizeof buf };
  int r = tc_gcm_seal(g, nonce, NULL, 0, &io, 1, tag);
  if (r == 0)
    r = check("AES-256-GCM ciphertext", buf, "cea7403d4d606b6e074ec5d3baf39d18", 16);
  if (r == 0)
    r = check("AES-256-GCM tag", tag, "d0d1c8a799996bf0265b98b5d48ab919", 16);
  if (r == 0) {
    tag[0] ^= 1;   /* a wrong tag must be refused */
    if (tc_gcm_open(g, nonce, NULL, 0, &io, 1, tag) == 0)
      r = tc_error(EPROTO, "crypto self-test failed: AES-256-GCM accepted a bad tag");
  }
  tc_gcm_free(g);
  return r;
}

static int
selftest_x25519(void)
{
  uint8_t a[32], pub[32];
  unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", a, 32);
  tc_x25519_base(pub, a);
  return check("X25519", pub, "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a", 32);
}

static int
selftest_hkdf(void)
{
  uint8_t ikm[22], salt[13], info[10], prk[32], okm[42];
  memset(ikm, 0x0b, sizeof ikm);
  for (int i = 0; i < 13; i++) salt[i] = (uint8_t) i;
  for (int i = 0; i < 10; i++) info[i] = (uint8_t) (0xf0 + i);
  tc_hkdf_extract(salt, sizeof salt, ikm, sizeof ikm, prk);
  if (check("HKDF-SHA256 extract", prk, "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5", 32) < 0)
    return -1;
  tc_hkdf_expand(prk, info, sizeof info, okm, sizeof okm);
  return check("HKDF-SHA256 expand", okm,
               "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865", 42);
}

static int
selftest_xts(void)
{
  uint8_t key[64], pt[2 * TC_XTS_SECTOR], ct[sizeof pt], back[sizeof pt];
  for (int i = 0; i < 64; i++) key[i] = (uint8_t) (i * 7 + 1);
  for (size_t i = 0; i < sizeof pt; i++) pt[i] = (uint8_t) i;
  struct tc_xts *x;
  if (tc_xts_new(&x, key) < 0)
    return -1;
  int r = tc_xts_encrypt(x, 5, pt, ct, sizeof pt);
  if (r == 0)
    r = tc_xts_decrypt(x, 5, ct, back, sizeof ct);
  if (r == 0 && (memcmp(back, pt, sizeof pt) != 0 || memcmp(ct, pt, 64) == 0 ||
                 memcmp(ct, ct + TC_XTS_SECTOR, 64) == 0))
    r = tc_error(EPROTO, "crypto self-test failed: AES-256-XTS round trip");
  tc_xts_free(x);
  memset(key + 32, 0, 32);
  memset(key, 0, 32);
  if (r == 0 && tc_xts_new(&x, key) == 0) {
    tc_xts_free(x);
    r = tc_error(EPROTO, "crypto self-test failed: AES-256-XTS accepted equal key halves");
  }
  return r;
}

static int
selftest_xxh3(void)
{
  uint8_t buf[4096];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t) (i * 31);
  /* Every build must agree with the portable one. */
  extern uint64_t tc_xxh3_64_seed_sse2(const void *, size_t, uint64_t);
  for (size_t len = 0; len <= sizeof buf; len = len ? len * 2 : 1)
    if (tc_xxh3_64_seed(buf, len, 42) != tc_xxh3_64_seed_sse2(buf, len, 42))
      return tc_error(EPROTO, "crypto self-test failed: XXH3 %s differs at %zu bytes", tc_xxh3_impl(), len);
  return 0;
}

int
tc_crypto_selftest(char *msg, size_t msglen)
{
  int r = selftest_gcm();
  if (r == 0) r = selftest_x25519();
  if (r == 0) r = selftest_hkdf();
  if (r == 0) r = selftest_xts();
  if (r == 0) r = selftest_xxh3();
  if (msg)
    {
      if (r == 0)
        snprintf(msg, msglen,
                 "crypto self-test passed: AES-256-XTS (%s, GnuTLS %s), AES-256-GCM (%s), X25519, HKDF-SHA256 (Nettle), XXH3 (%s)",
                 tc_xts_impl_name(), gnutls_check_version(NULL), tc_gcm_impl_name(), tc_xxh3_impl());
      else
        snprintf(msg, msglen, "%s", tc_last_error());
    }
  return r;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result;

static void
crypto_init_once(void)
{
  int r = gnutls_global_init();
  if (r < 0) {
    init_result = tc_error(EIO, "gnutls_global_init: %s", gnutls_strerror(r));
    return;
  }
  init_result = tc_crypto_selftest(NULL, 0);
}

int
tc_crypto_init(void)
{
  pthread_once(&init_once, crypto_init_once);
  if (init_result < 0)
    errno = EPROTO;
  return init_result;
}
