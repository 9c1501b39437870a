/* The messenger in one process: a server and a client endpoint on one
 * event loop, joined through an in-loop TCP relay that can flip a bit at
 * any byte of either direction, cut the stream, or drop, duplicate or swap
 * a range of bytes (one record).
 *
 * Asserts:
 *  - every mode runs with and without keys and echoes data intact;
 *  - a keyed handshake with one bit flipped at ANY byte position, in either
 *    direction, in each mode, never completes a request: the connection
 *    closes (a flipped length field stalls it until handshake_timeout);
 *  - a frame with one bit flipped at any byte position closes the
 *    connection in every mode with an integrity check (keyed none/payload/
 *    gcm, clear payload); mode none catches header flips (payload bytes are
 *    not checked in mode none, by definition: the test shows that too);
 *  - a replayed, dropped or reordered record closes a keyed connection;
 *    a truncated frame closes any connection; nothing crashes;
 *  - key update: with a 2^2-record interval 200 echoes succeed and the
 *    counters show the ratchet ran;
 *  - back-pressure: a client over msgr_max_inflight_ops / _bytes keeps the
 *    rest waiting (no failure), a server over its cap stops reading; all
 *    complete once the server answers;
 *  - a stalled handshake is closed after handshake_timeout;
 *  - a client's call timeout fails requests a silent server holds. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "certs.h"
#include "crypto.h"
#include "error.h"
#include "evloop.h"
#include "log.h"
#include "msgr.h"
#include "msgr_int.h"
#include "tap.h"
#include <pthread.h>

static struct tc_evloop *loop;
static char dir[64];
static char osd_crt[128], osd_key[128], cli_crt[128], cli_key[128], ca_cli[128];

/* ---------------- relay ---------------- */

enum { OP_NONE, OP_DROP, OP_DUP, OP_SWAP };
struct relay {
  int lfd, port;
  int fd[2];              /* 0: client side, 1: server side */
  uint64_t count[2];      /* bytes received per direction (0: c2s, 1: s2c) */
  long flip_at[2];        /* flip one bit at this offset (-1: none) */
  long cut_at[2];         /* close everything when this offset is reached */
  int op;                 /* on c2s: [op_start, op_start + op_len) */
  long op_start, op_len;
  uint8_t hold[65536];
  size_t held;
} R;

static void relay_close(void)
{
  for (int i = 0; i < 2; i++)
    if (R.fd[i] >= 0) {
      tc_evloop_del_fd(loop, R.fd[i]);
      close(R.fd[i]);
      R.fd[i] = -1;
    }
}

static void
relay_send(int to, const uint8_t *p, size_t n)
{
  while (n) {
    ssize_t w = write(R.fd[to], p, n);
    if (w < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      return;
    }
    p += w;
    n -= (size_t) w;
  }
}

/* c2s with a held range op: bytes before op_start go through; the range
 * (2 x op_len for a swap) is held and emitted transformed. */
static void
relay_c2s_op(const uint8_t *p, size_t n)
{
  long need = R.op == OP_SWAP ? 2 * R.op_len : R.op_len;
  uint64_t base = R.count[0] - n;  /* offset of p[0] */
  for (size_t i = 0; i < n; i++) {
    uint64_t off = base + i;
    if ((long) off < R.op_start || (long) off >= R.op_start + need) {
      relay_send(1, p + i, 1);
      continue;
    }
    R.hold[R.held++] = p[i];
    if ((long) R.held == need) {
      if (R.op == OP_DUP) {
        relay_send(1, R.hold, R.held);
        relay_send(1, R.hold, R.held);
      }
      else if (R.op == OP_SWAP) {
        relay_send(1, R.hold + R.op_len, R.op_len);
        relay_send(1, R.hold, R.op_len);
      }
      /* OP_DROP: nothing */
    }
  }
}

static void
relay_event(struct tc_evloop *l, int fd, uint32_t ev, void *arg)
{
  int from = (int) (intptr_t) arg, to = !from;
  uint8_t buf[65536];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n <= 0) {
    if (n < 0 && errno == EAGAIN)
      return;
    relay_close();
    return;
  }
  uint64_t start = R.count[from];
  R.count[from] += (uint64_t) n;
  if (R.flip_at[from] >= 0 && (uint64_t) R.flip_at[from] >= start && (uint64_t) R.flip_at[from] < R.count[from])
    buf[R.flip_at[from] - start] ^= (uint8_t) (1u << (R.flip_at[from] % 8));
  size_t fwd = (size_t) n;
  int cut = 0;
  if (R.cut_at[from] >= 0 && R.count[from] >= (uint64_t) R.cut_at[from]) {
    fwd = (size_t) (R.cut_at[from] - (long) start);
    if ((long) start > R.cut_at[from])
      fwd = 0;
    cut = 1;
  }
  if (from == 0 && R.op != OP_NONE && !cut)
    relay_c2s_op(buf, fwd);
  else
    relay_send(to, buf, fwd);
  if (cut)
    relay_close();
}

static int server_port;

