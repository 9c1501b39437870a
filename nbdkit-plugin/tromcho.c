/* nbdkit tromcho: tromcho images as NBD exports (DESIGN.md section 7).
 *
 *   nbdkit tromcho [config=FILE] [image=NAME] [any tromcho option=VALUE]
 *
 * Without image=, every image the user may read is an export named after
 * it. One nbdkit instance acts as one cluster user (its cert=/pkey=).
 * metrics_port=N serves Prometheus /metrics (metrics_frontend.h, series
 * tromcho_nbd_*). */
#include <config.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "tune.h"
#include "client.h"
#include "crypto.h"
#include "error.h"
#include "image.h"
#include "log.h"
#include "metrics.h"
#include "metrics_frontend.h"
#include "tc_config.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

/* The largest request advertised (NBD block size maximum). nbdkit reads a
 * write's payload into a buffer of its worker thread and keeps that buffer,
 * as large as the largest request the thread has seen, until the
 * connection closes: with the old 32 MiB, a client within the maximum could
 * pin 16 threads x 32 MiB per connection (four connections of fio writing
 * 32 MiB blocks: 2151 MiB, bench/README.md). Clients that honour the
 * maximum (qemu, nbdcopy) now hold at most 16 MiB per connection; 1 MiB
 * already spans eight objects of the default 128 KiB, so larger requests
 * add little parallelism. */
#define TROMCHO_MAX_REQUEST (1024u * 1024u)

/* Set during configuration (single-threaded), read-only after. */
static char *config_path;
static char *image_name;
static struct { char *key, *value; } *overrides;
static size_t n_overrides;
static struct tc_config *cfg;
static struct tc_client *client;   /* created after fork, freed at unload */
static struct tc_fe_metrics *metrics;   /* started after fork (NULL: metrics_port 0) */

static void
tromcho_unload(void)
{
  tc_fe_metrics_stop(metrics);
  metrics = NULL;
  tc_client_free(client);
  tc_config_free(cfg);
  for (size_t i = 0; i < n_overrides; i++) {
    free(overrides[i].key);
    free(overrides[i].value);
  }
  free(overrides);
  free(config_path);
  free(image_name);
}

static int
tromcho_config(const char *key, const char *value)
{
  if (strcmp(key, "config") == 0) {
    free(config_path);
    if (!(config_path = nbdkit_absolute_path(value)))
      return -1;
    return 0;
  }
  if (strcmp(key, "image") == 0) {
    free(image_name);
    if (!(image_name = strdup(value))) {
      nbdkit_error("strdup: %m");
      return -1;
    }
    return 0;
  }
  if (!tc_option_find(key)) {
    nbdkit_error("unknown parameter '%s' (see nbdkit tromcho --help)", key);
    return -1;
  }
  void *n = realloc(overrides, (n_overrides + 1) * sizeof *overrides);
  if (!n) {
    nbdkit_error("realloc: %m");
    return -1;
  }
  overrides = n;
  overrides[n_overrides].key = strdup(key);
  overrides[n_overrides].value = strdup(value);
  if (!overrides[n_overrides].key || !overrides[n_overrides].value) {
    free(overrides[n_overrides].key);
    free(overrides[n_overrides].value);
    nbdkit_error("strdup: %m");
    return -1;
  }
  n_overrides++;
  return 0;
}

static int
tromcho_config_complete(void)
{
  const char *path = config_path ? config_path : getenv("TROMCHO_CONFIG");
  /* The default file may be absent; an explicit one must exist. */
  if (!path && access("/etc/tromcho/tromcho.conf", R_OK) == 0)
    path = "/etc/tromcho/tromcho.conf";
  cfg = tc_config_load_file(path);
  if (!cfg) {
    nbdkit_error("%s", tc_last_error());
    return -1;
  }
  for (size_t i = 0; i < n_overrides; i++)
    if (tc_config_set(cfg, overrides[i].key, overrides[i].value) < 0) {
      nbdkit_error("%s", tc_last_error());
      return -1;
    }
  if (tc_log_configure(cfg, "nbdkit-tromcho") < 0) {
    nbdkit_error("%s", tc_last_error());
    return -1;
  }
  return 0;
}

#define tromcho_config_help \
  "config=<FILE>        tromcho config file (default $TROMCHO_CONFIG or /etc/tromcho/tromcho.conf)\n" \
  "image=<NAME>         serve this image only (default: every image the user may read)\n" \
  "<option>=<VALUE>     any tromcho option, e.g. etcd_address=, cert=, pkey=, osd_ca=,\n" \
  "                     proto_checksums=none|payload|gcm (tromcho --help lists them all)"

