/* Issuing keys and certificates with GnuTLS (for tromcho make-certs). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <gnutls/abstract.h>
#include "certs.h"
#include "crypto.h"
#include "error.h"
#include "fullio.h"

int
tc_key_type_parse(const char *name)
{
  if (!strcmp(name, "ecdsa") || !strcmp(name, "ecdsa-p256") || !strcmp(name, "p256"))
    return TC_KEY_ECDSA_P256;
  if (!strcmp(name, "ed25519"))
    return TC_KEY_ED25519;
  if (!strcmp(name, "rsa") || !strcmp(name, "rsa3072") || !strcmp(name, "rsa-3072"))
    return TC_KEY_RSA3072;
  return -1;
}

/* Write data to path through path.tmp + rename, with the given mode. */
static int
write_file(const char *path, const void *data, size_t len, mode_t mode)
{
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int) sizeof tmp)
    return tc_error(ENAMETOOLONG, "write %s: name too long", path);
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    return tc_error(errno, "write %s: %s", tmp, strerror(errno));
  /* The umask must not widen or narrow what we ask for. */
  if (fchmod(fd, mode) < 0 || tc_write_full(fd, data, len, -1) < 0 || fsync(fd) < 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    return tc_error(e, "write %s: %s", tmp, strerror(e));
  }
  close(fd);
  if (rename(tmp, path) < 0) {
    int e = errno;
    unlink(tmp);
    return tc_error(e, "rename %s to %s: %s", tmp, path, strerror(e));
  }
  return 0;
}

/* Ed25519 signs the message itself (GnuTLS names its hash SHA-512). */
static gnutls_digest_algorithm_t
sign_digest(gnutls_privkey_t k)
{
  return gnutls_privkey_get_pk_algorithm(k, NULL) == GNUTLS_PK_EDDSA_ED25519 ? GNUTLS_DIG_SHA512 : GNUTLS_DIG_SHA256;
}

static int
load_issuer(const char *cert_file, const char *key_file, gnutls_x509_crt_t *crt, gnutls_privkey_t *key)
{
  gnutls_datum_t d = { NULL, 0 };
  int r;
  *crt = NULL;
  *key = NULL;
  if ((r = gnutls_load_file(cert_file, &d)) < 0)
    return tc_error(ENOENT, "load issuer certificate %s: %s", cert_file, gnutls_strerror(r));
  r = gnutls_x509_crt_init(crt);
  if (r >= 0)
    r = gnutls_x509_crt_import(*crt, &d, GNUTLS_X509_FMT_PEM);
  gnutls_free(d.data);
  if (r < 0)
    return tc_error(EINVAL, "load issuer certificate %s: %s", cert_file, gnutls_strerror(r));
  if ((r = gnutls_load_file(key_file, &d)) < 0)
    return tc_error(ENOENT, "load issuer key %s: %s", key_file, gnutls_strerror(r));
  r = gnutls_privkey_init(key);
  if (r >= 0)
    r = gnutls_privkey_import_x509_raw(*key, &d, GNUTLS_X509_FMT_PEM, NULL, 0);
  gnutls_free(d.data);
  if (r < 0)
    return tc_error(EINVAL, "load issuer key %s: %s", key_file, gnutls_strerror(r));
  return 0;
}