static void
relay_accept(struct tc_evloop *l, int fd, uint32_t ev, void *arg)
{
  int a = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (a < 0)
    return;
  if (R.fd[0] >= 0) {   /* one pair at a time */
    close(a);
    return;
  }
  int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(server_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  if (connect(b, (struct sockaddr *) &sa, sizeof sa) < 0) {
    close(a);
    close(b);
    return;
  }
  fcntl(b, F_SETFL, O_NONBLOCK);
  R.fd[0] = a;
  R.fd[1] = b;
  R.count[0] = R.count[1] = 0;
  R.held = 0;
  tc_evloop_add_fd(loop, a, EPOLLIN, relay_event, (void *) 0);
  tc_evloop_add_fd(loop, b, EPOLLIN, relay_event, (void *) 1);
}

static void
relay_init(void)
{
  R.fd[0] = R.fd[1] = -1;
  R.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t sl = sizeof sa;
  if (bind(R.lfd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(R.lfd, 16) < 0)
    abort();
  getsockname(R.lfd, (struct sockaddr *) &sa, &sl);
  R.port = ntohs(sa.sin_port);
  tc_evloop_add_fd(loop, R.lfd, EPOLLIN, relay_accept, NULL);
}

static void
relay_plan(long flip_c2s, long flip_s2c, long cut_c2s, int op, long op_start, long op_len)
{
  R.flip_at[0] = flip_c2s;
  R.flip_at[1] = flip_s2c;
  R.cut_at[0] = cut_c2s;
  R.cut_at[1] = -1;
  R.op = op;
  R.op_start = op_start;
  R.op_len = op_len;
}

/* ---------------- endpoints ---------------- */

/* Server: echo, or hold requests until released (back-pressure tests). */
struct held { struct tc_msgr_conn *c; struct tc_frame_hdr h; void *p; };
static struct held held[4096];
static int nheld, hold_requests, hold_limit = 4096;

static void
echo_now(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, void *payload)
{
  struct tc_frame_hdr r = *hdr;
  r.status = 0;
  struct iovec iov = { payload, hdr->len };
  tc_msgr_reply(c, &r, &iov, payload ? 1 : 0, TC_MSGR_INPLACE, free, payload);
}

static int nrequests, own_seen;

static void
srv_request(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, void *payload, void *arg)
{
  nrequests++;
  if (hdr->flags & TC_FRAME_OWN_KEY)
    own_seen++;
  if (hold_requests && nheld < hold_limit) {
    held[nheld++] = (struct held) { c, *hdr, payload };
    return;
  }
  echo_now(c, hdr, payload);
}

static void
release_held(void)
{
  hold_requests = 0;
  for (int i = 0; i < nheld; i++)
    echo_now(held[i].c, &held[i].h, held[i].p);
  nheld = 0;
}

/* Handshake timeout of the endpoints made next: 400 ms keeps the tests
 * whose flips stall a handshake short; the clean runs of section 1 take
 * 10 s, as a handshake on a heavily loaded host can take over 400 ms. */
static int hs_ms = 400;

static struct tc_msgr *
server_new(int mode, int keyed, int rekey_log2, uint32_t max_ops)
{
  struct tc_msgr_opts o = { .mode = mode, .force = TC_MODE_NONE, .handshake_timeout_ms = hs_ms,
                            .rekey_log2 = rekey_log2, .max_inflight_ops = max_ops,
                            .on_request = srv_request };
  if (keyed) {
    o.cert = osd_crt;
    o.pkey = osd_key;
    o.client_ca = ca_cli;
  }
  struct tc_msgr *m = tc_msgr_new(loop, &o);
  if (!m || tc_msgr_listen(m, "127.0.0.1", 0) < 0) {
    fprintf(stderr, "server: %s\n", tc_last_error());
    exit(1);
  }
  return m;
}

static struct tc_msgr *
client_new(int mode, int keyed, uint32_t max_ops, uint64_t max_bytes)
{
  struct tc_msgr_opts o = { .mode = mode, .force = TC_MODE_UNSET, .handshake_timeout_ms = hs_ms,
                            .max_inflight_ops = max_ops, .max_inflight_bytes = max_bytes };
  if (keyed) {
    o.cert = cli_crt;
    o.pkey = cli_key;
    o.osd_ca = osd_crt;
  }
  struct tc_msgr *m = tc_msgr_new(loop, &o);
  if (!m) {
    fprintf(stderr, "client: %s\n", tc_last_error());
    exit(1);
  }
  return m;
}

/* ---------------- one client run ---------------- */

#define MAXREQ 256
struct run {
  struct tc_msgr_conn *conn;
  int up, down, ok, bad, failed, n;
  struct tc_msgr_req req[MAXREQ];
  uint8_t *data[MAXREQ], *expect[MAXREQ];
  struct iovec iov[MAXREQ];
};

static void
run_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct run *r = arg;
  int i = (int) (req - r->req);
  if (err)
    r->failed++;
  else if (req->reply.len == r->iov[i].iov_len &&
           (!req->reply.len || !memcmp(req->reply_payload, r->expect[i], req->reply.len)))
    r->ok++;
  else
    r->bad++;
  if (!err && req->reply_payload && req->reply_payload != req->rbuf)
    free(req->reply_payload);
}

static void
run_conn(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  struct run *r = arg;
  if (event == TC_MSGR_UP)
    r->up = 1;
  else {
    r->down = 1;
    r->conn = NULL;
  }
}

/* With mixed_sizes set, request i carries mixed_size(size, i) bytes:
 * large and small frames (around the reader's direct-read threshold, and
 * empty ones) interleave in both directions. */
static int mixed_sizes;
/* The requests' flags and opcode (section 11). */
static unsigned run_flags;
static uint16_t run_opcode = 7;

static size_t
mixed_size(size_t size, int i)
{
  static const size_t sizes[] = { 0, 1, 16383, 16384, 16385, 4096, 65536 + 3, 80, 200000 };
  return i % 10 == 9 ? size : sizes[i % 10];
}

/* Connect to port, send n requests of size bytes, run until all are
 * answered or failed (or timeout_ms), then close. */
static void
run_client(struct tc_msgr *m, int port, int n, size_t size, int timeout_ms, struct run *r)
{
  memset(r, 0, sizeof *r);
  r->n = n;
  r->conn = tc_msgr_connect(m, "127.0.0.1", port, run_conn, r);
  if (!r->conn) {
    r->down = 1;
    r->failed = n;
    return;
  }
  size_t size0 = size;
  for (int i = 0; i < n; i++) {
    size = mixed_sizes ? mixed_size(size0, i) : size0;
    r->data[i] = malloc(size ? size : 1);
    r->expect[i] = malloc(size ? size : 1);
    for (size_t k = 0; k < size; k++)
      r->expect[i][k] = r->data[i][k] = (uint8_t) (k * 13 + i * 7 + 1);
    r->iov[i] = (struct iovec) { r->data[i], size };
    r->req[i].hdr.opcode = run_opcode;
    r->req[i].hdr.inode = 0x1234;
    r->req[i].flags = run_flags;
    r->req[i].iov = &r->iov[i];
    r->req[i].iovcnt = 1;
    r->req[i].done = run_done;
    r->req[i].arg = r;
    tc_msgr_call(r->conn, &r->req[i]);
  }
  uint64_t end = tc_now_ms() + timeout_ms;
  while ((n ? r->ok + r->bad + r->failed < n : !r->up && !r->down) && tc_now_ms() < end)
    tc_evloop_run_once(loop, 20);
  if (r->conn)
    tc_msgr_close(r->conn);
  while (!r->down)
    tc_evloop_run_once(loop, 20);
  relay_close();
  for (int i = 0; i < 3; i++)   /* let the server side see the close */
    tc_evloop_run_once(loop, 0);
  for (int i = 0; i < n; i++) {
    free(r->data[i]);
    free(r->expect[i]);
  }
}


/* A raw client: a clear (no keys) handshake by hand, then a writer thread
 * that blasts pre-sealed frames, so the server finds far more than one
 * round of reads waiting in a single wake-up. */
#define BLAST_FRAMES 48
#define BLAST_SIZE (192 * 1024)
struct blast { int fd; uint8_t *buf; size_t len; };

static void *
blast_writer(void *arg)
{
  struct blast *b = arg;
  size_t off = 0;
  while (off < b->len) {
    ssize_t w = write(b->fd, b->buf + off, b->len - off);
    if (w <= 0)
      break;
    off += (size_t) w;
  }
  return NULL;
}

static int
blast_test(int port)
{
  struct tc_hs_cfg cfg = { .mode = TC_MODE_PAYLOAD, .force = TC_MODE_UNSET };
  struct tc_hs hs;
  struct tc_buf out = { 0 }, in = { 0 };
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || tc_hs_init(&hs, &cfg, 0) < 0 || tc_hs_start(&hs, &out) < 0 ||
      write(fd, out.p, out.len) != (ssize_t) out.len)
    return -1;
  fcntl(fd, F_SETFL, O_NONBLOCK);
  int r = 0;
  uint64_t end = tc_now_ms() + 3000;
  while (r == 0 && tc_now_ms() < end) {
    tc_evloop_run_once(loop, 10);
    uint8_t b[512];
    ssize_t n = read(fd, b, sizeof b);
    if (n > 0) {
      tc_buf_append(&in, b, (size_t) n);
      size_t used;
      r = tc_hs_feed(&hs, in.p, in.len, &used, &out);
      tc_buf_consume(&in, used);
    }
  }
  if (r != 1)
    return -1;
  struct tc_frame_ctx f = { .mode = hs.mode, .max_frame = 1 << 24 };
  tc_hs_clear(&hs);
  size_t hw = tc_frame_hdr_wire(&f);
  struct blast b = { fd, malloc(BLAST_FRAMES * (hw + BLAST_SIZE)), 0 };
  uint8_t *payload = calloc(1, BLAST_SIZE);
  for (int i = 0; i < BLAST_FRAMES; i++) {
    struct tc_frame_hdr h = { .opcode = 1 };
    struct iovec iov = { payload, BLAST_SIZE };
    tc_frame_seal_hdr(&f, &h, &iov, 1, b.buf + b.len);
    memcpy(b.buf + b.len + hw, payload, BLAST_SIZE);
    b.len += hw + BLAST_SIZE;
  }
  fcntl(fd, F_SETFL, 0);
  nrequests = 0;
  pthread_t t;
  pthread_create(&t, NULL, blast_writer, &b);
  end = tc_now_ms() + 5000;
  while (nrequests < BLAST_FRAMES && tc_now_ms() < end)
    tc_evloop_run_once(loop, 10);
  shutdown(fd, SHUT_RDWR);
  pthread_join(t, NULL);
  close(fd);
  for (int i = 0; i < 5; i++)
    tc_evloop_run_once(loop, 1);
  free(b.buf);
  free(payload);
  tc_buf_free(&out);
  tc_buf_free(&in);
  return nrequests;
}

