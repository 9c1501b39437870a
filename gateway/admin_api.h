/* The admin HTTPS API (DESIGN.md section 3): a libmicrohttpd daemon of its
 * own in the gateway process, on gateway_api_address, with server_cert /
 * server_pkey; client certificates chaining to client_ca name the caller
 * (CN = user). Calls and bodies: admin_req.h; rights and work: admin_ops.h. */
#ifndef TROMCHO_ADMIN_API_H
#define TROMCHO_ADMIN_API_H
#include "tc_config.h"

struct admin_api;

/* Start the API if server_cert is set (*out = NULL, 0 when it is not).
 * -1 with tc_last_error() naming the option on a bad configuration:
 * server_cert without server_pkey, use_perms without client_ca,
 * gateway_api_address without server_cert, unreadable files, a port in use. */
int admin_api_start(struct tc_config *cfg, struct admin_api **out);
const char *admin_api_address(const struct admin_api *a);
void admin_api_stop(struct admin_api *a);

#endif
