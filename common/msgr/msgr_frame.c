/* Frame protection: seal and open frame headers and payloads in the three
 * modes (msgr.h). Pure functions over a connection's tc_frame_ctx, so the
 * fuzz target can drive them without sockets. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "crypto.h"
#include "error.h"
#include "msgr_int.h"
#include "vector.h"

#define HDR_SIZE sizeof(struct tc_frame_hdr)
#define HDR_CHECKED offsetof(struct tc_frame_hdr, hdr_check)

int
tc_buf_append(struct tc_buf *b, const void *data, size_t len)
{
  if (b->len + len < b->len || tc_grow(&b->p, &b->cap, b->len + len, 1, 256) < 0)
    return tc_error(ENOMEM, "buffer: out of memory");
  memcpy(b->p + b->len, data, len);
  b->len += len;
  return 0;
}

void
tc_buf_consume(struct tc_buf *b, size_t n)
{
  if (n >= b->len)
    b->len = 0;
  else {
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
  }
}

void
tc_buf_free(struct tc_buf *b)
{
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

/* key and IV base of a direction from its current secret */
static int
dir_load(struct tc_msgr_dir *d)
{
  uint8_t key[TC_GCM_KEY_SIZE];
  if (tc_hkdf_expand(d->secret, "tromcho key", 11, key, sizeof key) < 0 ||
      tc_hkdf_expand(d->secret, "tromcho iv", 10, d->iv, sizeof d->iv) < 0)
    return -1;
  int r = d->gcm ? tc_gcm_rekey(d->gcm, key) : tc_gcm_new(&d->gcm, key);
  tc_wipe(key, sizeof key);
  return r;
}

static int
dir_init(struct tc_msgr_dir *d, const uint8_t secret[32], int rekey_log2)
{
  memcpy(d->secret, secret, sizeof d->secret);
  d->seq = 0;
  d->rekey_log2 = rekey_log2;
  return dir_load(d);
}

static void
dir_clear(struct tc_msgr_dir *d)
{
  tc_gcm_free(d->gcm);
  tc_wipe(d, sizeof *d);
}

static void
dir_nonce(const struct tc_msgr_dir *d, uint8_t nonce[TC_GCM_NONCE_SIZE])
{
  memcpy(nonce, d->iv, TC_GCM_NONCE_SIZE);
  for (int i = 0; i < 8; i++)
    nonce[TC_GCM_NONCE_SIZE - 1 - i] ^= (uint8_t) (d->seq >> (8 * i));
}

/* After each record: advance the counter; every 2^rekey_log2 records ratchet
 * the secret (HKDF, like TLS 1.3 KeyUpdate; both sides count the same). */
static int
dir_next(struct tc_msgr_dir *d)
{
  d->seq++;
  if ((d->seq & ((UINT64_C(1) << d->rekey_log2) - 1)) == 0) {
    uint8_t next[TC_SHA256_SIZE];
    if (tc_hkdf_expand(d->secret, "tromcho key update", 18, next, sizeof next) < 0)
      return -1;
    memcpy(d->secret, next, sizeof next);
    tc_wipe(next, sizeof next);
    d->rekeys++;
    return dir_load(d);
  }
  return 0;
}

int
tc_frame_ctx_keys(struct tc_frame_ctx *f, const uint8_t tx_secret[32], const uint8_t rx_secret[32],
                  uint64_t salt, int rekey_log2)
{
  if (rekey_log2 < TC_REKEY_LOG2_MIN || rekey_log2 > TC_REKEY_LOG2_MAX)
    return tc_error(EINVAL, "frames: key update interval 2^%d out of range", rekey_log2);
  f->keyed = 1;
  f->salt = salt;
  if (dir_init(&f->tx, tx_secret, rekey_log2) < 0 || dir_init(&f->rx, rx_secret, rekey_log2) < 0)
    return -1;
  return 0;
}

void
tc_frame_ctx_clear(struct tc_frame_ctx *f)
{
  dir_clear(&f->tx);
  dir_clear(&f->rx);
  tc_gcm_free(f->own);
  f->own = NULL;
  tc_wipe(&f->salt, sizeof f->salt);
}

size_t
tc_frame_hdr_wire(const struct tc_frame_ctx *f)
{
  return HDR_SIZE + (f->keyed ? TC_FRAME_TAG : 0);
}

size_t
tc_frame_payload_wire(const struct tc_frame_ctx *f, uint32_t len)
{
  return len + (f->keyed && f->mode == TC_MODE_GCM && len ? TC_FRAME_TAG : 0);
}

