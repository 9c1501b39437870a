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

static void
usage(void)
{
  fprintf(stderr,
          "usage: crypto-tool xts-enc|xts-dec HEXKEY(128 hex digits) SECTOR < in > out\n"
          "       crypto-tool gcm-seal|gcm-open HEXKEY(64) HEXNONCE(24) HEXAAD < in > out\n");
  exit(2);
}

static void
die(const char *what)
{
  fprintf(stderr, "crypto-tool: %s\n", what);
  exit(1);
}

/* Decode exactly want bytes of hex (want == SIZE_MAX: any length). */
static uint8_t *
unhex(const char *name, const char *hex, size_t want, size_t *got)
{
  size_t n = strlen(hex);
  if (n % 2 || (want != SIZE_MAX && n != 2 * want)) {
    fprintf(stderr, "crypto-tool: %s must be %zu hex digits, not %zu\n", name, 2 * want, n);
    exit(1);
  }
  uint8_t *out = malloc(n / 2 + 1);
  if (!out)
    die("out of memory");
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdefABCDEF", hex[2 * i]) ||
        !strchr("0123456789abcdefABCDEF", hex[2 * i + 1])) {
      fprintf(stderr, "crypto-tool: %s: '%.2s' at offset %zu is not hex\n", name, hex + 2 * i, 2 * i);
      exit(1);
    }
    out[i] = (uint8_t) v;
  }
  if (got)
    *got = n / 2;
  return out;
}

static uint8_t *
read_all(size_t *len)
{
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  if (!buf)
    die("out of memory");
  for (;;) {
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (!nb)
        die("out of memory");
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, stdin);
    n += r;
    if (r == 0)
      break;
  }
  if (ferror(stdin))
    die("reading stdin failed");
  *len = n;
  return buf;
}

static void
write_all(const void *p, size_t len)
{
  if (len && fwrite(p, 1, len, stdout) != len)
    die("writing stdout failed");
  if (fflush(stdout) != 0)
    die("writing stdout failed");
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
    uint8_t *key = unhex("HEXKEY", argv[2], TC_XTS_KEY_SIZE, NULL);
    char *end;
    errno = 0;
    unsigned long long sector = strtoull(argv[3], &end, 0);
    if (errno || end == argv[3] || *end || argv[3][0] == '-')
      die("SECTOR must be a sector number from 0 to 2^64-1");
    struct tc_xts *x;
    if (tc_xts_new(&x, key) < 0)
      die(tc_last_error());
    tc_wipe(key, TC_XTS_KEY_SIZE);
    free(key);
    uint8_t *buf = read_all(&len);
    int r = op[4] == 'e' ? tc_xts_encrypt(x, sector, buf, buf, len) : tc_xts_decrypt(x, sector, buf, buf, len);
    if (r < 0)
      die(tc_last_error());
    write_all(buf, len);
    tc_xts_free(x);
    free(buf);
    return 0;
  }
  if (!strcmp(op, "gcm-seal") || !strcmp(op, "gcm-open")) {
    if (argc != 5)
      usage();
    size_t aadlen;
    uint8_t *key = unhex("HEXKEY", argv[2], TC_GCM_KEY_SIZE, NULL);
    uint8_t *nonce = unhex("HEXNONCE", argv[3], TC_GCM_NONCE_SIZE, NULL);
    uint8_t *aad = unhex("HEXAAD", argv[4], SIZE_MAX, &aadlen);
    struct tc_gcm *g;
    if (tc_gcm_new(&g, key) < 0)
      die(tc_last_error());
    tc_wipe(key, TC_GCM_KEY_SIZE);
    free(key);
    uint8_t *buf = read_all(&len);
    struct iovec a = { aad, aadlen };
    if (op[4] == 's') {
      uint8_t tag[TC_GCM_TAG_SIZE];
      struct iovec d = { buf, len };
      if (tc_gcm_seal(g, nonce, &a, aadlen ? 1 : 0, &d, 1, tag) < 0)
        die(tc_last_error());
      write_all(buf, len);
      write_all(tag, sizeof tag);
    }
    else {
      if (len < TC_GCM_TAG_SIZE)
        die("input is shorter than the 16-byte tag");
      struct iovec d = { buf, len - TC_GCM_TAG_SIZE };
      if (tc_gcm_open(g, nonce, &a, aadlen ? 1 : 0, &d, 1, buf + len - TC_GCM_TAG_SIZE) < 0)
        die(tc_last_error());
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
