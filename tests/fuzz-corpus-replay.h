/* For the fuzz targets built as unit tests (without --enable-fuzzing):
 * replay every file of the in-tree seed corpus $srcdir/fuzz-corpus/NAME
 * through LLVMFuzzerTestOneInput ($top_srcdir/tests/fuzz-corpus/NAME when
 * the harness sets top_srcdir, tests/Makefile.am's TESTS_ENVIRONMENT). Returns the number of files, or -1 if the
 * folder cannot be read. */
#ifndef TROMCHO_FUZZ_CORPUS_REPLAY_H
#define TROMCHO_FUZZ_CORPUS_REPLAY_H
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
fuzz_replay_corpus(const char *name)
{
  const char *top = getenv("top_srcdir"), *src = getenv("srcdir");
  char cdir[1024];
  if (top)
    snprintf(cdir, sizeof cdir, "%s/tests/fuzz-corpus/%s", top, name);
  else
    snprintf(cdir, sizeof cdir, "%s/fuzz-corpus/%s", src ? src : ".", name);
  DIR *d = opendir(cdir);
  if (!d) {
    fprintf(stderr, "fuzz-%s: cannot open the seed corpus %s\n", name, cdir);
    return -1;
  }
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", cdir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f)
      continue;
    uint8_t buf[65536];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    n++;
  }
  closedir(d);
  return n;
}

#endif
