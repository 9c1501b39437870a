/* What the gateway's HTTP services share (listen.h). */
#include <config.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "listen.h"
#include "error.h"
#include "fullio.h"
#include "log.h"

/* HOST:PORT or [V6]:PORT into a bound, listening socket. */
int
gw_listen(const char *option, const char *address, char *bound, size_t bound_len)
{
  char host[256];
  const char *port;
  if (address[0] == '[') {
    const char *close = strchr(address, ']');
    if (!close || close[1] != ':' || (size_t) (close - address - 1) >= sizeof host)
      return tc_error(EINVAL, "%s '%s': expected HOST:PORT or [IPV6]:PORT", option, address);
    memcpy(host, address + 1, (size_t) (close - address - 1));
    host[close - address - 1] = 0;
    port = close + 2;
  } else {
    const char *colon = strrchr(address, ':');
    if (!colon || colon == address || (size_t) (colon - address) >= sizeof host)
      return tc_error(EINVAL, "%s '%s': expected HOST:PORT", option, address);
    memcpy(host, address, (size_t) (colon - address));
    host[colon - address] = 0;
    port = colon + 1;
  }
  char *end;
  long p = strtol(port, &end, 10);
  if (!*port || *end || p < 0 || p > 65535)
    return tc_error(EINVAL, "%s '%s': bad port '%s'", option, address, port);
  struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_family = AF_UNSPEC,
                            .ai_socktype = SOCK_STREAM }, *ai;
  int rc = getaddrinfo(host, port, &hints, &ai);
  if (rc)
    return tc_error(EINVAL, "%s '%s': %s", option, address, gai_strerror(rc));
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(ai);
    return tc_error(errno, "%s '%s': socket: %s", option, address, strerror(errno));
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 512) < 0) {
    int e = errno;
    freeaddrinfo(ai);
    close(fd);
    return tc_error(e, "%s '%s': cannot listen: %s", option, address, strerror(e));
  }
  freeaddrinfo(ai);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char h[64] = "?";
  int bport = 0;
  if (getsockname(fd, (struct sockaddr *) &ss, &sl) == 0) {
    if (ss.ss_family == AF_INET) {
      inet_ntop(AF_INET, &((struct sockaddr_in *) &ss)->sin_addr, h, sizeof h);
      bport = ntohs(((struct sockaddr_in *) &ss)->sin_port);
    } else {
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *) &ss)->sin6_addr, h, sizeof h);
      bport = ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
    }
  }
  snprintf(bound, bound_len, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", h, bport);
  return fd;
}

char *
gw_read_pem(const char *option, const char *path)
{
  size_t n;
  char *buf = tc_read_file(path, 1u << 20, &n);
  if (!buf) {
    tc_error(errno, "option %s: cannot read %s: %s", option, path,
             errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
    return NULL;
  }
  if (n == 0) {
    free(buf);
    tc_error(EINVAL, "option %s: %s is empty", option, path);
    return NULL;
  }
  return buf;
}

void
gw_mhd_log(void *cls, const char *fmt, va_list ap)
{
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  size_t n = strlen(buf);
  while (n && buf[n - 1] == '\n')
    buf[--n] = 0;
  tc_debug("%s: libmicrohttpd: %s", (const char *) cls, buf);
}
