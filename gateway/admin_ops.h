/* The admin API's calls, executed with the gateway's own tc_client
 * (common/image/image_admin.c does the work) after the seed's API rights
 * (common/cluster/perms.c, tc_perm_api) allowed them for the caller.
 *
 * The client acts as the gateway's `cert` identity, as Vitastor's
 * `vitastor-cli serve` does: with use_perms it must be an administrator for
 * every call to be able to succeed; the caller's own rights are checked here
 * before anything is done. */
#ifndef TROMCHO_ADMIN_OPS_H
#define TROMCHO_ADMIN_OPS_H
#include <stdbool.h>
#include <json-c/json.h>
#include "admin_req.h"
#include "client.h"
#include "perms.h"

/* A caller: who its certificate proved and its /config/user record. */
struct admin_caller {
  struct tc_identity id;
  struct tc_user user;
  char *name;
  char **groups;
};

/* The caller for a verified user certificate whose CN is cn: reads
 * /config/user/<cn> (absent: a client in no group). -1 with e set (503)
 * when the KV cannot be read. anonymous: role ANON, no KV access. */
int admin_caller_load(struct tc_client *cl, const char *cn, struct admin_caller *c, struct admin_err *e);
void admin_caller_anonymous(struct admin_caller *c);
void admin_caller_free(struct admin_caller *c);

/* Run one parsed call for who. The reply object, or NULL with e set
 * (403 permission denied, 404 no such image, 409 exists or busy, ...). */
json_object *admin_exec(struct tc_client *cl, bool use_perms, const struct tc_identity *who,
                        const struct admin_req *r, struct admin_err *e);

/* HTTP status of a tc_error errno. */
int admin_status_of_errno(int err);

#endif
