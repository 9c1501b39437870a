/* Fuzz target for the OSD's operation decoder (osd/osd_decode.c): the
 * bytes of a request frame as the messenger hands them to the OSD. Nothing
 * may crash or read past the payload, and whatever decodes must obey the
 * protocol (osd_proto.h): aligned, inside one object, at most 256 KiB,
 * data inside the payload.
 *
 * Input: byte 0 picks the OSD's block size (4 KiB << (byte % 7)), then the
 * 64-byte frame header, then the payload (hdr.len is set to its length).
 *
 * Built with --enable-fuzzing (CC=clang) it is a libFuzzer target:
 *   tests/fuzz-osd-decode tests/fuzz/corpus-osd-decode
 * Otherwise it is a unit test: it checks the decoder's answers on a set of
 * valid and invalid requests of every operation, then runs those seeds and
 * 300000 deterministic mutations of them. `fuzz-osd-decode --write-corpus
 * DIR` writes the seeds as a corpus. */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "osd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
check(const uint8_t *data, size_t size)
{
  struct tc_frame_hdr h;
  if (size < 1 + sizeof h)
    return -EINVAL;
  uint32_t bs = 4096u << (data[0] % 7);
  memcpy(&h, data + 1, sizeof h);
  size_t plen = size - 1 - sizeof h;
  h.len = (uint32_t) plen;
  /* The payload in a buffer of its exact size, so an overread is caught. */
  uint8_t *payload = plen ? malloc(plen) : NULL;
  if (plen && !payload)
    return -ENOMEM;
  if (plen)
    memcpy(payload, data + 1 + sizeof h, plen);
  struct osd_req r;
  char err[256];
  int rc = osd_req_decode(&h, payload, bs, &r, err, sizeof err);
  if (rc == 0) {
    switch (r.op) {
    case TC_OP_READ: case TC_OP_WRITE: case TC_OP_DELETE: case TC_OP_SEC_READ: case TC_OP_SEC_READ_BMP:
    case TC_OP_SEC_WRITE: case TC_OP_SEC_DELETE: case TC_OP_SEC_WRITE_STABLE: case TC_OP_SCRUB:
      if (r.offset % 4096 || r.len % 4096 || !r.len || r.len > TC_OSD_MAX_OP_BYTES ||
          r.offset / bs != (r.offset + r.len - 1) / bs)
        abort();   /* a range the protocol forbids got through */
      break;
    }
    if (r.op == TC_OP_WRITE_PARTIAL &&
        (!r.len || r.len > TC_OSD_MAX_OP_BYTES || r.offset / bs != (r.offset + r.len - 1) / bs))
      abort();
    if (r.op == TC_OP_WRITE_IF && (r.offset % 4096 || r.len != 4096 || r.offset / bs != (r.offset + 4095) / bs ||
                                   r.cond.present > 1 || r.data != payload + sizeof r.cond))
      abort();
    if (r.data && (r.data < payload || r.data + r.len > payload + plen))
      abort();     /* data outside the payload */
    if ((r.op == TC_OP_SEC_WRITE || r.op == TC_OP_SEC_DELETE || r.op == TC_OP_SEC_WRITE_STABLE) && !r.version)
      abort();
    if (r.op == TC_OP_SEC_LOCK && (!r.pool || !r.pg_count || r.pg >= r.pg_count))
      abort();     /* a lock of no PG */
    if (r.fua && r.op != TC_OP_WRITE && r.op != TC_OP_WRITE_PARTIAL && r.op != TC_OP_WRITE_IF && r.op != TC_OP_DELETE &&
        r.op != TC_OP_SEC_WRITE && r.op != TC_OP_SEC_DELETE)
      abort();     /* FUA on an operation that writes nothing */
    if (r.fua != ((h.flags & TC_OSD_FLAG_FUA) != 0))
      abort();
    if (((h.flags & TC_OSD_FLAG_REPLAY) != 0) != (r.replay_version != 0) ||
        (r.replay_version && r.op != TC_OP_WRITE && r.op != TC_OP_WRITE_PARTIAL && r.op != TC_OP_WRITE_IF &&
         r.op != TC_OP_DELETE))
      abort();     /* a replay condition on what is no client write, or lost */
  }
  else if (!err[0])
    abort();       /* a refusal must say why */
  free(payload);
  return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  check(data, size);
  return 0;
}

#ifndef TC_LIBFUZZER

#include "fuzz-corpus-replay.h"

struct seed {
  const char *name;
  int expect;              /* 0 or -errno */
  uint8_t bs_sel;
  union tc_osd_hdr h;      /* built in the operation's view (osd_proto.h) */
  uint32_t plen;
  uint64_t first8;         /* first 8 payload bytes */
};

