/* Helpers the C tests share (testlib.h). */
#include <config.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"

void
tl_die(const char *prog, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "%s: ", prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

static int
hexval(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

uint8_t *
tl_unhex(const char *prog, const char *what, const char *hex, size_t want, size_t *got)
{
  size_t n = strlen(hex);
  if (n % 2 || (want != SIZE_MAX && n != 2 * want)) {
    if (want != SIZE_MAX)
      tl_die(prog, "%s must be %zu hex digits, not %zu", what, 2 * want, n);
    tl_die(prog, "%s: an odd number of hex digits (%zu)", what, n);
  }
  uint8_t *out = malloc(n / 2 + 1);
  if (!out)
    tl_die(prog, "out of memory");
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      tl_die(prog, "%s: '%.2s' at offset %zu is not hex", what, hex + 2 * i, 2 * i);
    out[i] = (uint8_t) (hi << 4 | lo);
  }
  if (got)
    *got = n / 2;
  return out;
}

uint8_t *
tl_read_all(const char *prog, FILE *f, size_t *len)
{
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  if (!buf)
    tl_die(prog, "out of memory");
  for (;;) {
    if (n == cap) {
      uint8_t *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (!nb)
        tl_die(prog, "out of memory");
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0)
      break;
  }
  if (ferror(f))
    tl_die(prog, "reading the input failed");
  *len = n;
  return buf;
}

uint64_t
tl_splitmix(uint64_t *s)
{
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t
tl_xorshift(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

void
tl_fill_random(uint64_t *state, uint8_t *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t) tl_xorshift(state);
}

void
tl_fill_sector(uint8_t *p, size_t size, uint64_t inode, uint64_t s, uint64_t v)
{
  uint64_t seed = v * 0x100000001B3ull ^ inode * 31 ^ s;
  memcpy(p, &v, 8);
  memcpy(p + 8, &inode, 8);
  memcpy(p + 16, &s, 8);
  for (size_t i = 24; i + 8 <= size; i += 8) {
    uint64_t x = tl_splitmix(&seed);
    memcpy(p + i, &x, 8);
  }
}
