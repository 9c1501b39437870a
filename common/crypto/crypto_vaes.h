/* AES-256-GCM and AES-256-XTS on 256-bit VAES (AVX2), for CPUs that have
 * it without AVX-512 (AMD Zen 3), where Debian's libraries stop at 128-bit
 * AES-NI: crypto_gcm.c's and crypto_xts.c's faster paths, giving the same
 * bytes. Internal to common/crypto; the callers check tc_vaes_usable()
 * before calling the rest. */
#ifndef TC_CRYPTO_VAES_H
#define TC_CRYPTO_VAES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Whether this CPU and OS run the VAES code (AVX2, AES-NI, PCLMULQDQ, VAES,
 * VPCLMULQDQ): defined in crypto_gcm.c, built without those instructions. */
bool tc_vaes_usable(void);

/* --- AES-256-GCM (crypto_gcm_vaes.c) --- */
#define TC_GCM_VAES_POWERS 16

/* The expanded key: AES-256's 15 round keys and H^16..H^1 in the form the
 * GHASH multiplication takes (byte-reflected, times x). Plain bytes, so
 * that callers need no vector types; 32-byte aligned for the loads. */
struct tc_gcm_vaes_key {
  uint8_t hpow[TC_GCM_VAES_POWERS][16]; /* hpow[i] = H^(16-i); first, for 32-byte loads */
  uint8_t rk2[15][32];                  /* each round key twice, for both lanes */
  uint8_t rk[15][16];
} __attribute__((aligned(32)));

void tc_gcm_vaes_expand(struct tc_gcm_vaes_key *k, const uint8_t key[32]);
/* One GCM pass: alen bytes of additional data at aad authenticated (the
 * caller gathers them), the data buffers encrypted or decrypted in place,
 * or into out one after the other when out is not NULL; the tag the data
 * give (for an open, the caller compares). -1 (EINVAL) for more data than
 * GCM allows under one nonce. */
int tc_gcm_vaes_crypt(const struct tc_gcm_vaes_key *k, const uint8_t nonce[12], const uint8_t *aad, size_t alen,
                      const struct iovec *data, int ndata, uint8_t *out, bool encrypt, uint8_t tag[16]);

/* --- AES-256-XTS (crypto_xts_vaes.c) --- */
/* Round keys: data encryption and decryption (equivalent inverse cipher),
 * each twice for both lanes, and the tweak's. Plain bytes, 32-byte
 * aligned: the loops take them straight from here, no copy to wipe. */
struct tc_xts_vaes_key {
  uint8_t ek2[15][32];
  uint8_t dk2[15][32];
  uint8_t tk[15][16];
} __attribute__((aligned(32)));

/* key is key1 (data) || key2 (tweak), 64 bytes. */
void tc_xts_vaes_expand(struct tc_xts_vaes_key *k, const uint8_t key[64]);
/* One data unit of len bytes (a multiple of 16, >= 16) with the 16-byte
 * tweak before its encryption; in and out may be the same. */
void tc_xts_vaes_unit(const struct tc_xts_vaes_key *k, bool encrypt, const uint8_t tweak[16], const uint8_t *in,
                      uint8_t *out, size_t len);

#endif
