/* osd-client: a small test client of the OSD protocol for the shell tests
 * and bench/osd (the real cluster client is common/cluster/cluster.c). It connects
 * through the messenger with the config's cert/pkey, routes operations to
 * the PG's primary from the KV's /pg/config and /osd/state, and retries an
 * operation on -EAGAIN or a broken connection (re-reading the map) for up
 * to --timeout seconds.
 *
 *   osd-client [tromcho options] COMMAND [args]
 *   raw OP --host H --port P [--inode I] [--offset O] [--len L] [--version V] [--hex-payload HEX]
 *          [--inode-last I] [--pool P] [--pg N --pg-count C] [--epoch E] [--primary O] [--bitmap B] [--fua]
 *       one request to one OSD, built in its operation's view of osd_proto.h (data
 *       ops: inode offset len version; SEC_LIST: inode..inode-last, pg of pg-count;
 *       SEC_LOCK: pool, pg of pg-count, epoch; --fua: TC_OSD_FLAG_FUA); prints
 *       "status=S (text) version=V bitmap=B len=L", then " fua" if the reply
 *       carries TC_OSD_FLAG_FUA.
 *   write --inode I --offset O --len L --seed S      pattern write (split per object)
 *   read  --inode I --offset O --len L --seed S      read and check the pattern (--zero: expect zeros)
 *   delete --inode I --offset O --len L
 *   sync                                              SYNC on every OSD in the map
 *   stream --inode I --sectors N --count C [--sync-every K] [--iodepth D] --log FILE
 *       writes 4 KiB sectors at distinct offsets (a permutation of N sectors), each
 *       with its own pattern; after every K acknowledged writes a SYNC of every OSD
 *       written to; logs "w SEQ OFFSET" when acknowledged and "s SEQ" when every
 *       write up to SEQ is synced. --hold-at N --release-file F: after N
 *       acknowledged writes, issue no more until F exists (a test kills an OSD
 *       mid-stream at a known point, however fast or slow the machine is).
 *   verify --inode I --log FILE    every write logged before a "s" line reads back
 *   scrub-all --pool P             SEC_LIST every OSD, SCRUB each object on its primary;
 *                                  prints "scrub objects=N bad=B repaired=R"
 *   wait-clean --pool P            until every PG of the pool is active and clean
 *   describe --osd N               print OSD N's DESCRIBE answer (JSON)
 *   bench --inode I --rw randwrite|randread|write|read [--bs 4k] [--iodepth N]
 *         [--seconds S] [--size 256M]
 */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include "cluster_map.h"
#include "crypto.h"
#include "error.h"
#include "evloop.h"
#include "image_meta.h"
#include "kv_client.h"
#include "log.h"
#include "msgr.h"
#include "osd_proto.h"
#include "tc_config.h"

static struct tc_config *cfg;
static struct tc_evloop *loop;
static struct tc_msgr *msgr;
static struct tc_kv *kv;
static struct tc_map *map;
static double timeout_s = 30;
static uint64_t last_reload;

struct conn {
  uint64_t osd;
  struct tc_msgr_conn *c;
};
static struct conn conns[64];
static int nconns;

/* ---- map ---- */

static int
reload_map(void)
{
  const char *prefix = tc_config_str(cfg, "etcd_prefix");
  char k1[256], k2[256], k3[256];
  snprintf(k1, sizeof k1, "%s/config/pools", prefix);
  snprintf(k2, sizeof k2, "%s/pg/config", prefix);
  snprintf(k3, sizeof k3, "%s/osd/state/", prefix);
  struct tc_kv_result a, b, c;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  memset(&c, 0, sizeof c);
  if (tc_kv_get(kv, k1, 0, &a) < 0 || tc_kv_get(kv, k2, 0, &b) < 0 || tc_kv_get_prefix(kv, k3, 0, &c) < 0) {
    tc_kv_result_free(&a);
    tc_kv_result_free(&b);
    tc_kv_result_free(&c);
    return -1;
  }
  uint64_t ids[64];
  const char *vals[64];
  size_t lens[64], n = 0;
  for (size_t i = 0; i < c.n_kvs && n < 64; i++) {
    ids[n] = strtoull((const char *) c.kvs[i].key + strlen(k3), NULL, 10);
    vals[n] = (const char *) c.kvs[i].value;
    lens[n] = c.kvs[i].value_len;
    n++;
  }
  struct tc_map *m = tc_map_build(a.n_kvs ? (const char *) a.kvs[0].value : NULL, a.n_kvs ? a.kvs[0].value_len : 0,
                                  b.n_kvs ? (const char *) b.kvs[0].value : NULL, b.n_kvs ? b.kvs[0].value_len : 0,
                                  ids, vals, lens, n);
  tc_kv_result_free(&a);
  tc_kv_result_free(&b);
  tc_kv_result_free(&c);
  if (!m)
    return -1;
  if (map)
    tc_map_unref(map);
  map = m;
  last_reload = tc_now_ms();
  return 0;
}

