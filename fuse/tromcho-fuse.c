/* tromcho-fuse MOUNTPOINT: every image the user may read as a regular file
 * of the image's size (snapshots NAME@SNAP read-only). read, write, fsync
 * (cluster-wide flush), truncate (resize, owner only), fallocate (punch
 * hole = trim, zero range), direct I/O; multithreaded. (After nbdfuse.)
 * metrics_port N serves Prometheus /metrics (metrics_frontend.h, series
 * tromcho_fuse_*). */
#include <config.h>
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tune.h"
#include "client.h"
#include "crypto.h"
#include "error.h"
#include "image.h"
#include "log.h"
#include "metrics.h"
#include "metrics_frontend.h"
#include "tc_config.h"

/* Set in main before fuse_main; the client is created in init, after
 * fuse has daemonized. */
static struct tc_config *cfg;
static struct tc_client *client;
static struct tc_fe_metrics *metrics;   /* started in init (NULL: metrics_port 0) */
static time_t mount_time;

static void *
tf_init(struct fuse_conn_info *conn, struct fuse_config *fc)
{
  fc->use_ino = 0;
  fc->entry_timeout = 1;
  fc->attr_timeout = 1;
  fc->negative_timeout = 1;
  client = tc_client_new(cfg);
  if (!client) {
    tc_err("cannot connect to the cluster: %s", tc_last_error());
    fuse_exit(fuse_get_context()->fuse);
  }
  else if (tc_fe_metrics_start(cfg, "tromcho_fuse", &metrics) < 0) {
    tc_err("metrics: %s", tc_last_error());
    fuse_exit(fuse_get_context()->fuse);
  }
  return NULL;
}

static void
tf_destroy(void *data)
{
  tc_fe_metrics_stop(metrics);
  metrics = NULL;
  tc_client_free(client);
  client = NULL;
}

static int
fail(const char *what)
{
  int e = errno ? errno : EIO;
  tc_debug("%s: %s", what, tc_last_error());
  return -e;
}

/* A failed read, write, flush, trim, zero or truncate: the application
 * sees only an errno, so the reason goes to the log (a lookup that finds
 * nothing is routine and stays at debug, in fail). */
static int
io_fail(const char *what)
{
  int e = errno ? errno : EIO;
  tc_warn("%s: %s", what, tc_last_error());
  return -e;
}

/* The end of a request: its metrics, then r (a result or -errno). */
static int
done(enum tc_fe_op op, uint64_t bytes, double t0, int r)
{
  tc_fe_metrics_op(metrics, op, bytes, t0, r < 0);
  return r;
}

/* Set at start-up, read-only afterwards: whether other local users were
 * let in (-o allow_other). Without it files are the mounting user's alone. */
static bool shared;

/* Modes say what the mounting user's cluster rights allow; the kernel
 * enforces them (default_permissions, always on). Others get the same read
 * access only when the mount is shared on purpose (allow_other). */
static void
fill_stat(struct stat *st, uint64_t size, bool writable)
{
  memset(st, 0, sizeof *st);
  st->st_mode = S_IFREG | (writable ? 0600 : 0400) | (shared ? 0044 : 0);
  st->st_nlink = 1;
  st->st_size = (off_t) size;
  st->st_blksize = 4096;
  st->st_blocks = (blkcnt_t) (size / 512);
  st->st_uid = getuid();
  st->st_gid = getgid();
  st->st_atime = st->st_mtime = st->st_ctime = mount_time;
}

static int
tf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
  if (strcmp(path, "/") == 0) {
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFDIR | (shared ? 0755 : 0700);
    st->st_nlink = 2;
    st->st_uid = getuid();
    st->st_gid = getgid();
    st->st_atime = st->st_mtime = st->st_ctime = mount_time;
    return 0;
  }
  if (fi && fi->fh) {
    struct tc_image *img = (struct tc_image *) (uintptr_t) fi->fh;
    fill_stat(st, tc_image_size(img), !tc_image_readonly(img));
    return 0;
  }
  struct tc_image_meta m;
  bool writable;
  if (tc_client_stat(client, path + 1, &m, &writable) < 0)
    return fail("getattr");
  fill_stat(st, m.size, writable && !strchr(m.name, '@'));
  tc_image_meta_clear(&m);
  return 0;
}

