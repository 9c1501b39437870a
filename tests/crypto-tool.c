/* crypto-tool: tromcho's crypto core on stdin/stdout, for cross-checks
 * against independent implementations (tests/test-crypto-openssl.sh).
 *
 *   crypto-tool xts-enc|xts-dec HEXKEY SECTOR   < in > out
 *       AES-256-XTS over 4096-byte sectors, the first at image sector
 *       SECTOR (DESIGN.md section 6: tweak = sector index, 128-bit LE)
 *   crypto-tool gcm-seal HEXKEY HEXNONCE HEXAAD < plaintext > ciphertext||tag
 *   crypto-tool gcm-open HEXKEY HEXNONCE HEXAAD < ciphertext||tag > plaintext
 *
 * HEXAAD may be "" (no AAD). Exit status 1 with a message on any error,
 * including a tag that does not verify. Not installed. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "crypto.h"
#include "error.h"
#include "testlib.h"

#define PROG "crypto-tool"

static void
usage(void)
{
  fprintf(stderr,
          "usage: crypto-tool xts-enc|xts-dec HEXKEY(128 hex digits) SECTOR < in > out\n"
          "       crypto-tool gcm-seal|gcm-open HEXKEY(64) HEXNONCE(24) HEXAAD < in > out\n");
  exit(2);
}

/* Decode exactly want bytes of hex (want == SIZE_MAX: any length). */
static void
write_all(const void *p, size_t len)
{
  if (len && fwrite(p, 1, len, stdout) != len)
    tl_die(PROG, "writing stdout failed");
  if (fflush(stdout) != 0)
    tl_die(PROG, "writing stdout failed");
}

int
main(int argc, char **argv)
{
  if (argc < 2)
    usage();
  if (tc_crypto_init() < 0) {
    fprintf(stderr, "crypto-tool: %s\n", tc_last_error());
    return 1;
  }
  const char *op = argv[1];
  size_t len;
  if (!strcmp(op, "xts-enc") || !strcmp(op, "xts-dec")) {
    if (argc != 4)
      usage();
    uint8_t *key = tl_unhex(PROG, "HEXKEY", argv[2], TC_XTS_KEY_SIZE, NULL);
    char *end;
    errno = 0;
    unsigned long long sector = strtoull(argv[3], &end, 0);
    if (errno || end == argv[3] || *end || argv[3][0] == '-')
      tl_die(PROG, "SECTOR must be a sector number from 0 to 2^64-1");
    struct tc_xts *x;
    if (tc_xts_new(&x, key) < 0)
      tl_die(PROG, "%s", tc_last_error());
    tc_wipe(key, TC_XTS_KEY_SIZE);
    free(key);
    uint8_t *buf = tl_read_all(PROG, stdin, &len);
    int r = op[4] == 'e' ? tc_xts_encrypt(x, sector, buf, buf, len) : tc_xts_decrypt(x, sector, buf, buf, len);
    if (r < 0)
      tl_die(PROG, "%s", tc_last_error());
    write_all(buf, len);
    tc_xts_free(x);
    free(buf);
    return 0;
  }
  if (!strcmp(op, "gcm-seal") || !strcmp(op, "gcm-open")) {
    if (argc != 5)
      usage();
    size_t aadlen;
    uint8_t *key = tl_unhex(PROG, "HEXKEY", argv[2], TC_GCM_KEY_SIZE, NULL);
    uint8_t *nonce = tl_unhex(PROG, "HEXNONCE", argv[3], TC_GCM_NONCE_SIZE, NULL);
    uint8_t *aad = tl_unhex(PROG, "HEXAAD", argv[4], SIZE_MAX, &aadlen);
    struct tc_gcm *g;
    if (tc_gcm_new(&g, key) < 0)
      tl_die(PROG, "%s", tc_last_error());
    tc_wipe(key, TC_GCM_KEY_SIZE);
    free(key);
    uint8_t *buf = tl_read_all(PROG, stdin, &len);
    struct iovec a = { aad, aadlen };
    if (op[4] == 's') {
      uint8_t tag[TC_GCM_TAG_SIZE];
      struct iovec d = { buf, len };
      if (tc_gcm_seal(g, nonce, &a, aadlen ? 1 : 0, &d, 1, tag) < 0)
        tl_die(PROG, "%s", tc_last_error());
      write_all(buf, len);
      write_all(tag, sizeof tag);
    }
    else {
      if (len < TC_GCM_TAG_SIZE)
        tl_die(PROG, "input is shorter than the 16-byte tag");
      struct iovec d = { buf, len - TC_GCM_TAG_SIZE };
      if (tc_gcm_open(g, nonce, &a, aadlen ? 1 : 0, &d, 1, buf + len - TC_GCM_TAG_SIZE) < 0)
        tl_die(PROG, "%s", tc_last_error());
      write_all(buf, len - TC_GCM_TAG_SIZE);
    }
    tc_gcm_free(g);
    free(buf);
    free(nonce);
    free(aad);
    return 0;
  }
  usage();
  return 2;
}