static void
conn_cb(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  if (event != TC_MSGR_DOWN)
    return;
  for (int i = 0; i < nconns; i++)
    if (conns[i].c == c) {
      conns[i] = conns[--nconns];
      break;
    }
}

static struct tc_msgr_conn *
connect_to(const char *host, int port, uint64_t osd)
{
  for (int i = 0; i < nconns; i++)
    if (conns[i].osd == osd && osd)
      return conns[i].c;
  struct tc_msgr_conn *c = tc_msgr_connect(msgr, host, port, conn_cb, NULL);
  if (c && osd && nconns < 64)
    conns[nconns++] = (struct conn) { osd, c };
  return c;
}

static struct tc_msgr_conn *
conn_osd(uint64_t osd)
{
  const struct tc_osd_addr *a = map ? tc_map_osd(map, osd) : NULL;
  if (!a || !a->addr)
    return NULL;
  return connect_to(a->addr, a->port, osd);
}

static uint64_t
primary_of(uint64_t inode, uint64_t offset)
{
  const struct tc_pool_info *p = map ? tc_map_pool(map, TC_INODE_POOL(inode)) : NULL;
  if (!p)
    return 0;
  const struct tc_pg_info *pg = tc_map_pg(map, p->id, tc_map_pg_of(p, inode, offset));
  return pg ? pg->primary : 0;
}

static uint32_t
block_size(uint64_t inode)
{
  const struct tc_pool_info *p = map ? tc_map_pool(map, TC_INODE_POOL(inode)) : NULL;
  return p && p->block_size ? p->block_size : TC_DEFAULT_BLOCK_SIZE;
}

/* ---- operations with retries ---- */

struct op {
  struct tc_msgr_req req;
  struct iovec iov;
  uint64_t osd;             /* 0: route by inode/offset */
  uint64_t deadline;
  int done, status;
  void (*cb)(struct op *op);
  void *arg;
  uint64_t seq, t0;
};

static void op_send(struct op *op);

static void
op_retry_timer(struct tc_evloop *l, void *arg)
{
  struct op *op = arg;
  if (tc_now_ms() - last_reload > 200 && reload_map() < 0)
    fprintf(stderr, "osd-client: reading the map: %s\n", tc_last_error());
  op_send(op);
}

static void
op_complete(struct op *op, int status)
{
  op->done = 1;
  op->status = status;
  if (op->cb)
    op->cb(op);
}

static void
op_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct op *op = arg;
  int st = err ? err : req->reply.status;
  bool retry = err || st == -EAGAIN;
  if (retry && tc_now_ms() < op->deadline) {
    if (req->reply_payload && req->reply_payload != req->rbuf)
      free(req->reply_payload);
    req->reply_payload = NULL;
    tc_evloop_timer_add(loop, 100, op_retry_timer, op);
    return;
  }
  op_complete(op, st);
}

static void
op_send(struct op *op)
{
  uint64_t osd = op->osd ? op->osd : primary_of(tc_osd_hdr_of(&op->req.hdr).rw.inode,
                                                       tc_osd_hdr_of(&op->req.hdr).rw.offset);
  struct tc_msgr_conn *c = osd ? conn_osd(osd) : NULL;
  if (!c || tc_msgr_call(c, &op->req) < 0) {
    if (tc_now_ms() < op->deadline) {
      tc_evloop_timer_add(loop, 100, op_retry_timer, op);
      return;
    }
    op_complete(op, -EHOSTUNREACH);
  }
}

static void
op_start(struct op *op)
{
  op->done = 0;
  op->deadline = tc_now_ms() + (uint64_t) (timeout_s * 1000);
  op->req.done = op_done;
  op->req.arg = op;
  op->req.reply_payload = NULL;
  op_send(op);
}

static int
op_run(struct op *op)
{
  op_start(op);
  while (!op->done)
    tc_evloop_run_once(loop, 100);
  return op->status;
}

/* ---- patterns ---- */

static void
pattern(uint8_t *buf, size_t len, uint64_t inode, uint64_t offset, uint64_t seed)
{
  for (size_t i = 0; i < len; i += 8) {
    uint64_t x = (inode * 0x9E3779B97F4A7C15ull) ^ ((offset + i) * 0xC2B2AE3D27D4EB4Full) ^ (seed * 0x165667B19E3779F9ull);
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    memcpy(buf + i, &x, 8);
  }
}

/* ---- commands ---- */

static const char *
arg(int argc, char **argv, const char *name, const char *def)
{
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name))
      return argv[i + 1];
  return def;
}

static bool
flag(int argc, char **argv, const char *name)
{
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], name))
      return true;
  return false;
}

static uint64_t
num(int argc, char **argv, const char *name, const char *def)
{
  const char *s = arg(argc, argv, name, def);
  if (!s) {
    fprintf(stderr, "osd-client: %s is required\n", name);
    exit(2);
  }
  int64_t v = tc_parse_size(s);
  if (v < 0) {
    char *end;
    v = (int64_t) strtoull(s, &end, 0);
    if (*end) {
      fprintf(stderr, "osd-client: %s '%s' is not a number\n", name, s);
      exit(2);
    }
  }
  return (uint64_t) v;
}

