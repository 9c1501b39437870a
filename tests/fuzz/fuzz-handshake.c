/* libFuzzer target: the messenger handshake (common/msgr/msgr_handshake.c).
 *
 * Input: byte 0 picks the side (bit 0: server), keys (bit 1: certificates
 * on both sides, Ed25519 ones made at start-up) and the local mode (bits
 * 2-3); byte 1 the size of the chunks the bytes arrive in (1..256, like a
 * socket delivering them piecemeal); the rest is what the peer sends. A
 * client has already sent its ClientHello. The bytes are fed as a
 * connection feeds them, until the handshake finishes, fails or starves.
 *
 * TC_FUZZ_WRITE_SEEDS=DIR ./fuzz-handshake runs a real client and server
 * against each other (with and without keys) and writes what each side
 * received as seeds (how tests/fuzz/corpus-handshake was made). */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "certs.h"
#include "crypto.h"
#include "msgr_int.h"

static struct tc_hs_cfg cfg_keyed_srv, cfg_keyed_cli, cfg_clear;

static void
setup_certs(void)
{
  char dir[] = "/tmp/tromcho-fuzz-hs.XXXXXX";
  if (!mkdtemp(dir))
    abort();
  char ca[128], cak[128], cca[128], ccak[128], u[128], uk[128];
  snprintf(ca, sizeof ca, "%s/osd_ca.crt", dir);
  snprintf(cak, sizeof cak, "%s/osd_ca.key", dir);
  snprintf(cca, sizeof cca, "%s/client_ca.crt", dir);
  snprintf(ccak, sizeof ccak, "%s/client_ca.key", dir);
  snprintf(u, sizeof u, "%s/user.crt", dir);
  snprintf(uk, sizeof uk, "%s/user.key", dir);
  struct tc_cert_spec osd = { .cn = "fuzz osd", .is_ca = 1, .server = 1, .client = 1, .days = 30 };
  struct tc_cert_spec cl = { .cn = "fuzz client_ca", .is_ca = 1, .days = 30 };
  struct tc_cert_spec user = { .cn = "fuzzer", .client = 1, .days = 30 };
  if (tc_cert_issue(&osd, TC_KEY_ED25519, NULL, NULL, ca, cak) < 0 ||
      tc_cert_issue(&cl, TC_KEY_ED25519, NULL, NULL, cca, ccak) < 0 ||
      tc_cert_issue(&user, TC_KEY_ED25519, cca, ccak, u, uk) < 0)
    abort();
  cfg_keyed_srv.id = tc_cert_identity_load(ca, cak, 0);
  cfg_keyed_srv.osd_ca = tc_cert_trust_load(ca);
  cfg_keyed_srv.client_ca = tc_cert_trust_load(cca);
  cfg_keyed_cli.id = tc_cert_identity_load(u, uk, 0);
  cfg_keyed_cli.osd_ca = tc_cert_trust_load(ca);
  if (!cfg_keyed_srv.id || !cfg_keyed_srv.osd_ca || !cfg_keyed_srv.client_ca || !cfg_keyed_cli.id ||
      !cfg_keyed_cli.osd_ca)
    abort();
  const char *files[] = { ca, cak, cca, ccak, u, uk };
  for (int i = 0; i < 6; i++)
    unlink(files[i]);
  rmdir(dir);
}

static void
write_file(const char *dir, const char *name, uint8_t sel, const uint8_t *p, size_t n)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  uint8_t hdr[2] = { sel, 0 };   /* chunk size 0 -> 256 */
  if (!f || fwrite(hdr, 1, 2, f) != 2 || fwrite(p, 1, n, f) != n)
    abort();
  fclose(f);
}

