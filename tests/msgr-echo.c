/* msgr-echo: a messenger echo server and client for the shell tests and
 * bench/messenger.
 *
 *   msgr-echo server [--listen HOST] [--port P] [--roles osd,mon,user,anon]
 *                    [--rekey-log2 N] [--unchecked-key] [tromcho options]
 *       Listens (with osd_cert/osd_pkey as its identity), prints "PORT n",
 *       then one line per connection: "UP mode=M keyed=K peer=ROLE:NAME"
 *       and "DOWN err=E". Echoes every request. Stops on SIGTERM/SIGINT.
 *   msgr-echo client --port P [--host H] [--count N] [--size BYTES]
 *                    [--inflight K] [--marker] [--inplace] [--seconds S]
 *                    [--unchecked-key] [tromcho options]
 *       Connects (cert/pkey as its identity), prints "UP mode=...", sends N
 *       requests (or for S seconds) with K in flight, checks every echo,
 *       prints "OK ops=N mode=M" (with --seconds also ops/s and MB/s) and
 *       exits 0; exits 1 with "FAIL: why" if refused or closed early.
 * --marker fills payloads with the 64-byte marker "TROMCHO-MARKER-..." so a
 * capture can be searched for it. */
#include <config.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include "crypto.h"
#include "error.h"
#include "evloop.h"
#include "log.h"
#include "msgr.h"
#include "tc_config.h"

static const char MARKER[65] = "TROMCHO-MARKER-0123456789abcdef-the-payload-must-not-leak-in-gcm";

static struct tc_evloop *loop;
static int verbose_conn = 1;

static void
on_signal(struct tc_evloop *l, int fd, uint32_t ev, void *arg)
{
  struct signalfd_siginfo si;
  if (read(fd, &si, sizeof si) > 0)
    tc_evloop_stop(l);
}

static int
watch_signals(void)
{
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  sigprocmask(SIG_BLOCK, &s, NULL);
  int fd = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0 || tc_evloop_add_fd(loop, fd, EPOLLIN, on_signal, NULL) < 0)
    return -1;
  return fd;
}

static void
print_up(struct tc_msgr_conn *c)
{
  const struct tc_msgr_identity *id = tc_msgr_conn_peer(c);
  printf("UP mode=%s keyed=%d peer=%s:%s\n", tc_msgr_mode_name(tc_msgr_conn_mode(c)),
         tc_msgr_conn_keyed(c), tc_peer_role_name(id->role), id->name[0] ? id->name : "-");
  fflush(stdout);
}

/* ---- server ---- */

static void
srv_conn(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  if (!verbose_conn)
    return;
  if (event == TC_MSGR_UP)
    print_up(c);
  else {
    printf("DOWN err=%d\n", err);
    fflush(stdout);
  }
}

static void
srv_request(struct tc_msgr_conn *c, const struct tc_frame_hdr *hdr, void *payload, void *arg)
{
  struct tc_frame_hdr r = *hdr;
  r.status = (int32_t) hdr->len;
  struct iovec iov = { payload, hdr->len };
  /* The payload buffer is ours: seal it in place in gcm (no copy). */
  tc_msgr_reply(c, &r, &iov, payload ? 1 : 0, TC_MSGR_INPLACE, free, payload);
}

static unsigned
parse_roles(const char *s)
{
  unsigned r = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (!strcmp(t, "osd")) r |= TC_ROLE_BIT(TC_ROLE_OSD);
    else if (!strcmp(t, "mon")) r |= TC_ROLE_BIT(TC_ROLE_MON);
    else if (!strcmp(t, "user")) r |= TC_ROLE_BIT(TC_ROLE_USER);
    else if (!strcmp(t, "anon")) r |= TC_ROLE_BIT(TC_ROLE_ANON);
    else {
      fprintf(stderr, "msgr-echo: unknown role '%s'\n", t);
      exit(2);
    }
  }
  return r;
}

