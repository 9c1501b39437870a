/* AES-256-GCM, three implementations behind one API, giving the same bytes:
 *
 * - Intel's ipsec-mb (x86-64): VAES + VPCLMULQDQ with AVX-512 where the CPU
 *   has it, stitched AES-CTR and GHASH. Measured on this project's
 *   machines (AVX-512): 15.7 GB/s at 4 KiB, 18 GB/s at 1 MiB. Without
 *   AVX-512 its best (1.3) is 128-bit AES-NI: 3.6 GB/s on AMD Zen 3.
 * - Our own (crypto_gcm_vaes.c) on 256-bit VAES + VPCLMULQDQ, for CPUs
 *   that have them without AVX-512 (AMD Zen 3), where no Debian library
 *   uses them.
 * - GnuTLS's scatter-gather AEAD API: 3.7-4.5 GB/s on the same CPU (its
 *   assembly stops at 128-bit AES-NI). Used where ipsec-mb is not built in
 *   or the CPU lacks AES-NI/PCLMULQDQ.
 *
 * Both seal and open in place, header and payload as separate iovecs, and
 * check the tag in constant time. The ipsec-mb manager is read-only after
 * its one-time set-up (pthread_once), so threads share it safely; each
 * context holds its own expanded key. */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#ifdef HAVE_IPSEC_MB
#include <intel-ipsec-mb.h>
#endif
#include "crypto.h"
#include "error.h"
#ifdef TC_HAVE_VAES
#include <cpuid.h>
#include "crypto_vaes.h"
#endif

struct tc_gcm {
  enum tc_gcm_impl impl;
  gnutls_aead_cipher_hd_t h;
#ifdef TC_HAVE_VAES
  struct tc_gcm_vaes_key *vk;
#endif
#ifdef HAVE_IPSEC_MB
  struct gcm_key_data *kd; /* expanded key and GHASH powers, 64-aligned */
#endif
};

#ifdef HAVE_IPSEC_MB
static IMB_MGR *imb;
static const char *imb_name = "gnutls";
static bool imb_avx512; /* its VAES code runs: faster than ours */
static pthread_once_t imb_once = PTHREAD_ONCE_INIT;

static void
imb_setup(void)
{
  IMB_MGR *m = alloc_mb_mgr(0);
  if (!m)
    return;
  IMB_ARCH arch = IMB_ARCH_NONE;
  init_mb_mgr_auto(m, &arch);
  /* Without AES-NI and PCLMULQDQ ipsec-mb emulates them in software, far
   * slower than it is with them: leave GCM to GnuTLS then. */
  uint64_t need = IMB_FEATURE_AESNI | IMB_FEATURE_PCLMULQDQ;
  if (imb_get_errno(m) != 0 || arch < IMB_ARCH_SSE || (m->features & need) != need) {
    free_mb_mgr(m);
    return;
  }
  imb = m;
  imb_avx512 = arch == IMB_ARCH_AVX512;
  imb_name = arch == IMB_ARCH_AVX512 ? "ipsec-mb avx512"
             : arch == IMB_ARCH_AVX2 ? "ipsec-mb avx2"
             : arch == IMB_ARCH_AVX  ? "ipsec-mb avx"
                                     : "ipsec-mb sse";
}

static IMB_MGR *
imb_get(void)
{
  pthread_once(&imb_once, imb_setup);
  return imb;
}


/* One pass of ipsec-mb's GCM over the data buffers: encrypt or decrypt them
 * in place, or (out not NULL) into out, one piece after the other; writes
 * the tag the data and aad give. */
static int
imb_crypt(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE], const uint8_t *a, size_t alen,
          const struct iovec *data, int ndata, uint8_t *out, bool encrypt, uint8_t tag[TC_GCM_TAG_SIZE])
{
  struct gcm_context_data ctx;
  IMB_AES256_GCM_INIT(imb, g->kd, &ctx, nonce, a, alen);
  for (int i = 0; i < ndata; i++) {
    size_t n = data[i].iov_len;
    if (!n)
      continue;
    uint8_t *dst = out ? out : data[i].iov_base;
    if (encrypt)
      IMB_AES256_GCM_ENC_UPDATE(imb, g->kd, &ctx, dst, data[i].iov_base, n);
    else
      IMB_AES256_GCM_DEC_UPDATE(imb, g->kd, &ctx, dst, data[i].iov_base, n);
    if (out)
      out += n;
  }
  if (encrypt)
    IMB_AES256_GCM_ENC_FINALIZE(imb, g->kd, &ctx, tag, TC_GCM_TAG_SIZE);
  else
    IMB_AES256_GCM_DEC_FINALIZE(imb, g->kd, &ctx, tag, TC_GCM_TAG_SIZE);
  tc_wipe(&ctx, sizeof ctx);
  return 0;
}
#endif