/* ---------------- own keys: a server that passes requests on ---------------- */

/* Server A keeps opcode 9 sealed and sends every request on to server B
 * (over fwd_conn), answering with B's answer: as an OSD primary passes a
 * WRITE on as SEC_WRITEs. */
static struct tc_msgr_conn *fwd_conn;
static int fwd_taken;

struct fwd {
  struct tc_msgr_conn *c;
  struct tc_frame_hdr h;
  void *payload;
  struct iovec iov;
  struct tc_msgr_req req;
};

static int
keep_nine(const struct tc_frame_hdr *h, void *arg)
{
  (void) arg;
  return h->opcode == 9;
}

static void
fwd_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct fwd *f = arg;
  struct tc_frame_hdr r = f->h;
  r.status = err ? err : req->reply.status;
  void *p = err ? NULL : req->reply_payload;
  struct iovec iov = { p, p ? req->reply.len : 0 };
  tc_msgr_reply(f->c, &r, &iov, p ? 1 : 0, TC_MSGR_INPLACE, free, p);
  free(f->payload);
  free(f);
}

static void
fwd_request(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, void *payload, void *arg)
{
  (void) arg;
  struct tc_msgr_sealed *s = tc_msgr_take_sealed(c);
  fwd_taken += s != NULL;
  struct fwd *f = calloc(1, sizeof *f);
  f->c = c;
  f->h = *hdr;
  f->payload = payload;
  f->iov = (struct iovec) { payload, hdr->len };
  f->req = (struct tc_msgr_req) { .hdr.opcode = 7, .iov = &f->iov, .iovcnt = payload ? 1 : 0, .sealed = s,
                                  .done = fwd_done, .arg = f };
  if (tc_msgr_call(fwd_conn, &f->req) < 0)
    fwd_done(&f->req, -ENOTCONN, f);
  tc_msgr_sealed_put(s);   /* the messenger holds its own */
}

static void
fwd_conn_cb(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  (void) c, (void) err, (void) arg;
  if (event == TC_MSGR_DOWN)
    fwd_conn = NULL;
}

/* ---------------- tests ---------------- */