static int
opcode_of(const char *name)
{
  for (int i = 1; i < 64; i++)
    if (tc_osd_op_name(i) && !strcmp(tc_osd_op_name(i), name))
      return i;
  return -1;
}

static int
cmd_raw(int argc, char **argv)
{
  const char *name = argc > 1 ? argv[1] : "";
  int opc = opcode_of(name);
  if (opc < 0) {
    fprintf(stderr, "osd-client raw: unknown operation '%s'\n", name);
    return 2;
  }
  const char *host = arg(argc, argv, "--host", "127.0.0.1");
  int port = (int) num(argc, argv, "--port", NULL);
  struct op op;
  memset(&op, 0, sizeof op);
  uint64_t inode = num(argc, argv, "--inode", "0"), offset = num(argc, argv, "--offset", "0");
  uint64_t version = num(argc, argv, "--version", "0");
  uint64_t len = num(argc, argv, "--len", "0");
  uint8_t *payload = NULL;
  const char *hex = arg(argc, argv, "--hex-payload", NULL), *text = arg(argc, argv, "--text-payload", NULL);
  if (hex) {
    size_t n = strlen(hex) / 2;
    payload = calloc(1, n + 1);
    for (size_t i = 0; i < n; i++)
      sscanf(hex + 2 * i, "%2hhx", &payload[i]);
    op.iov = (struct iovec) { payload, n };
  }
  else if (text) {
    payload = (uint8_t *) strdup(text);
    op.iov = (struct iovec) { payload, strlen(text) };
  }
  else if (len && (opc == TC_OP_WRITE || opc == TC_OP_SEC_WRITE)) {
    payload = malloc(len);
    pattern(payload, len, inode, offset, num(argc, argv, "--seed", "1"));
    op.iov = (struct iovec) { payload, len };
  }
  else if (len && opc == TC_OP_SEC_WRITE_STABLE) {
    payload = calloc(1, 8 + len);
    uint64_t bm = num(argc, argv, "--bitmap", "0");
    memcpy(payload, &bm, 8);
    op.iov = (struct iovec) { payload, 8 + len };
  }
  /* Each operation's header in its own view (osd_proto.h). */
  switch (opc) {
  case TC_OP_READ: case TC_OP_WRITE: case TC_OP_DELETE: case TC_OP_SEC_READ: case TC_OP_SEC_READ_BMP:
  case TC_OP_SEC_WRITE: case TC_OP_SEC_DELETE: case TC_OP_SEC_WRITE_STABLE:
  case TC_OP_WRITE_PARTIAL: case TC_OP_WRITE_IF:
    op.req.hdr = tc_osd_rw_hdr(opc, inode, offset, (uint32_t) len, version);
    break;
  case TC_OP_SCRUB:
    op.req.hdr = tc_osd_obj_hdr(opc, inode, offset);
    break;
  case TC_OP_SEC_LIST:
    op.req.hdr = tc_osd_list_hdr(inode, num(argc, argv, "--inode-last", "0"), (uint32_t) num(argc, argv, "--pg", "0"),
                                 (uint32_t) num(argc, argv, "--pg-count", "0"));
    break;
  case TC_OP_SEC_LOCK:
    op.req.hdr = tc_osd_lock_hdr(num(argc, argv, "--pool", "0"), (uint32_t) num(argc, argv, "--pg", "0"),
                                 (uint32_t) num(argc, argv, "--pg-count", "0"), num(argc, argv, "--epoch", "0"),
                                 (uint32_t) num(argc, argv, "--primary", "0"));
    break;
  default:
    op.req.hdr.opcode = (uint16_t) opc;
  }
  if (flag(argc, argv, "--fua"))
    op.req.hdr.flags = TC_OSD_FLAG_FUA;
  op.req.iov = op.iov.iov_len ? &op.iov : NULL;
  op.req.iovcnt = op.iov.iov_len ? 1 : 0;
  timeout_s = 0;   /* no retries */
  struct tc_msgr_conn *c = connect_to(host, port, 0);
  if (!c) {
    fprintf(stderr, "osd-client: connect %s:%d: %s\n", host, port, tc_last_error());
    return 1;
  }
  op.req.done = op_done;
  op.req.arg = &op;
  op.deadline = 0;
  if (tc_msgr_call(c, &op.req) < 0) {
    fprintf(stderr, "osd-client: %s\n", tc_last_error());
    return 1;
  }
  while (!op.done)
    tc_evloop_run_once(loop, 100);
  const union tc_osd_hdr rh = tc_osd_hdr_of(&op.req.reply);
  printf("status=%d (%s) version=%" PRIu64 " bitmap=%#" PRIx64 " len=%" PRIu32 "%s\n", op.status,
         op.status < 0 ? strerror(-op.status) : "ok", rh.reply.version, rh.reply.bitmap, op.req.reply.len,
         op.req.reply.flags & TC_OSD_FLAG_FUA ? " fua" : "");
  if (op.req.reply_payload && op.req.reply.len && flag(argc, argv, "--print"))
    printf("%.*s\n", (int) op.req.reply.len, (char *) op.req.reply_payload);
  free(op.req.reply_payload);
  free(payload);
  if (flag(argc, argv, "--then-ping") && op.status != -ECONNRESET) {
    /* The connection goes on after the answer (a refusal included). */
    struct op ping;
    memset(&ping, 0, sizeof ping);
    ping.req.hdr.opcode = TC_OP_PING;
    ping.req.done = op_done;
    ping.req.arg = &ping;
    if (tc_msgr_call(c, &ping.req) == 0)
      while (!ping.done)
        tc_evloop_run_once(loop, 100);
    printf("then PING status=%d\n", ping.done ? ping.status : -ENOTCONN);
  }
  /* A refused handshake has closed (and freed) it already. */
  for (int i = 0; i < nconns; i++)
    if (conns[i].c == c) {
      tc_msgr_close(c);
      break;
    }
  return op.status == -ECONNRESET || op.status == -EHOSTUNREACH || op.status == -ECONNREFUSED ||
         op.status == -EACCES ? 1 : 0;
}