/* ipsec-mb and our VAES code take the additional data as one buffer
 * (frames authenticate small headers, if anything): gather it, then one
 * pass of the context's implementation over the data buffers, in place or
 * (out not NULL) into out; writes the tag the data and aad give. */
#define TC_GCM_AAD_MAX 1024

static bool
one_pass_impl(const struct tc_gcm *g)
{
  return g->impl == TC_GCM_IPSEC_MB || g->impl == TC_GCM_VAES;
}

static int
one_pass(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE], const struct iovec *aad, int naad,
         const struct iovec *data, int ndata, uint8_t *out, bool encrypt, uint8_t tag[TC_GCM_TAG_SIZE])
{
  uint8_t a[TC_GCM_AAD_MAX];
  size_t alen = 0;
  for (int i = 0; i < naad; i++) {
    if (aad[i].iov_len > sizeof a - alen)
      return tc_error(EINVAL, "AES-256-GCM: more than %zu bytes of additional data", sizeof a);
    memcpy(a + alen, aad[i].iov_base, aad[i].iov_len);
    alen += aad[i].iov_len;
  }
#ifdef TC_HAVE_VAES
  if (g->impl == TC_GCM_VAES)
    return tc_gcm_vaes_crypt(g->vk, nonce, a, alen, data, ndata, out, encrypt, tag);
#endif
#ifdef HAVE_IPSEC_MB
  if (g->impl == TC_GCM_IPSEC_MB)
    return imb_crypt(g, nonce, a, alen, data, ndata, out, encrypt, tag);
#endif
  return tc_error(ENOTSUP, "AES-256-GCM: implementation %d is not built in", (int) g->impl);
}

#ifdef TC_HAVE_VAES
/* Checked here, in code built without AVX: the CPU's support and the OS's
 * (it saves the YMM registers: OSXSAVE, and XCR0's SSE and AVX state).
 * CPUID itself, not __builtin_cpu_supports: clang 14 (the fuzzing build)
 * knows no "vaes" or "vpclmulqdq" there. */
bool
tc_vaes_usable(void)
{
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  bool aes = c & bit_AES, pclmul = c & bit_PCLMUL, osxsave = c & bit_OSXSAVE, avx = c & bit_AVX;
  if (!(aes && pclmul && osxsave && avx))
    return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6) != 6)   /* XMM and YMM state */
    return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
    return false;
  return (b & bit_AVX2) && (c & bit_VAES) && (c & bit_VPCLMULQDQ);
}
#endif

/* What TC_GCM_AUTO picks: ipsec-mb's AVX-512 code where it runs, else ours
 * on 256-bit VAES, else ipsec-mb's AES-NI code, else GnuTLS. */
static enum tc_gcm_impl
auto_impl(void)
{
#ifdef HAVE_IPSEC_MB
  if (imb_get() && imb_avx512)
    return TC_GCM_IPSEC_MB;
#endif
#ifdef TC_HAVE_VAES
  if (tc_vaes_usable())
    return TC_GCM_VAES;
#endif
#ifdef HAVE_IPSEC_MB
  if (imb_get())
    return TC_GCM_IPSEC_MB;
#endif
  return TC_GCM_GNUTLS;
}

const char *
tc_gcm_impl_name(void)
{
  enum tc_gcm_impl i = auto_impl();
  if (i == TC_GCM_VAES)
    return "tromcho vaes-avx2";
#ifdef HAVE_IPSEC_MB
  if (i == TC_GCM_IPSEC_MB)
    return imb_name;
#endif
  return "gnutls";
}

enum tc_gcm_impl
tc_gcm_impl_of(const struct tc_gcm *g)
{
  return g->impl;
}

