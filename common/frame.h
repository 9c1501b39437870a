/* The messenger's frame header (DESIGN.md section 5): a fixed 64-byte
 * little-endian header before each payload. In mode `none` it travels in
 * the clear; with keys it is sealed with AES-256-GCM (16-byte tag after it);
 * `checksum` is XXH3-64 of the payload (seeded with the connection's secret
 * salt when keys exist). Replies carry status = 0 or a negative errno. */
#ifndef TROMCHO_FRAME_H
#define TROMCHO_FRAME_H
#include <stdint.h>

#define TC_FRAME_MAGIC 0x314d5254u   /* "TRM1" */

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
  uint64_t reserved;
} __attribute__((packed));

_Static_assert(sizeof(struct tc_frame_hdr) == 64, "frame header is 64 bytes");

#endif
