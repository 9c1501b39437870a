/* A tiny test helper for the C unit tests: CHECK(cond, fmt, ...) counts and
 * prints failures; DONE() prints the tally and returns the exit status. */
#ifndef TROMCHO_TAP_H
#define TROMCHO_TAP_H
#include <stdio.h>

static int tap_pass, tap_fail;

#define CHECK(cond, ...) do {                                        \
    if (cond) tap_pass++;                                            \
    else {                                                           \
      tap_fail++;                                                    \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
      fprintf(stderr, __VA_ARGS__);                                  \
      fprintf(stderr, "\n");                                         \
    }                                                                \
  } while (0)

#define DONE() (printf("%d checks passed, %d failed\n", tap_pass, tap_fail), \
                tap_fail ? 1 : 0)

#endif