#define RW(op, ino, off, n, ver) \
  { .rw = { .magic = TC_FRAME_MAGIC, .opcode = (op), .inode = (ino), .offset = (off), .len = (n), .version = (ver) } }
#define OBJ(op, ino, off) { .obj = { .magic = TC_FRAME_MAGIC, .opcode = (op), .inode = (ino), .offset = (off) } }
#define LIST(first, last, pgn, pgc) \
  { .list = { .magic = TC_FRAME_MAGIC, .opcode = TC_OP_SEC_LIST, .inode_first = (first), .inode_last = (last), \
              .pg = (pgn), .pg_count = (pgc) } }
#define LOCK(pl, pgn, pgc, ep) \
  { .lock = { .magic = TC_FRAME_MAGIC, .opcode = TC_OP_SEC_LOCK, .pool = (pl), .pg = (pgn), .pg_count = (pgc), \
              .epoch = (ep) } }
#define PLAIN(op) { .frame = { .magic = TC_FRAME_MAGIC, .opcode = (op) } }
#define FUA(op, ino, off, n, ver) \
  { .rw = { .magic = TC_FRAME_MAGIC, .opcode = (op), .flags = TC_OSD_FLAG_FUA, .inode = (ino), .offset = (off), \
            .len = (n), .version = (ver) } }
#define I1 ((1ull << 48) | 1)

