/* AES-256 with AES-NI on one 128-bit block, and its key schedules: shared
 * by the VAES implementations (crypto_gcm_vaes.c, crypto_xts_vaes.c), which
 * are built with -maes and called only on CPUs that have it. */
#ifndef TC_AES_NI_H
#define TC_AES_NI_H

#include <immintrin.h>
#include <stdint.h>

/* One step of the key schedule: k's words chained (each XORed with all
 * before it) and XORed with t, aeskeygenassist's word broadcast. */
static inline __m128i
aes_expand_step(__m128i k, __m128i t)
{
  k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
  k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
  k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
  return _mm_xor_si128(k, t);
}

/* Round keys i and i + 1 from the two before: the even one with
 * RotWord(SubWord()) and the round constant (word 3 of aeskeygenassist),
 * the odd one with SubWord() alone (word 2). aeskeygenassist takes its
 * round constant as an immediate, hence a macro. */
#define AES_EXPAND_PAIR(rk, i, rcon)                                                               \
  do {                                                                                             \
    (rk)[i] = aes_expand_step((rk)[(i) - 2],                                                       \
                              _mm_shuffle_epi32(_mm_aeskeygenassist_si128((rk)[(i) - 1], rcon), 0xff)); \
    if ((i) < 14)                                                                                  \
      (rk)[(i) + 1] = aes_expand_step((rk)[(i) - 1],                                               \
                                      _mm_shuffle_epi32(_mm_aeskeygenassist_si128((rk)[i], 0), 0xaa)); \
  } while (0)

/* The 15 round keys of AES-256 for encryption. */
static inline void
aes256_expand(__m128i rk[15], const uint8_t key[32])
{
  rk[0] = _mm_loadu_si128((const __m128i *) key);
  rk[1] = _mm_loadu_si128((const __m128i *) (key + 16));
  AES_EXPAND_PAIR(rk, 2, 0x01);
  AES_EXPAND_PAIR(rk, 4, 0x02);
  AES_EXPAND_PAIR(rk, 6, 0x04);
  AES_EXPAND_PAIR(rk, 8, 0x08);
  AES_EXPAND_PAIR(rk, 10, 0x10);
  AES_EXPAND_PAIR(rk, 12, 0x20);
  AES_EXPAND_PAIR(rk, 14, 0x40);
}

/* The equivalent inverse cipher's round keys (for aesdec), from rk. */
static inline void
aes256_decrypt_keys(__m128i dk[15], const __m128i rk[15])
{
  dk[0] = rk[14];
  for (int i = 1; i < 14; i++)
    dk[i] = _mm_aesimc_si128(rk[14 - i]);
  dk[14] = rk[0];
}

/* One block with the 15 round keys at rk (16-byte aligned: an __m128i
 * array or a key structure's bytes). */
static inline __m128i
aes256_block(const void *rk, __m128i x)
{
  const __m128i *k = rk;
  x = _mm_xor_si128(x, _mm_load_si128(k));
  for (int r = 1; r < 14; r++)
    x = _mm_aesenc_si128(x, _mm_load_si128(k + r));
  return _mm_aesenclast_si128(x, _mm_load_si128(k + 14));
}

#endif
