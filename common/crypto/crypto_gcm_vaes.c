/* AES-256-GCM with VAES and VPCLMULQDQ on 256-bit registers (built with
 * -mavx2 -mvaes -mvpclmulqdq; crypto_gcm.c calls it only on CPUs that have
 * them). Why it exists: on AMD Zen 3, which has VAES but no AVX-512,
 * Debian 12's libraries top out at 3.4-3.6 GB/s (ipsec-mb 1.3 has VAES
 * code for AVX-512 only, OpenSSL 3.0 and GnuTLS none), and every byte of
 * a sealed write goes through AES-GCM six times. Two blocks per
 * instruction here, sixteen blocks (256 bytes) per loop.
 *
 * GHASH arithmetic (NIST SP 800-38D's bit order): each block is
 * byte-reversed (W), so that bit 127 - j of W is the coefficient of x^j.
 * In t = 1/x the carry-less product of W(A) and t*W(B) is t^128 * W(A*B),
 * and dividing by t^128 modulo t^128 + t^127 + t^126 + t^121 + 1 takes
 * two carry-less multiplications by 0xc200000000000000 (a Montgomery
 * reduction, as in Gueron's and the Linux kernel's GCM code). So the
 * powers of H are stored as t * W(H^k) ("twisted") and every product
 * comes out reduced and in the W form.
 *
 * Every operation on secret data is a fixed sequence of instructions
 * whatever its value: no table lookups, no branches on data. */
#include <config.h>
#include <errno.h>
#include <immintrin.h>
#include <string.h>
#include "aes_ni.h"
#include "crypto.h"
#include "crypto_vaes.h"
#include "error.h"

/* GCM's limit for one nonce: 2^32 - 2 blocks. */
#define DATA_MAX ((UINT64_C(1) << 36) - 32)

/* Reverses the 16 bytes of each 128-bit lane. */
static inline __m128i
bswap128(__m128i x)
{
  return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

static inline __m256i
bswap256(__m256i x)
{
  const __m256i m = _mm256_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5,
                                    6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return _mm256_shuffle_epi8(x, m);
}

/* t^127 + t^126 + t^121 + 1: the reduction constant (high qword) and what
 * a carry out of bit 127 folds back to. */
static inline __m128i
poly(void)
{
  return _mm_set_epi64x((long long) 0xc200000000000000ULL, 1);
}

/* The 256-bit product [hi:lo] reduced: lo's low qword, then the next,
 * folded up by multiplying with the constant (see the top). */
static inline __m128i
reduce(__m128i lo, __m128i hi)
{
  __m128i t = _mm_clmulepi64_si128(lo, poly(), 0x10);
  __m128i x = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), t);
  __m128i u = _mm_clmulepi64_si128(x, poly(), 0x10);
  return _mm_xor_si128(_mm_xor_si128(hi, _mm_shuffle_epi32(x, 0x4e)), u);
}

/* a * b, a in the W form, b twisted; the result in the W form. */
static inline __m128i
gf_mul(__m128i a, __m128i b)
{
  __m128i lo = _mm_clmulepi64_si128(a, b, 0x00);
  __m128i hi = _mm_clmulepi64_si128(a, b, 0x11);
  __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10));
  lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
  hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
  return reduce(lo, hi);
}

/* t * w modulo the polynomial: a 128-bit shift left by one, the bit that
 * falls off folded back in. */
static inline __m128i
twist(__m128i w)
{
  __m128i carry = _mm_slli_si128(_mm_srli_epi64(w, 63), 8);
  __m128i top = _mm_srai_epi32(_mm_shuffle_epi32(w, 0xff), 31);
  w = _mm_or_si128(_mm_slli_epi64(w, 1), carry);
  return _mm_xor_si128(w, _mm_and_si128(top, poly()));
}

static inline __m256i
rk2(const struct tc_gcm_vaes_key *k, int i)
{
  return _mm256_load_si256((const __m256i *) k->rk2[i]);
}

