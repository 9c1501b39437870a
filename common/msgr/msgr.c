/* The messenger endpoint: settings and certificates, listening, connecting,
 * and the end-of-round work (writing queued output, freeing closed
 * connections). */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "error.h"
#include "log.h"
#include "msgr_int.h"

static void
free_hs_cfg(struct tc_hs_cfg *h)
{
  tc_cert_identity_free(h->id);
  tc_cert_trust_free(h->osd_ca);
  tc_cert_trust_free(h->client_ca);
  tc_cert_trust_free(h->mon_ca);
  memset(h, 0, sizeof *h);
}

struct tc_msgr *
tc_msgr_new(struct tc_evloop *loop, const struct tc_msgr_opts *o)
{
  struct tc_msgr *m = calloc(1, sizeof *m);
  if (!m) {
    tc_error(ENOMEM, "tc_msgr_new: out of memory");
    return NULL;
  }
  m->loop = loop;
  m->listen_fd = -1;
  if (o->mode < TC_MODE_NONE || o->mode > TC_MODE_GCM) {
    tc_error(EINVAL, "tc_msgr_new: proto_checksums %d is not none, payload or gcm", o->mode);
    goto fail;
  }
  if (o->force != TC_MODE_UNSET && (o->force < TC_MODE_NONE || o->force > TC_MODE_GCM)) {
    tc_error(EINVAL, "tc_msgr_new: force_proto_checksums %d is not none, payload or gcm", o->force);
    goto fail;
  }
  m->hs.mode = o->mode;
  m->hs.force = o->force;
  m->hs.allowed_roles = o->allowed_roles;
  m->hs.rekey_log2 = o->rekey_log2 ? o->rekey_log2 : TC_REKEY_LOG2_DEFAULT;
  if (m->hs.rekey_log2 < TC_REKEY_LOG2_MIN || m->hs.rekey_log2 > TC_REKEY_LOG2_MAX) {
    tc_error(EINVAL, "tc_msgr_new: key update every 2^%d records: out of %d..%d", m->hs.rekey_log2,
             TC_REKEY_LOG2_MIN, TC_REKEY_LOG2_MAX);
    goto fail;
  }
  if ((o->cert != NULL) != (o->pkey != NULL)) {
    tc_error(EINVAL, "tc_msgr_new: a certificate needs its key and a key its certificate (cert %s, pkey %s)",
             o->cert ? o->cert : "unset", o->pkey ? o->pkey : "unset");
    goto fail;
  }
  if (o->cert && !(m->hs.id = tc_cert_identity_load(o->cert, o->pkey, o->unchecked_key)))
    goto fail;
  if (o->osd_ca && !(m->hs.osd_ca = tc_cert_trust_load(o->osd_ca)))
    goto fail;
  if (o->client_ca && !(m->hs.client_ca = tc_cert_trust_load(o->client_ca)))
    goto fail;
  if (o->mon_ca && !(m->hs.mon_ca = tc_cert_trust_load(o->mon_ca)))
    goto fail;
  /* Roles come from the CA a chain verifies against: two options naming
   * one CA would give every holder of the one the role of the other. */
  struct { const struct tc_cert_trust *t; const char *opt, *file; } cas[] = {
    { m->hs.osd_ca, "osd_ca", o->osd_ca }, { m->hs.mon_ca, "mon_ca", o->mon_ca },
    { m->hs.client_ca, "client_ca", o->client_ca },
  };
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++)
      if (cas[i].t && cas[j].t && tc_cert_trust_overlap(cas[i].t, cas[j].t)) {
        tc_error(EINVAL, "tc_msgr_new: %s (%s) and %s (%s) name the same CA: every certificate of one "
                 "would be taken for the other", cas[i].opt, cas[i].file, cas[j].opt, cas[j].file);
        goto fail;
      }
  m->max_ops = o->max_inflight_ops ? o->max_inflight_ops : 256;
  m->max_bytes = o->max_inflight_bytes ? o->max_inflight_bytes : 64 << 20;
  m->max_frame = o->max_frame ? o->max_frame : 64 << 20;
  m->hs_timeout_ms = o->handshake_timeout_ms ? o->handshake_timeout_ms : 10000;
  m->max_conns = o->max_conns ? o->max_conns : 1024;
  m->max_conns_per_addr = o->max_conns_per_addr ? o->max_conns_per_addr : 64;
  m->conn_budget = o->conn_budget ? o->conn_budget : 16 << 20;
  m->budget = o->budget ? o->budget : 256 << 20;
  m->frame_timeout_ms = o->frame_timeout_ms ? o->frame_timeout_ms : 30000;
  m->idle_timeout_ms = o->idle_timeout_ms ? o->idle_timeout_ms : 600000;
  if (m->conn_budget < TC_MSGR_MIN_BUDGET) {
    tc_error(EINVAL, "tc_msgr_new: msgr_conn_budget %" PRIu64 " is below %u bytes", m->conn_budget,
             TC_MSGR_MIN_BUDGET);
    goto fail;
  }
  if (m->budget < m->conn_budget) {
    tc_error(EINVAL, "tc_msgr_new: msgr_process_budget %" PRIu64 " is below msgr_conn_budget %" PRIu64,
             m->budget, m->conn_budget);
    goto fail;
  }
  m->on_request = o->on_request;
  m->on_conn = o->on_conn;
  m->arg = o->arg;
  return m;
