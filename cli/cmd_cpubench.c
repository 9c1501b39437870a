/* tromcho cpubench: the seed document's seven scenarios, each doing the
 * real per-frame work of the data path (see frame.h): checksum the payload
 * into a frame header, seal the header, seal the payload, XTS-encrypt image
 * sectors. Prints the seed's output shape, or JSON with --json. MB here is
 * 2^20 bytes, as in the seed's figures. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "commands.h"
#include "crypto.h"
#include "error.h"
#include "frame.h"

struct bench_ctx {
  struct tc_gcm *gcm;
  struct tc_xts *xts;
  uint64_t salt;
  uint64_t counter;        /* record counter: nonce = iv_base XOR counter */
  uint8_t iv_base[TC_GCM_NONCE_SIZE];
  struct tc_frame_hdr hdr;
  uint8_t tag[TC_GCM_TAG_SIZE];
  uint8_t *buf;
  size_t len;
};

static void
next_nonce(struct bench_ctx *b, uint8_t nonce[TC_GCM_NONCE_SIZE])
{
  memcpy(nonce, b->iv_base, TC_GCM_NONCE_SIZE);
  uint64_t c = b->counter++;
  for (int i = 0; i < 8; i++)
    nonce[4 + i] ^= (uint8_t) (c >> (8 * i));
}

static void
fill_header(struct bench_ctx *b)
{
  b->hdr.magic = TC_FRAME_MAGIC;
  b->hdr.opcode = 2;
  b->hdr.req_id++;
  b->hdr.offset += b->len;
  b->hdr.len = (uint32_t) b->len;
}

static int
seal_header(struct bench_ctx *b)
{
  uint8_t nonce[TC_GCM_NONCE_SIZE];
  struct iovec h = { &b->hdr, sizeof b->hdr };
  next_nonce(b, nonce);
  return tc_gcm_seal(b->gcm, nonce, NULL, 0, &h, 1, b->tag);
}

static int
seal_payload(struct bench_ctx *b)
{
  uint8_t nonce[TC_GCM_NONCE_SIZE];
  struct iovec p = { b->buf, b->len };
  next_nonce(b, nonce);
  return tc_gcm_seal(b->gcm, nonce, NULL, 0, &p, 1, b->tag);
}

static int
xts(struct bench_ctx *b)
{
  return tc_xts_encrypt(b->xts, b->hdr.offset / TC_XTS_SECTOR, b->buf, b->buf, b->len);
}

static int
op_xxh(struct bench_ctx *b)
{
  fill_header(b);
  b->hdr.checksum = tc_xxh3_64(b->buf, b->len);
  return 0;
}

static int
op_hdr_xxh(struct bench_ctx *b)
{
  fill_header(b);
  b->hdr.checksum = tc_xxh3_64_seed(b->buf, b->len, b->salt);
  return seal_header(b);
}

static int
op_gcm_full(struct bench_ctx *b)
{
  fill_header(b);
  return seal_header(b) < 0 ? -1 : seal_payload(b);
}

static int
op_xts(struct bench_ctx *b)
{
  fill_header(b);
  return xts(b);
}

static int
op_xts_xxh(struct bench_ctx *b)
{
  fill_header(b);
  if (xts(b) < 0)
    return -1;
  b->hdr.checksum = tc_xxh3_64(b->buf, b->len);
  return 0;
}

static int
op_hdr_xts_xxh(struct bench_ctx *b)
{
  fill_header(b);
  if (xts(b) < 0)
    return -1;
  b->hdr.checksum = tc_xxh3_64_seed(b->buf, b->len, b->salt);
  return seal_header(b);
}

static int
op_xts_gcm(struct bench_ctx *b)
{
  fill_header(b);
  if (xts(b) < 0 || seal_header(b) < 0)
    return -1;
  return seal_payload(b);
}

struct scenario {
  const char *section;
  const char *label;
  int (*op)(struct bench_ctx *);
};

static const struct scenario scenarios[] = {
  { "No transport encryption, data checksums enabled, e2e unencrypted image", "xxhash3", op_xxh },
  { "Header encryption with payload checksums, e2e unencrypted image", "AES-256-GCM encrypt header + xxhash3", op_hdr_xxh },
  { "Full transport encryption, e2e unencrypted image", "AES-256-GCM encrypt header and", op_gcm_full },
  { "No transport encryption, no checksums, e2e encrypted image", "AES-256-XTS encrypt", op_xts },
  { "No transport encryption, e2e encrypted image, data checksums enabled", "AES-256-XTS encrypt + xxhash3", op_xts_xxh },
  { "Header encryption with payload checksums, e2e encrypted image", "AES-256-GCM encrypt header + AES-256-XTS encrypt + xxhash3", op_hdr_xts_xxh },
  { "Full transport encryption, e2e encrypted image", "AES-256-XTS + AES-256-GCM encrypt", op_xts_gcm },
};