int
tc_gcm_new_impl(struct tc_gcm **out, const uint8_t key[TC_GCM_KEY_SIZE], enum tc_gcm_impl impl)
{
  *out = NULL;
  if (impl == TC_GCM_AUTO)
    impl = auto_impl();
#ifdef TC_HAVE_VAES
  if (impl == TC_GCM_VAES && !tc_vaes_usable())
    return tc_error(ENOTSUP, "AES-256-GCM: this CPU lacks AVX2, VAES or VPCLMULQDQ");
#else
  if (impl == TC_GCM_VAES)
    return tc_error(ENOTSUP, "AES-256-GCM: the VAES implementation is built for x86-64 only");
#endif
#ifdef HAVE_IPSEC_MB
  if (impl == TC_GCM_IPSEC_MB && !imb_get())
    return tc_error(ENOTSUP, "AES-256-GCM: ipsec-mb needs AES-NI and PCLMULQDQ, which this CPU lacks");
#else
  if (impl == TC_GCM_IPSEC_MB)
    return tc_error(ENOTSUP, "AES-256-GCM: this build has no ipsec-mb (configure found no libipsec-mb-dev)");
#endif
  struct tc_gcm *g = calloc(1, sizeof *g);
  if (!g)
    return tc_error(ENOMEM, "AES-256-GCM: out of memory");
  g->impl = impl;
  if (tc_gcm_rekey(g, key) < 0) {
    tc_gcm_free(g);
    return -1;
  }
  *out = g;
  return 0;
}

int
tc_gcm_new(struct tc_gcm **out, const uint8_t key[TC_GCM_KEY_SIZE])
{
  return tc_gcm_new_impl(out, key, TC_GCM_AUTO);
}

/* The expanded key's 64-byte-aligned home, allocated on the first key. */
static int
key_home(void **p, size_t size)
{
  if (!*p && posix_memalign(p, 64, size) != 0) {
    *p = NULL;
    return tc_error(ENOMEM, "AES-256-GCM: out of memory");
  }
  return 0;
}

int
tc_gcm_rekey(struct tc_gcm *g, const uint8_t key[TC_GCM_KEY_SIZE])
{
#ifdef TC_HAVE_VAES
  if (g->impl == TC_GCM_VAES) {
    if (key_home((void **) &g->vk, sizeof *g->vk) < 0)
      return -1;
    tc_gcm_vaes_expand(g->vk, key);
    return 0;
  }
#endif
#ifdef HAVE_IPSEC_MB
  if (g->impl == TC_GCM_IPSEC_MB) {
    if (key_home((void **) &g->kd, sizeof *g->kd) < 0)
      return -1;
    IMB_AES256_GCM_PRE(imb, key, g->kd);
    return 0;
  }
#endif
  uint8_t k[TC_GCM_KEY_SIZE];
  memcpy(k, key, sizeof k);
  gnutls_datum_t d = { k, sizeof k };
  gnutls_aead_cipher_hd_t h;
  int r = gnutls_aead_cipher_init(&h, GNUTLS_CIPHER_AES_256_GCM, &d);
  tc_wipe(k, sizeof k);
  if (r < 0)
    return tc_error(EINVAL, "AES-256-GCM: gnutls_aead_cipher_init: %s", gnutls_strerror(r));
  if (g->h)
    gnutls_aead_cipher_deinit(g->h);
  g->h = h;
  return 0;
}

void
tc_gcm_free(struct tc_gcm *g)
{
  if (!g)
    return;
  if (g->h)
    gnutls_aead_cipher_deinit(g->h);
#ifdef TC_HAVE_VAES
  if (g->vk) {
    tc_wipe(g->vk, sizeof *g->vk);
    free(g->vk);
  }
#endif
#ifdef HAVE_IPSEC_MB
  if (g->kd) {
    tc_wipe(g->kd, sizeof *g->kd);
    free(g->kd);
  }
#endif
  free(g);
}

int
tc_gcm_seal(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
            const struct iovec *aad, int naad, const struct iovec *data, int ndata,
            uint8_t tag[TC_GCM_TAG_SIZE])
{
  if (one_pass_impl(g))
    return one_pass(g, nonce, aad, naad, data, ndata, NULL, true, tag);
  size_t tagsz = TC_GCM_TAG_SIZE;
  int r = gnutls_aead_cipher_encryptv2(g->h, nonce, TC_GCM_NONCE_SIZE, (giovec_t *) aad, naad,
                                       (giovec_t *) data, ndata, tag, &tagsz);
  if (r < 0)
    return tc_error(EIO, "AES-256-GCM seal: %s", gnutls_strerror(r));
  return 0;
}