static const struct seed seeds[] = {
  { "read", 0, 5, RW(TC_OP_READ, I1, 0, 4096, 0), 0, 0 },
  { "read-object", 0, 5, RW(TC_OP_READ, I1, 131072, 131072, 0), 0, 0 },
  { "read-unaligned", -EINVAL, 5, RW(TC_OP_READ, I1, 100, 4096, 0), 0, 0 },
  { "read-cross", -EINVAL, 5, RW(TC_OP_READ, I1, 126976, 8192, 0), 0, 0 },
  { "read-zero", -EINVAL, 5, RW(TC_OP_READ, I1, 0, 0, 0), 0, 0 },
  { "read-huge", -EINVAL, 6, RW(TC_OP_READ, I1, 0, 0x80000000u, 0), 0, 0 },
  { "read-payload", -EINVAL, 5, RW(TC_OP_READ, I1, 0, 4096, 0), 16, 0 },
  { "read-wrap", -EINVAL, 5, RW(TC_OP_READ, I1, UINT64_MAX - 4095, 8192, 0), 0, 0 },
  { "write", 0, 5, RW(TC_OP_WRITE, I1, 8192, 4096, 0), 4096, 0 },
  { "write-odd", -EINVAL, 5, RW(TC_OP_WRITE, I1, 8192, 4000, 0), 4000, 0 },
  { "write-empty", -EINVAL, 5, RW(TC_OP_WRITE, I1, 8192, 0, 0), 0, 0 },
  { "write-cross", -EINVAL, 0, RW(TC_OP_WRITE, I1, 0, 8192, 0), 8192, 0 },
  { "write-len-payload", -EINVAL, 5, RW(TC_OP_WRITE, I1, 8192, 8192, 0), 4096, 0 },
  { "write-partial", 0, 5, RW(TC_OP_WRITE_PARTIAL, I1, 100, 7, 0), 7, 0 },
  { "write-partial-object", 0, 5, RW(TC_OP_WRITE_PARTIAL, I1, 131072, 131072, 0), 131072, 0 },
  { "write-partial-cross", -EINVAL, 5, RW(TC_OP_WRITE_PARTIAL, I1, 131070, 10, 0), 10, 0 },
  { "write-partial-empty", -EINVAL, 5, RW(TC_OP_WRITE_PARTIAL, I1, 100, 0, 0), 0, 0 },
  { "write-partial-wrap", -EINVAL, 5, RW(TC_OP_WRITE_PARTIAL, I1, UINT64_MAX - 3, 10, 0), 10, 0 },
  { "write-partial-len-payload", -EINVAL, 5, RW(TC_OP_WRITE_PARTIAL, I1, 100, 20, 0), 10, 0 },
  { "write-if", 0, 5, RW(TC_OP_WRITE_IF, I1, 8192, 4096, 0), 16 + 4096, 0x1234 },
  { "write-if-short", -EINVAL, 5, RW(TC_OP_WRITE_IF, I1, 8192, 4096, 0), 4096, 0x1234 },
  { "write-if-unaligned", -EINVAL, 5, RW(TC_OP_WRITE_IF, I1, 100, 4096, 0), 16 + 4096, 0x1234 },
  { "delete", 0, 5, RW(TC_OP_DELETE, I1, 0, 131072, 0), 0, 0 },
  { "sync", 0, 5, PLAIN(TC_OP_SYNC), 0, 0 },
  { "sync-payload", -EINVAL, 5, PLAIN(TC_OP_SYNC), 8, 0 },
  { "scrub", 0, 5, OBJ(TC_OP_SCRUB, I1, 12345), 0, 0 },
  { "describe", 0, 5, PLAIN(TC_OP_DESCRIBE), 0, 0 },
  { "ping", 0, 5, PLAIN(TC_OP_PING), 0, 0 },
  { "show-config", 0, 5, PLAIN(TC_OP_SHOW_CONFIG), 0, 0 },
  { "sec-list", 0, 5, LIST(1ull << 48, (2ull << 48) - 1, 3, 4), 0, 0 },
  { "sec-list-all", 0, 5, LIST(1ull << 48, (2ull << 48) - 1, 0, 0), 0, 0 },
  { "sec-list-badpg", -EINVAL, 5, LIST(1ull << 48, (2ull << 48) - 1, 4, 4), 0, 0 },
  { "sec-list-empty", -EINVAL, 5, LIST(2ull << 48, 1ull << 48, 0, 0), 0, 0 },
  { "sec-read", 0, 5, RW(TC_OP_SEC_READ, I1, 0, 131072, 0), 0, 0 },
  { "sec-read-bmp", 0, 5, RW(TC_OP_SEC_READ_BMP, I1, 0, 131072, 0), 0, 0 },
  { "sec-write", 0, 5, RW(TC_OP_SEC_WRITE, I1, 4096, 4096, 7), 4096, 0 },
  { "sec-write-v0", -EINVAL, 5, RW(TC_OP_SEC_WRITE, I1, 4096, 4096, 0), 4096, 0 },
  { "sec-write-stable", 0, 5, RW(TC_OP_SEC_WRITE_STABLE, I1, 131072, 131072, 9), 8 + 131072, 0xffff },
  { "sec-write-stable-bits", -EINVAL, 5, RW(TC_OP_SEC_WRITE_STABLE, I1, 131072, 131072, 9), 8 + 131072, 1ull << 40 },
  { "sec-write-stable-off", -EINVAL, 5, RW(TC_OP_SEC_WRITE_STABLE, I1, 4096, 131072, 9), 8 + 131072, 1 },
  { "sec-write-stable-short", -EINVAL, 5, RW(TC_OP_SEC_WRITE_STABLE, I1, 131072, 131072, 9), 8 + 4096, 1 },
  { "sec-write-stable-len", -EINVAL, 5, RW(TC_OP_SEC_WRITE_STABLE, I1, 131072, 4096, 9), 8 + 131072, 1 },
  { "sec-delete", 0, 5, RW(TC_OP_SEC_DELETE, I1, 0, 8192, 3), 0, 0 },
  { "sec-delete-v1-payload", -EINVAL, 5, RW(TC_OP_SEC_DELETE, I1, 0, 0, 3), 8, 8192 },
  { "sec-delete-nolen", -EINVAL, 5, RW(TC_OP_SEC_DELETE, I1, 0, 0, 3), 0, 0 },
  { "sec-delete-v0", -EINVAL, 5, RW(TC_OP_SEC_DELETE, I1, 0, 8192, 0), 0, 0 },
  { "sec-delete-cross", -EINVAL, 5, RW(TC_OP_SEC_DELETE, I1, 126976, 8192, 3), 0, 0 },
  { "sec-sync", 0, 5, PLAIN(TC_OP_SEC_SYNC), 0, 0 },
  { "write-fua", 0, 5, FUA(TC_OP_WRITE, I1, 8192, 4096, 0), 4096, 0 },
  { "write-partial-fua", 0, 5, FUA(TC_OP_WRITE_PARTIAL, I1, 100, 7, 0), 7, 0 },
  { "write-if-fua", 0, 5, FUA(TC_OP_WRITE_IF, I1, 8192, 4096, 0), 16 + 4096, 0x1234 },
  { "delete-fua", 0, 5, FUA(TC_OP_DELETE, I1, 0, 131072, 0), 0, 0 },
  { "sec-write-fua", 0, 5, FUA(TC_OP_SEC_WRITE, I1, 4096, 4096, 7), 4096, 0 },
  { "sec-delete-fua", 0, 5, FUA(TC_OP_SEC_DELETE, I1, 0, 8192, 3), 0, 0 },
  { "read-fua", -EINVAL, 5, FUA(TC_OP_READ, I1, 0, 4096, 0), 0, 0 },
  { "sec-read-fua", -EINVAL, 5, FUA(TC_OP_SEC_READ, I1, 0, 4096, 0), 0, 0 },
  { "sec-write-stable-fua", -EINVAL, 5, FUA(TC_OP_SEC_WRITE_STABLE, I1, 131072, 131072, 9), 8 + 131072, 0xffff },
  { "sync-fua", -EINVAL, 5, FUA(TC_OP_SYNC, 0, 0, 0, 0), 0, 0 },
  { "sec-lock", 0, 5, LOCK(1, 1, 4, 5), 0, 0 },
  { "sec-lock-nopool", -EINVAL, 5, LOCK(0, 1, 4, 5), 0, 0 },
  { "sec-lock-nopg", -EINVAL, 5, LOCK(1, 0, 0, 5), 0, 0 },
  { "sec-lock-badpg", -EINVAL, 5, LOCK(1, 4, 4, 5), 0, 0 },
  { "sec-stabilize", 0, 5, PLAIN(TC_OP_SEC_STABILIZE), 0, 0 },
  { "unknown-op", -EINVAL, 5, PLAIN(99), 0, 0 },
  { "op-zero", -EINVAL, 5, PLAIN(0), 0, 0 },
};