/* Split [offset, offset+len) into per-object pieces and run op on each. */
static int
cmd_rw(int argc, char **argv, int opc)
{
  uint64_t inode = num(argc, argv, "--inode", NULL), offset = num(argc, argv, "--offset", "0");
  uint64_t len = num(argc, argv, "--len", NULL), seed = num(argc, argv, "--seed", "1");
  bool zero = flag(argc, argv, "--zero");
  uint32_t bs = block_size(inode);
  int bad = 0;
  for (uint64_t pos = offset; pos < offset + len;) {
    uint64_t n = bs - pos % bs;
    if (n > offset + len - pos)
      n = offset + len - pos;
    struct op op;
    memset(&op, 0, sizeof op);
    uint8_t *buf = malloc(n), *want = malloc(n);
    pattern(want, n, inode, pos, seed);
    if (zero)
      memset(want, 0, n);
    op.req.hdr = tc_osd_rw_hdr(opc, inode, pos, (uint32_t) n, 0);
    if (opc == TC_OP_WRITE) {
      op.iov = (struct iovec) { want, n };
      op.req.iov = &op.iov;
      op.req.iovcnt = 1;
    }
    else {
      op.req.rbuf = buf;
      op.req.rbuf_len = n;
    }
    int st = op_run(&op);
    if (st < 0) {
      fprintf(stderr, "osd-client: %s inode %#" PRIx64 " offset %" PRIu64 ": %s\n", tc_osd_op_name(opc), inode, pos,
              strerror(-st));
      free(buf);
      free(want);
      return 1;
    }
    if (opc == TC_OP_READ) {
      const uint8_t *got = op.req.reply_payload ? op.req.reply_payload : buf;
      if (op.req.reply.len != n || memcmp(got, want, n)) {
        fprintf(stderr, "osd-client: READ inode %#" PRIx64 " offset %" PRIu64 ": data differs from the pattern\n",
                inode, pos);
        bad++;
      }
      if (op.req.reply_payload && op.req.reply_payload != buf)
        free(op.req.reply_payload);
    }
    free(buf);
    free(want);
    pos += n;
  }
  if (bad)
    return 1;
  printf("%s ok: %" PRIu64 " bytes\n", tc_osd_op_name(opc), len);
  return 0;
}

/* SYNC every OSD that is a primary now (the ones that acknowledged our
 * writes, or took their PGs over); again from the start if one fails. */
static int
sync_all(void)
{
  uint64_t deadline = tc_now_ms() + (uint64_t) (timeout_s * 1000);
  for (;;) {
    if (tc_now_ms() - last_reload > 100)
      reload_map();
    uint64_t prim[64];
    size_t np = 0;
    for (size_t k = 0; map && k < map->n_pools; k++)
      for (uint32_t g = 0; g < map->pools[k].pg_count; g++) {
        const struct tc_pg_info *pg = tc_map_pg(map, map->pools[k].id, g);
        bool seen = false;
        for (size_t j = 0; pg && j < np; j++)
          seen |= prim[j] == pg->primary;
        if (pg && pg->primary && !seen && np < 64)
          prim[np++] = pg->primary;
      }
    int failed = 0;
    for (size_t i = 0; i < np && !failed; i++) {
      struct op op;
      memset(&op, 0, sizeof op);
      op.req.hdr.opcode = TC_OP_SYNC;
      op.osd = prim[i];
      double saved = timeout_s;
      timeout_s = 2;
      int st = op_run(&op);
      timeout_s = saved;
      if (st < 0) {
        if (tc_now_ms() > deadline) {
          fprintf(stderr, "osd-client: SYNC on osd %" PRIu64 ": %s\n", op.osd, strerror(-st));
          return -1;
        }
        failed = 1;
      }
    }
    if (!failed)
      return 0;
    usleep(100000);
  }
}