static void
make_certs(void)
{
  snprintf(dir, sizeof dir, "/tmp/tromcho-test-msgr.XXXXXX");
  if (!mkdtemp(dir))
    abort();
  char ca_key[128];
  snprintf(osd_crt, sizeof osd_crt, "%s/osd_ca.crt", dir);
  snprintf(osd_key, sizeof osd_key, "%s/osd_ca.key", dir);
  snprintf(ca_cli, sizeof ca_cli, "%s/client_ca.crt", dir);
  snprintf(ca_key, sizeof ca_key, "%s/client_ca.key", dir);
  snprintf(cli_crt, sizeof cli_crt, "%s/user.crt", dir);
  snprintf(cli_key, sizeof cli_key, "%s/user.key", dir);
  /* Ed25519: fixed-size signatures, so handshake lengths are the same on
   * every run and frame offsets can be computed. */
  struct tc_cert_spec ca = { .cn = "test osd_ca", .is_ca = 1, .server = 1, .client = 1, .days = 2 };
  struct tc_cert_spec cca = { .cn = "test client_ca", .is_ca = 1, .days = 2 };
  struct tc_cert_spec user = { .cn = "tester", .client = 1, .days = 2 };
  if (tc_cert_issue(&ca, TC_KEY_ED25519, NULL, NULL, osd_crt, osd_key) < 0 ||
      tc_cert_issue(&cca, TC_KEY_ED25519, NULL, NULL, ca_cli, ca_key) < 0 ||
      tc_cert_issue(&user, TC_KEY_ED25519, ca_cli, ca_key, cli_crt, cli_key) < 0) {
    fprintf(stderr, "certs: %s\n", tc_last_error());
    exit(1);
  }
}

static const char *
mname(int mode, int keyed)
{
  static char b[32];
  snprintf(b, sizeof b, "%s/%s", tc_msgr_mode_name(mode), keyed ? "keyed" : "clear");
  return b;
}

#define PAYLOAD 200