static uint64_t
checksum_iov(const struct iovec *iov, int iovcnt, uint64_t seed)
{
  if (iovcnt == 1)
    return tc_xxh3_64_seed(iov[0].iov_base, iov[0].iov_len, seed);
  XXH3_state_t st;
  memset(&st, 0, sizeof st);
  XXH3_64bits_reset_withSeed(&st, seed);
  for (int i = 0; i < iovcnt; i++)
    XXH3_64bits_update(&st, iov[i].iov_base, iov[i].iov_len);
  return XXH3_64bits_digest(&st);
}

int
tc_frame_seal_hdr(struct tc_frame_ctx *f, struct tc_frame_hdr *hdr, const struct iovec *iov,
                  int iovcnt, uint8_t out[TC_FRAME_HDR_MAX])
{
  size_t len = 0;
  for (int i = 0; i < iovcnt; i++)
    len += iov[i].iov_len;
  if (len > f->max_frame)
    return tc_error(EMSGSIZE, "frame of %zu bytes: larger than max_frame %u", len, f->max_frame);
  hdr->magic = TC_FRAME_MAGIC;
  hdr->len = (uint32_t) len;
  hdr->checksum = 0;
  hdr->hdr_check = 0;
  if (f->mode == TC_MODE_PAYLOAD)
    hdr->checksum = len ? checksum_iov(iov, iovcnt, f->keyed ? f->salt : 0) : 0;
  if (!f->keyed) {
    hdr->hdr_check = tc_xxh3_64(hdr, HDR_CHECKED);
    memcpy(out, hdr, HDR_SIZE);
    return 0;
  }
  memcpy(out, hdr, HDR_SIZE);
  uint8_t nonce[TC_GCM_NONCE_SIZE];
  dir_nonce(&f->tx, nonce);
  struct iovec d = { out, HDR_SIZE };
  if (tc_gcm_seal(f->tx.gcm, nonce, NULL, 0, &d, 1, out + HDR_SIZE) < 0)
    return -1;
  return dir_next(&f->tx);
}

int
tc_frame_seal_payload(struct tc_frame_ctx *f, const struct iovec *iov, int iovcnt,
                      uint8_t tag[TC_FRAME_TAG])
{
  uint8_t nonce[TC_GCM_NONCE_SIZE];
  dir_nonce(&f->tx, nonce);
  if (tc_gcm_seal(f->tx.gcm, nonce, NULL, 0, iov, iovcnt, tag) < 0)
    return -1;
  return dir_next(&f->tx);
}

int
tc_frame_seal_payload_copy(struct tc_frame_ctx *f, const struct iovec *iov, int iovcnt, void *out, size_t len)
{
  uint8_t nonce[TC_GCM_NONCE_SIZE];
  dir_nonce(&f->tx, nonce);
  if (tc_gcm_seal_copy(f->tx.gcm, nonce, iov, iovcnt, out, len) < 0)
    return -1;
  return dir_next(&f->tx);
}

int
tc_frame_seal_keyrec(struct tc_frame_ctx *f, const uint8_t key[TC_GCM_KEY_SIZE], uint8_t out[TC_FRAME_KEYREC])
{
  uint8_t nonce[TC_GCM_NONCE_SIZE];
  dir_nonce(&f->tx, nonce);
  memcpy(out, key, TC_GCM_KEY_SIZE);
  struct iovec d = { out, TC_GCM_KEY_SIZE };
  if (tc_gcm_seal(f->tx.gcm, nonce, NULL, 0, &d, 1, out + TC_GCM_KEY_SIZE) < 0)
    return -1;
  return dir_next(&f->tx);
}

int
tc_frame_open_keyrec(struct tc_frame_ctx *f, const struct tc_frame_hdr *hdr, const uint8_t *wire,
                     uint8_t key[TC_GCM_KEY_SIZE])
{
  uint8_t nonce[TC_GCM_NONCE_SIZE];
  dir_nonce(&f->rx, nonce);
  memcpy(key, wire, TC_GCM_KEY_SIZE);
  struct iovec d = { key, TC_GCM_KEY_SIZE };
  if (tc_gcm_open(f->rx.gcm, nonce, NULL, 0, &d, 1, wire + TC_GCM_KEY_SIZE) < 0)
    return tc_error(EBADMSG, "key record of frame %" PRIu64 " (req_id %" PRIu64 ") fails authentication",
                    f->rx.seq, hdr->req_id);
  return dir_next(&f->rx);
}

/* The own-key context set to key. An own key seals one payload only, so
 * its nonce is a constant. */
static const uint8_t own_nonce[TC_GCM_NONCE_SIZE];

static struct tc_gcm *
own_ctx(struct tc_frame_ctx *f, const uint8_t key[TC_GCM_KEY_SIZE])
{
  if (f->own ? tc_gcm_rekey(f->own, key) < 0 : tc_gcm_new(&f->own, key) < 0)
    return NULL;
  return f->own;
}

