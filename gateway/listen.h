/* Listening sockets of the gateway's HTTP services (KV API, admin API). */
#ifndef TROMCHO_LISTEN_H
#define TROMCHO_LISTEN_H
#include <stddef.h>

/* HOST:PORT or [V6]:PORT (the value of option) into a bound, listening
 * socket; bound receives the address actually bound. -1 with tc_last_error()
 * naming the option and the address on failure. */
int gw_listen(const char *option, const char *address, char *bound, size_t bound_len);

#endif
