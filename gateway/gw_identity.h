/* Who sent a request to the gateway: the CA a TLS client certificate
 * chains to gives the role (DESIGN.md section 2): client_ca -> a user
 * named by its CN (its type and groups come from /config/user/<CN>, read
 * by the filter at each request), osd_ca -> an OSD, mon_ca -> a monitor.
 * The chain is checked with common/crypto/certs.c: signatures, validity
 * dates, key usage, and extended key usage clientAuth. */
#ifndef TROMCHO_GW_IDENTITY_H
#define TROMCHO_GW_IDENTITY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "certs.h"
#include "perms.h"
#include "tc_config.h"

/* A proven identity. `id` is what the rights functions (perms.h) take;
 * id.user is filled by kvfilter_load_user() for users. */
struct gw_identity {
  struct tc_identity id;
  char cn[TC_CN_MAX];         /* certificate CN (the user name for users) */
  char desc[TC_CN_MAX + 32];  /* for logs: "user alice", "osd CN=osd", "anyone" */
};

/* The trust anchors of the three roles. */
struct gw_trust;

/* Load client_ca, osd_ca and mon_ca from cfg (each optional). Refuses two
 * options that name the same CA file or the same certificate. */
struct gw_trust *gw_trust_load(const struct tc_config *cfg);
void gw_trust_free(struct gw_trust *t);
/* Whether any CA is configured (client certificates can be checked). */
bool gw_trust_any(const struct gw_trust *t);
/* The PEM of every configured CA, concatenated (for the TLS server's list of
 * acceptable issuers). Borrowed; NULL if none. */
const char *gw_trust_pem(const struct gw_trust *t);

/* The anonymous identity (no certificate; trusted-network mode only). */
void gw_identity_anyone(struct gw_identity *out);

/* Identify the peer of a TLS connection: session is the connection's
 * gnutls_session_t (MHD_CONNECTION_INFO_GNUTLS_SESSION). Returns 0 with
 * out filled, or -1 with tc_last_error() naming the cause (no certificate,
 * expired, not yet valid, issued by none of the CAs, not for clientAuth). */
int gw_identity_from_session(const struct gw_trust *t, void *session, struct gw_identity *out);

/* The same from a DER chain (end entity first): for tests and proxies. */
int gw_identity_from_chain(const struct gw_trust *t, const uint8_t *const *der, const size_t *len, int n,
                           struct gw_identity *out);

#endif