/* ---- stream / verify ---- */

static FILE *logf_;
static uint64_t s_next, s_count, s_sectors, s_inode, s_acked, s_inflight, s_sync_every, s_since_sync;
static int s_failed;
static uint64_t s_acked_below;   /* every seq below this is acknowledged */
static uint8_t *s_ackmap;
static uint64_t s_hold_at;          /* 0: never hold */
static const char *s_release_file;

/* Holding: s_hold_at writes are acknowledged and the release file is absent. */
static int
stream_held(void)
{
  if (!s_hold_at || s_next < s_hold_at)
    return 0;
  if (access(s_release_file, F_OK) == 0) {
    s_hold_at = 0;
    return 0;
  }
  return 1;
}

static uint64_t
perm(uint64_t seq, uint64_t n)
{
  return (seq * 2654435761ull + 12345) % n;   /* a bijection when n is not a multiple of the prime */
}

static void stream_issue(void);

static void
stream_write_done(struct op *op)
{
  s_inflight--;
  if (op->status < 0) {
    fprintf(stderr, "osd-client: stream write %" PRIu64 " failed: %s\n", op->seq, strerror(-op->status));
    s_failed = 1;
  }
  else {
    fprintf(logf_, "w %" PRIu64 " %" PRIu64 "\n", op->seq, tc_osd_hdr_of(&op->req.hdr).rw.offset);
    s_ackmap[op->seq] = 1;
    while (s_acked_below < s_count && s_ackmap[s_acked_below])
      s_acked_below++;
    s_acked++;
    s_since_sync++;
  }
  free(op->iov.iov_base);
  free(op);
  stream_issue();
}

/* Issue writes up to the depth, but not past the next SYNC point: the
 * main loop syncs once they are all acknowledged (never from a callback). */
static void
stream_issue(void)
{
  uint64_t depth = 8;
  const char *d = getenv("OSD_CLIENT_IODEPTH");
  if (d)
    depth = strtoull(d, NULL, 10);
  while (!s_failed && s_inflight < depth && s_next < s_count && !stream_held() &&
         !(s_sync_every && s_since_sync + s_inflight >= s_sync_every)) {
    struct op *op = calloc(1, sizeof *op);
    uint8_t *buf = malloc(4096);
    if (!op || !buf) {
      fprintf(stderr, "osd-client: stream: out of memory\n");
      free(op);
      free(buf);
      s_failed = 1;
      return;
    }
    op->seq = s_next++;
    uint64_t off = perm(op->seq, s_sectors) * 4096;
    op->req.hdr = tc_osd_rw_hdr(TC_OP_WRITE, s_inode, off, 4096, 0);
    pattern(buf, 4096, s_inode, off, op->seq + 1);
    op->iov = (struct iovec) { buf, 4096 };
    op->req.iov = &op->iov;
    op->req.iovcnt = 1;
    op->cb = stream_write_done;
    s_inflight++;
    op_start(op);
  }
}

static void
stream_sync(void)
{
  if (sync_all() == 0) {
    fprintf(logf_, "s %" PRIu64 "\n", s_acked_below);
    fflush(logf_);
  }
  else
    s_failed = 1;
  s_since_sync = 0;
}

static int
cmd_stream(int argc, char **argv)
{
  s_inode = num(argc, argv, "--inode", NULL);
  s_sectors = num(argc, argv, "--sectors", "8192");
  s_count = num(argc, argv, "--count", NULL);
  s_sync_every = num(argc, argv, "--sync-every", "64");
  s_hold_at = num(argc, argv, "--hold-at", "0");
  s_release_file = arg(argc, argv, "--release-file", "");
  if (s_hold_at && !*s_release_file) {
    fprintf(stderr, "osd-client stream: --hold-at needs --release-file\n");
    return 2;
  }
  if (s_count > s_sectors || s_sectors % 2654435761ull == 0) {
    fprintf(stderr, "osd-client stream: --count must be <= --sectors\n");
    return 2;
  }
  logf_ = fopen(arg(argc, argv, "--log", "/dev/stdout"), "a");
  s_ackmap = calloc(s_count + 1, 1);
  if (!logf_ || !s_ackmap)
    return 1;
  setvbuf(logf_, NULL, _IOLBF, 0);
  stream_issue();
  while (!s_failed && (s_next < s_count || s_inflight)) {
    tc_evloop_run_once(loop, 100);
    if (!s_inflight && s_hold_at)
      stream_issue();   /* the release file may have appeared */
    if (!s_failed && !s_inflight && s_sync_every && s_since_sync >= s_sync_every) {
      stream_sync();
      stream_issue();
    }
  }
  if (!s_failed)
    stream_sync();
  fclose(logf_);
  free(s_ackmap);
  printf("stream: %" PRIu64 " writes acknowledged%s\n", s_acked, s_failed ? ", then a failure" : "");
  return s_failed;
}

