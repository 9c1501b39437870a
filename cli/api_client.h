/* The CLI's client of the gateway's admin HTTPS API (option api_url): the
 * image commands send their call there instead of changing the KV
 * themselves, authenticated by cert/pkey, the server checked against api_ca. */
#ifndef TROMCHO_API_CLIENT_H
#define TROMCHO_API_CLIENT_H
#include <stdbool.h>
#include <json-c/json.h>
#include "tc_config.h"

/* Whether api_url is set. */
bool cli_api_enabled(const struct tc_config *cfg);

/* POST body (consumed; NULL = {}) to <api_url>/api/v1/<call>. 0 with
 * *reply (caller puts it), or 1 after printing "tromcho CMD: <the API's
 * error> (HTTP status)" or why the API could not be reached. */
int cli_api_call(const char *cmd, const struct tc_config *cfg, const char *call, json_object *body,
                 json_object **reply);

/* Add a string field when v is not NULL. */
void cli_api_add(json_object *o, const char *k, const char *v);

#endif
