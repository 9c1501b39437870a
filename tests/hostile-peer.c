/* A hostile messenger peer for the tests (test-hostile-osd.sh): opens many
 * connections to a server and misbehaves on each, then holds them open
 * until --hold seconds have passed (or the server closed them all), and
 * prints what the server did:
 *
 *   hostile-peer ATTACK --port P [--host H] [--from ADDR] [--conns N]
 *                [--hold SECS] [--opcode OP] [--len BYTES] [--send BYTES]
 *                [--osd_ca F --cert F --pkey F]
 *
 * ATTACK:
 *   idle       TCP connect and say nothing.
 *   garbage    send 4 KiB of random bytes instead of a ClientHello.
 *   truncated  send the first half of a real ClientHello, then nothing.
 *   frame      finish the handshake (anonymous, or with --cert), then send
 *              a request header announcing --len payload bytes (opcode
 *              --opcode, default 2 = WRITE) and only --send of them, then
 *              stall.
 * --from binds the source address (e.g. 127.0.0.2: Linux routes all of
 * 127/8 to lo), so a flood does not share the legitimate client's address.
 *
 * Output, one line: "connected=N handshaken=N closed_by_server=N open=N"
 * (closed_by_server counts connections the server closed before --hold
 * ran out). Exit status 0 unless the tool itself failed. Traffic goes only
 * where --host says (the tests use 127.0.0.1) and stops after --hold. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "crypto.h"
#include "error.h"
#include "msgr_int.h"

struct peer {
  int fd;
  int handshaken;
  int closed;
};

static const char *
arg(int argc, char **argv, const char *name, const char *def)
{
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[i], name))
      return argv[i + 1];
  return def;
}

static int
connect_from(const char *host, int port, const char *from)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
  if (from) {
    struct sockaddr_in src = { .sin_family = AF_INET };
    if (inet_pton(AF_INET, from, &src.sin_addr) != 1 || bind(fd, (struct sockaddr *) &src, sizeof src) < 0) {
      close(fd);
      return -1;
    }
  }
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int
write_all(int fd, const void *p, size_t n)
{
  const uint8_t *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    b += w;
    n -= (size_t) w;
  }
  return 0;
}

/* Run the client side of the handshake on a blocking socket. Fills f. */
static int
handshake(int fd, const struct tc_hs_cfg *cfg, struct tc_frame_ctx *f, int truncate)
{
  struct tc_hs hs;
  struct tc_buf out = { 0 }, in = { 0 };
  int rc = -1;
  if (tc_hs_init(&hs, cfg, 0) < 0)
    return -1;
  if (tc_hs_start(&hs, &out) < 0)
    goto done;
  if (truncate) {
    rc = write_all(fd, out.p, out.len / 2);
    goto done;
  }
  for (;;) {
    if (out.len) {
      if (write_all(fd, out.p, out.len) < 0)
        goto done;
      out.len = 0;
    }
    uint8_t buf[16384];
    struct pollfd pf = { fd, POLLIN, 0 };
    if (poll(&pf, 1, 10000) <= 0)
      goto done;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0 || tc_buf_append(&in, buf, (size_t) n) < 0)
      goto done;
    size_t used = 0;
    int r = tc_hs_feed(&hs, in.p, in.len, &used, &out);
    tc_buf_consume(&in, used);
    if (r < 0) {
      fprintf(stderr, "hostile-peer: handshake refused: %s\n", tc_last_error());
      goto done;
    }
    if (r == 1)
      break;
  }
  if (out.len && write_all(fd, out.p, out.len) < 0)
    goto done;
  memset(f, 0, sizeof *f);
  f->mode = hs.mode;
  f->max_frame = UINT32_MAX;
  if (hs.keyed && tc_frame_ctx_keys(f, hs.c2s, hs.s2c, hs.salt, hs.rekey_log2) < 0)
    goto done;
  rc = 0;
done:
  tc_hs_clear(&hs);
  tc_buf_free(&out);
  tc_buf_free(&in);
  return rc;
}

/* Announce len payload bytes, send the first `send` of them. */
static int
send_frame(int fd, struct tc_frame_ctx *f, uint16_t opcode, uint32_t len, uint32_t send)
{
  /* calloc: zero pages are not committed until written. */
  uint8_t *payload = calloc(1, len ? len : 1);
  if (!payload)
    return -1;
  struct tc_frame_hdr h = { .opcode = opcode, .req_id = 1, .inode = (1ull << 48) | 1, .offset = 0 };
  struct iovec iov = { payload, len };
  uint8_t wire[TC_FRAME_HDR_MAX];
  int rc = -1;
  if (tc_frame_seal_hdr(f, &h, &iov, len ? 1 : 0, wire) < 0)
    goto out;
  if (write_all(fd, wire, tc_frame_hdr_wire(f)) < 0)
    goto out;
  /* Send in pieces: the server may close the connection on the header. */
  for (uint32_t off = 0; off < send && off < len;) {
    uint32_t k = send - off < 65536 ? send - off : 65536;
    if (write_all(fd, payload + off, k) < 0)
      break;
    off += k;
  }
  rc = 0;
out:
  free(payload);
  return rc;
}