static void
tromcho_dump_plugin(void)
{
  printf("tromcho_version=%s\n", PACKAGE_VERSION);
  printf("tromcho_options=");
  for (const struct tc_opt_def *o = tc_options; o->name; o++)
    printf("%s%s", o == tc_options ? "" : ",", o->name);
  printf("\n");
  printf("tromcho_xts=gnutls\n");
  printf("tromcho_multi_conn=yes\n");
  printf("tromcho_block_size=1/4096/%u\n", TROMCHO_MAX_REQUEST);
  printf("tromcho_fua=native\n");
}

/* Threads must start after nbdkit daemonizes. */
static int
tromcho_after_fork(void)
{
  tc_tune_malloc();   /* nbdkit's process: large requests stay on the heap */
  if (tc_crypto_init() < 0) {
    nbdkit_error("%s", tc_last_error());
    return -1;
  }
  client = tc_client_new(cfg);
  if (!client || tc_fe_metrics_start(cfg, "tromcho_nbd", &metrics) < 0) {
    nbdkit_error("%s", tc_last_error());
    return -1;
  }
  return 0;
}

static int
add_export(void *opaque, const struct tc_image_meta *m, bool writable)
{
  char desc[160];
  snprintf(desc, sizeof desc, "tromcho image %s (%llu bytes%s%s)", m->name, (unsigned long long) m->size,
           m->enc_key ? ", encrypted" : "", writable ? "" : ", read-only");
  return nbdkit_add_export(opaque, m->name, desc);
}

static int
tromcho_list_exports(int readonly, int is_tls, struct nbdkit_exports *exports)
{
  if (image_name)
    return nbdkit_add_export(exports, image_name, NULL);
  if (tc_client_list(client, add_export, exports) < 0) {
    nbdkit_error("%s", tc_last_error());
    return -1;
  }
  return 0;
}

struct first_image { char *name; };

static int
take_first(void *opaque, const struct tc_image_meta *m, bool writable)
{
  struct first_image *f = opaque;
  f->name = strdup(m->name);
  return 1;   /* stop */
}

static const char *
tromcho_default_export(int readonly, int is_tls)
{
  if (image_name)
    return image_name;
  struct first_image f = { NULL };
  if (tc_client_list(client, take_first, &f) < 0) {
    nbdkit_error("%s", tc_last_error());
    return NULL;
  }
  if (!f.name) {
    nbdkit_error("there is no image this user may read");
    return NULL;
  }
  const char *r = nbdkit_strdup_intern(f.name);
  free(f.name);
  return r;
}

static void *
tromcho_open(int readonly)
{
  const char *name = image_name;
  if (!name || !*name) {
    name = nbdkit_export_name();
    if (!name || !*name)
      name = tromcho_default_export(readonly, 0);
  }
  if (!name)
    return NULL;
  struct tc_image *img = tc_client_open(client, name, readonly);
  if (!img) {
    nbdkit_error("%s", tc_last_error());
    return NULL;
  }
  tc_fe_metrics_handle(metrics, 1);
  return img;
}

static void
tromcho_close(void *handle)
{
  tc_image_free(handle);
  tc_fe_metrics_handle(metrics, -1);
}

static int64_t
tromcho_get_size(void *handle)
{
  return (int64_t) tc_image_size(handle);
}

static int
tromcho_can_write(void *handle)
{
  return !tc_image_readonly(handle);
}

static int
tromcho_can_multi_conn(void *handle)
{
  /* Flush is cluster-wide: it makes every write acknowledged to any
   * connection durable on the OSDs; and the connections share one sector
   * lock per image, so their partial-sector writes never undo each other. */
  return 1;
}

static int
tromcho_can_fua(void *handle)
{
  /* A FUA write is made durable on its own replicas only (the OSD
   * protocol's FUA flag), not by a flush of everything dirty on every OSD
   * as nbdkit's emulation would. */
  return NBDKIT_FUA_NATIVE;
}

static int
tromcho_can_fast_zero(void *handle)
{
  return 1;
}

static int
tromcho_block_size(void *handle, uint32_t *minimum, uint32_t *preferred, uint32_t *maximum)
{
  /* Any byte range works: partial sectors are serialised by one sector
   * lock per image in this process and by the OSD across processes. */
  *minimum = 1;
  *preferred = 4096;  /* the encryption sector */
  *maximum = TROMCHO_MAX_REQUEST;
  return 0;
}

/* The errno an NBD client is told. NBD has a handful of error codes and
 * nbdkit turns every errno it does not know into NBD_EINVAL ("Invalid
 * argument": the request was wrong), which is not what a call timeout,
 * a failed integrity check or a lost OSD is: those are I/O errors. The
 * log line (nbdkit_error) keeps the cluster's own errno and reason. */
