/* GET /metrics over plain HTTP with libmicrohttpd's own thread (see
 * metrics.h). Plain HTTP on loopback by default: the figures name no image
 * and no user, but whoever binds it elsewhere decides who may scrape. */
#include <config.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <microhttpd.h>
#include "error.h"
#include "log.h"
#include "metrics.h"

struct tc_metrics_http {
  struct tc_metrics *m;
  struct MHD_Daemon *d;
  int port;
};

static enum MHD_Result
send_text(struct MHD_Connection *c, unsigned status, const char *type, char *text, size_t len)
{
  struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", type);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
           const char *upload, size_t *upload_size, void **state)
{
  struct tc_metrics_http *h = cls;
  (void) version;
  (void) upload;
  if (!*state) {   /* first call: headers only */
    *state = h;
    return MHD_YES;
  }
  if (*upload_size) {   /* a GET carries no body: drop it */
    *upload_size = 0;
    return MHD_YES;
  }
  if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
    char *t = strdup("only GET /metrics\n");
    return t ? send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", t, strlen(t)) : MHD_NO;
  }
  if (strcmp(url, "/metrics")) {
    char *t = strdup("not found: only /metrics\n");
    return t ? send_text(c, MHD_HTTP_NOT_FOUND, "text/plain", t, strlen(t)) : MHD_NO;
  }
  char *text;
  size_t len;
  if (tc_metrics_render(h->m, &text, &len) < 0) {
    char *t = strdup("out of memory\n");
    return t ? send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", t, strlen(t)) : MHD_NO;
  }
  return send_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

static int
listen_on(const char *address, int port, int *bound)
{
  struct sockaddr_storage ss;
  socklen_t sl;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *s4 = (struct sockaddr_in *) &ss;
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &ss;
  if (!address || !*address)
    address = "127.0.0.1";
  if (port < 0 || port > 65535)
    return tc_error(EINVAL, "metrics endpoint: port %d is out of range", port);
  if (inet_pton(AF_INET, address, &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t) port);
    sl = sizeof *s4;
  } else if (inet_pton(AF_INET6, address, &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t) port);
    sl = sizeof *s6;
  } else
    return tc_error(EINVAL, "metrics endpoint: '%s' is not a numeric IPv4 or IPv6 address", address);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return tc_error(errno, "metrics endpoint: socket: %s", strerror(errno));
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *) &ss, sl) < 0 || listen(fd, 16) < 0) {
    int e = errno;
    close(fd);
    return tc_error(e, "metrics endpoint: listening on %s port %d: %s", address, port, strerror(e));
  }
  sl = sizeof ss;
  if (getsockname(fd, (struct sockaddr *) &ss, &sl) < 0) {
    int e = errno;
    close(fd);
    return tc_error(e, "metrics endpoint: getsockname: %s", strerror(e));
  }
  *bound = ntohs(ss.ss_family == AF_INET ? s4->sin_port : s6->sin6_port);
  return fd;
}

struct tc_metrics_http *
tc_metrics_http_start(struct tc_metrics *m, const char *address, int port)
{
  struct tc_metrics_http *h = calloc(1, sizeof *h);
  if (!h) {
    tc_error(ENOMEM, "metrics endpoint: out of memory");
    return NULL;
  }
  h->m = m;
  int fd = listen_on(address, port, &h->port);
  if (fd < 0) {
    free(h);
    return NULL;
  }
  /* Scrapers are few: a small connection cap and a short idle timeout keep
   * a stuck one from holding the thread's sockets. */
  h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, h,
                          MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) 10,
                          MHD_OPTION_CONNECTION_LIMIT, (unsigned) 16, MHD_OPTION_END);
  if (!h->d) {
    close(fd);
    free(h);
    tc_error(EIO, "metrics endpoint: libmicrohttpd did not start on %s port %d", address ? address : "127.0.0.1",
             port);
    return NULL;
  }
  return h;
}

int
tc_metrics_http_port(const struct tc_metrics_http *h)
{
  return h->port;
}

void
tc_metrics_http_stop(struct tc_metrics_http *h)
{
  if (!h)
    return;
  /* MHD_stop_daemon closes the listen socket it was given. */
  MHD_stop_daemon(h->d);
  free(h);
}
