/* libFuzzer target: the messenger's frame layer (common/msgr/msgr_frame.c).
 *
 * Input: byte 0 picks the mode (bits 0-1, 3 = gcm), keys (bit 2), the
 * key update interval (bit 3: every 4 records) and, in gcm with keys,
 * whether the round trip below seals every other payload under a key of
 * its own (bit 4); the rest is a stream of frames as they come off the
 * wire, opened one by one exactly as a connection does (header, then the
 * key record of an own-key frame, then payload; an own-key payload of an
 * odd opcode into a second buffer, as a server keeping it sealed) until
 * one fails. The keys are
 * fixed, so the seed corpus holds real valid streams. Then, as a property,
 * the rest of the input is sealed as a payload on one side and opened on the
 * other: it must come back unchanged (abort otherwise).
 *
 * TC_FUZZ_WRITE_SEEDS=DIR ./fuzz-frame writes a valid stream per mode to DIR
 * (how tests/fuzz/corpus-frame was made) and exits. */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "crypto.h"
#include "msgr_int.h"

static const uint8_t secret_a[32] = "tromcho fuzz secret, direction A";
static const uint8_t secret_b[32] = "tromcho fuzz secret, direction B";

static void
ctx_init(struct tc_frame_ctx *f, int mode, int keyed, int rekey, int side)
{
  memset(f, 0, sizeof *f);
  f->mode = mode;
  f->max_frame = 1 << 20;
  if (keyed &&
      tc_frame_ctx_keys(f, side ? secret_b : secret_a, side ? secret_a : secret_b, 0x1234567890abcdefULL, rekey) < 0)
    abort();
}

static void
decode_sel(uint8_t sel, int *mode, int *keyed, int *rekey)
{
  *mode = sel & 3;
  if (*mode == 3)
    *mode = TC_MODE_GCM;
  *keyed = (sel >> 2) & 1;
  if (!*keyed && *mode == TC_MODE_GCM)
    *mode = TC_MODE_PAYLOAD;   /* as negotiation does */
  *rekey = (sel & 8) ? 2 : 20;
}

/* Seal one frame with payload p[len] into out; returns bytes written.
 * own (in gcm with keys, len > 0): under a key of its own. */
static size_t
seal_frame(struct tc_frame_ctx *f, const uint8_t *p, size_t len, uint16_t opcode, uint8_t *out, int own)
{
  own = own && len && f->keyed && f->mode == TC_MODE_GCM;
  struct tc_frame_hdr h = { .opcode = opcode, .flags = own ? TC_FRAME_OWN_KEY : 0, .req_id = opcode, .inode = 7,
                            .offset = 4096 };
  uint8_t *copy = malloc(len ? len : 1);
  memcpy(copy, p, len);
  struct iovec iov = { copy, len };
  if (tc_frame_seal_hdr(f, &h, &iov, len ? 1 : 0, out) < 0)
    abort();
  size_t n = tc_frame_hdr_wire(f);
  if (own) {
    uint8_t key[TC_GCM_KEY_SIZE];
    memset(key, opcode + 1, sizeof key);
    if (tc_frame_seal_keyrec(f, key, out + n) < 0 || tc_frame_own_seal(f, key, &iov, 1, NULL, len, out + n +
                                                                       TC_FRAME_KEYREC + len) < 0)
      abort();
    memcpy(out + n + TC_FRAME_KEYREC, copy, len);
    free(copy);
    return n + TC_FRAME_KEYREC + len + TC_FRAME_TAG;
  }
  if (len && f->keyed && f->mode == TC_MODE_GCM) {
    if (tc_frame_seal_payload(f, &iov, 1, out + n + len) < 0)
      abort();
  }
  memcpy(out + n, copy, len);
  free(copy);
  return n + tc_frame_payload_wire(f, (uint32_t) len);
}

