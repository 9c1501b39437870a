/* Certificate -> identity for the gateway (see identity.h). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include "gw_identity.h"
#include "error.h"
#include "fullio.h"

struct gw_trust {
  struct tc_cert_trust *ca[3];   /* client_ca, osd_ca, mon_ca */
  char *pem;                      /* all of them, for the TLS server */
};

static const char *const ca_opt[3] = { "client_ca", "osd_ca", "mon_ca" };
static const enum tc_peer_role ca_role[3] = { TC_ROLE_USER, TC_ROLE_OSD, TC_ROLE_MON };

/* Read a whole file (caller frees); NULL with tc_error. */
static char *
slurp(const char *opt, const char *path, size_t *len)
{
  char *buf = tc_read_file(path, 16u << 20, len);
  if (!buf)
    tc_error(errno, "option %s: cannot read %s: %s", opt, path, strerror(errno));
  return buf;
}

struct gw_trust *
gw_trust_load(const struct tc_config *cfg)
{
  struct gw_trust *t = calloc(1, sizeof *t);
  char *pem[3] = { NULL, NULL, NULL };
  size_t len[3] = { 0, 0, 0 }, total = 0;
  if (!t) {
    tc_error(ENOMEM, "gateway: out of memory");
    return NULL;
  }
  for (int i = 0; i < 3; i++) {
    const char *path = tc_config_str(cfg, ca_opt[i]);
    if (!path)
      continue;
    if (!(pem[i] = slurp(ca_opt[i], path, &len[i])))
      goto fail;
    for (int j = 0; j < i; j++)
      if (pem[j] && len[j] == len[i] && memcmp(pem[j], pem[i], len[i]) == 0) {
        tc_error(EINVAL, "options %s and %s name the same CA (%s): each role needs its own CA, "
                 "or a certificate of one role would act as the other", ca_opt[j], ca_opt[i], path);
        goto fail;
      }
    if (!(t->ca[i] = tc_cert_trust_load(path))) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s", tc_last_error());
      tc_error(EINVAL, "option %s: %s", ca_opt[i], msg);
      goto fail;
    }
    total += len[i] + 1;
  }
  if (total) {
    if (!(t->pem = malloc(total + 1))) {
      tc_error(ENOMEM, "gateway: out of memory");
      goto fail;
    }
    size_t o = 0;
    for (int i = 0; i < 3; i++)
      if (pem[i]) {
        memcpy(t->pem + o, pem[i], len[i]);
        o += len[i];
        t->pem[o++] = '\n';
      }
    t->pem[o] = 0;
  }
  for (int i = 0; i < 3; i++)
    free(pem[i]);
  return t;
fail:
  for (int i = 0; i < 3; i++)
    free(pem[i]);
  gw_trust_free(t);
  return NULL;
}

void
gw_trust_free(struct gw_trust *t)
{
  if (!t)
    return;
  for (int i = 0; i < 3; i++)
    tc_cert_trust_free(t->ca[i]);
  free(t->pem);
  free(t);
}

bool
gw_trust_any(const struct gw_trust *t)
{
  return t && (t->ca[0] || t->ca[1] || t->ca[2]);
}

const char *
gw_trust_pem(const struct gw_trust *t)
{
  return t ? t->pem : NULL;
}

void
gw_identity_anyone(struct gw_identity *out)
{
  memset(out, 0, sizeof *out);
  out->id.role = TC_ROLE_ANON;
  snprintf(out->desc, sizeof out->desc, "anyone");
}

int
gw_identity_from_chain(const struct gw_trust *t, const uint8_t *const *der, const size_t *len, int n,
                       struct gw_identity *out)
{
  gw_identity_anyone(out);
  if (n < 1)
    return tc_error(EACCES, "no client certificate: this gateway (use_perms) needs one chaining to "
                    "client_ca, osd_ca or mon_ca");
  char cn[TC_CN_MAX];
  tc_cert_der_cn(der[0], len[0], cn, sizeof cn);
  char why[400] = "";
  for (int i = 0; i < 3; i++) {
    if (!t || !t->ca[i])
      continue;
    struct tc_cert_peer *p = tc_cert_verify_chain(t->ca[i], der, len, n, TC_CERT_CLIENT);
    if (!p) {
      if (errno == ESRCH)
        continue;   /* not this CA's: try the next */
      /* Issued by this CA but wrong (expired, bad usage...): say so. */
      return tc_error(EACCES, "client certificate CN=%s (%s): %s", cn, ca_opt[i], tc_last_error());
    }
    tc_cert_peer_free(p);
    out->id.role = ca_role[i];
    snprintf(out->cn, sizeof out->cn, "%s", cn);
    if (ca_role[i] == TC_ROLE_USER) {
      out->id.name = out->cn;
      snprintf(out->desc, sizeof out->desc, "user %s", cn);
    } else
      snprintf(out->desc, sizeof out->desc, "%s CN=%s", ca_role[i] == TC_ROLE_OSD ? "osd" : "mon", cn);
    return 0;
  }
  snprintf(why, sizeof why, "issued by none of client_ca, osd_ca, mon_ca");
  return tc_error(EACCES, "client certificate CN=%s: %s", cn, why);
}

int
gw_identity_from_session(const struct gw_trust *t, void *session, struct gw_identity *out)
{
  gnutls_session_t s = session;
  unsigned n = 0;
  gw_identity_anyone(out);
  const gnutls_datum_t *certs = s ? gnutls_certificate_get_peers(s, &n) : NULL;
  if (!certs || n == 0)
    return gw_identity_from_chain(t, NULL, NULL, 0, out);
  if (n > TC_CERT_MAX_CHAIN)
    return tc_error(EACCES, "client certificate chain of %u certificates (at most %d)", n, TC_CERT_MAX_CHAIN);
  const uint8_t *der[TC_CERT_MAX_CHAIN];
  size_t len[TC_CERT_MAX_CHAIN];
  for (unsigned i = 0; i < n; i++) {
    der[i] = certs[i].data;
    len[i] = certs[i].size;
  }
  return gw_identity_from_chain(t, der, len, (int) n, out);
}