int
tc_frame_own_seal(struct tc_frame_ctx *f, const uint8_t key[TC_GCM_KEY_SIZE], const struct iovec *iov,
                  int iovcnt, void *out, size_t len, uint8_t tag[TC_FRAME_TAG])
{
  struct tc_gcm *g = own_ctx(f, key);
  if (!g)
    return -1;
  if (out)
    return tc_gcm_seal_copy(g, own_nonce, iov, iovcnt, out, len);
  return tc_gcm_seal(g, own_nonce, NULL, 0, iov, iovcnt, tag);
}

int
tc_frame_own_open(struct tc_frame_ctx *f, const struct tc_frame_hdr *hdr, const uint8_t key[TC_GCM_KEY_SIZE],
                  void *payload, const uint8_t tag[TC_FRAME_TAG], void *out)
{
  struct tc_gcm *g = own_ctx(f, key);
  if (!g)
    return -1;
  struct iovec d = { payload, hdr->len };
  if (out ? tc_gcm_open_copy(g, own_nonce, payload, out, hdr->len, tag) < 0
          : tc_gcm_open(g, own_nonce, NULL, 0, &d, 1, tag) < 0)
    return tc_error(EBADMSG, "frame payload (req_id %" PRIu64 ", %u bytes, own key) fails authentication",
                    hdr->req_id, hdr->len);
  return 0;
}

int
tc_frame_open_hdr(struct tc_frame_ctx *f, const uint8_t *wire, struct tc_frame_hdr *hdr)
{
  memcpy(hdr, wire, HDR_SIZE);
  if (f->keyed) {
    uint8_t nonce[TC_GCM_NONCE_SIZE];
    dir_nonce(&f->rx, nonce);
    struct iovec d = { hdr, HDR_SIZE };
    if (tc_gcm_open(f->rx.gcm, nonce, NULL, 0, &d, 1, wire + HDR_SIZE) < 0)
      return tc_error(EBADMSG, "frame header %" PRIu64 " fails authentication "
                      "(altered, replayed, reordered or dropped record)", f->rx.seq);
    if (dir_next(&f->rx) < 0)
      return -1;
  }
  else if (hdr->hdr_check != tc_xxh3_64(hdr, HDR_CHECKED))
    return tc_error(EBADMSG, "frame header checksum mismatch (altered header)");
  if (hdr->magic != TC_FRAME_MAGIC)
    return tc_error(EBADMSG, "frame header: bad magic 0x%08x", hdr->magic);
  if (hdr->len > f->max_frame)
    return tc_error(EMSGSIZE, "frame header: payload of %u bytes, more than max_frame %u",
                    hdr->len, f->max_frame);
  if (f->mode != TC_MODE_PAYLOAD && hdr->checksum != 0)
    return tc_error(EBADMSG, "frame header: checksum set in mode %s", tc_msgr_mode_name(f->mode));
  if ((hdr->flags & TC_FRAME_OWN_KEY) &&
      (!f->keyed || f->mode != TC_MODE_GCM || !hdr->len || (hdr->flags & TC_FRAME_REPLY)))
    return tc_error(EBADMSG, "frame header: own-key flag on %s", hdr->flags & TC_FRAME_REPLY ? "a reply"
                    : !hdr->len ? "a frame without payload" : "a connection not in mode gcm with keys");
  return 0;
}

int
tc_frame_open_payload(struct tc_frame_ctx *f, const struct tc_frame_hdr *hdr, void *payload,
                      const uint8_t *tag)
{
  if (!hdr->len)
    return 0;
  if (hdr->flags & TC_FRAME_OWN_KEY)
    return tc_error(EBADMSG, "frame payload (req_id %" PRIu64 "): own key, opened without its key record",
                    hdr->req_id);
  if (f->mode == TC_MODE_GCM && f->keyed) {
    uint8_t nonce[TC_GCM_NONCE_SIZE];
    dir_nonce(&f->rx, nonce);
    struct iovec d = { payload, hdr->len };
    if (tc_gcm_open(f->rx.gcm, nonce, NULL, 0, &d, 1, tag) < 0)
      return tc_error(EBADMSG, "frame payload (req_id %" PRIu64 ", %u bytes) fails authentication",
                      hdr->req_id, hdr->len);
    return dir_next(&f->rx);
  }
  if (f->mode == TC_MODE_PAYLOAD &&
      tc_xxh3_64_seed(payload, hdr->len, f->keyed ? f->salt : 0) != hdr->checksum)
    return tc_error(EBADMSG, "frame payload (req_id %" PRIu64 ", %u bytes): checksum mismatch",
                    hdr->req_id, hdr->len);
  return 0;
}