static void
write_seeds(const char *dir)
{
  static const uint8_t sels[] = { 0, 1, 4, 5, 7, 15, 23, 31 };
  for (size_t i = 0; i < sizeof sels; i++) {
    int mode, keyed, rekey;
    decode_sel(sels[i], &mode, &keyed, &rekey);
    struct tc_frame_ctx f;
    ctx_init(&f, mode, keyed, rekey, 0);
    uint8_t buf[4096];
    size_t n = 0;
    buf[n++] = sels[i];
    static const char *msgs[] = { "", "hello", "a somewhat longer payload for the second frame", "x" };
    for (int k = 0; k < 4; k++)
      n += seal_frame(&f, (const uint8_t *) msgs[k], strlen(msgs[k]), (uint16_t) (k + 1), buf + n,
                      (sels[i] & 16) && k % 2);
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%s%s%s", dir, tc_msgr_mode_name(mode), keyed ? "keyed" : "clear",
             rekey == 2 ? "-rekey4" : "", sels[i] & 16 ? "-ownkey" : "");
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(buf, 1, n, fp) != n)
      abort();
    fclose(fp);
    tc_frame_ctx_clear(&f);
  }
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  if (tc_crypto_init() < 0)
    abort();
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
  if (size < 1)
    return 0;
  int mode, keyed, rekey, own = data[0] & 16;
  decode_sel(data[0], &mode, &keyed, &rekey);
  data++;
  size--;

  /* 1. Open the stream as the receiving side. */
  struct tc_frame_ctx rx;
  ctx_init(&rx, mode, keyed, rekey, 1);
  size_t off = 0;
  for (;;) {
    size_t hw = tc_frame_hdr_wire(&rx);
    struct tc_frame_hdr h;
    if (size - off < hw || tc_frame_open_hdr(&rx, data + off, &h) < 0)
      break;
    off += hw;
    if (h.len > rx.max_frame)
      abort();   /* open_hdr must have refused it */
    if (h.flags & TC_FRAME_OWN_KEY) {
      if (!rx.keyed || rx.mode != TC_MODE_GCM || !h.len)
        abort();   /* open_hdr must have refused it */
      uint8_t key[TC_GCM_KEY_SIZE];
      if (size - off < TC_FRAME_KEYREC + (size_t) h.len + TC_FRAME_TAG ||
          tc_frame_open_keyrec(&rx, &h, data + off, key) < 0)
        break;
      off += TC_FRAME_KEYREC;
      uint8_t *p = malloc(h.len), *out = h.opcode & 1 ? malloc(h.len) : NULL;
      memcpy(p, data + off, h.len);
      int r = tc_frame_own_open(&rx, &h, key, p, data + off + h.len, out);
      if (r == 0 && out && memcmp(p, data + off, h.len))
        abort();   /* opened into out: the sealed bytes stay as they came */
      free(p);
      free(out);
      off += h.len + TC_FRAME_TAG;
      if (r < 0)
        break;
      continue;
    }
    size_t pw = tc_frame_payload_wire(&rx, h.len);
    if (size - off < pw)
      break;
    uint8_t *p = malloc(h.len ? h.len : 1);
    memcpy(p, data + off, h.len);
    int r = tc_frame_open_payload(&rx, &h, p, data + off + h.len);
    free(p);
    off += pw;
    if (r < 0)
      break;
  }
  tc_frame_ctx_clear(&rx);

  /* 2. Round trip: what one side seals, the other opens unchanged. */
  if (size <= 65536) {
    struct tc_frame_ctx a, b;
    ctx_init(&a, mode, keyed, rekey, 0);
    ctx_init(&b, mode, keyed, rekey, 1);
    uint8_t *wire = malloc(size + TC_FRAME_HDR_MAX + TC_FRAME_KEYREC + TC_FRAME_TAG);
    for (int k = 0; k < 3; k++) {   /* a few records, across key updates with rekey 4 */
      size_t n = seal_frame(&a, data, size, (uint16_t) k, wire, own && k % 2);
      struct tc_frame_hdr h;
      if (tc_frame_open_hdr(&b, wire, &h) < 0 || h.len != size || h.opcode != k)
        abort();
      size_t hw = tc_frame_hdr_wire(&b);
      if (h.flags & TC_FRAME_OWN_KEY) {
        uint8_t key[TC_GCM_KEY_SIZE];
        if (n != hw + TC_FRAME_KEYREC + size + TC_FRAME_TAG || tc_frame_open_keyrec(&b, &h, wire + hw, key) < 0 ||
            tc_frame_own_open(&b, &h, key, wire + hw + TC_FRAME_KEYREC, wire + hw + TC_FRAME_KEYREC + size, NULL) < 0 ||
            memcmp(wire + hw + TC_FRAME_KEYREC, data, size))
          abort();
        continue;
      }
      if (n != hw + tc_frame_payload_wire(&b, h.len))
        abort();
      if (tc_frame_open_payload(&b, &h, wire + hw, wire + hw + h.len) < 0 || memcmp(wire + hw, data, size))
        abort();
    }
    free(wire);
    tc_frame_ctx_clear(&a);
    tc_frame_ctx_clear(&b);
  }
  return 0;
}
