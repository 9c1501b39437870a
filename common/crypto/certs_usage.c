/* Extended key usage of a certificate: does it fit the use it is put to
 * (DESIGN.md section 2: clientAuth when it acts as a client)? */
#include <config.h>
#include <errno.h>
#include <string.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include "certs.h"
#include "error.h"

int
tc_cert_der_check_purpose(const uint8_t *der, size_t len, const char *purpose_oid, const char *what)
{
  gnutls_x509_crt_t crt;
  char cn[TC_CN_MAX];
  if (gnutls_x509_crt_init(&crt) < 0)
    return tc_error(ENOMEM, "certificate: out of memory");
  gnutls_datum_t d = { (unsigned char *) der, (unsigned) len };
  int r = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_DER);
  if (r < 0) {
    gnutls_x509_crt_deinit(crt);
    return tc_error(EBADMSG, "certificate does not parse: %s", gnutls_strerror(r));
  }
  int found = 0, present = 0;
  for (unsigned i = 0;; i++) {
    char oid[128];
    size_t sz = sizeof oid;
    r = gnutls_x509_crt_get_key_purpose_oid(crt, i, oid, &sz, NULL);
    if (r == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
      break;
    if (r < 0) {
      gnutls_x509_crt_deinit(crt);
      return tc_error(EBADMSG, "certificate: extended key usage does not parse: %s", gnutls_strerror(r));
    }
    present = 1;
    if (strcmp(oid, purpose_oid) == 0 || strcmp(oid, GNUTLS_KP_ANY) == 0)
      found = 1;
  }
  tc_cert_der_cn(der, len, cn, sizeof cn);
  gnutls_x509_crt_deinit(crt);
  /* No extension at all: any use (RFC 5280 4.2.1.12). */
  if (present && !found)
    return tc_error(EACCES, "certificate CN=%s: extended key usage does not allow %s", cn, what);
  return 0;
}