int
tc_cert_issue(const struct tc_cert_spec *spec, enum tc_key_type type,
              const char *issuer_cert, const char *issuer_key,
              const char *cert_file, const char *key_file)
{
  gnutls_x509_privkey_t xkey = NULL;
  gnutls_privkey_t key = NULL, ikey = NULL;
  gnutls_x509_crt_t crt = NULL, icrt = NULL;
  gnutls_datum_t pem = { NULL, 0 };
  int r, ret = -1;
  const char *what = spec->cn;

  if ((r = gnutls_x509_privkey_init(&xkey)) < 0)
    goto gnutls_fail;
  switch (type) {
  case TC_KEY_ECDSA_P256:
    r = gnutls_x509_privkey_generate2(xkey, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0, NULL, 0);
    break;
  case TC_KEY_ED25519:
    r = gnutls_x509_privkey_generate2(xkey, GNUTLS_PK_EDDSA_ED25519, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_ED25519), 0, NULL, 0);
    break;
  case TC_KEY_RSA3072:
    r = gnutls_x509_privkey_generate2(xkey, GNUTLS_PK_RSA, 3072, 0, NULL, 0);
    break;
  default:
    tc_error(EINVAL, "issue %s: unknown key type %d", what, (int) type);
    goto out;
  }
  if (r < 0)
    goto gnutls_fail;
  if ((r = gnutls_x509_privkey_export2_pkcs8(xkey, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &pem)) < 0)
    goto gnutls_fail;
  if (write_file(key_file, pem.data, pem.size, 0600) < 0)
    goto out;
  tc_wipe(pem.data, pem.size);
  gnutls_free(pem.data);
  pem.data = NULL;

  if ((r = gnutls_privkey_init(&key)) < 0 ||
      (r = gnutls_privkey_import_x509(key, xkey, 0)) < 0 ||
      (r = gnutls_x509_crt_init(&crt)) < 0 ||
      (r = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
      (r = gnutls_x509_crt_set_key(crt, xkey)) < 0)
    goto gnutls_fail;
  uint8_t serial[16];
  if (tc_random(serial, sizeof serial) < 0)
    goto out;
  serial[0] &= 0x7f;   /* a positive INTEGER */
  serial[0] |= 0x01;   /* and no leading zero byte */
  time_t nb = spec->not_before ? spec->not_before : time(NULL) - 60;
  time_t na = spec->not_after ? spec->not_after : nb + (time_t) spec->days * 86400;
  if ((r = gnutls_x509_crt_set_serial(crt, serial, sizeof serial)) < 0 ||
      (r = gnutls_x509_crt_set_activation_time(crt, nb)) < 0 ||
      (r = gnutls_x509_crt_set_expiration_time(crt, na)) < 0 ||
      (r = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, spec->cn, strlen(spec->cn))) < 0 ||
      (r = gnutls_x509_crt_set_basic_constraints(crt, spec->is_ca ? 1 : 0, -1)) < 0)
    goto gnutls_fail;
  unsigned ku = GNUTLS_KEY_DIGITAL_SIGNATURE;
  if (spec->is_ca)
    ku |= GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN;
  if (type == TC_KEY_RSA3072 && spec->server)
    ku |= GNUTLS_KEY_KEY_ENCIPHERMENT;
  if ((r = gnutls_x509_crt_set_key_usage(crt, ku)) < 0)
    goto gnutls_fail;
  if (spec->server && (r = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0)
    goto gnutls_fail;
  if (spec->client && (r = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_CLIENT, 0)) < 0)
    goto gnutls_fail;
  if (spec->server) {
    static const uint8_t lo4[4] = { 127, 0, 0, 1 };
    static const uint8_t lo6[16] = { [15] = 1 };
    if ((r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9, GNUTLS_FSAN_APPEND)) < 0 ||
        (r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, lo4, 4, GNUTLS_FSAN_APPEND)) < 0 ||
        (r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, lo6, 16, GNUTLS_FSAN_APPEND)) < 0)
      goto gnutls_fail;
    for (const char *const *d = spec->dns; d && *d; d++)
      if ((r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, *d, strlen(*d), GNUTLS_FSAN_APPEND)) < 0)
        goto gnutls_fail;
  }
  uint8_t kid[64];
  size_t kidlen = sizeof kid;
  if ((r = gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA1, kid, &kidlen)) < 0 ||
      (r = gnutls_x509_crt_set_subject_key_id(crt, kid, kidlen)) < 0)
    goto gnutls_fail;
  if (issuer_cert) {
    if (load_issuer(issuer_cert, issuer_key, &icrt, &ikey) < 0)
      goto out;
    kidlen = sizeof kid;
    if (gnutls_x509_crt_get_subject_key_id(icrt, kid, &kidlen, NULL) >= 0 &&
        (r = gnutls_x509_crt_set_authority_key_id(crt, kid, kidlen)) < 0)
      goto gnutls_fail;
    r = gnutls_x509_crt_privkey_sign(crt, icrt, ikey, sign_digest(ikey), 0);
  }
  else {
    if ((r = gnutls_x509_crt_set_authority_key_id(crt, kid, kidlen)) < 0)
      goto gnutls_fail;
    r = gnutls_x509_crt_privkey_sign(crt, crt, key, sign_digest(key), 0);
  }
  if (r < 0)
    goto gnutls_fail;
  if ((r = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &pem)) < 0)
    goto gnutls_fail;
  if (write_file(cert_file, pem.data, pem.size, 0644) < 0)
    goto out;
  ret = 0;
  goto out;
gnutls_fail:
  tc_error(EIO, "issue certificate CN=%s: %s", what, gnutls_strerror(r));
out:
  if (pem.data)
    gnutls_free(pem.data);
  if (crt) gnutls_x509_crt_deinit(crt);
  if (icrt) gnutls_x509_crt_deinit(icrt);
  if (key) gnutls_privkey_deinit(key);
  if (ikey) gnutls_privkey_deinit(ikey);
  if (xkey) gnutls_x509_privkey_deinit(xkey);
  if (ret < 0 && key_file)
    unlink(key_file);   /* never leave a key without its certificate */
  return ret;
}