struct dir_fill {
  void *buf;
  fuse_fill_dir_t filler;
};

static int
add_entry(void *opaque, const struct tc_image_meta *m, bool writable)
{
  struct dir_fill *d = opaque;
  struct stat st;
  fill_stat(&st, m->size, writable && !strchr(m->name, '@'));
  d->filler(d->buf, m->name, &st, 0, FUSE_FILL_DIR_PLUS);
  return 0;
}

static int
tf_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off, struct fuse_file_info *fi,
           enum fuse_readdir_flags flags)
{
  if (strcmp(path, "/") != 0)
    return -ENOTDIR;
  filler(buf, ".", NULL, 0, 0);
  filler(buf, "..", NULL, 0, 0);
  struct dir_fill d = { buf, filler };
  return tc_client_list(client, add_entry, &d) < 0 ? fail("readdir") : 0;
}

static int
tf_open(const char *path, struct fuse_file_info *fi)
{
  bool readonly = (fi->flags & O_ACCMODE) == O_RDONLY;
  struct tc_image *img = tc_client_open(client, path + 1, readonly);
  if (!img)
    return fail("open");
  if (!readonly && tc_image_readonly(img)) {
    tc_image_free(img);
    return -EACCES;
  }
  fi->fh = (uintptr_t) img;
  tc_fe_metrics_handle(metrics, 1);
  /* O_DIRECT: bypass the page cache, every read and write reaches the image. */
  fi->direct_io = (fi->flags & O_DIRECT) != 0;
  fi->keep_cache = 0;
  return 0;
}

static int
tf_release(const char *path, struct fuse_file_info *fi)
{
  tc_image_free((struct tc_image *) (uintptr_t) fi->fh);
  tc_fe_metrics_handle(metrics, -1);
  return 0;
}

static int
tf_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
  struct tc_image *img = (struct tc_image *) (uintptr_t) fi->fh;
  uint64_t isize = tc_image_size(img);
  if ((uint64_t) off >= isize)
    return 0;
  if (size > isize - (uint64_t) off)
    size = isize - (uint64_t) off;
  double t0 = tc_metrics_now();
  return done(TC_FE_READ, size, t0, tc_image_read(img, buf, size, (uint64_t) off) < 0 ? io_fail("read") : (int) size);
}

static int
tf_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
  struct tc_image *img = (struct tc_image *) (uintptr_t) fi->fh;
  /* A synchronous write (O_SYNC or O_DSYNC open, pwritev2 RWF_DSYNC: the
   * kernel puts O_DSYNC in the write's flags) is durable when it returns:
   * written with FUA. The kernel follows one through the page cache with
   * an FSYNC, but not an O_DIRECT one, which would otherwise be lost with
   * the OSDs (tests/test-fuse-sync.sh). Images do not grow by writing:
   * truncate resizes them. */
  unsigned flags = fi->flags & O_DSYNC ? TC_IMAGE_FUA : 0;
  double t0 = tc_metrics_now();
  return done(TC_FE_WRITE, size, t0,
              tc_image_write_flags(img, buf, size, (uint64_t) off, flags) < 0 ? io_fail("write") : (int) size);
}

static int
tf_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
  double t0 = tc_metrics_now();
  return done(TC_FE_FLUSH, 0, t0, tc_image_flush((struct tc_image *) (uintptr_t) fi->fh) < 0 ? io_fail("fsync") : 0);
}