fail:
  free_hs_cfg(&m->hs);
  free(m);
  return NULL;
}

struct tc_msgr *
tc_msgr_new_from_config(struct tc_evloop *loop, const struct tc_config *cfg, int flags)
{
  struct tc_msgr_opts o = { 0 };
  const char *pc = tc_config_str(cfg, "proto_checksums");
  const char *fpc = tc_config_str(cfg, "force_proto_checksums");
  o.mode = tc_msgr_mode_parse(pc);
  o.force = tc_msgr_mode_parse(fpc);
  if (o.mode < 0) {
    tc_error(EINVAL, "option proto_checksums: '%s' is not one of none, payload, gcm", pc ? pc : "");
    return NULL;
  }
  if (o.force < TC_MODE_UNSET) {
    tc_error(EINVAL, "option force_proto_checksums: '%s' is not one of none, payload, gcm (or empty)", fpc);
    return NULL;
  }
  if (flags & TC_MSGR_AS_OSD) {
    o.cert = tc_config_str(cfg, "osd_cert");
    o.pkey = tc_config_str(cfg, "osd_pkey");
  }
  else {
    o.cert = tc_config_str(cfg, "cert");
    o.pkey = tc_config_str(cfg, "pkey");
  }
  o.osd_ca = tc_config_str(cfg, "osd_ca");
  o.client_ca = tc_config_str(cfg, "client_ca");
  o.mon_ca = tc_config_str(cfg, "mon_ca");
  int64_t ops = tc_config_int(cfg, "msgr_max_inflight_ops");
  int64_t bytes = tc_config_int(cfg, "msgr_max_inflight_bytes");
  int64_t hto = tc_config_int(cfg, "handshake_timeout");
  if (ops < 1 || ops > 1 << 20 || bytes < 4096 || hto < 1 || hto > 3600) {
    tc_error(EINVAL, "options msgr_max_inflight_ops (1..1048576), msgr_max_inflight_bytes (>= 4096) "
             "or handshake_timeout (1..3600 s) out of range");
    return NULL;
  }
  o.max_inflight_ops = (uint32_t) ops;
  o.max_inflight_bytes = (uint64_t) bytes;
  o.handshake_timeout_ms = (int) hto * 1000;
  int64_t mc = tc_config_int(cfg, "msgr_max_conns"), mca = tc_config_int(cfg, "msgr_max_conns_per_addr");
  int64_t cb = tc_config_int(cfg, "msgr_conn_budget"), pb = tc_config_int(cfg, "msgr_process_budget");
  int64_t fto = tc_config_int(cfg, "msgr_frame_timeout"), ito = tc_config_int(cfg, "msgr_idle_timeout");
  if (mc < 1 || mc > 1 << 20 || mca < 1 || mca > mc) {
    tc_error(EINVAL, "options msgr_max_conns (1..1048576) and msgr_max_conns_per_addr (1..msgr_max_conns) "
             "out of range: %" PRId64 ", %" PRId64, mc, mca);
    return NULL;
  }
  if (cb < TC_MSGR_MIN_BUDGET || pb < cb) {
    tc_error(EINVAL, "options msgr_conn_budget (>= %u) and msgr_process_budget (>= msgr_conn_budget) out "
             "of range: %" PRId64 ", %" PRId64, TC_MSGR_MIN_BUDGET, cb, pb);
    return NULL;
  }
  if (fto < 1 || fto > 86400 || ito < 1 || ito > 86400 * 7) {
    tc_error(EINVAL, "options msgr_frame_timeout (1..86400 s) and msgr_idle_timeout (1..604800 s) out of "
             "range: %" PRId64 ", %" PRId64, fto, ito);
    return NULL;
  }
  o.max_conns = (uint32_t) mc;
  o.max_conns_per_addr = (uint32_t) mca;
  o.conn_budget = (uint64_t) cb;
  o.budget = (uint64_t) pb;
  o.frame_timeout_ms = (int) fto * 1000;
  o.idle_timeout_ms = (int) ito * 1000;
  return tc_msgr_new(loop, &o);
}