static int
nbd_errno(int e)
{
  switch (e) {
  case EPERM: case EACCES: case EROFS:
    return EPERM;
  case ENOMEM: case ENOSPC: case EDQUOT: case EFBIG: case EINVAL: case EOVERFLOW: case ENOTSUP: case ESHUTDOWN:
#if EOPNOTSUPP != ENOTSUP
  case EOPNOTSUPP:
#endif
    return e;
  default:
    return EIO;
  }
}

static int
fail(void)
{
  int e = errno ? errno : EIO;   /* nbdkit_error keeps errno (documented); no need to rely on it */
  nbdkit_error("%s", tc_last_error());
  nbdkit_set_error(nbd_errno(e));
  return -1;
}

/* The end of a request: its metrics, then 0 or the error for nbdkit. */
static int
done(enum tc_fe_op op, uint64_t bytes, double t0, int r)
{
  int e = errno;
  tc_fe_metrics_op(metrics, op, bytes, t0, r < 0);
  errno = e;
  return r < 0 ? fail() : 0;
}

static int
tromcho_pread(void *handle, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  double t0 = tc_metrics_now();
  return done(TC_FE_READ, count, t0, tc_image_read(handle, buf, count, offset));
}

static int
tromcho_pwrite(void *handle, const void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  double t0 = tc_metrics_now();
  return done(TC_FE_WRITE, count, t0,
              tc_image_write_flags(handle, buf, count, offset, flags & NBDKIT_FLAG_FUA ? TC_IMAGE_FUA : 0));
}

/* FUA on a trim or a zero (rare: Linux sends it with writes only): the
 * operation, then a flush. */
static int
fua_flush(void *handle, uint32_t flags, int r)
{
  if (r < 0 || !(flags & NBDKIT_FLAG_FUA))
    return r;
  return tc_image_flush(handle);
}

static int
tromcho_flush(void *handle, uint32_t flags)
{
  double t0 = tc_metrics_now();
  return done(TC_FE_FLUSH, 0, t0, tc_image_flush(handle));
}

static int
tromcho_trim(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  double t0 = tc_metrics_now();
  return done(TC_FE_TRIM, count, t0, fua_flush(handle, flags, tc_image_trim(handle, count, offset)));
}

static int
tromcho_zero(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  bool may_trim = flags & NBDKIT_FLAG_MAY_TRIM;
  if ((flags & NBDKIT_FLAG_FAST_ZERO) && !tc_image_zero_fast(handle, may_trim)) {
    nbdkit_set_error(ENOTSUP);
    return -1;
  }
  double t0 = tc_metrics_now();
  return done(TC_FE_ZERO, count, t0, fua_flush(handle, flags, tc_image_zero(handle, count, offset, may_trim)));
}

static int
add_extent(void *opaque, uint64_t offset, uint64_t len, bool allocated)
{
  return nbdkit_add_extent(opaque, offset, len, allocated ? 0 : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO);
}

static int
tromcho_extents(void *handle, uint32_t count, uint64_t offset, uint32_t flags,
                struct nbdkit_extents *extents)
{
  double t0 = tc_metrics_now();
  return done(TC_FE_EXTENTS, 0, t0, tc_image_extents(handle, count, offset, add_extent, extents));
}

static struct nbdkit_plugin plugin = {
  .name = "tromcho",
  .longname = "tromcho clustered block storage",
  .version = PACKAGE_VERSION,
  .description = "Serves tromcho images (end-to-end encrypted, replicated) as NBD exports.",
  .unload = tromcho_unload,
  .config = tromcho_config,
  .config_complete = tromcho_config_complete,
  .config_help = tromcho_config_help,
  .magic_config_key = "image",
  .dump_plugin = tromcho_dump_plugin,
  .after_fork = tromcho_after_fork,
  .list_exports = tromcho_list_exports,
  .default_export = tromcho_default_export,
  .open = tromcho_open,
  .close = tromcho_close,
  .get_size = tromcho_get_size,
  .block_size = tromcho_block_size,
  .can_write = tromcho_can_write,
  .can_fast_zero = tromcho_can_fast_zero,
  .can_fua = tromcho_can_fua,
  .can_multi_conn = tromcho_can_multi_conn,
  .pread = tromcho_pread,
  .pwrite = tromcho_pwrite,
  .flush = tromcho_flush,
  .trim = tromcho_trim,
  .zero = tromcho_zero,
  .extents = tromcho_extents,
  .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN(plugin)