static double
now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Run op until `ms` milliseconds pass; returns iterations, elapsed in *took. */
static long
run_for(struct bench_ctx *b, int (*op)(struct bench_ctx *), double ms, double *took)
{
  long iters = 0;
  /* Check the clock every batch, sized so a batch is well under 1 ms. */
  long batch = b->len >= (1 << 20) ? 10 : 1000;
  double start = now_ms(), t;
  do {
    for (long i = 0; i < batch; i++)
      if (op(b) < 0)
        return -1;
    iters += batch;
    t = now_ms();
  } while (t - start < ms);
  *took = t - start;
  return iters;
}

int
cmd_cpubench(int argc, char **argv, struct tc_config *cfg)
{
  double seconds = 2;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json"))
      json = 1;
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      char *end;
      seconds = strtod(argv[++i], &end);
      if (*end || seconds <= 0 || seconds > 3600) {
        fprintf(stderr, "tromcho cpubench: --seconds '%s' is not a number of seconds in (0, 3600]\n", argv[i]);
        return 1;
      }
    }
    else {
      fprintf(stderr, "tromcho cpubench: unknown argument '%s' (usage: cpubench [--seconds S] [--json])\n", argv[i]);
      return 1;
    }
  }

  struct bench_ctx b = { 0 };
  uint8_t gkey[TC_GCM_KEY_SIZE], xkey[TC_XTS_KEY_SIZE];
  size_t maxlen = 1 << 20;
  b.buf = aligned_alloc(4096, maxlen);
  if (!b.buf || tc_random(gkey, sizeof gkey) < 0 || tc_random(xkey, sizeof xkey) < 0 ||
      tc_random(b.iv_base, sizeof b.iv_base) < 0 || tc_random(&b.salt, sizeof b.salt) < 0 ||
      tc_random(b.buf, maxlen) < 0 ||
      tc_gcm_new(&b.gcm, gkey) < 0 || tc_xts_new(&b.xts, xkey) < 0) {
    fprintf(stderr, "tromcho cpubench: %s\n", b.buf ? tc_last_error() : "out of memory");
    free(b.buf);
    tc_gcm_free(b.gcm);
    return 1;
  }
  tc_wipe(gkey, sizeof gkey);
  tc_wipe(xkey, sizeof xkey);

  int status = 0;
  double took;
  if (!json) {
    printf("tromcho transport encryption benchmark (AES-256-GCM, AES-256-XTS and xxhash3)\n"
           "AES-256-GCM through %s, AES-256-XTS through %s, XXH3 %s\n\nWarmup...\n", tc_gcm_impl_name(),
           tc_xts_impl_name(), tc_xxh3_impl());
    fflush(stdout);
  }
  else
    printf("[");
  b.len = maxlen;
  for (size_t s = 0; s < sizeof scenarios / sizeof scenarios[0]; s++)
    run_for(&b, scenarios[s].op, 50, &took);

  static const size_t sizes[] = { 1 << 20, 4096 };
  int first = 1;
  for (size_t s = 0; s < sizeof scenarios / sizeof scenarios[0] && !status; s++) {
    if (!json)
      printf("\n%s\n", scenarios[s].section);
    for (int z = 0; z < 2; z++) {
      b.len = sizes[z];
      const char *sz = z == 0 ? "1 M" : "4 K";
      if (!json) {
        printf("%s %s block... ", scenarios[s].label, sz);
        fflush(stdout);
      }
      long iters = run_for(&b, scenarios[s].op, seconds * 1000, &took);
      if (iters < 0) {
        fprintf(stderr, "tromcho cpubench: %s\n", tc_last_error());
        status = 1;
        break;
      }
      double mbs = (double) iters * b.len / 1048576.0 / (took / 1000.0);
      if (json)
        printf("%s\n {\"scenario\": \"%s\", \"section\": \"%s\", \"block_size\": %zu, "
               "\"iterations\": %ld, \"ms\": %.0f, \"mb_per_s\": %.2f}",
               first ? "" : ",", scenarios[s].label, scenarios[s].section, b.len, iters, took, mbs);
      else
        printf("%ld iterations in %.0f ms = %.2f MB/s\n", iters, took, mbs);
      first = 0;
      fflush(stdout);
    }
  }
  if (json)
    printf("\n]\n");
  tc_gcm_free(b.gcm);
  tc_xts_free(b.xts);
  free(b.buf);
  return status;
}