static int
cmd_verify(int argc, char **argv)
{
  uint64_t inode = num(argc, argv, "--inode", NULL);
  FILE *f = fopen(arg(argc, argv, "--log", ""), "r");
  if (!f) {
    fprintf(stderr, "osd-client verify: cannot open the log\n");
    return 2;
  }
  char line[128];
  uint64_t *seqs = NULL, *offs = NULL, synced = 0;
  size_t n = 0, cap = 0;
  while (fgets(line, sizeof line, f)) {
    uint64_t a, b;
    if (sscanf(line, "w %" SCNu64 " %" SCNu64, &a, &b) == 2) {
      if (n == cap) {
        cap = cap ? cap * 2 : 1024;
        seqs = realloc(seqs, cap * sizeof *seqs);
        offs = realloc(offs, cap * sizeof *offs);
      }
      seqs[n] = a;
      offs[n] = b;
      n++;
    }
    else if (sscanf(line, "s %" SCNu64, &a) == 1 && a > synced)
      synced = a;
  }
  fclose(f);
  size_t checked = 0, bad = 0;
  uint8_t buf[4096], want[4096];
  for (size_t i = 0; i < n; i++) {
    if (seqs[i] >= synced)
      continue;
    struct op op;
    memset(&op, 0, sizeof op);
    op.req.hdr = tc_osd_rw_hdr(TC_OP_READ, inode, offs[i], 4096, 0);
    op.req.rbuf = buf;
    op.req.rbuf_len = sizeof buf;
    int st = op_run(&op);
    pattern(want, 4096, inode, offs[i], seqs[i] + 1);
    const uint8_t *got = op.req.reply_payload ? op.req.reply_payload : buf;
    if (st < 0 || memcmp(got, want, 4096)) {
      if (bad < 10)
        fprintf(stderr, "osd-client verify: write %" PRIu64 " at offset %" PRIu64 " is %s\n", seqs[i], offs[i],
                st < 0 ? strerror(-st) : "not there");
      bad++;
    }
    if (op.req.reply_payload && op.req.reply_payload != buf)
      free(op.req.reply_payload);
    checked++;
  }
  free(seqs);
  free(offs);
  printf("verify: %zu synced writes checked, %zu bad\n", checked, bad);
  return bad || !checked ? 1 : 0;
}

/* ---- scrub-all / wait-clean ---- */

static int
cmd_scrub_all(int argc, char **argv)
{
  uint64_t pool = num(argc, argv, "--pool", NULL);
  struct tc_osd_list_entry *objs = NULL;
  size_t n = 0;
  for (size_t i = 0; map && i < map->n_osds; i++) {
    struct op op;
    memset(&op, 0, sizeof op);
    op.req.hdr = tc_osd_list_hdr(TC_INODE(pool, 0), TC_INODE(pool + 1, 0) - 1, 0, 0);
    op.osd = map->osds[i].id;
    int st = op_run(&op);
    if (st < 0) {
      fprintf(stderr, "osd-client: SEC_LIST on osd %" PRIu64 ": %s\n", op.osd, strerror(-st));
      free(objs);
      return 1;
    }
    size_t k = op.req.reply.len / sizeof *objs;
    objs = realloc(objs, (n + k + 1) * sizeof *objs);
    memcpy(objs + n, op.req.reply_payload, k * sizeof *objs);
    n += k;
    free(op.req.reply_payload);
  }
  uint64_t total_bad = 0, total_rep = 0, count = 0;
  for (size_t i = 0; i < n; i++) {
    bool dup = false;
    for (size_t j = 0; j < i && !dup; j++)
      dup = objs[j].inode == objs[i].inode && objs[j].offset == objs[i].offset;
    if (dup)
      continue;
    struct op op;
    memset(&op, 0, sizeof op);
    op.req.hdr = tc_osd_obj_hdr(TC_OP_SCRUB, objs[i].inode, objs[i].offset);
    int st = op_run(&op);
    if (st < 0) {
      fprintf(stderr, "osd-client: SCRUB inode %#" PRIx64 " offset %" PRIu64 ": %s\n", objs[i].inode,
              objs[i].offset, strerror(-st));
      free(objs);
      return 1;
    }
    count++;
    total_bad += (uint64_t) st;
    total_rep += tc_osd_hdr_of(&op.req.reply).scrub.repaired;
  }
  free(objs);
  printf("scrub objects=%" PRIu64 " bad=%" PRIu64 " repaired=%" PRIu64 "\n", count, total_bad, total_rep);
  return 0;
}