void
tc_msgr_set_callbacks(struct tc_msgr *m, tc_msgr_request_cb on_request, tc_msgr_conn_cb on_conn, void *arg)
{
  m->on_request = on_request;
  m->on_conn = on_conn;
  m->arg = arg;
}

void
tc_msgr_set_allowed_roles(struct tc_msgr *m, unsigned roles)
{
  m->hs.allowed_roles = roles;
}

int
tc_msgr_has_keys(const struct tc_msgr *m)
{
  return m->hs.id != NULL || m->hs.osd_ca != NULL;
}

/* End of a loop round: write what was queued, then free closed connections. */
static void
post(struct tc_evloop *loop, void *arg)
{
  struct tc_msgr *m = arg;
  m->post_scheduled = 0;
  /* Bytes of budget were released: connections waiting for room go on
   * (each retry may close connections: start over after one goes). */
  while (m->wake_budget && !m->freeing) {
    m->wake_budget = 0;
    for (struct tc_msgr_conn *c = m->conns; c; c = c->next)
      if (c->rstate == R_BUDGET && tc_msgr_conn_budget_retry(c)) {
        m->wake_budget = 1;
        break;
      }
  }
  while (m->flushq || m->dead) {
    while (m->flushq) {
      struct tc_msgr_conn *c = m->flushq;
      m->flushq = c->next_flush;
      c->in_flushq = 0;
      if (c->state != C_CLOSED)
        tc_msgr_conn_flush(c);
    }
    while (m->dead) {
      struct tc_msgr_conn *c = m->dead;
      m->dead = c->next_dead;
      tc_msgr_conn_destroy(c);
    }
  }
  if (m->freeing)
    free(m);
}

void
tc_msgr_schedule_post(struct tc_msgr *m)
{
  if (m->post_scheduled)
    return;
  if (tc_evloop_defer(m->loop, post, m) == 0)
    m->post_scheduled = 1;
}

void
tc_msgr_free(struct tc_msgr *m)
{
  if (!m)
    return;
  if (m->listen_fd >= 0) {
    tc_evloop_del_fd(m->loop, m->listen_fd);
    close(m->listen_fd);
    m->listen_fd = -1;
  }
  tc_msgr_sweep_stop(m);
  while (m->conns)
    tc_msgr_conn_fail(m->conns, 0, "endpoint shut down");
  m->flushq = NULL;
  while (m->dead) {
    struct tc_msgr_conn *c = m->dead;
    m->dead = c->next_dead;
    tc_msgr_conn_destroy(c);
  }
  free_hs_cfg(&m->hs);
  if (m->post_scheduled)
    m->freeing = 1;    /* the scheduled post frees m */
  else
    free(m);
}

static void
sock_name(const struct sockaddr_storage *sa, char *buf, size_t len)
{
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *s = (const void *) sa;
    inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
    port = ntohs(s->sin_port);
    snprintf(buf, len, "%s:%d", host, port);
  }
  else if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *s = (const void *) sa;
    inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
    port = ntohs(s->sin6_port);
    snprintf(buf, len, "[%s]:%d", host, port);
  }
  else
    snprintf(buf, len, "?");
}

/* The source address alone (no port), as the per-address cap counts it. */
static void
sock_addr(const struct sockaddr_storage *sa, char *buf, size_t len)
{
  char name[64];
  sock_name(sa, name, sizeof name);
  snprintf(buf, len, "%s", name);
  char *colon = strrchr(buf, ':');
  if (colon)
    *colon = 0;
}

