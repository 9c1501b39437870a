/* The KV API's accept loop and connection limits (see conn_guard.h). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include "conn_guard.h"
#include "cleanup.h"
#include "error.h"
#include "log.h"

/* A socket handed to MHD that never reached NOTIFY_CONNECTION_STARTED (MHD
 * failed to set it up and closed it) is forgotten after this long. */
#define UNSTARTED_FORGET_MS 10000
/* Open files beyond the connections: the store, the monitor's and admin
 * API's clients, logs. */
#define SPARE_FILES 256

enum phase { PH_IDLE, PH_REQUEST, PH_STREAM };

struct conn_slot {
  struct conn_slot *prev, *next;
  int fd;
  int family;
  uint8_t addr[16];
  int64_t since_ms;          /* start of the current phase */
  enum phase phase;
  bool started;              /* MHD has it (NOTIFY_CONNECTION_STARTED) */
  bool authenticated;        /* presented a valid certificate */
  bool closing;              /* shut down by us, MHD has yet to close it */
};

struct conn_guard {
  struct conn_guard_limits lim;
  pthread_mutex_t mu;
  struct conn_slot head;     /* circular list of every slot */
  struct conn_slot **by_fd;
  int nfds;
  int open, closing_n, authenticated;
  uint64_t accepted, refused, evicted, idle_closed, request_closed;
  int listen_fd;
  int stop_pipe[2];
  struct MHD_Daemon *d;
  pthread_t thread;
  bool running;
};

static int64_t
now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Enough open files for max_conns sockets, their evicted predecessors
 * still closing and the rest of the process. */
static int
raise_nofile(const struct conn_guard_limits *lim, int *nfds)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
    return tc_error(errno, "gateway: getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
  rlim_t want = (rlim_t) lim->max_conns * 2 + SPARE_FILES;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
      return tc_error(errno, "gateway: setrlimit(RLIMIT_NOFILE, %llu): %s", (unsigned long long) rl.rlim_cur,
                      strerror(errno));
  }
  if (rl.rlim_cur < (rlim_t) lim->max_conns + SPARE_FILES)
    return tc_error(EMFILE, "option gateway_max_connections %d needs %d open files, the limit is %llu "
                    "(raise it: ulimit -n, systemd LimitNOFILE) or lower the option", lim->max_conns,
                    lim->max_conns + SPARE_FILES, (unsigned long long) rl.rlim_cur);
  *nfds = rl.rlim_cur > (1 << 24) ? 1 << 24 : (int) rl.rlim_cur;
  return 0;
}

struct conn_guard *
conn_guard_new(const struct conn_guard_limits *lim)
{
  if (lim->max_conns < 1 || lim->max_per_addr < 1 || lim->idle_timeout_s < 1 || lim->request_timeout_s < 1) {
    tc_error(EINVAL, "gateway: gateway_max_connections, gateway_max_connections_per_addr, "
             "gateway_idle_timeout and gateway_request_timeout must be at least 1");
    return NULL;
  }
  struct conn_guard *g = calloc(1, sizeof *g);
  if (!g) {
    tc_error(ENOMEM, "gateway: out of memory");
    return NULL;
  }
  g->lim = *lim;
  g->listen_fd = g->stop_pipe[0] = g->stop_pipe[1] = -1;
  g->head.next = g->head.prev = &g->head;
  if (raise_nofile(lim, &g->nfds) < 0 || !(g->by_fd = calloc((size_t) g->nfds, sizeof *g->by_fd))) {
    if (!g->by_fd && g->nfds)
      tc_error(ENOMEM, "gateway: out of memory");
    free(g);
    return NULL;
  }
  if (pipe2(g->stop_pipe, O_CLOEXEC) < 0) {
    tc_error(errno, "gateway: pipe: %s", strerror(errno));
    free(g->by_fd);
    free(g);
    return NULL;
  }
  pthread_mutex_init(&g->mu, NULL);
  return g;
}

static void
unlink_slot(struct conn_guard *g, struct conn_slot *s)
{
  s->prev->next = s->next;
  s->next->prev = s->prev;
  if (s->fd >= 0 && s->fd < g->nfds && g->by_fd[s->fd] == s)
    g->by_fd[s->fd] = NULL;
  g->open--;
  if (s->closing)
    g->closing_n--;
  if (s->authenticated)
    g->authenticated--;
  free(s);
}

/* Close a connection MHD serves: its worker sees the end of the stream and
 * closes it (NOTIFY_CONNECTION_CLOSED then forgets the slot). */
static void
shut(struct conn_guard *g, struct conn_slot *s)
{
  s->closing = true;
  g->closing_n++;
  shutdown(s->fd, SHUT_RDWR);
}

static bool
same_addr(const struct conn_slot *s, int family, const uint8_t *addr)
{
  return s->family == family && memcmp(s->addr, addr, family == AF_INET ? 4 : 16) == 0;
}

