#include <config.h>
#include <malloc.h>
#include "tune.h"

void
tc_tune_malloc(void)
{
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}