static int
gather_len_ok(const struct iovec *in, int nin, size_t len)
{
  size_t off = 0;
  for (int i = 0; i < nin; i++) {
    if (in[i].iov_len > len - off)
      return tc_error(EINVAL, "AES-256-GCM seal: more than %zu bytes of input for a %zu-byte record", len, len);
    off += in[i].iov_len;
  }
  if (off != len)
    return tc_error(EINVAL, "AES-256-GCM seal: %zu bytes of input for a %zu-byte record", off, len);
  return 0;
}

int
tc_gcm_seal_copy(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
                 const struct iovec *in, int nin, void *out, size_t len)
{
  if (gather_len_ok(in, nin, len) < 0)
    return -1;
  uint8_t *o = out;
  if (one_pass_impl(g))   /* gather and encrypt in one pass */
    return one_pass(g, nonce, NULL, 0, in, nin, o, true, o + len);
  if (nin == 1) {
    size_t outlen = len + TC_GCM_TAG_SIZE;
    int r = gnutls_aead_cipher_encrypt(g->h, nonce, TC_GCM_NONCE_SIZE, NULL, 0, TC_GCM_TAG_SIZE,
                                       in[0].iov_base, len, out, &outlen);
    if (r < 0)
      return tc_error(EIO, "AES-256-GCM seal: %s", gnutls_strerror(r));
    return 0;
  }
  /* Scattered input: gather, then seal in place. */
  for (int i = 0; i < nin; i++) {
    memcpy(o, in[i].iov_base, in[i].iov_len);
    o += in[i].iov_len;
  }
  struct iovec one = { out, len };
  return tc_gcm_seal(g, nonce, NULL, 0, &one, 1, (uint8_t *) out + len);
}

/* Never leave the plaintext of a forged or damaged record behind: both
 * implementations decrypt in place before the tag is known to be good. */
static void
wipe_data(const struct iovec *data, int ndata)
{
  for (int i = 0; i < ndata; i++)
    tc_wipe(data[i].iov_base, data[i].iov_len);
}

int
tc_gcm_open(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
            const struct iovec *aad, int naad, const struct iovec *data, int ndata,
            const uint8_t tag[TC_GCM_TAG_SIZE])
{
  if (one_pass_impl(g)) {
    uint8_t want[TC_GCM_TAG_SIZE];
    if (one_pass(g, nonce, aad, naad, data, ndata, NULL, false, want) < 0)
      return -1;
    int ok = tc_memeq_ct(want, tag, TC_GCM_TAG_SIZE);
    tc_wipe(want, sizeof want);
    if (!ok) {
      wipe_data(data, ndata);
      return tc_error(EBADMSG, "AES-256-GCM open: authentication tag mismatch");
    }
    return 0;
  }
  int r = gnutls_aead_cipher_decryptv2(g->h, nonce, TC_GCM_NONCE_SIZE, (giovec_t *) aad, naad,
                                       (giovec_t *) data, ndata, (void *) tag, TC_GCM_TAG_SIZE);
  if (r < 0)
    wipe_data(data, ndata);
  if (r == GNUTLS_E_DECRYPTION_FAILED)
    return tc_error(EBADMSG, "AES-256-GCM open: authentication tag mismatch");
  if (r < 0)
    return tc_error(EIO, "AES-256-GCM open: %s", gnutls_strerror(r));
  return 0;
}

int
tc_gcm_open_copy(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE], const void *in, void *out,
                 size_t len, const uint8_t tag[TC_GCM_TAG_SIZE])
{
  struct iovec o = { out, len };
  if (!one_pass_impl(g)) {   /* GnuTLS: a copy opened in place */
    memcpy(out, in, len);
    return tc_gcm_open(g, nonce, NULL, 0, &o, 1, tag);
  }
  uint8_t want[TC_GCM_TAG_SIZE];
  struct iovec i = { (void *) in, len };
  if (one_pass(g, nonce, NULL, 0, &i, 1, out, false, want) < 0)
    return -1;
  int ok = tc_memeq_ct(want, tag, TC_GCM_TAG_SIZE);
  tc_wipe(want, sizeof want);
  if (!ok) {
    wipe_data(&o, 1);
    return tc_error(EBADMSG, "AES-256-GCM open: authentication tag mismatch");
  }
  return 0;
}