static int
cmd_wait_clean(int argc, char **argv)
{
  uint64_t pool = num(argc, argv, "--pool", NULL);
  uint64_t deadline = tc_now_ms() + (uint64_t) (timeout_s * 1000);
  for (;;) {
    reload_map();
    const struct tc_pool_info *p = map ? tc_map_pool(map, pool) : NULL;
    uint32_t clean = 0, total = p ? p->pg_count : 0;
    for (size_t i = 0; p && i < map->n_osds; i++) {
      struct op op;
      memset(&op, 0, sizeof op);
      op.req.hdr.opcode = TC_OP_DESCRIBE;
      op.osd = map->osds[i].id;
      double saved = timeout_s;
      timeout_s = 1;
      int st = op_run(&op);
      timeout_s = saved;
      if (st < 0 || !op.req.reply_payload)
        continue;
      json_tokener *tok = json_tokener_new();
      json_object *j = tok ? json_tokener_parse_ex(tok, (const char *) op.req.reply_payload, (int) op.req.reply.len)
                           : NULL, *pgs;
      if (tok)
        json_tokener_free(tok);
      free(op.req.reply_payload);
      if (j && json_object_object_get_ex(j, "pgs", &pgs))
        for (size_t k = 0; k < json_object_array_length(pgs); k++) {
          json_object *e = json_object_array_get_idx(pgs, k), *f, *c;
          if (json_object_object_get_ex(e, "pool", &f) && (uint64_t) json_object_get_int64(f) == pool &&
              json_object_object_get_ex(e, "clean", &c) && json_object_get_boolean(c))
            clean++;
        }
      json_object_put(j);
    }
    if (total && clean == total) {
      printf("pool %" PRIu64 ": %" PRIu32 " of %" PRIu32 " PGs clean\n", pool, clean, total);
      return 0;
    }
    if (tc_now_ms() > deadline) {
      fprintf(stderr, "osd-client: pool %" PRIu64 ": %" PRIu32 " of %" PRIu32 " PGs clean after %.0f s\n", pool, clean,
              total, timeout_s);
      return 1;
    }
    usleep(200000);
  }
}

static int
cmd_describe(int argc, char **argv)
{
  struct op op;
  memset(&op, 0, sizeof op);
  op.req.hdr.opcode = TC_OP_DESCRIBE;
  op.osd = num(argc, argv, "--osd", NULL);
  int st = op_run(&op);
  if (st < 0 || !op.req.reply_payload) {
    fprintf(stderr, "osd-client: DESCRIBE of OSD %" PRIu64 ": %s\n", op.osd, st < 0 ? strerror(-st) : "no answer");
    return 1;
  }
  printf("%.*s\n", (int) op.req.reply.len, (const char *) op.req.reply_payload);
  free(op.req.reply_payload);
  return 0;
}

/* ---- bench ---- */

static uint64_t b_ops, b_lat_sum, b_end, b_size, b_bs, b_inode, b_seq_pos;
static int b_write, b_rand, b_inflight, b_failed;
static uint64_t b_rng = 88172645463325252ull;

static void bench_issue(struct op *op);

static void
bench_done(struct op *op)
{
  if (op->status < 0) {
    fprintf(stderr, "osd-client bench: %s\n", strerror(-op->status));
    b_failed = 1;
  }
  b_ops++;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now_us = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
  b_lat_sum += now_us - op->t0;
  if (op->req.reply_payload && op->req.reply_payload != op->req.rbuf)
    free(op->req.reply_payload);
  if (b_failed || tc_now_ms() >= b_end) {
    b_inflight--;
    return;
  }
  bench_issue(op);
}

static void
bench_issue(struct op *op)
{
  uint64_t off;
  if (b_rand) {
    b_rng ^= b_rng << 13;
    b_rng ^= b_rng >> 7;
    b_rng ^= b_rng << 17;
    off = b_rng % (b_size / b_bs) * b_bs;
  }
  else {
    off = b_seq_pos;
    b_seq_pos = (b_seq_pos + b_bs) % b_size;
  }
  op->req.hdr = tc_osd_rw_hdr(b_write ? TC_OP_WRITE : TC_OP_READ, b_inode, off, b_bs, 0);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  op->t0 = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
  op_start(op);
}

