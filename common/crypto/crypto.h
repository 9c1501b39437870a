/* The crypto core: every primitive tromcho uses, behind one small API that
 * hides which library implements it.
 *
 *   AES-256-XTS   our own on 256-bit VAES where the CPU has it (crypto_xts_vaes.c:
 *                 7.4 GB/s against GnuTLS's 5.2 on AMD Zen 3), else GnuTLS
 *                 (AES-NI; Nettle 3.8's XTS measured 8-9x slower)
 *   AES-256-GCM   Intel's ipsec-mb on x86-64 with AVX-512 (VAES/VPCLMULQDQ: 4x
 *                 GnuTLS on the Intel VMs); on CPUs with VAES but no AVX-512
 *                 (AMD Zen 3) our own on 256-bit VAES (crypto_gcm_vaes.c: 6.1
 *                 GB/s against ipsec-mb's AES-NI code's 3.7); else ipsec-mb's
 *                 AES-NI code, else GnuTLS's AEAD API. No Debian 12 library
 *                 has 256-bit VAES code for either: the two files are AES-NI
 *                 and carry-less multiplications only, constant time, checked
 *                 against GnuTLS on random inputs by tests/test-crypto.c
 *   XXH3-64       xxHash, header-only inline, built for AVX-512, AVX2 and SSE2
 *                 and chosen at run time (Debian's libxxhash is SSE2 only)
 *   X25519, SHA-256, HMAC-SHA256, HKDF-SHA256   Nettle
 *   CSPRNG        GnuTLS (gnutls_rnd, seeded from getrandom)
 *
 * Contexts are caller-owned and NOT safe to share between threads: keep one
 * per thread (or per connection on an event loop). Key material is wiped
 * when a context is freed. All functions return 0 on success, -1 with errno
 * and tc_last_error() on failure. */
#ifndef TROMCHO_CRYPTO_H
#define TROMCHO_CRYPTO_H
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define TC_XTS_KEY_SIZE 64
#define TC_XTS_SECTOR 4096
#define TC_GCM_KEY_SIZE 32
#define TC_GCM_NONCE_SIZE 12
#define TC_GCM_TAG_SIZE 16
#define TC_X25519_SIZE 32
#define TC_SHA256_SIZE 32

/* Call once before threads start (idempotent). Runs the known-answer
 * self-test; returns -1 if any primitive gives a wrong answer. */
int tc_crypto_init(void);
/* The known-answer self-test alone; fills msg with a summary line. */
int tc_crypto_selftest(char *msg, size_t msglen);

/* --- AES-256-XTS over 4096-byte sectors (DESIGN.md section 6) --- */
struct tc_xts;
/* Refuses a key whose two 32-byte halves are equal (EINVAL). */
int tc_xts_new(struct tc_xts **out, const uint8_t key[TC_XTS_KEY_SIZE]);
/* Implementations of AES-256-XTS (the same bytes): TC_XTS_AUTO is our own
 * on 256-bit VAES where the CPU has it (crypto_xts_vaes.c), else GnuTLS.
 * tc_xts_new_impl names one (ENOTSUP if it is not there); tests compare. */
enum tc_xts_impl { TC_XTS_AUTO, TC_XTS_GNUTLS, TC_XTS_VAES };
int tc_xts_new_impl(struct tc_xts **out, const uint8_t key[TC_XTS_KEY_SIZE], enum tc_xts_impl impl);
/* "tromcho vaes-avx2" or "gnutls": what TC_XTS_AUTO picks. */
const char *tc_xts_impl_name(void);
void tc_xts_free(struct tc_xts *x);
/* Encrypt/decrypt len bytes (a multiple of 4096) starting at image sector
 * first_sector; the tweak of each sector is its index as a 128-bit
 * little-endian number (dm-crypt aes-xts-plain64, 4096-byte sectors).
 * in == out is allowed (in place); otherwise they must not overlap. */
int tc_xts_encrypt(struct tc_xts *x, uint64_t first_sector, const void *in, void *out, size_t len);
int tc_xts_decrypt(struct tc_xts *x, uint64_t first_sector, const void *in, void *out, size_t len);
/* One data unit of any length that is a multiple of 16 (>= 16) with an
 * explicit 16-byte tweak: for test vectors. */
int tc_xts_encrypt_unit(struct tc_xts *x, const uint8_t tweak[16], const void *in, void *out, size_t len);
int tc_xts_decrypt_unit(struct tc_xts *x, const uint8_t tweak[16], const void *in, void *out, size_t len);

/* --- AES-256-GCM, 96-bit nonce, 128-bit tag --- */
struct tc_gcm;
/* Implementations of AES-256-GCM (they give the same bytes). TC_GCM_AUTO is
 * ipsec-mb where its AVX-512 code runs, else our own on 256-bit VAES
 * (crypto_gcm_vaes.c) where the CPU has VAES, VPCLMULQDQ and AVX2, else
 * ipsec-mb where it was built in and the CPU has AES-NI and PCLMULQDQ,
 * else GnuTLS. Tests and benchmarks name one to compare them. */