void
tc_gcm_vaes_expand(struct tc_gcm_vaes_key *k, const uint8_t key[32])
{
  __m128i rk[15];
  aes256_expand(rk, key);
  for (int i = 0; i < 15; i++) {
    _mm_store_si128((__m128i *) k->rk[i], rk[i]);
    _mm256_store_si256((__m256i *) k->rk2[i], _mm256_broadcastsi128_si256(rk[i]));
  }
  /* H = E(K, 0), then H^1..H^16. */
  __m128i h = bswap128(aes256_block(rk, _mm_setzero_si128()));
  __m128i h1 = twist(h), p = h;
  _mm_store_si128((__m128i *) k->hpow[TC_GCM_VAES_POWERS - 1], h1);
  for (int n = 2; n <= TC_GCM_VAES_POWERS; n++) {
    p = gf_mul(p, h1);
    _mm_store_si128((__m128i *) k->hpow[TC_GCM_VAES_POWERS - n], twist(p));
  }
  tc_wipe(rk, sizeof rk);
  h = h1 = p = _mm_setzero_si128();
}

/* --- one GCM pass --- */

/* A pass's state: what it leaves behind is wiped (the round keys are read
 * from the key, never copied). */
struct pass {
  __m128i y;         /* GHASH so far, W form */
  __m128i ctr;       /* the next counter block, byte-reversed (counter in dword 0) */
  uint8_t part[16];  /* ciphertext of an unfinished block */
  uint8_t ks[16];    /* its key stream */
  size_t npart;
  uint64_t len;
};

static inline void
ghash_block(struct pass *s, const struct tc_gcm_vaes_key *k, __m128i w)
{
  s->y = gf_mul(_mm_xor_si128(s->y, w), _mm_load_si128((const __m128i *) k->hpow[TC_GCM_VAES_POWERS - 1]));
}

static inline __m128i
next_keystream(struct pass *s, const struct tc_gcm_vaes_key *k)
{
  __m128i c = bswap128(s->ctr);
  s->ctr = _mm_add_epi32(s->ctr, _mm_set_epi32(0, 0, 0, 1));
  return aes256_block(k->rk, c);
}

/* Sixteen blocks of ciphertext at c into the hash: each times its power
 * of H, one reduction for all. */
static inline void
ghash16(struct pass *s, const struct tc_gcm_vaes_key *k, const uint8_t *c)
{
  __m256i lo = _mm256_setzero_si256(), hi = lo, mid = lo;
#pragma GCC unroll 8
  for (int j = 0; j < 8; j++) {
    __m256i x = bswap256(_mm256_loadu_si256((const __m256i *) (c + 32 * j)));
    if (j == 0)
      x = _mm256_xor_si256(x, _mm256_zextsi128_si256(s->y));
    __m256i h = _mm256_load_si256((const __m256i *) k->hpow[2 * j]);
    lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128(x, h, 0x00));
    hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128(x, h, 0x11));
    mid = _mm256_xor_si256(mid, _mm256_clmulepi64_epi128(x, h, 0x01));
    mid = _mm256_xor_si256(mid, _mm256_clmulepi64_epi128(x, h, 0x10));
  }
  lo = _mm256_xor_si256(lo, _mm256_slli_si256(mid, 8));
  hi = _mm256_xor_si256(hi, _mm256_srli_si256(mid, 8));
  __m128i l = _mm_xor_si128(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
  __m128i h = _mm_xor_si128(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
  s->y = reduce(l, h);
}

/* n whole 256-byte chunks from in to out (may be the same), hashing the
 * ciphertext: for a decryption the chunk's input alongside its AES, for an
 * encryption the chunk before's output, so that the two overlap. */
static void
crypt_chunks(struct pass *s, const struct tc_gcm_vaes_key *k, const uint8_t *in, uint8_t *out, size_t n,
             bool encrypt)
{
  const __m256i two = _mm256_set_epi32(0, 0, 0, 2, 0, 0, 0, 2);
  __m256i base = _mm256_add_epi32(_mm256_broadcastsi128_si256(s->ctr), _mm256_set_epi32(0, 0, 0, 1, 0, 0, 0, 0));
  for (size_t i = 0; i < n; i++, in += 256, out += 256) {
    __m256i b[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
      b[j] = _mm256_xor_si256(bswap256(base), rk2(k, 0));
      base = _mm256_add_epi32(base, two);
    }
    if (!encrypt)
      ghash16(s, k, in);
    else if (i > 0)
      ghash16(s, k, out - 256);
#pragma GCC unroll 13
    for (int r = 1; r < 14; r++) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; j++)
        b[j] = _mm256_aesenc_epi128(b[j], rk2(k, r));
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
      __m256i d = _mm256_loadu_si256((const __m256i *) (in + 32 * j));
      _mm256_storeu_si256((__m256i *) (out + 32 * j), _mm256_xor_si256(_mm256_aesenclast_epi128(b[j], rk2(k, 14)), d));
    }
  }
  if (encrypt && n)
    ghash16(s, k, out - 256);
  s->ctr = _mm_add_epi32(s->ctr, _mm_set_epi32(0, 0, 0, (int) (16 * n)));
}