static int
run_server(int argc, char **argv, struct tc_config *cfg)
{
  const char *host = "127.0.0.1";
  int port = 0, rekey = 0, unchecked = 0;
  unsigned roles = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--port") && i + 1 < argc) port = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--listen") && i + 1 < argc) host = argv[++i];
    else if (!strcmp(argv[i], "--roles") && i + 1 < argc) roles = parse_roles(argv[++i]);
    else if (!strcmp(argv[i], "--rekey-log2") && i + 1 < argc) rekey = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quiet")) verbose_conn = 0;
    else if (!strcmp(argv[i], "--unchecked-key")) unchecked = 1;
    else {
      fprintf(stderr, "msgr-echo server: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  struct tc_msgr *m = NULL;
  if (!rekey && !unchecked && !(m = tc_msgr_new_from_config(loop, cfg, TC_MSGR_AS_OSD))) {
    fprintf(stderr, "msgr-echo server: %s\n", tc_last_error());
    return 1;
  }
  if (rekey || unchecked) {
    /* Re-create with a short key update interval (tests of the ratchet) or
     * with a key that is not the certificate's (tests of CertificateVerify). */
    struct tc_msgr_opts o = { .mode = tc_msgr_mode_parse(tc_config_str(cfg, "proto_checksums")),
      .force = tc_msgr_mode_parse(tc_config_str(cfg, "force_proto_checksums")),
      .cert = tc_config_str(cfg, "osd_cert"), .pkey = tc_config_str(cfg, "osd_pkey"),
      .osd_ca = tc_config_str(cfg, "osd_ca"), .client_ca = tc_config_str(cfg, "client_ca"),
      .mon_ca = tc_config_str(cfg, "mon_ca"), .rekey_log2 = rekey, .unchecked_key = unchecked,
      .max_inflight_ops = (uint32_t) tc_config_int(cfg, "msgr_max_inflight_ops"),
      .max_inflight_bytes = (uint64_t) tc_config_int(cfg, "msgr_max_inflight_bytes"),
      .handshake_timeout_ms = (int) tc_config_int(cfg, "handshake_timeout") * 1000 };
    if (!(m = tc_msgr_new(loop, &o))) {
      fprintf(stderr, "msgr-echo server: %s\n", tc_last_error());
      return 1;
    }
  }
  tc_msgr_set_callbacks(m, srv_request, srv_conn, NULL);
  if (roles)
    tc_msgr_set_allowed_roles(m, roles);
  if (tc_msgr_listen(m, host, port) < 0) {
    fprintf(stderr, "msgr-echo server: %s\n", tc_last_error());
    tc_msgr_free(m);
    return 1;
  }
  printf("PORT %d\n", tc_msgr_listen_port(m));
  fflush(stdout);
  int sfd = watch_signals();
  tc_evloop_run(loop);
  tc_msgr_free(m);
  if (sfd >= 0) {
    tc_evloop_del_fd(loop, sfd);
    close(sfd);
  }
  return 0;
}

/* ---- client ---- */

struct client {
  struct tc_msgr_conn *conn;
  size_t size;
  long count, sent, done;
  int inflight, marker, failed, up;
  unsigned flags;
  uint64_t t_end;
  struct slot { struct tc_msgr_req req; uint8_t *buf, *rbuf, *expect; struct iovec iov; } *slots;
  char why[600];
};

static void send_slot(struct client *cl, struct slot *s);

static void
cl_done(struct tc_msgr_req *req, int err, void *arg)
{
  struct client *cl = arg;
  struct slot *s = (struct slot *) req;
  if (err) {
    if (!cl->failed)
      snprintf(cl->why, sizeof cl->why, "request failed (%s): %s", strerror(-err),
               cl->conn ? tc_msgr_conn_close_reason(cl->conn) : "");
    cl->failed = 1;
    tc_evloop_stop(loop);
    return;
  }
  if (req->reply.status != (int32_t) cl->size || req->reply.len != cl->size ||
      (cl->size && memcmp(req->reply_payload, s->expect, cl->size))) {
    snprintf(cl->why, sizeof cl->why, "echo of request %" PRIu64 " differs", req->hdr.req_id);
    cl->failed = 1;
    tc_evloop_stop(loop);
    return;
  }
  if (req->reply_payload && req->reply_payload != s->rbuf)
    free(req->reply_payload);
  cl->done++;
  int more = cl->t_end ? tc_now_ms() < cl->t_end : cl->sent < cl->count;
  if (more)
    send_slot(cl, s);
  else if (cl->done == cl->sent)
    tc_evloop_stop(loop);
}

static void
send_slot(struct client *cl, struct slot *s)
{
  memset(&s->req, 0, sizeof s->req);
  if (cl->flags & TC_MSGR_INPLACE)
    memcpy(s->buf, s->expect, cl->size);   /* the last send sealed it */
  s->iov.iov_base = s->buf;
  s->iov.iov_len = cl->size;
  s->req.hdr.opcode = 1;
  s->req.hdr.inode = 42;
  s->req.hdr.offset = (uint64_t) cl->sent * cl->size;
  s->req.iov = &s->iov;
  s->req.iovcnt = cl->size ? 1 : 0;
  s->req.flags = cl->flags;
  s->req.rbuf = s->rbuf;
  s->req.rbuf_len = cl->size;
  s->req.done = cl_done;
  s->req.arg = cl;
  cl->sent++;
  if (tc_msgr_call(cl->conn, &s->req) < 0) {
    snprintf(cl->why, sizeof cl->why, "%s", tc_last_error());
    cl->failed = 1;
    tc_evloop_stop(loop);
  }
}

static void
cl_conn(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  struct client *cl = arg;
  if (event == TC_MSGR_UP) {
    cl->up = 1;
    print_up(c);
    return;
  }
  if (!cl->failed && (cl->done < cl->sent || cl->done == 0 || !cl->up)) {
    snprintf(cl->why, sizeof cl->why, "connection closed (%s): %s", strerror(-err), tc_msgr_conn_close_reason(c));
    cl->failed = 1;
  }
  cl->conn = NULL;
  tc_evloop_stop(loop);
}

static int
run_client(int argc, char **argv, struct tc_config *cfg)
{
  const char *host = "127.0.0.1";
  int port = 0, unchecked = 0;
  double seconds = 0;
  struct client cl = { .size = 4096, .count = 10, .inflight = 1 };
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--port") && i + 1 < argc) port = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--host") && i + 1 < argc) host = argv[++i];
    else if (!strcmp(argv[i], "--count") && i + 1 < argc) cl.count = atol(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) cl.size = (size_t) tc_parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--inflight") && i + 1 < argc) cl.inflight = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--marker")) cl.marker = 1;
    else if (!strcmp(argv[i], "--inplace")) cl.flags |= TC_MSGR_INPLACE;
    else if (!strcmp(argv[i], "--unchecked-key")) unchecked = 1;
    else {
      fprintf(stderr, "msgr-echo client: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (cl.inflight < 1 || cl.inflight > 4096 || cl.count < 1) {
    fprintf(stderr, "msgr-echo client: bad --inflight or --count\n");
    return 2;
  }
  struct tc_msgr *m;
  if (unchecked) {
    struct tc_msgr_opts o = { .mode = tc_msgr_mode_parse(tc_config_str(cfg, "proto_checksums")),
      .force = tc_msgr_mode_parse(tc_config_str(cfg, "force_proto_checksums")),
      .cert = tc_config_str(cfg, "cert"), .pkey = tc_config_str(cfg, "pkey"),
      .osd_ca = tc_config_str(cfg, "osd_ca"), .unchecked_key = 1,
      .handshake_timeout_ms = (int) tc_config_int(cfg, "handshake_timeout") * 1000 };
    m = tc_msgr_new(loop, &o);
  }
  else
    m = tc_msgr_new_from_config(loop, cfg, 0);
  if (!m) {
    printf("FAIL: %s\n", tc_last_error());
    return 1;
  }
  cl.slots = calloc(cl.inflight, sizeof *cl.slots);
  for (int i = 0; i < cl.inflight; i++) {
    struct slot *s = &cl.slots[i];
    s->buf = malloc(cl.size + 1);
    s->rbuf = malloc(cl.size + 1);
    s->expect = malloc(cl.size + 1);
    for (size_t k = 0; k < cl.size; k++)
      s->expect[k] = cl.marker ? (uint8_t) MARKER[k % 64] : (uint8_t) (k * 7 + i);
    memcpy(s->buf, s->expect, cl.size);
  }
  cl.conn = tc_msgr_connect(m, host, port, cl_conn, &cl);
  if (!cl.conn) {
    printf("FAIL: %s\n", tc_last_error());
    return 1;
  }
  uint64_t t0 = tc_now_ms();
  if (seconds > 0)
    cl.t_end = t0 + (uint64_t) (seconds * 1000);
  for (int i = 0; i < cl.inflight && (cl.t_end || cl.sent < cl.count); i++)
    send_slot(&cl, &cl.slots[i]);
  if (!cl.failed)
    tc_evloop_run(loop);
  uint64_t t1 = tc_now_ms();
  int mode = cl.conn && cl.up ? tc_msgr_conn_mode(cl.conn) : -1;
  struct tc_msgr_stats st = { 0 };
  if (cl.conn)
    tc_msgr_conn_stats(cl.conn, &st);
  tc_msgr_free(m);   /* fails what is still in flight: ignored now */
  int rc = 0;
  if (cl.failed || cl.done < cl.sent) {
    printf("FAIL: %s\n", cl.why[0] ? cl.why : "not every request was answered");
    rc = 1;
  }
  else if (seconds > 0) {
    double s = (t1 - t0) / 1000.0;
    printf("OK ops=%ld mode=%s rekeys=%" PRIu64 " ops/s=%.0f MB/s=%.1f\n", cl.done, tc_msgr_mode_name(mode),
           st.rekeys, cl.done / s, cl.done * (double) cl.size / s / 1e6);
  }
  else
    printf("OK ops=%ld mode=%s rekeys=%" PRIu64 "\n", cl.done, tc_msgr_mode_name(mode), st.rekeys);
  for (int i = 0; i < cl.inflight; i++) {
    free(cl.slots[i].buf);
    free(cl.slots[i].rbuf);
    free(cl.slots[i].expect);
  }
  free(cl.slots);
  return rc;
}