enum tc_gcm_impl { TC_GCM_AUTO, TC_GCM_GNUTLS, TC_GCM_IPSEC_MB, TC_GCM_VAES };
int tc_gcm_new(struct tc_gcm **out, const uint8_t key[TC_GCM_KEY_SIZE]);
/* As tc_gcm_new with a given implementation; ENOTSUP if it is not there. */
int tc_gcm_new_impl(struct tc_gcm **out, const uint8_t key[TC_GCM_KEY_SIZE], enum tc_gcm_impl impl);
/* The name of the implementation TC_GCM_AUTO picks: "ipsec-mb avx512",
 * "tromcho vaes-avx2", "ipsec-mb avx2", ... or "gnutls". */
const char *tc_gcm_impl_name(void);
/* The implementation a context uses. */
enum tc_gcm_impl tc_gcm_impl_of(const struct tc_gcm *g);
void tc_gcm_free(struct tc_gcm *g);
/* Replace the key (key update) without reallocating. */
int tc_gcm_rekey(struct tc_gcm *g, const uint8_t key[TC_GCM_KEY_SIZE]);
/* Encrypt the data buffers in place, authenticating aad too; writes the tag.
 * Header and payload can be separate iovecs: nothing is copied. */
int tc_gcm_seal(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
                const struct iovec *aad, int naad, const struct iovec *data, int ndata,
                uint8_t tag[TC_GCM_TAG_SIZE]);
/* Encrypt len bytes gathered from the in buffers into out (one pass: the
 * copy and the encryption together, GnuTLS's one-shot AEAD call for one
 * contiguous buffer), authenticating nothing else; out needs room for
 * len + TC_GCM_TAG_SIZE bytes: the tag is written right after the
 * ciphertext. The same bytes as tc_gcm_seal on a copy. */
int tc_gcm_seal_copy(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
                     const struct iovec *in, int nin, void *out, size_t len);
/* Check the tag (in constant time) and decrypt in place; EBADMSG if the
 * tag does not match, in which case the data buffers are zeroed (no
 * unauthenticated plaintext is ever left behind). */
int tc_gcm_open(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
                const struct iovec *aad, int naad, const struct iovec *data, int ndata,
                const uint8_t tag[TC_GCM_TAG_SIZE]);

/* Check the tag and decrypt len bytes of in into out (one pass where the
 * implementation allows, in left as it is); EBADMSG on a mismatch, out
 * then zeroed. */
int tc_gcm_open_copy(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE], const void *in, void *out,
                     size_t len, const uint8_t tag[TC_GCM_TAG_SIZE]);

/* --- XXH3-64 --- */
uint64_t tc_xxh3_64(const void *data, size_t len);
uint64_t tc_xxh3_64_seed(const void *data, size_t len, uint64_t seed);
/* Which implementation tc_xxh3 dispatches to: "avx512", "avx2" or "sse2". */
const char *tc_xxh3_impl(void);

/* --- hashes and key derivation --- */
void tc_sha256(const void *data, size_t len, uint8_t out[TC_SHA256_SIZE]);
void tc_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                    uint8_t out[TC_SHA256_SIZE]);
/* HMAC-SHA256 with the key set up once (Nettle, SHA-NI where the CPU has
 * it) for many short messages: tc_hmac2 computes HMAC(key, a || b) and
 * only reads h, so threads may share one. Wiped by tc_hmac_free. */
struct tc_hmac;
int tc_hmac_new(struct tc_hmac **out, const void *key, size_t keylen);
void tc_hmac_free(struct tc_hmac *h);
void tc_hmac2(const struct tc_hmac *h, const void *a, size_t alen, const void *b, size_t blen,
              uint8_t out[TC_SHA256_SIZE]);
/* HKDF-SHA256 (RFC 5869). */
void tc_hkdf_extract(const void *salt, size_t saltlen, const void *ikm, size_t ikmlen,
                     uint8_t prk[TC_SHA256_SIZE]);
/* outlen <= 255 * 32. */
int tc_hkdf_expand(const uint8_t prk[TC_SHA256_SIZE], const void *info, size_t infolen,
                   void *out, size_t outlen);

/* --- X25519 (RFC 7748) --- */
/* out = scalar * point. Fails (EINVAL) if the result is all zeros (a
 * low-order peer point), which a key exchange must refuse. */
int tc_x25519(uint8_t out[TC_X25519_SIZE], const uint8_t scalar[TC_X25519_SIZE],
              const uint8_t point[TC_X25519_SIZE]);
/* out = scalar * base point (a public key). */
void tc_x25519_base(uint8_t out[TC_X25519_SIZE], const uint8_t scalar[TC_X25519_SIZE]);

/* --- randomness and secrets --- */
/* Cryptographically secure random bytes (keys, nonces, handshake randoms). */
int tc_random(void *buf, size_t len);
/* Wipe a secret; not optimised away. */
void tc_wipe(void *p, size_t len);
/* Constant-time equality of two equal-length buffers: 1 if equal. */
int tc_memeq_ct(const void *a, const void *b, size_t len);

#endif
