/* What the gateway's HTTP services (KV API, admin API) share: their
 * listening sockets, their PEM files and libmicrohttpd's log. */
#ifndef TROMCHO_LISTEN_H
#define TROMCHO_LISTEN_H
#include <stdarg.h>
#include <stddef.h>

/* HOST:PORT or [V6]:PORT (the value of option) into a bound, listening
 * socket; bound receives the address actually bound. -1 with tc_last_error()
 * naming the option and the address on failure. */
int gw_listen(const char *option, const char *address, char *bound, size_t bound_len);

/* The PEM file at path (the value of option), NUL-terminated, for
 * libmicrohttpd (caller frees): NULL with an error naming the option if it
 * cannot be read, is empty or is larger than 1 MiB. */
char *gw_read_pem(const char *option, const char *path);

/* libmicrohttpd's messages (MHD_OPTION_EXTERNAL_LOGGER) at debug level;
 * cls: the service's name, as the messages' prefix. */
void gw_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#endif