static uint8_t *
seed_bytes(const struct seed *s, size_t *size)
{
  *size = 1 + sizeof s->h + s->plen;
  uint8_t *b = calloc(1, *size);
  if (!b)
    return NULL;
  b[0] = s->bs_sel;
  memcpy(b + 1, &s->h, sizeof s->h);
  if (s->plen >= 8)
    memcpy(b + 1 + sizeof s->h, &s->first8, 8);
  return b;
}

/* SHOW_CONFIG payloads: JSON the decoder must parse or refuse. */
static int
show_config(const char *json, int expect)
{
  size_t n = strlen(json), size = 1 + 64 + n;
  uint8_t *b = calloc(1, size);
  union tc_osd_hdr h = PLAIN(TC_OP_SHOW_CONFIG);
  memcpy(b + 1, &h.frame, sizeof h.frame);
  memcpy(b + 65, json, n);
  int rc = check(b, size);
  free(b);
  if (rc != expect) {
    fprintf(stderr, "FAIL: SHOW_CONFIG %s: %d, expected %d\n", json, rc, expect);
    return 1;
  }
  return 0;
}

static const char *
seed_name(size_t i)
{
  return seeds[i].name;
}

static uint8_t *
seed_at(size_t i, size_t *size)
{
  return seed_bytes(&seeds[i], size);
}

int
main(int argc, char **argv)
{
  size_t nseeds = sizeof seeds / sizeof seeds[0];
  if (argc == 3 && !strcmp(argv[1], "--write-corpus"))
    return fuzz_write_corpus("fuzz-osd-decode", argv[2], nseeds, seed_name, seed_at);
  int failed = 0;
  /* The decoder's answers. */
  for (size_t i = 0; i < nseeds; i++) {
    size_t size;
    uint8_t *b = seed_bytes(&seeds[i], &size);
    if (!b)
      return 1;
    int rc = check(b, size);
    if (rc != seeds[i].expect) {
      fprintf(stderr, "FAIL: %s: decoder says %d, expected %d\n", seeds[i].name, rc, seeds[i].expect);
      failed = 1;
    }
    free(b);
  }
  if (fuzz_replay_corpus("osd-decode") < 0)
    return 1;
  failed |= show_config("{\"osd_num\": 3}", 0);
  failed |= show_config("{}", 0);
  failed |= show_config("{\"osd_num\": -1}", -EINVAL);
  failed |= show_config("{\"osd_num\": \"x\"}", -EINVAL);
  failed |= show_config("[1,2]", -EINVAL);
  failed |= show_config("{\"osd_num\": 3", -EINVAL);
  /* Deterministic mutations of the seeds. */
  uint64_t x = 0x9E3779B97F4A7C15ull;
  unsigned runs = 300000;
  for (unsigned k = 0; k < runs; k++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t size;
    uint8_t *b = seed_bytes(&seeds[x % nseeds], &size);
    if (!b)
      return 1;
    int flips = 1 + (int) (x >> 60);
    for (int f = 0; f < flips; f++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      /* mostly the header (where the fields are), sometimes the payload */
      size_t at = (x >> 8) % (size < 80 || x % 4 ? (size < 65 ? size : 65) : size);
      b[at] ^= (uint8_t) (1u << (x >> 3) % 8);
      if (x % 7 == 0)
        b[at] = (uint8_t) (x >> 16);
    }
    if (x % 11 == 0 && size > 65)
      size = 65 + (x >> 20) % (size - 65);   /* a shorter payload */
    check(b, size);
    free(b);
  }
  if (failed)
    return 1;
  printf("fuzz-osd-decode: %zu seeds checked, %u mutations, no failure\n", nseeds, runs);
  return 0;
}
#endif