int
main(int argc, char **argv)
{
  tc_log_open("msgr-echo", 0);
  /* Payload buffers of 128 KiB would otherwise be mmapped and unmapped for
   * every frame (glibc's default thresholds), or trimmed and faulted in
   * again: a daemon should do the same. */
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct tc_config *cfg = tc_config_load(&argc, argv);
  if (!cfg) {
    fprintf(stderr, "msgr-echo: %s\n", tc_last_error());
    return 2;
  }
  if (tc_log_configure(cfg, NULL) < 0) {
    fprintf(stderr, "msgr-echo: %s\n", tc_last_error());
    return 2;
  }
  if (tc_crypto_init() < 0 || !(loop = tc_evloop_new())) {
    fprintf(stderr, "msgr-echo: %s\n", tc_last_error());
    return 2;
  }
  int rc;
  if (argc >= 2 && !strcmp(argv[1], "server"))
    rc = run_server(argc, argv, cfg);
  else if (argc >= 2 && !strcmp(argv[1], "client"))
    rc = run_client(argc, argv, cfg);
  else {
    fprintf(stderr, "usage: msgr-echo server|client [options] (see the top of tests/msgr-echo.c)\n");
    rc = 2;
  }
  tc_evloop_free(loop);
  tc_config_free(cfg);
  return rc;
}