static int
cmd_bench(int argc, char **argv)
{
  b_inode = num(argc, argv, "--inode", NULL);
  const char *rw = arg(argc, argv, "--rw", "randwrite");
  b_bs = num(argc, argv, "--bs", "4k");
  int depth = (int) num(argc, argv, "--iodepth", "1");
  double secs = (double) num(argc, argv, "--seconds", "10");
  b_size = num(argc, argv, "--size", "256M");
  b_write = strstr(rw, "write") != NULL;
  b_rand = strncmp(rw, "rand", 4) == 0;
  uint32_t bs = block_size(b_inode);
  /* a 1 MiB "sequential" op is one request per object, issued together */
  uint64_t per_op = b_bs > bs ? bs : b_bs;
  int sub = (int) (b_bs / per_op);
  b_bs = per_op;
  depth *= sub;
  struct op *ops = calloc((size_t) depth, sizeof *ops);
  uint8_t *wbuf = malloc(per_op);
  uint8_t **rbufs = calloc((size_t) depth, sizeof *rbufs);
  pattern(wbuf, per_op, b_inode, 0, 7);
  b_end = tc_now_ms() + (uint64_t) (secs * 1000);
  uint64_t t0 = tc_now_ms();
  for (int i = 0; i < depth; i++) {
    ops[i].iov = (struct iovec) { wbuf, per_op };
    if (b_write) {
      ops[i].req.iov = &ops[i].iov;
      ops[i].req.iovcnt = 1;
    }
    else {
      rbufs[i] = malloc(per_op);
      ops[i].req.rbuf = rbufs[i];
      ops[i].req.rbuf_len = per_op;
    }
    ops[i].cb = bench_done;
    b_inflight++;
    bench_issue(&ops[i]);
  }
  while (b_inflight)
    tc_evloop_run_once(loop, 100);
  double el = (double) (tc_now_ms() - t0) / 1000.0;
  double iops = (double) b_ops / el, mbs = (double) b_ops * (double) per_op / el / 1e6;
  printf("bench rw=%s bs=%" PRIu64 " iodepth=%d ops=%" PRIu64 " seconds=%.1f iops=%.0f MB/s=%.1f lat_us=%.0f%s\n", rw,
         per_op * (uint64_t) sub, depth / sub, b_ops / (uint64_t) sub, el, iops / sub, mbs,
         b_ops ? (double) b_lat_sum / (double) b_ops : 0, b_failed ? " FAILED" : "");
  for (int i = 0; i < depth; i++)
    free(rbufs[i]);
  free(rbufs);
  free(ops);
  free(wbuf);
  return b_failed;
}

int
main(int argc, char **argv)
{
  signal(SIGPIPE, SIG_IGN);
  if (tc_crypto_init() < 0 || !(cfg = tc_config_load(&argc, argv))) {
    fprintf(stderr, "osd-client: %s\n", tc_last_error());
    return 2;
  }
  tc_log_set_level(TC_LOG_ERROR);
  if (argc < 2) {
    fprintf(stderr, "usage: osd-client [options] raw|write|read|delete|sync|stream|verify|scrub-all|wait-clean|bench ...\n");
    tc_config_free(cfg);
    return 2;
  }
  const char *t = arg(argc - 1, argv + 1, "--timeout", NULL);
  if (t)
    timeout_s = atof(t);
  loop = tc_evloop_new();
  msgr = loop ? tc_msgr_new_from_config(loop, cfg, 0) : NULL;
  kv = tc_kv_new_from_config(cfg);
  if (!loop || !msgr || !kv) {
    fprintf(stderr, "osd-client: %s\n", tc_last_error());
    return 2;
  }
  const char *cmd = argv[1];
  int ac = argc - 1;
  char **av = argv + 1;
  int rc;
  if (strcmp(cmd, "raw") && reload_map() < 0) {
    fprintf(stderr, "osd-client: reading the map from the KV: %s\n", tc_last_error());
    rc = 2;
  }
  else if (!strcmp(cmd, "raw"))
    rc = cmd_raw(ac, av);
  else if (!strcmp(cmd, "write"))
    rc = cmd_rw(ac, av, TC_OP_WRITE);
  else if (!strcmp(cmd, "read"))
    rc = cmd_rw(ac, av, TC_OP_READ);
  else if (!strcmp(cmd, "delete")) {
    uint64_t inode = num(ac, av, "--inode", NULL), off = num(ac, av, "--offset", "0"), len = num(ac, av, "--len", NULL);
    struct op op;
    memset(&op, 0, sizeof op);
    op.req.hdr = tc_osd_rw_hdr(TC_OP_DELETE, inode, off, (uint32_t) len, 0);
    int st = op_run(&op);
    printf("DELETE status=%d\n", st);
    rc = st < 0;
  }
  else if (!strcmp(cmd, "sync"))
    rc = sync_all() < 0;
  else if (!strcmp(cmd, "stream"))
    rc = cmd_stream(ac, av);
  else if (!strcmp(cmd, "verify"))
    rc = cmd_verify(ac, av);
  else if (!strcmp(cmd, "scrub-all"))
    rc = cmd_scrub_all(ac, av);
  else if (!strcmp(cmd, "wait-clean"))
    rc = cmd_wait_clean(ac, av);
  else if (!strcmp(cmd, "bench"))
    rc = cmd_bench(ac, av);
  else if (!strcmp(cmd, "describe"))
    rc = cmd_describe(ac, av);
  else {
    fprintf(stderr, "osd-client: unknown command '%s'\n", cmd);
    rc = 2;
  }
  for (int i = nconns - 1; i >= 0; i--)
    tc_msgr_close(conns[i].c);
  for (int i = 0; i < 20; i++)
    tc_evloop_run_once(loop, 10);
  tc_msgr_free(msgr);
  tc_evloop_free(loop);
  if (map)
    tc_map_unref(map);
  tc_kv_free(kv);
  tc_config_free(cfg);
  return rc;
}