int
main(void)
{
  tc_log_open("test-msgr", 0);
  tc_log_set_level(getenv("TEST_MSGR_VERBOSE") ? TC_LOG_DEBUG : TC_LOG_ERROR);
  if (tc_crypto_init() < 0 || !(loop = tc_evloop_new()))
    return 1;
  uint64_t T0 = tc_now_ms();
  make_certs();
  relay_init();
  relay_plan(-1, -1, -1, OP_NONE, 0, 0);

  /* 1. Clean runs in every mode, and the stream lengths for the offsets. */
  long hs_c2s[2], hs_s2c[2];   /* handshake bytes per keyed-ness */
  long frame_c2s[3][2];        /* one request frame's bytes */
  hs_ms = 10000;
  for (int keyed = 0; keyed < 2; keyed++)
    for (int mode = 0; mode < 3; mode++) {
      if (!keyed && mode == TC_MODE_GCM)
        continue;
      struct tc_msgr *s = server_new(mode, keyed, 0, 0);
      struct tc_msgr *c = client_new(mode, keyed, 0, 0);
      server_port = tc_msgr_listen_port(s);
      struct run r;
      run_client(c, R.port, 0, 0, 500, &r);   /* handshake only */
      hs_c2s[keyed] = (long) R.count[0];
      hs_s2c[keyed] = (long) R.count[1];
      CHECK(r.up, "%s: handshake completes", mname(mode, keyed));
      run_client(c, R.port, 1, PAYLOAD, 2000, &r);
      frame_c2s[mode][keyed] = (long) R.count[0] - hs_c2s[keyed];
      CHECK(r.ok == 1, "%s: echo intact (ok %d bad %d failed %d)", mname(mode, keyed), r.ok, r.bad, r.failed);
      run_client(c, R.port, 50, 70000, 5000, &r);
      CHECK(r.ok == 50, "%s: 50 x 70000-byte echoes (ok %d bad %d failed %d)", mname(mode, keyed), r.ok, r.bad,
            r.failed);
      /* Many big frames at once: the reader must finish a payload that its
       * last read round completed (a hang here once). */
      run_client(c, R.port, 64, 262144, 60000, &r);   /* a deadline, not a speed check */
      CHECK(r.ok == 64, "%s: 64 x 256 KiB echoes in flight at once (ok %d bad %d failed %d)", mname(mode, keyed),
            r.ok, r.bad, r.failed);
      /* Large and small (and empty) frames interleaved, all in flight: the
       * reader switches between reading up to the next header only (while
       * large payloads flow) and filling its buffer. */
      mixed_sizes = 1;
      run_client(c, R.port, 200, 300000, 60000, &r);
      mixed_sizes = 0;
      CHECK(r.ok == 200, "%s: 200 echoes of 0 B to 293 KiB mixed, in flight at once (ok %d bad %d failed %d)",
            mname(mode, keyed), r.ok, r.bad, r.failed);
      tc_msgr_free(c);
      tc_msgr_free(s);
    }
  hs_ms = 400;
  printf("# handshake bytes: clear c2s %ld s2c %ld, keyed c2s %ld s2c %ld\n", hs_c2s[0], hs_s2c[0],
         hs_c2s[1], hs_s2c[1]);
  CHECK(frame_c2s[TC_MODE_GCM][1] == 64 + 16 + PAYLOAD + 16, "gcm frame = sealed header + sealed payload (%ld)",
        frame_c2s[TC_MODE_GCM][1]);
  CHECK(frame_c2s[TC_MODE_PAYLOAD][1] == 64 + 16 + PAYLOAD, "keyed payload frame = sealed header + payload");
  CHECK(frame_c2s[TC_MODE_PAYLOAD][0] == 64 + PAYLOAD, "clear payload frame = header + payload");

  printf("# %.1f s: clean runs\n", (tc_now_ms() - T0) / 1000.0);
  /* 2. Keyed handshake: one bit flipped at every byte, both directions. */
  for (int mode = 0; mode < 3; mode++) {
    struct tc_msgr *s = server_new(mode, 1, 0, 0);
    struct tc_msgr *c = client_new(mode, 1, 0, 0);
    server_port = tc_msgr_listen_port(s);
    int survived = 0, tried = 0;
    for (int dir_ = 0; dir_ < 2; dir_++) {
      long len = dir_ == 0 ? hs_c2s[1] : hs_s2c[1];
      for (long pos = 0; pos < len; pos++) {
        relay_plan(dir_ == 0 ? pos : -1, dir_ == 1 ? pos : -1, -1, OP_NONE, 0, 0);
        struct run r;
        run_client(c, R.port, 1, PAYLOAD, 3000, &r);
        tried++;
        if (r.ok || r.bad) {
          survived++;
          fprintf(stderr, "FAIL: %s handshake flip %s byte %ld: request %s\n", tc_msgr_mode_name(mode),
                  dir_ ? "s2c" : "c2s", pos, r.ok ? "succeeded" : "delivered altered");
        }
      }
    }
    CHECK(survived == 0, "mode %s: %d of %d handshake bit flips went unnoticed", tc_msgr_mode_name(mode),
          survived, tried);
    tc_msgr_free(c);
    tc_msgr_free(s);
  }
  relay_plan(-1, -1, -1, OP_NONE, 0, 0);

  printf("# %.1f s: handshake flips\n", (tc_now_ms() - T0) / 1000.0);
  /* 3. One bit flipped at every byte of a request frame and of a reply. */
  for (int keyed = 0; keyed < 2; keyed++)
    for (int mode = 0; mode < 3; mode++) {
      if (!keyed && mode == TC_MODE_GCM)
        continue;
      struct tc_msgr *s = server_new(mode, keyed, 0, 0);
      struct tc_msgr *c = client_new(mode, keyed, 0, 0);
      server_port = tc_msgr_listen_port(s);
      long flen = frame_c2s[mode][keyed];
      int caught = 0, missed_hdr = 0, missed_payload = 0;
      for (int d = 0; d < 2; d++)
        for (long i = 0; i < flen; i++) {
          long pos = (d == 0 ? hs_c2s[keyed] : hs_s2c[keyed]) + i;
          relay_plan(d == 0 ? pos : -1, d == 1 ? pos : -1, -1, OP_NONE, 0, 0);
          struct run r;
          run_client(c, R.port, 1, PAYLOAD, 3000, &r);
          if (r.failed && !r.ok && !r.bad)
            caught++;
          else if (i < 64)
            missed_hdr++;
          else
            missed_payload++;
        }
      if (mode == TC_MODE_NONE) {
        CHECK(missed_hdr == 0, "%s: every header flip closes (%d missed)", mname(mode, keyed), missed_hdr);
        CHECK(missed_payload == 2 * PAYLOAD, "%s: payload flips pass unnoticed, as mode none means (%d)",
              mname(mode, keyed), missed_payload);
      }
      else
        CHECK(missed_hdr + missed_payload == 0, "%s: every frame bit flip closes (%d caught, %d missed)",
              mname(mode, keyed), caught, missed_hdr + missed_payload);
      tc_msgr_free(c);
      tc_msgr_free(s);
    }

  printf("# %.1f s: frame flips\n", (tc_now_ms() - T0) / 1000.0);
  /* 4. Replay, drop, reorder, truncate records (keyed), on two requests. */
  for (int mode = 0; mode < 3; mode++) {
    struct tc_msgr *s = server_new(mode, 1, 0, 0);
    struct tc_msgr *c = client_new(mode, 1, 0, 0);
    server_port = tc_msgr_listen_port(s);
    long f = frame_c2s[mode][1], h = hs_c2s[1];
    struct run r;
    static const char *names[] = { "", "dropped", "replayed", "reordered" };
    for (int op = OP_DROP; op <= OP_SWAP; op++) {
      relay_plan(-1, -1, -1, op, h, f);
      run_client(c, R.port, 2, PAYLOAD, 3000, &r);
      CHECK(r.ok + r.bad == 0 && r.failed == 2, "%s: %s frame closes the connection (ok %d failed %d)",
            tc_msgr_mode_name(mode), names[op], r.ok, r.failed);
    }
    relay_plan(-1, -1, h + f / 2, OP_NONE, 0, 0);
    run_client(c, R.port, 1, PAYLOAD, 3000, &r);
    CHECK(r.failed == 1, "%s: truncated frame fails the request", tc_msgr_mode_name(mode));
    relay_plan(-1, -1, h / 2, OP_NONE, 0, 0);
    run_client(c, R.port, 1, PAYLOAD, 3000, &r);
    CHECK(r.failed == 1, "%s: truncated handshake fails", tc_msgr_mode_name(mode));
    tc_msgr_free(c);
    tc_msgr_free(s);
  }
  relay_plan(-1, -1, -1, OP_NONE, 0, 0);

  printf("# %.1f s: replay etc\n", (tc_now_ms() - T0) / 1000.0);
  /* 5. Key update every 4 records. */
  {
    struct tc_msgr *s = server_new(TC_MODE_GCM, 1, 2, 0);
    struct tc_msgr *c = client_new(TC_MODE_GCM, 1, 0, 0);
    server_port = tc_msgr_listen_port(s);
    struct run r;
    memset(&r, 0, sizeof r);
    r.conn = tc_msgr_connect(c, "127.0.0.1", server_port, run_conn, &r);
    uint8_t buf[MAXREQ][64];
    long rounds = 0;
    while (rounds < 200) {
      int i = (int) (rounds % MAXREQ);
      memset(buf[i], (int) rounds, 64);
      r.iov[i] = (struct iovec) { buf[i], 64 };
      r.expect[i] = buf[i];
      memset(&r.req[i], 0, sizeof r.req[i]);
      r.req[i].iov = &r.iov[i];
      r.req[i].iovcnt = 1;
      r.req[i].done = run_done;
      r.req[i].arg = &r;
      tc_msgr_call(r.conn, &r.req[i]);
      while (r.ok + r.bad + r.failed <= rounds && !r.down)
        tc_evloop_run_once(loop, 50);
      rounds++;
    }
    struct tc_msgr_stats st = { 0 };
    if (r.conn)
      tc_msgr_conn_stats(r.conn, &st);
    CHECK(r.ok == 200, "rekey every 4 records: 200 echoes (ok %d bad %d failed %d)", r.ok, r.bad, r.failed);
    CHECK(st.rekeys >= 190, "rekey every 4 records: %" PRIu64 " key updates", st.rekeys);
    tc_msgr_free(c);
    tc_msgr_free(s);
  }

  /* 6. Back-pressure. */
  {
    struct tc_msgr *s = server_new(TC_MODE_PAYLOAD, 1, 0, 0);
    struct tc_msgr *c = client_new(TC_MODE_PAYLOAD, 1, 8, 0);
    server_port = tc_msgr_listen_port(s);
    hold_requests = 1;
    nheld = 0;
    struct run r;
    memset(&r, 0, sizeof r);
    r.conn = tc_msgr_connect(c, "127.0.0.1", server_port, run_conn, &r);
    static uint8_t pl[100][512];
    for (int i = 0; i < 100; i++) {
      r.iov[i] = (struct iovec) { pl[i], 512 };
      r.expect[i] = pl[i];
      r.req[i] = (struct tc_msgr_req) { .iov = &r.iov[i], .iovcnt = 1, .done = run_done, .arg = &r };
      CHECK(tc_msgr_call(r.conn, &r.req[i]) == 0, "call %d over the cap does not fail", i);
    }
    for (int i = 0; i < 20; i++)
      tc_evloop_run_once(loop, 10);
    struct tc_msgr_stats st;
    tc_msgr_conn_stats(r.conn, &st);
    CHECK(nheld == 8 && st.inflight_ops == 8 && st.waiting == 92 && r.failed == 0,
          "client cap 8 ops: server got %d, in flight %" PRIu64 ", waiting %" PRIu64, nheld, st.inflight_ops,
          st.waiting);
    release_held();
    uint64_t end = tc_now_ms() + 5000;
    while (r.ok + r.bad + r.failed < 100 && tc_now_ms() < end)
      tc_evloop_run_once(loop, 10);
    CHECK(r.ok == 100, "client cap: all 100 complete once answered (ok %d)", r.ok);
    tc_msgr_close(r.conn);
    tc_evloop_run_once(loop, 10);
    tc_msgr_free(c);

    /* bytes cap: 16 KiB requests expecting 16 KiB replies, 64 KiB cap -> 2 */
    c = client_new(TC_MODE_PAYLOAD, 1, 1000, 65536);
    hold_requests = 1;
    nheld = 0;
    memset(&r, 0, sizeof r);
    r.conn = tc_msgr_connect(c, "127.0.0.1", server_port, run_conn, &r);
    static uint8_t big[10][16384];
    static uint8_t rb[10][16384];
    for (int i = 0; i < 10; i++) {
      r.iov[i] = (struct iovec) { big[i], sizeof big[i] };
      r.expect[i] = big[i];
      r.req[i] = (struct tc_msgr_req) { .iov = &r.iov[i], .iovcnt = 1, .rbuf = rb[i], .rbuf_len = 16384,
                                        .done = run_done, .arg = &r };
      tc_msgr_call(r.conn, &r.req[i]);
    }
    for (int i = 0; i < 20; i++)
      tc_evloop_run_once(loop, 10);
    CHECK(nheld == 2, "client cap 64 KiB: server got %d requests of 16+16 KiB", nheld);
    release_held();
    end = tc_now_ms() + 5000;
    while (r.ok + r.bad + r.failed < 10 && tc_now_ms() < end)
      tc_evloop_run_once(loop, 10);
    CHECK(r.ok == 10 && r.req[0].reply_payload == rb[0], "bytes cap: all complete, replies read into rbuf");
    tc_msgr_close(r.conn);
    tc_evloop_run_once(loop, 10);
    tc_msgr_free(c);
    tc_msgr_free(s);

    /* server cap: it stops reading after 4 unanswered requests */
    s = server_new(TC_MODE_PAYLOAD, 1, 0, 4);
    server_port = tc_msgr_listen_port(s);
    c = client_new(TC_MODE_PAYLOAD, 1, 1000, 1 << 30);
    hold_requests = 1;
    nheld = 0;
    memset(&r, 0, sizeof r);
    r.conn = tc_msgr_connect(c, "127.0.0.1", server_port, run_conn, &r);
    for (int i = 0; i < 64; i++) {
      r.iov[i] = (struct iovec) { pl[i], 512 };
      r.expect[i] = pl[i];
      r.req[i] = (struct tc_msgr_req) { .iov = &r.iov[i], .iovcnt = 1, .done = run_done, .arg = &r };
      tc_msgr_call(r.conn, &r.req[i]);
    }
    for (int i = 0; i < 20; i++)
      tc_evloop_run_once(loop, 10);
    CHECK(nheld == 4, "server cap 4: it read %d requests of 64 sent", nheld);
    release_held();
    end = tc_now_ms() + 5000;
    while (r.ok + r.bad + r.failed < 64 && tc_now_ms() < end)
      tc_evloop_run_once(loop, 10);
    CHECK(r.ok == 64, "server cap: all 64 complete (ok %d)", r.ok);
    tc_msgr_close(r.conn);
    tc_evloop_run_once(loop, 10);
    tc_msgr_free(c);
    tc_msgr_free(s);
  }

  printf("# %.1f s: rekey, back-pressure\n", (tc_now_ms() - T0) / 1000.0);
  /* 7. A stalled handshake is closed after handshake_timeout (400 ms). */
  {
    struct tc_msgr *s = server_new(TC_MODE_PAYLOAD, 1, 0, 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(tc_msgr_listen_port(s)),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    CHECK(connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0, "raw connect");
    fcntl(fd, F_SETFL, O_NONBLOCK);
    uint64_t t0 = tc_now_ms();
    int closed = 0;
    while (!closed && tc_now_ms() - t0 < 3000) {
      tc_evloop_run_once(loop, 20);
      char b;
      closed = read(fd, &b, 1) == 0;
    }
    uint64_t dt = tc_now_ms() - t0;
    CHECK(closed && dt >= 350 && dt < 1500, "stalled handshake closed after %" PRIu64 " ms", dt);
    close(fd);
    tc_msgr_free(s);
  }

  /* 8. Many frames waiting at once: every one is delivered, including the
   * one completed by the last read of a round (this once hung). */
  {
    struct tc_msgr *s = server_new(TC_MODE_PAYLOAD, 0, 0, 0);
    int got = blast_test(tc_msgr_listen_port(s));
    CHECK(got == BLAST_FRAMES, "%d frames of %d KiB written at once: server delivered %d", BLAST_FRAMES,
          BLAST_SIZE / 1024, got);
    tc_msgr_free(s);
  }
  /* ... and with one read per wake-up, every frame still completes. */
  tc_msgr_read_rounds = 1;
  for (int keyed = 0; keyed < 2; keyed++) {
    struct tc_msgr *s = server_new(TC_MODE_GCM, keyed, 0, 0);
    struct tc_msgr *c = client_new(TC_MODE_GCM, keyed, 0, 0);
    server_port = tc_msgr_listen_port(s);
    struct run r;
    run_client(c, server_port, 20, 100000, 5000, &r);
    CHECK(r.ok == 20, "one read per wake-up, %s: 20 echoes (ok %d failed %d)", keyed ? "keyed" : "clear", r.ok,
          r.failed);
    tc_msgr_free(c);
    tc_msgr_free(s);
  }
  tc_msgr_read_rounds = 16;

  /* 9. A call timeout of 1 s: requests the server holds fail (ETIMEDOUT,
   * the connection goes down) once nothing has come back for 1-2 s (the
   * sweep looks every second); a server that answers is unaffected. */
  {
    struct tc_msgr *s = server_new(TC_MODE_PAYLOAD, 0, 0, 0);
    struct tc_msgr *c = client_new(TC_MODE_PAYLOAD, 0, 0, 0);
    CHECK(tc_msgr_set_call_timeout(c, 1000) == 0, "call timeout set");
    server_port = tc_msgr_listen_port(s);
    struct run r;
    run_client(c, server_port, 20, 4096, 5000, &r);
    CHECK(r.ok == 20, "call timeout, answering server: 20 echoes (ok %d failed %d)", r.ok, r.failed);
    hold_requests = 1;
    nheld = 0;
    uint64_t t0 = tc_now_ms();
    run_client(c, server_port, 4, 4096, 6000, &r);
    uint64_t dt = tc_now_ms() - t0;
    CHECK(r.failed == 4 && r.ok == 0 && r.down && dt >= 1000 && dt < 3500,
          "call timeout, silent server: %d of 4 failed after %" PRIu64 " ms (ok %d)", r.failed, dt, r.ok);
    /* The server's side of that connection is gone (freed with it): drop
     * what it held without answering. */
    for (int i = 0; i < nheld; i++)
      free(held[i].p);
    nheld = 0;
    hold_requests = 0;
    tc_msgr_free(c);
    tc_msgr_free(s);
  }

  /* 10. A server that answers every request but one: the timeout above
   * never fires (replies keep coming), so the one it sits on fails once it
   * has waited twice the call timeout (2-3 s with the sweep), with the
   * connection; before, it waited for ever. */
  {
    struct tc_msgr *s = server_new(TC_MODE_PAYLOAD, 0, 0, 0);
    struct tc_msgr *c = client_new(TC_MODE_PAYLOAD, 0, 0, 0);
    CHECK(tc_msgr_set_call_timeout(c, 1000) == 0, "call timeout set");
    hold_requests = 1;
    hold_limit = 1;
    nheld = 0;
    struct run r;
    memset(&r, 0, sizeof r);
    r.conn = tc_msgr_connect(c, "127.0.0.1", tc_msgr_listen_port(s), run_conn, &r);
    CHECK(r.conn != NULL, "connect");
    uint8_t byte[MAXREQ] = { 0 };
    uint64_t t0 = tc_now_ms(), failed_at = 0;
    int sent = 0;
    while (r.conn && sent < MAXREQ && tc_now_ms() - t0 < 8000) {
      /* a request every 100 ms: the first is held, the rest echoed */
      r.data[sent] = r.expect[sent] = &byte[sent];
      r.iov[sent] = (struct iovec) { &byte[sent], 1 };
      r.req[sent] = (struct tc_msgr_req) { .hdr.opcode = 7, .iov = &r.iov[sent], .iovcnt = 1, .done = run_done,
                                           .arg = &r };
      tc_msgr_call(r.conn, &r.req[sent++]);
      uint64_t next = tc_now_ms() + 100;
      while (r.conn && tc_now_ms() < next)
        tc_evloop_run_once(loop, 20);
      if (r.failed && !failed_at)
        failed_at = tc_now_ms();
    }
    while (!r.down)
      tc_evloop_run_once(loop, 20);
    if (!failed_at)
      failed_at = tc_now_ms();
    uint64_t dt = failed_at - t0;
    CHECK(nheld == 1 && r.down && r.failed >= 1 && r.ok >= 10 && dt >= 2000 && dt < 4500,
          "one request of many unanswered: it failed after %" PRIu64 " ms (%d answered, %d failed, held %d)", dt,
          r.ok, r.failed, nheld);
    for (int i = 0; i < 3; i++)
      tc_evloop_run_once(loop, 0);
    for (int i = 0; i < nheld; i++)
      free(held[i].p);
    nheld = 0;
    hold_requests = 0;
    hold_limit = 4096;
    tc_msgr_free(c);
    tc_msgr_free(s);
  }

  printf("# %.1f s: timeouts\n", (tc_now_ms() - T0) / 1000.0);
  /* 11. Own keys (msgr.h): a client seals its payloads under keys of their
   * own; A opens them, keeps opcode 9 sealed and passes those to B as
   * they came; B opens them with the key A forwards in its key record. */
  {
    struct tc_msgr *a = server_new(TC_MODE_GCM, 1, 0, 0);
    tc_msgr_set_callbacks(a, fwd_request, NULL, NULL);
    tc_msgr_set_keep_sealed(a, keep_nine, NULL);
    struct tc_msgr *c = client_new(TC_MODE_GCM, 1, 0, 0);
    for (int link = 0; link < 2; link++) {   /* A to B in gcm, then in payload */
      int bmode = link ? TC_MODE_PAYLOAD : TC_MODE_GCM;
      struct tc_msgr *b = server_new(bmode, 1, 0, 0);
      struct tc_msgr *ac = client_new(bmode, 1, 0, 0);
      fwd_conn = tc_msgr_connect(ac, "127.0.0.1", tc_msgr_listen_port(b), fwd_conn_cb, NULL);
      for (int op = 0; op < 2; op++) {   /* opcode 9 (kept sealed), then 7 (not kept) */
        run_flags = TC_MSGR_OWN_KEY;
        run_opcode = op ? 7 : 9;
        fwd_taken = own_seen = 0;
        struct run r;
        run_client(c, tc_msgr_listen_port(a), 50, 70000, 20000, &r);
        int want_taken = op ? 0 : 50, want_own = link ? 0 : op ? 0 : 50;
        CHECK(r.ok == 50 && fwd_taken == want_taken && own_seen == want_own,
              "own keys, A to B in %s, opcode %d: %d of 50 echoes through A intact (bad %d failed %d); A kept %d "
              "sealed (want %d), B got %d own-key frames (want %d)",
              tc_msgr_mode_name(bmode), run_opcode, r.ok, r.bad, r.failed, fwd_taken, want_taken, own_seen,
              want_own);
      }
      if (fwd_conn)
        tc_msgr_close(fwd_conn);
      for (int i = 0; i < 5; i++)
        tc_evloop_run_once(loop, 5);
      tc_msgr_free(ac);
      tc_msgr_free(b);
    }
    tc_msgr_free(c);
    tc_msgr_free(a);

    /* The frame on the wire, and every bit of it flipped (request and
     * reply), with the server opening in place and into a second buffer;
     * then dropped, replayed and reordered own-key frames. */
    for (int keep = 0; keep < 2; keep++) {
      struct tc_msgr *s = server_new(TC_MODE_GCM, 1, 0, 0);
      if (keep)
        tc_msgr_set_keep_sealed(s, keep_nine, NULL);
      c = client_new(TC_MODE_GCM, 1, 0, 0);
      server_port = tc_msgr_listen_port(s);
      run_flags = TC_MSGR_OWN_KEY;
      run_opcode = 9;
      own_seen = 0;
      struct run r;
      run_client(c, R.port, 1, PAYLOAD, 3000, &r);
      long flen = (long) R.count[0] - hs_c2s[1], rlen = (long) R.count[1] - hs_s2c[1];
      CHECK(r.ok == 1 && own_seen == 1, "own key%s: echo intact (ok %d, own-key frames %d)", keep ? ", kept" : "",
            r.ok, own_seen);
      CHECK(flen == 64 + 16 + 48 + PAYLOAD + 16 && rlen == 64 + 16 + PAYLOAD + 16,
            "own-key frame = sealed header + key record + payload + tag (%ld), its reply as any (%ld)", flen, rlen);
      int missed = 0, tried = 0;
      for (int d = 0; d < 2; d++)
        for (long i = 0; i < (d ? rlen : flen); i++) {
          relay_plan(d == 0 ? hs_c2s[1] + i : -1, d == 1 ? hs_s2c[1] + i : -1, -1, OP_NONE, 0, 0);
          run_client(c, R.port, 1, PAYLOAD, 3000, &r);
          tried++;
          if (r.ok || r.bad)
            missed++;
        }
      CHECK(missed == 0, "own key%s: %d of %d bit flips went unnoticed", keep ? ", kept" : "", missed, tried);
      static const char *names[] = { "", "dropped", "replayed", "reordered" };
      for (int op = OP_DROP; op <= OP_SWAP; op++) {
        relay_plan(-1, -1, -1, op, hs_c2s[1], flen);
        run_client(c, R.port, 2, PAYLOAD, 3000, &r);
        CHECK(r.ok + r.bad == 0 && r.failed == 2, "own key%s: a %s frame closes the connection (ok %d failed %d)",
              keep ? ", kept" : "", names[op], r.ok, r.failed);
      }
      relay_plan(-1, -1, -1, OP_NONE, 0, 0);
      tc_msgr_free(c);
      tc_msgr_free(s);
    }
    run_flags = 0;
    run_opcode = 7;

    /* The flag where it has no place: a reply, a connection without gcm
     * keys, an empty frame. */
    struct tc_frame_ctx tx, rx;
    static const uint8_t k1[32] = "own key test, direction one....", k2[32] = "own key test, direction two....";
    struct { int mode, keyed; uint16_t flags; uint32_t len; const char *what; } bad[] = {
      { TC_MODE_GCM, 1, TC_FRAME_OWN_KEY | TC_FRAME_REPLY, 10, "a reply" },
      { TC_MODE_PAYLOAD, 1, TC_FRAME_OWN_KEY, 10, "mode payload" },
      { TC_MODE_PAYLOAD, 0, TC_FRAME_OWN_KEY, 10, "no keys" },
      { TC_MODE_GCM, 1, TC_FRAME_OWN_KEY, 0, "no payload" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      memset(&tx, 0, sizeof tx);
      memset(&rx, 0, sizeof rx);
      tx.mode = rx.mode = bad[i].mode;
      tx.max_frame = rx.max_frame = 1 << 20;
      if (bad[i].keyed && (tc_frame_ctx_keys(&tx, k1, k2, 1, 20) < 0 || tc_frame_ctx_keys(&rx, k2, k1, 1, 20) < 0))
        abort();
      uint8_t body[16] = { 0 }, wire[TC_FRAME_HDR_MAX];
      struct iovec iov = { body, bad[i].len };
      struct tc_frame_hdr h = { .opcode = 9, .flags = bad[i].flags }, got;
      int sealed = tc_frame_seal_hdr(&tx, &h, &iov, bad[i].len ? 1 : 0, wire);
      int opened = tc_frame_open_hdr(&rx, wire, &got);
      CHECK(sealed == 0 && opened < 0 && strstr(tc_last_error(), "own-key flag"),
            "own-key flag on %s: refused (%s)", bad[i].what, tc_last_error());
      tc_frame_ctx_clear(&tx);
      tc_frame_ctx_clear(&rx);
    }
  }

  tc_evloop_del_fd(loop, R.lfd);
  close(R.lfd);
  tc_evloop_free(loop);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) { /* best effort */ }
  return DONE();
}
