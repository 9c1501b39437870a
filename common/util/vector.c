/* The growth rule of vector.h. */
#include <config.h>
#include <errno.h>
#include <stdint.h>
#include "vector.h"

int
tc_grow(void *ptrp, size_t *cap, size_t need, size_t elem, size_t min_cap)
{
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : (min_cap ? min_cap : 8);
  while (n < need) {
    if (n > SIZE_MAX / 2) {
      n = need;
      break;
    }
    n *= 2;
  }
  if (n < min_cap)
    n = min_cap;
  if (elem && n > SIZE_MAX / elem) {
    errno = EOVERFLOW;
    return -1;
  }
  void **pp = ptrp;
  void *p = realloc(*pp, n * elem);
  if (!p) {
    errno = ENOMEM;
    return -1;
  }
  *pp = p;
  *cap = n;
  return 0;
}
