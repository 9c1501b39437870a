/* Fuzz target for the bytes the OSD store reads back from disk: object
 * records (store_meta.c) and the store header (store_format.c). A record
 * that decodes must encode back to the same bytes; nothing may crash.
 *
 * Built with --enable-fuzzing (CC=clang) it is a libFuzzer target:
 *   tests/fuzz-store-meta tests/fuzz/corpus-store-meta
 * Otherwise it is a unit test: it runs every seed in the corpus and 200000
 * deterministic mutations of them. Input: byte 0 picks the block size
 * (4 KiB << (byte % 9)), byte 1 picks record (even) or header (odd), the
 * rest is the record or header. */
#include <config.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "crypto.h"
#include "store_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static struct tc_store_obj_rec rec;
  static uint8_t out[8 + 32 + 12 * TC_STORE_MAX_SECTORS];
  if (size < 2)
    return 0;
  uint32_t spb = 1u << (data[0] % 9);
  if (data[1] % 2 == 0) {
    if (tc_store_obj_rec_decode(&rec, spb, data + 2, size - 2) == NULL) {
      size_t n = tc_store_obj_rec_encode(&rec, spb, out);
      if (n != size - 2 || n > tc_store_obj_rec_max_size(spb) || memcmp(out, data + 2, n) != 0)
        abort();   /* decode accepted bytes that do not round-trip */
    }
  }
  else {
    struct tc_store_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(&h, data + 2, size - 2 < sizeof h ? size - 2 : sizeof h);
    if (tc_store_hdr_check(&h, "fuzz") == 0 &&
        (h.block_size < TC_STORE_MIN_BLOCK_SIZE || h.size <= h.data_offset || h.osd_num == 0))
      abort();   /* accepted an impossible header */
  }
  return 0;
}

#ifndef TC_LIBFUZZER
#include "fuzz-corpus-replay.h"
#include "testlib.h"

/* The corpus, kept for the mutations below. */
static uint8_t seeds[64][4096];
static size_t lens[64], nseeds;

static void
keep_seed(void *arg, const uint8_t *data, size_t size)
{
  (void) arg;
  LLVMFuzzerTestOneInput(data, size);
  if (nseeds == 64)
    return;
  lens[nseeds] = size < sizeof seeds[0] ? size : sizeof seeds[0];
  memcpy(seeds[nseeds], data, lens[nseeds]);
  nseeds++;
}

int
main(void)
{
  if (tc_crypto_init() < 0)
    return 1;
  if (fuzz_each_corpus_input("store-meta", keep_seed, NULL) < 0)
    return 1;
  if (nseeds == 0) {
    fprintf(stderr, "fuzz-store-meta: no seeds in tests/fuzz/corpus-store-meta\n");
    return 1;
  }
  uint64_t s = 1;
  static uint8_t buf[4096 + 64];
  for (int i = 0; i < 200000; i++) {
    size_t k = tl_splitmix(&s) % nseeds, len = lens[k];
    memcpy(buf, seeds[k], len);
    int flips = 1 + (int) (tl_splitmix(&s) % 4);
    for (int f = 0; f < flips; f++) {
      uint64_t r = tl_splitmix(&s);
      switch (r % 4) {
      case 0: if (len) buf[(r >> 8) % len] ^= (uint8_t) (1u << ((r >> 40) % 8)); break;
      case 1: if (len) buf[(r >> 8) % len] = (uint8_t) (r >> 40); break;
      case 2: if (len > 2) len -= 1 + (r >> 8) % (len - 2 < 16 ? len - 2 : 16); break;
      case 3: if (len < sizeof buf - 16) { memset(buf + len, (int) (r >> 40), 1 + (r >> 8) % 12); len += 1 + (r >> 8) % 12; } break;
      }
    }
    LLVMFuzzerTestOneInput(buf, len);
  }
  printf("fuzz-store-meta: %zu seeds, 200000 mutations, no failure\n", nseeds);
  return 0;
}
#endif
