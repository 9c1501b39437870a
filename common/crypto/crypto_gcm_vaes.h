/* AES-256-GCM on 256-bit VAES and VPCLMULQDQ (AVX2), for CPUs that have
 * them without AVX-512 (AMD Zen 3): crypto_gcm.c's third implementation.
 * Internal to common/crypto; crypto_gcm.c checks the CPU before calling. */
#ifndef TC_CRYPTO_GCM_VAES_H
#define TC_CRYPTO_GCM_VAES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define TC_GCM_VAES_POWERS 16

/* The expanded key: AES-256's 15 round keys and H^16..H^1 in the form the
 * GHASH multiplication takes (byte-reflected, times x). Plain bytes, so
 * that callers need no vector types; 32-byte aligned for the loads. */
struct tc_gcm_vaes_key {
  uint8_t hpow[TC_GCM_VAES_POWERS][16]; /* hpow[i] = H^(16-i); first, for 32-byte loads */
  uint8_t rk[15][16];
} __attribute__((aligned(32)));

/* The caller checks the CPU (AVX2, AES-NI, PCLMULQDQ, VAES, VPCLMULQDQ)
 * in code built without those instructions, before calling these. */
void tc_gcm_vaes_expand(struct tc_gcm_vaes_key *k, const uint8_t key[32]);
/* One GCM pass as crypto_gcm.c's imb_crypt: aad (at most 1024 bytes in
 * all) authenticated, the data buffers encrypted or decrypted in place, or
 * into out one after the other when out is not NULL; the tag the data give
 * (for an open, the caller compares). -1 (EINVAL) for too much AAD or more
 * data than GCM allows under one nonce. */
int tc_gcm_vaes_crypt(const struct tc_gcm_vaes_key *k, const uint8_t nonce[12], const struct iovec *aad,
                      int naad, const struct iovec *data, int ndata, uint8_t *out, bool encrypt,
                      uint8_t tag[16]);

#endif