int
main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: hostile-peer idle|garbage|truncated|frame --port P [options]\n");
    return 2;
  }
  const char *attack = argv[1];
  const char *host = arg(argc, argv, "--host", "127.0.0.1");
  const char *from = arg(argc, argv, "--from", NULL);
  int port = atoi(arg(argc, argv, "--port", "0"));
  int nconns = atoi(arg(argc, argv, "--conns", "1"));
  int hold = atoi(arg(argc, argv, "--hold", "5"));
  uint16_t opcode = (uint16_t) atoi(arg(argc, argv, "--opcode", "2"));
  uint32_t len = (uint32_t) strtoul(arg(argc, argv, "--len", "262144"), NULL, 0);
  uint32_t send = (uint32_t) strtoul(arg(argc, argv, "--send", "0"), NULL, 0);
  const char *osd_ca = arg(argc, argv, "--osd_ca", NULL);
  const char *cert = arg(argc, argv, "--cert", NULL), *pkey = arg(argc, argv, "--pkey", NULL);
  if (port <= 0 || nconns <= 0 || nconns > 20000) {
    fprintf(stderr, "hostile-peer: --port and --conns (1..20000) are required\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);   /* the server closing on us is the expected outcome */
  if (tc_crypto_init() < 0) {
    fprintf(stderr, "hostile-peer: %s\n", tc_last_error());
    return 1;
  }
  struct tc_hs_cfg cfg = { .mode = TC_MODE_PAYLOAD, .force = TC_MODE_UNSET };
  if (osd_ca && !(cfg.osd_ca = tc_cert_trust_load(osd_ca))) {
    fprintf(stderr, "hostile-peer: %s\n", tc_last_error());
    return 1;
  }
  if (cert && !(cfg.id = tc_cert_identity_load(cert, pkey, 0))) {
    fprintf(stderr, "hostile-peer: %s\n", tc_last_error());
    return 1;
  }
  struct peer *peers = calloc((size_t) nconns, sizeof *peers);
  if (!peers)
    return 1;
  int connected = 0, handshaken = 0;
  for (int i = 0; i < nconns; i++) {
    peers[i].fd = connect_from(host, port, from);
    if (peers[i].fd < 0) {
      peers[i].closed = 1;
      continue;
    }
    connected++;
    int fd = peers[i].fd;
    if (!strcmp(attack, "garbage")) {
      uint8_t junk[4096];
      tc_random(junk, sizeof junk);
      if (write_all(fd, junk, sizeof junk) < 0) { /* the server may close at once */ }
    }
    else if (!strcmp(attack, "truncated")) {
      struct tc_frame_ctx f;
      handshake(fd, &cfg, &f, 1);
    }
    else if (!strcmp(attack, "frame")) {
      struct tc_frame_ctx f;
      if (handshake(fd, &cfg, &f, 0) == 0) {
        peers[i].handshaken = 1;
        handshaken++;
        send_frame(fd, &f, opcode, len, send);
        tc_frame_ctx_clear(&f);
      }
    }
    else if (strcmp(attack, "idle")) {
      fprintf(stderr, "hostile-peer: unknown attack '%s'\n", attack);
      return 2;
    }
  }
  /* Hold: watch for the server closing them. */
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int open_left = connected;
  for (;;) {
    open_left = 0;
    for (int i = 0; i < nconns; i++) {
      if (peers[i].closed)
        continue;
      struct pollfd pf = { peers[i].fd, POLLIN, 0 };
      if (poll(&pf, 1, 0) > 0) {
        char b[4096];
        ssize_t n = read(peers[i].fd, b, sizeof b);
        if (n <= 0) {
          peers[i].closed = 2;
          close(peers[i].fd);
          continue;
        }
      }
      open_left++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (open_left == 0 || t.tv_sec - t0.tv_sec >= hold)
      break;
    usleep(50000);
  }
  int closed = 0;
  for (int i = 0; i < nconns; i++) {
    if (peers[i].closed == 2)
      closed++;
    else if (!peers[i].closed)
      close(peers[i].fd);
  }
  printf("connected=%d handshaken=%d closed_by_server=%d open=%d\n", connected, handshaken, closed, open_left);
  free(peers);
  tc_cert_identity_free(cfg.id);
  tc_cert_trust_free(cfg.osd_ca);
  return 0;
}