/* Run both sides in memory; write what each received. */
static void
write_seeds(const char *dir)
{
  for (int keyed = 0; keyed < 2; keyed++) {
    struct tc_hs_cfg *sc = keyed ? &cfg_keyed_srv : &cfg_clear;
    struct tc_hs_cfg *cc = keyed ? &cfg_keyed_cli : &cfg_clear;
    sc->mode = cc->mode = TC_MODE_PAYLOAD;
    sc->force = cc->force = TC_MODE_UNSET;
    struct tc_hs s, c;
    struct tc_buf to_s = { 0 }, to_c = { 0 }, all_s = { 0 }, all_c = { 0 };
    if (tc_hs_init(&s, sc, 1) < 0 || tc_hs_init(&c, cc, 0) < 0 || tc_hs_start(&c, &to_s) < 0)
      abort();
    int sdone = 0, cdone = 0;
    for (int round = 0; round < 8 && !(sdone && cdone); round++) {
      size_t used;
      if (to_s.len) {
        tc_buf_append(&all_s, to_s.p, to_s.len);
        int r = tc_hs_feed(&s, to_s.p, to_s.len, &used, &to_c);
        if (r < 0)
          abort();
        sdone |= r == 1;
        tc_buf_consume(&to_s, used);
      }
      if (to_c.len) {
        tc_buf_append(&all_c, to_c.p, to_c.len);
        int r = tc_hs_feed(&c, to_c.p, to_c.len, &used, &to_s);
        if (r < 0)
          abort();
        cdone |= r == 1;
        tc_buf_consume(&to_c, used);
      }
    }
    if (!sdone || !cdone)
      abort();
    uint8_t ssel = 1 | (keyed << 1) | (TC_MODE_PAYLOAD << 2), csel = (keyed << 1) | (TC_MODE_PAYLOAD << 2);
    write_file(dir, keyed ? "server-receives-keyed" : "server-receives-clear", ssel, all_s.p, all_s.len);
    write_file(dir, keyed ? "client-receives-keyed" : "client-receives-clear", csel, all_c.p, all_c.len);
    tc_hs_clear(&s);
    tc_hs_clear(&c);
    tc_buf_free(&to_s);
    tc_buf_free(&to_c);
    tc_buf_free(&all_s);
    tc_buf_free(&all_c);
  }
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  if (tc_crypto_init() < 0)
    abort();
  setup_certs();
  const char *d = getenv("TC_FUZZ_WRITE_SEEDS");
  if (d) {
    write_seeds(d);
    exit(0);
  }
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 2)
    return 0;
  int server = data[0] & 1, keyed = (data[0] >> 1) & 1, mode = (data[0] >> 2) & 3;
  size_t chunk = data[1] ? data[1] : 256;
  data += 2;
  size -= 2;
  struct tc_hs_cfg cfg = keyed ? (server ? cfg_keyed_srv : cfg_keyed_cli) : cfg_clear;
  cfg.mode = mode > TC_MODE_GCM ? TC_MODE_GCM : mode;
  cfg.force = TC_MODE_UNSET;
  struct tc_hs hs;
  struct tc_buf out = { 0 }, in = { 0 };
  if (tc_hs_init(&hs, &cfg, server) < 0)
    abort();
  if (!server && tc_hs_start(&hs, &out) < 0)
    abort();
  size_t off = 0;
  int r = 0;
  while (off < size && r == 0) {
    size_t n = size - off < chunk ? size - off : chunk;
    tc_buf_append(&in, data + off, n);
    off += n;
    size_t used = 0;
    r = tc_hs_feed(&hs, in.p, in.len, &used, &out);
    if (used > in.len)
      abort();
    tc_buf_consume(&in, used);
  }
  if (r == 1 && (hs.mode < TC_MODE_NONE || hs.mode > TC_MODE_GCM || (hs.mode == TC_MODE_GCM && !hs.keyed)))
    abort();   /* a finished handshake never yields gcm without keys */
  if (r == 1 && hs.keyed && !server && hs.ident.role != TC_ROLE_OSD)
    abort();   /* a keyed client only finishes with an OSD */
  tc_hs_clear(&hs);
  tc_buf_free(&out);
  tc_buf_free(&in);
  return 0;
}
