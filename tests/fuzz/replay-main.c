/* The main() of the libFuzzer targets in tests/fuzz/ when they are built
 * without libFuzzer (an ordinary or a sanitizer build): a unit test that
 * feeds the target's seed corpus (tests/fuzz/corpus-NAME, NAME given as
 * TC_FUZZ_NAME at compile time) through LLVMFuzzerTestOneInput, each input
 * as it is and then in deterministic mutations (bits flipped, bytes set to
 * values parsers treat specially, cut short, a piece repeated). A target
 * aborts on anything its parser must never produce, and the sanitizers
 * stop on memory errors and leaks, so a failure is the process dying; the
 * exit status is 0 only when the corpus was found and not empty.
 *
 * TC_FUZZ_MUTATIONS (environment) sets the mutations per input (default
 * 64). libFuzzer explores far more (tests/fuzz/run-fuzz.sh); this keeps
 * what it found, and the neighbourhood of every input, checked on every
 * run of the suite. */
#include <config.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../fuzz-corpus-replay.h"

#ifndef TC_FUZZ_NAME
#error "TC_FUZZ_NAME (the corpus name) must be defined"
#endif

/* Targets that need set-up (certificates, a scratch store) define it. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

struct replay {
  unsigned mutations;
  uint64_t x;           /* xorshift state */
  unsigned long runs;
};

static uint64_t
next(struct replay *r)
{
  r->x ^= r->x << 13;
  r->x ^= r->x >> 7;
  r->x ^= r->x << 17;
  return r->x;
}

/* Run data, then r->mutations variants of it, each in a buffer of its own
 * size so that a read past the end is caught. */
static void
replay_one(void *arg, const uint8_t *data, size_t size)
{
  static const uint8_t special[] = { 0x00, 0xff, 0x7f, 0x80, '"', '\\', '{', '}', '[', ']', ':', ',', '0', '-', '=', '\n' };
  struct replay *r = arg;
  uint8_t *b = malloc(size ? size : 1);
  if (!b)
    abort();
  memcpy(b, data, size);
  LLVMFuzzerTestOneInput(b, size);
  free(b);
  r->runs++;
  for (unsigned m = 0; m < r->mutations && size; m++) {
    size_t n = size;
    uint64_t v = next(r);
    /* Room for a repeated piece: at most doubles the input. */
    b = malloc(2 * size);
    if (!b)
      abort();
    memcpy(b, data, size);
    switch (v % 4) {
    case 0:   /* flip one to four bits */
      for (unsigned k = 0; k <= (v >> 2) % 4; k++) {
        uint64_t w = next(r);
        b[w % size] ^= (uint8_t) (1u << (w >> 32) % 8);
      }
      break;
    case 1:   /* set a byte to a value parsers treat specially */
      b[(v >> 8) % size] = special[(v >> 40) % sizeof special];
      break;
    case 2:   /* cut short */
      n = (v >> 8) % size;
      break;
    default: { /* repeat a piece in place after itself */
      size_t at = (v >> 8) % size, len = 1 + (v >> 32) % (size - at);
      memmove(b + at + len, b + at, size - at);
      n = size + len;
      break;
    }
    }
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact)
      abort();
    memcpy(exact, b, n);
    free(b);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    r->runs++;
  }
}

int
main(int argc, char **argv)
{
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  struct replay r = { .mutations = 64, .x = 0x9e3779b97f4a7c15ull };
  const char *m = getenv("TC_FUZZ_MUTATIONS");
  if (m)
    r.mutations = (unsigned) strtoul(m, NULL, 10);
  int n = fuzz_each_corpus_input(TC_FUZZ_NAME, replay_one, &r);
  if (n <= 0) {
    fprintf(stderr, "fuzz-%s: %s seed corpus\n", TC_FUZZ_NAME, n < 0 ? "no" : "an empty");
    return 1;
  }
  printf("fuzz-%s: %d corpus inputs and %lu runs with mutations, no failure\n", TC_FUZZ_NAME, n, r.runs);
  return 0;
}
