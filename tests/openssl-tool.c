/* openssl-tool: the independent implementation for
 * tests/test-crypto-openssl.sh, OpenSSL's libcrypto (EVP), with the same
 * command line as crypto-tool:
 *
 *   openssl-tool xts-enc|xts-dec HEXKEY SECTOR   < in > out
 *   openssl-tool gcm-seal HEXKEY HEXNONCE HEXAAD < plaintext > ciphertext||tag
 *   openssl-tool gcm-open HEXKEY HEXNONCE HEXAAD < ciphertext||tag > plaintext
 *
 * Why libcrypto and not the `openssl` command: `openssl enc` refuses XTS
 * ("enc XTS ciphers not supported", OpenSSL 3.0) and has no AEAD mode at
 * all. Why OpenSSL and not Nettle: GnuTLS is built on Nettle and falls back
 * to Nettle's GCM where it has no assembly of its own, so Nettle is not
 * independent enough; OpenSSL shares no code path with GnuTLS or Nettle.
 * It needs libssl-dev (an optional build dependency: without it this tool
 * is not built and the test is skipped). This file never touches tromcho
 * code. GCM nonces may have any length here (GCM spec cases 17 and 18). */
#include <config.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <openssl/evp.h>
#include "testlib.h"

#define PROG "openssl-tool"

int
main(int argc, char **argv)
{
  if (argc < 2)
    tl_die(PROG, "usage: openssl-tool xts-enc|xts-dec KEY SECTOR | gcm-seal|gcm-open KEY NONCE AAD");
  const char *op = argv[1];
  size_t len;
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  if (!c)
    tl_die(PROG, "EVP_CIPHER_CTX_new failed");
  if ((!strcmp(op, "xts-enc") || !strcmp(op, "xts-dec")) && argc == 4) {
    int enc = op[4] == 'e';
    uint8_t *key = tl_unhex(PROG, "HEXKEY", argv[2], 64, NULL);
    char *end;
    errno = 0;
    unsigned long long sector = strtoull(argv[3], &end, 0);
    if (errno || *end)
      tl_die(PROG, "bad SECTOR");
    uint8_t *buf = tl_read_all(PROG, stdin, &len), *out = malloc(len + 1);
    if (!out || len % 4096)
      tl_die(PROG, "input is not a whole number of 4096-byte sectors");
    /* One EVP call per sector, each with its own IV: the sector index as a
     * 128-bit little-endian number. */
    for (size_t off = 0; off < len; off += 4096, sector++) {
      uint8_t iv[16] = { 0 };
      int outl;
      for (int i = 0; i < 8; i++)
        iv[i] = (uint8_t) (sector >> (8 * i));
      if (EVP_CipherInit_ex(c, EVP_aes_256_xts(), NULL, key, iv, enc) != 1 ||
          EVP_CipherUpdate(c, out + off, &outl, buf + off, 4096) != 1 || outl != 4096)
        tl_die(PROG, "EVP AES-256-XTS failed");
    }
    if (fwrite(out, 1, len, stdout) != len)
      tl_die(PROG, "write failed");
    free(key);
    free(buf);
    free(out);
    EVP_CIPHER_CTX_free(c);
    return 0;
  }
  if ((!strcmp(op, "gcm-seal") || !strcmp(op, "gcm-open")) && argc == 5) {
    int enc = op[4] == 's';
    size_t ivlen, aadlen;
    uint8_t *key = tl_unhex(PROG, "HEXKEY", argv[2], 32, NULL);
    uint8_t *iv = tl_unhex(PROG, "HEXNONCE", argv[3], SIZE_MAX, &ivlen);
    uint8_t *aad = tl_unhex(PROG, "HEXAAD", argv[4], SIZE_MAX, &aadlen);
    uint8_t *buf = tl_read_all(PROG, stdin, &len);
    if (!enc && len < 16)
      tl_die(PROG, "input is shorter than the tag");
    size_t dlen = enc ? len : len - 16;
    uint8_t *out = malloc(dlen + 16);
    int outl, fin;
    if (!out || ivlen == 0 ||
        EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, (int) ivlen, NULL) != 1 ||
        EVP_CipherInit_ex(c, NULL, NULL, key, iv, enc) != 1)
      tl_die(PROG, "EVP AES-256-GCM init failed");
    if (aadlen && EVP_CipherUpdate(c, NULL, &outl, aad, (int) aadlen) != 1)
      tl_die(PROG, "EVP AES-256-GCM AAD failed");
    if (dlen && EVP_CipherUpdate(c, out, &outl, buf, (int) dlen) != 1)
      tl_die(PROG, "EVP AES-256-GCM failed");
    if (!enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, buf + dlen) != 1)
      tl_die(PROG, "EVP AES-256-GCM set tag failed");
    if (EVP_CipherFinal_ex(c, out + dlen, &fin) != 1)
      tl_die(PROG, "authentication tag mismatch");
    if (enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, out + dlen) != 1)
      tl_die(PROG, "EVP AES-256-GCM get tag failed");
    size_t outlen = enc ? dlen + 16 : dlen;
    if (fwrite(out, 1, outlen, stdout) != outlen)
      tl_die(PROG, "write failed");
    free(key);
    free(iv);
    free(aad);
    free(buf);
    free(out);
    EVP_CIPHER_CTX_free(c);
    return 0;
  }
  tl_die(PROG, "usage: openssl-tool xts-enc|xts-dec KEY SECTOR | gcm-seal|gcm-open KEY NONCE AAD");
  return 1;
}