/* n bytes of the data stream, continuing wherever the last piece ended. */
static void
crypt_piece(struct pass *s, const struct tc_gcm_vaes_key *k, const uint8_t *in, uint8_t *out, size_t n,
            bool encrypt)
{
  /* Finish an unfinished block first. */
  while (s->npart && n) {
    uint8_t c = in[0];
    out[0] = (uint8_t) (c ^ s->ks[s->npart]);
    s->part[s->npart++] = encrypt ? out[0] : c;
    in++, out++, n--;
    if (s->npart == 16) {
      ghash_block(s, k, bswap128(_mm_loadu_si128((const __m128i *) s->part)));
      s->npart = 0;
    }
  }
  crypt_chunks(s, k, in, out, n / 256, encrypt);
  in += n / 256 * 256, out += n / 256 * 256, n %= 256;
  for (; n >= 16; n -= 16, in += 16, out += 16) {
    __m128i d = _mm_loadu_si128((const __m128i *) in);
    __m128i c = _mm_xor_si128(d, next_keystream(s, k));
    _mm_storeu_si128((__m128i *) out, c);
    ghash_block(s, k, bswap128(encrypt ? c : d));
  }
  if (n) {
    _mm_storeu_si128((__m128i *) s->ks, next_keystream(s, k));
    for (size_t i = 0; i < n; i++) {
      uint8_t c = in[i];
      out[i] = (uint8_t) (c ^ s->ks[i]);
      s->part[i] = encrypt ? out[i] : c;
    }
    s->npart = n;
  }
}

int
tc_gcm_vaes_crypt(const struct tc_gcm_vaes_key *k, const uint8_t nonce[12], const uint8_t *aad, size_t alen,
                  const struct iovec *data, int ndata, uint8_t *out, bool encrypt, uint8_t tag[16])
{
  uint64_t total = 0;
  for (int i = 0; i < ndata; i++) {
    if (data[i].iov_len > DATA_MAX - total)
      return tc_error(EINVAL, "AES-256-GCM: more than 2^36 - 32 bytes under one nonce");
    total += data[i].iov_len;
  }
  struct pass s;
  memset(&s, 0, sizeof s);
  /* J0 = nonce || 1; the data's counters start at 2. */
  uint8_t j0b[16];
  memcpy(j0b, nonce, 12);
  memcpy(j0b + 12, "\0\0\0\1", 4);
  __m128i j0 = _mm_loadu_si128((const __m128i *) j0b);
  s.ctr = _mm_add_epi32(bswap128(j0), _mm_set_epi32(0, 0, 0, 1));
  /* The additional data, its last block zero-padded. */
  size_t off = 0;
  for (; alen - off >= 16; off += 16)
    ghash_block(&s, k, bswap128(_mm_loadu_si128((const __m128i *) (aad + off))));
  if (off < alen) {
    uint8_t last[16] = { 0 };
    memcpy(last, aad + off, alen - off);
    ghash_block(&s, k, bswap128(_mm_loadu_si128((const __m128i *) last)));
  }
  for (int i = 0; i < ndata; i++) {
    size_t n = data[i].iov_len;
    if (!n)
      continue;
    uint8_t *dst = out ? out : data[i].iov_base;
    crypt_piece(&s, k, data[i].iov_base, dst, n, encrypt);
    if (out)
      out += n;
  }
  if (s.npart) {
    memset(s.part + s.npart, 0, 16 - s.npart);
    ghash_block(&s, k, bswap128(_mm_loadu_si128((const __m128i *) s.part)));
  }
  /* The lengths block, (bits of aad, bits of data) big-endian, is
   * (aad << 64 | data) in the W form. */
  ghash_block(&s, k, _mm_set_epi64x((long long) (alen * 8), (long long) (total * 8)));
  __m128i t = _mm_xor_si128(bswap128(s.y), aes256_block(k->rk, j0));
  _mm_storeu_si128((__m128i *) tag, t);
  tc_wipe(&s, sizeof s);
  return 0;
}
