/* The messenger's frame header (DESIGN.md section 5): a fixed 64-byte
 * little-endian header before each payload. Without keys it travels in the
 * clear and hdr_check = XXH3-64 of its first 56 bytes; with keys it is
 * sealed with AES-256-GCM (16-byte tag after it) and hdr_check = 0.
 * `checksum` is XXH3-64 of the payload in mode payload (seeded with the
 * connection's secret salt when keys exist), 0 otherwise. Replies carry
 * TC_FRAME_REPLY in flags and status = 0 or a negative errno. The fields are
 * little-endian on the wire; the struct is used as is (little-endian hosts
 * only, checked below). */
#ifndef TROMCHO_FRAME_H
#define TROMCHO_FRAME_H
#include <stdint.h>

#define TC_FRAME_MAGIC 0x314d5254u   /* "TRM1" */

/* The wire protocol's version, carried in every handshake message: the
 * messenger and the OSD protocol on top of it (osd_proto.h). Bumped when
 * either changes; a peer of another version is refused at the handshake.
 * 2: typed per-operation headers, SEC_DELETE's length in the header.
 * 3: payloads sealed under a key of their own (TC_FRAME_OWN_KEY). */
#define TC_PROTO_VERSION 3

struct tc_frame_hdr {
  uint32_t magic;
  uint16_t opcode;
  uint16_t flags;
  uint64_t req_id;
  uint64_t inode;
  uint64_t offset;
  uint32_t len;       /* payload bytes that follow */
  int32_t status;     /* replies: >= 0 result, < 0 -errno */
  uint64_t version;
  uint64_t checksum;  /* XXH3-64 of the payload (mode payload) */
  uint64_t hdr_check; /* XXH3-64 of bytes 0..55 when the header is not sealed */
} __attribute__((packed));

_Static_assert(sizeof(struct tc_frame_hdr) == 64, "frame header is 64 bytes");

#define TC_FRAME_REPLY 0x0001u   /* flags: this frame answers request req_id */
/* flags, requests in mode gcm only: the payload is sealed under a key of
 * its own, which travels sealed in a key record between the header and
 * the payload (msgr.h, "Own keys"). */
#define TC_FRAME_OWN_KEY 0x0002u
#define TC_FRAME_MSGR_FLAGS (TC_FRAME_REPLY | TC_FRAME_OWN_KEY)   /* the messenger's bits */

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tromcho's frame code assumes a little-endian host; add byte swaps here first"
#endif

#endif