static int
tf_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
  if (size < 0 || size % 4096)
    return -EINVAL;
  if (tc_client_resize(client, path + 1, (uint64_t) size) < 0)
    return io_fail("truncate");
  if (fi && fi->fh)
    tc_image_set_size((struct tc_image *) (uintptr_t) fi->fh, (uint64_t) size);
  return 0;
}

static int
tf_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
  struct tc_image *img = (struct tc_image *) (uintptr_t) fi->fh;
  double t0 = tc_metrics_now();
  if (mode & FALLOC_FL_PUNCH_HOLE)
    return done(TC_FE_TRIM, (uint64_t) len, t0,
                tc_image_trim(img, (uint64_t) len, (uint64_t) off) < 0 ? io_fail("punch hole") : 0);
  if (mode & FALLOC_FL_ZERO_RANGE)
    return done(TC_FE_ZERO, (uint64_t) len, t0,
                tc_image_zero(img, (uint64_t) len, (uint64_t) off, false) < 0 ? io_fail("zero range") : 0);
  if (mode == 0)   /* allocation: the image is already that size */
    return (uint64_t) (off + len) <= tc_image_size(img) ? 0 : -EFBIG;
  return -EOPNOTSUPP;
}

static const struct fuse_operations ops = {
  .init = tf_init,
  .destroy = tf_destroy,
  .getattr = tf_getattr,
  .readdir = tf_readdir,
  .open = tf_open,
  .release = tf_release,
  .read = tf_read,
  .write = tf_write,
  .fsync = tf_fsync,
  .truncate = tf_truncate,
  .fallocate = tf_fallocate,
};

/* Idle worker threads libfuse keeps (its documented default before 3.12). */
#define TF_MAX_IDLE_THREADS "10"

static void
usage(FILE *f)
{
  fprintf(f, "Usage: tromcho-fuse [TROMCHO OPTIONS] MOUNTPOINT [-f] [-o FUSE-OPTION,...]\n"
             "Every image the user may read appears as a file under MOUNTPOINT.\n\n");
  tc_config_print_help(f);
}

int
main(int argc, char **argv)
{
  tc_tune_malloc();
  tc_log_open("tromcho-fuse", 0);
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  cfg = tc_config_load(&argc, argv);
  if (!cfg) {
    fprintf(stderr, "tromcho-fuse: %s\n", tc_last_error());
    return 1;
  }
  if (tc_log_configure(cfg, NULL) < 0 || tc_crypto_init() < 0) {
    fprintf(stderr, "tromcho-fuse: %s\n", tc_last_error());
    tc_config_free(cfg);
    return 1;
  }
  mount_time = time(NULL);
  /* -o allow_other only when asked for; default_permissions always. */
  for (int i = 1; i < argc; i++)
    if (strstr(argv[i], "allow_other") && i > 1 && !strcmp(argv[i - 1], "-o"))
      shared = true;
    else if (!strncmp(argv[i], "-o", 2) && strstr(argv[i], "allow_other"))
      shared = true;
  /* libfuse 3.14 leaves max_idle_threads at UINT_MAX when not given and then
   * warns "Ignoring invalid max threads value 4294967295": give it one. */
  struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
  bool idle_given = false, ok = true;
  for (int i = 0; i < argc; i++) {
    idle_given |= strstr(argv[i], "max_idle_threads=") != NULL;
    ok &= fuse_opt_add_arg(&args, argv[i]) == 0;
  }
  if (!ok || (!idle_given && fuse_opt_add_arg(&args, "-omax_idle_threads=" TF_MAX_IDLE_THREADS) < 0) ||
      fuse_opt_add_arg(&args, "-odefault_permissions") < 0) {
    fuse_opt_free_args(&args);
    fprintf(stderr, "tromcho-fuse: out of memory adding mount options\n");
    tc_config_free(cfg);
    return 1;
  }
  int r = fuse_main(args.argc, args.argv, &ops, NULL);
  fuse_opt_free_args(&args);
  tc_config_free(cfg);
  return r;
}