static void
set_nodelay(int fd)
{
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void
on_accept(struct tc_evloop *loop, int fd, uint32_t events, void *arg)
{
  struct tc_msgr *m = arg;
  for (int i = 0; i < 64; i++) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int cfd = accept4(fd, (struct sockaddr *) &sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
        tc_warn("msgr: accept on port %d: %s", m->listen_port, strerror(errno));
      return;
    }
    set_nodelay(cfd);
    char name[64], addr[64];
    sock_name(&sa, name, sizeof name);
    sock_addr(&sa, addr, sizeof addr);
    if (tc_msgr_admit_conn(m, addr) < 0) {
      /* One warning a second at most: a flood must not flood the log. */
      uint64_t now = tc_now_ms();
      m->refused_conns++;
      if (now - m->refused_log_ms >= 1000) {
        m->refused_log_ms = now;
        tc_warn("msgr: client %s refused: %s (%" PRIu64 " refused so far)", name, tc_last_error(),
                m->refused_conns);
      }
      else
        tc_debug("msgr: client %s refused: %s", name, tc_last_error());
      close(cfd);
      continue;
    }
    struct tc_msgr_conn *c = tc_msgr_conn_new(m, cfd, 1, name);
    if (!c) {
      tc_warn("msgr: client %s: %s", name, tc_last_error());
      close(cfd);
      continue;
    }
    c->cb = m->on_conn;
    c->cb_arg = m->arg;
    tc_msgr_conn_start(c);
  }
}

static int
resolve(const char *host, int port, struct addrinfo **res, int passive)
{
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                            .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) };
  int r = getaddrinfo(host, ps, &hints, res);
  if (r)
    return tc_error(EHOSTUNREACH, "resolve %s:%d: %s", host ? host : "*", port, gai_strerror(r));
  return 0;
}

int
tc_msgr_listen(struct tc_msgr *m, const char *host, int port)
{
  struct addrinfo *res;
  if (m->listen_fd >= 0)
    return tc_error(EBUSY, "tc_msgr_listen: already listening on port %d", m->listen_port);
  if (resolve(host, port, &res, 1) < 0)
    return -1;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 512) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    freeaddrinfo(res);
    return tc_error(e, "tc_msgr_listen: %s:%d: %s", host ? host : "*", port, strerror(e));
  }
  freeaddrinfo(res);
  struct sockaddr_storage sa;
  socklen_t sl = sizeof sa;
  getsockname(fd, (struct sockaddr *) &sa, &sl);
  m->listen_port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &sa)->sin6_port
                         : ((struct sockaddr_in *) &sa)->sin_port);
  if (tc_evloop_add_fd(m->loop, fd, EPOLLIN, on_accept, m) < 0) {
    close(fd);
    return -1;
  }
  if (tc_msgr_sweep_start(m) < 0) {
    tc_evloop_del_fd(m->loop, fd);
    close(fd);
    return -1;
  }
  m->listen_fd = fd;
  return 0;
}

int
tc_msgr_listen_port(const struct tc_msgr *m)
{
  return m->listen_port;
}

struct tc_msgr_conn *
tc_msgr_connect(struct tc_msgr *m, const char *host, int port, tc_msgr_conn_cb cb, void *arg)
{
  struct addrinfo *res;
  if (resolve(host, port, &res, 0) < 0)
    return NULL;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    tc_error(errno, "connect to %s:%d: socket: %s", host, port, strerror(errno));
    freeaddrinfo(res);
    return NULL;
  }
  set_nodelay(fd);
  int r = connect(fd, res->ai_addr, res->ai_addrlen);
  int e = errno;
  char name[64];
  sock_name((struct sockaddr_storage *) res->ai_addr, name, sizeof name);
  freeaddrinfo(res);
  if (r < 0 && e != EINPROGRESS) {
    close(fd);
    tc_error(e, "connect to %s: %s", name, strerror(e));
    return NULL;
  }
  struct tc_msgr_conn *c = tc_msgr_conn_new(m, fd, 0, name);
  if (!c) {
    close(fd);
    return NULL;
  }
  c->cb = cb;
  c->cb_arg = arg;
  if (r == 0)
    tc_msgr_conn_start(c);
  return c;
}
