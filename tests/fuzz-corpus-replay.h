/* The fuzz targets' shared main() parts. The seed corpus of every target
 * NAME is tests/fuzz/corpus-NAME, one input a file. Built as unit tests
 * (without --enable-fuzzing) the targets in tests/ replay it through
 * LLVMFuzzerTestOneInput ($top_srcdir/tests/fuzz/corpus-NAME when the
 * harness sets top_srcdir, tests/Makefile.am's TESTS_ENVIRONMENT, else
 * $srcdir/fuzz/corpus-NAME), and `fuzz-NAME --write-corpus DIR` writes
 * their built-in seeds as a corpus. */
#ifndef TROMCHO_FUZZ_CORPUS_REPLAY_H
#define TROMCHO_FUZZ_CORPUS_REPLAY_H
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Call fn(arg, bytes, size) for every file of the seed corpus NAME (at
 * most 64 KiB of each). Returns the number of files, or -1 if the folder
 * cannot be read. */
static int
fuzz_each_corpus_input(const char *name, void (*fn)(void *arg, const uint8_t *data, size_t size), void *arg)
{
  const char *top = getenv("top_srcdir"), *src = getenv("srcdir");
  char cdir[1024];
  if (top)
    snprintf(cdir, sizeof cdir, "%s/tests/fuzz/corpus-%s", top, name);
  else
    snprintf(cdir, sizeof cdir, "%s/fuzz/corpus-%s", src ? src : ".", name);
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
    fn(arg, buf, len);
    n++;
  }
  closedir(d);
  return n;
}

static void
fuzz_run_one(void *arg, const uint8_t *data, size_t size)
{
  (void) arg;
  LLVMFuzzerTestOneInput(data, size);
}

/* Replay the seed corpus NAME through LLVMFuzzerTestOneInput: the number
 * of files, or -1 if the folder cannot be read. */
static inline int
fuzz_replay_corpus(const char *name)
{
  return fuzz_each_corpus_input(name, fuzz_run_one, NULL);
}

/* `PROG --write-corpus DIR`: write each of the n built-in seeds, named
 * name(i), with the bytes bytes(i, &size) returns (caller frees), to
 * DIR/NAME. The exit status. */
static inline int
fuzz_write_corpus(const char *prog, const char *outdir, size_t n, const char *(*name)(size_t i),
                  uint8_t *(*bytes)(size_t i, size_t *size))
{
  for (size_t i = 0; i < n; i++) {
    size_t size = 0;
    uint8_t *b = bytes(i, &size);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", outdir, name(i));
    FILE *f = b ? fopen(path, "wb") : NULL;
    int ok = f && fwrite(b, 1, size, f) == size;
    if (f && fclose(f) != 0)
      ok = 0;
    free(b);
    if (!ok) {
      fprintf(stderr, "%s: writing %s failed\n", prog, path);
      return 1;
    }
  }
  return 0;
}

#endif