/* The connection to close for room: unauthenticated, no request under way,
 * silent longest (from addr only when addr is given). NULL if none. One
 * MHD has not started yet counts too: when its workers fall behind a burst
 * of sockets, the newest ones are all unstarted, and refusing every
 * newcomer would lock the legitimate ones out until MHD caught up. */
static struct conn_slot *
victim(struct conn_guard *g, int family, const uint8_t *addr)
{
  struct conn_slot *best = NULL;
  uint32_t best_silence = 0;
  for (struct conn_slot *s = g->head.next; s != &g->head; s = s->next) {
    if (s->closing || s->authenticated || s->phase != PH_IDLE)
      continue;
    if (addr && !same_addr(s, family, addr))
      continue;
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
      continue;
    if (!best || ti.tcpi_last_data_recv > best_silence) {
      best = s;
      best_silence = ti.tcpi_last_data_recv;
    }
  }
  return best;
}

static void
addr_of(const struct sockaddr_storage *sa, int *family, uint8_t addr[16])
{
  memset(addr, 0, 16);
  *family = sa->ss_family;
  if (sa->ss_family == AF_INET)
    memcpy(addr, &((const struct sockaddr_in *) sa)->sin_addr, 4);
  else if (sa->ss_family == AF_INET6)
    memcpy(addr, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16);
}

/* Room for a socket from addr: true if there is (after closing the most
 * silent unauthenticated connection if a cap is reached). Under g->mu. */
static bool
make_room(struct conn_guard *g, int family, const uint8_t *addr)
{
  if (g->open >= 2 * g->lim.max_conns)   /* the closing ones have not gone yet */
    return false;
  int live = g->open - g->closing_n, from_addr = 0;
  for (struct conn_slot *o = g->head.next; o != &g->head; o = o->next)
    if (!o->closing && same_addr(o, family, addr))
      from_addr++;
  if (from_addr < g->lim.max_per_addr && live < g->lim.max_conns)
    return true;
  struct conn_slot *v = victim(g, family, from_addr >= g->lim.max_per_addr ? addr : NULL);
  if (!v)
    return false;
  shut(g, v);
  g->evicted++;
  return true;
}

/* A new socket: make room or refuse it, then hand it to MHD. */
static void
admit(struct conn_guard *g, int fd, struct sockaddr_storage *sa, socklen_t salen)
{
  int family;
  uint8_t addr[16];
  addr_of(sa, &family, addr);
  struct conn_slot *s = calloc(1, sizeof *s);
  bool ok = false;
  {
    SCOPED_LOCK(&g->mu);
    if (s && fd < g->nfds) {
      if (g->by_fd[fd])             /* a socket MHD closed without telling */
        unlink_slot(g, g->by_fd[fd]);
      ok = make_room(g, family, addr);
    }
    if (ok) {
      s->fd = fd;
      s->family = family;
      memcpy(s->addr, addr, sizeof addr);
      s->since_ms = now_ms();
      s->next = &g->head;
      s->prev = g->head.prev;
      s->prev->next = s;
      g->head.prev = s;
      g->by_fd[fd] = s;
      g->open++;
      g->accepted++;
    } else
      g->refused++;
  }
  if (!ok) {
    free(s);
    close(fd);
    return;
  }
  if (MHD_add_connection(g->d, fd, (const struct sockaddr *) sa, salen) != MHD_YES) {
    /* MHD closed the socket. */
    SCOPED_LOCK(&g->mu);
    if (g->by_fd[fd] == s)
      unlink_slot(g, s);
  }
}

/* The deadlines, once a second. */
static void
sweep(struct conn_guard *g)
{
  int64_t now = now_ms();
  int idle = 0, req = 0;
  {
    SCOPED_LOCK(&g->mu);
    for (struct conn_slot *s = g->head.next, *n; s != &g->head; s = n) {
      n = s->next;
      if (!s->started) {
        if (now - s->since_ms > UNSTARTED_FORGET_MS)
          unlink_slot(g, s);
        continue;
      }
      if (s->closing)
        continue;
      if (s->phase == PH_IDLE && now - s->since_ms > g->lim.idle_timeout_s * 1000LL) {
        shut(g, s);
        idle++;
      } else if (s->phase == PH_REQUEST && now - s->since_ms > g->lim.request_timeout_s * 1000LL) {
        shut(g, s);
        req++;
      }
    }
    g->idle_closed += (uint64_t) idle;
    g->request_closed += (uint64_t) req;
  }
  if (idle)
    tc_debug("closed %d connections without a request for gateway_idle_timeout (%d s)", idle,
             g->lim.idle_timeout_s);
  if (req)
    tc_warn("closed %d connections whose request took more than gateway_request_timeout (%d s)", req,
            g->lim.request_timeout_s);
}

static void *
accept_thread(void *arg)
{
  struct conn_guard *g = arg;
  int64_t last_sweep = now_ms();
  for (;;) {
    struct pollfd p[2] = { { g->listen_fd, POLLIN, 0 }, { g->stop_pipe[0], POLLIN, 0 } };
    int n = poll(p, 2, 1000);
    if (n < 0 && errno != EINTR) {
      tc_warn("gateway: poll: %s", strerror(errno));
      usleep(100000);
    }
    if (n > 0 && p[1].revents)
      break;
    if (now_ms() - last_sweep >= 1000) {
      sweep(g);
      last_sweep = now_ms();
    }
    if (n <= 0 || !(p[0].revents & POLLIN))
      continue;
    for (int i = 0; i < 64; i++) {
      struct sockaddr_storage sa;
      socklen_t salen = sizeof sa;
      int fd = accept4(g->listen_fd, (struct sockaddr *) &sa, &salen, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
          /* Out of files: the next sweep or closes make room. */
          tc_warn("gateway: accept: %s (gateway_max_connections %d)", strerror(errno), g->lim.max_conns);
          usleep(100000);
        }
        break;
      }
      admit(g, fd, &sa, salen);
    }
  }
  return NULL;
}

int
conn_guard_start(struct conn_guard *g, int listen_fd, struct MHD_Daemon *d)
{
  /* Non-blocking: the loop accepts until EAGAIN, then sweeps and polls. */
  int fl = fcntl(listen_fd, F_GETFL);
  if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return tc_error(errno, "gateway: listening socket: fcntl: %s", strerror(errno));
  g->listen_fd = listen_fd;
  g->d = d;
  int rc = pthread_create(&g->thread, NULL, accept_thread, g);
  if (rc)
    return tc_error(rc, "gateway: starting the accept thread: %s", strerror(rc));
  g->running = true;
  return 0;
}

void
conn_guard_stop(struct conn_guard *g)
{
  if (!g || !g->running)
    return;
  char c = 0;
  if (write(g->stop_pipe[1], &c, 1) < 0)
    tc_warn("gateway: stopping the accept thread: %s", strerror(errno));
  pthread_join(g->thread, NULL);
  g->running = false;
  close(g->listen_fd);
  g->listen_fd = -1;
}

void
conn_guard_free(struct conn_guard *g)
{
  if (!g)
    return;
  conn_guard_stop(g);
  while (g->head.next != &g->head)
    unlink_slot(g, g->head.next);
  close(g->stop_pipe[0]);
  close(g->stop_pipe[1]);
  pthread_mutex_destroy(&g->mu);
  free(g->by_fd);
  free(g);
}

void
conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                  enum MHD_ConnectionNotificationCode toe)
{
  struct conn_guard *g = cls;
  if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    struct conn_slot *s = *socket_context;
    if (s) {
      SCOPED_LOCK(&g->mu);
      unlink_slot(g, s);
    }
    *socket_context = NULL;
    return;
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci)
    return;
  int fd = ci->connect_fd, one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  SCOPED_LOCK(&g->mu);
  struct conn_slot *s = fd >= 0 && fd < g->nfds ? g->by_fd[fd] : NULL;
  if (s && !s->started) {
    s->started = true;
    s->since_ms = now_ms();
    *socket_context = s;
  }
}

struct conn_slot *
conn_guard_slot(struct MHD_Connection *conn)
{
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

static void
set_phase(struct conn_guard *g, struct conn_slot *s, enum phase ph)
{
  if (!s)
    return;
  SCOPED_LOCK(&g->mu);
  s->phase = ph;
  s->since_ms = now_ms();
}

void
conn_guard_request_begin(struct conn_guard *g, struct conn_slot *s)
{
  set_phase(g, s, PH_REQUEST);
}

void
conn_guard_streaming(struct conn_guard *g, struct conn_slot *s)
{
  set_phase(g, s, PH_STREAM);
}

void
conn_guard_request_end(struct conn_guard *g, struct conn_slot *s)
{
  set_phase(g, s, PH_IDLE);
}

void
conn_guard_authenticated(struct conn_guard *g, struct conn_slot *s)
{
  if (!s)
    return;
  SCOPED_LOCK(&g->mu);
  if (!s->authenticated) {
    s->authenticated = true;
    g->authenticated++;
  }
}

void
conn_guard_get_stats(struct conn_guard *g, struct conn_guard_stats *st)
{
  SCOPED_LOCK(&g->mu);
  st->accepted = g->accepted;
  st->refused = g->refused;
  st->evicted = g->evicted;
  st->idle_closed = g->idle_closed;
  st->request_closed = g->request_closed;
  st->open = g->open - g->closing_n;
  st->authenticated = g->authenticated;
}
