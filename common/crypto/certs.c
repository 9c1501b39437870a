/* Loading identities, verifying peer chains, handshake signatures (GnuTLS). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <gnutls/abstract.h>
#include "certs.h"
#include "error.h"

struct tc_cert_identity {
  gnutls_x509_crt_t *crts;
  unsigned ncrts;
  gnutls_datum_t der[TC_CERT_MAX_CHAIN];
  gnutls_privkey_t key;
  gnutls_sign_algorithm_t sigalg;
  char cn[TC_CN_MAX];
};

#define TRUST_MAX_IDS 16
struct tc_cert_trust {
  gnutls_x509_trust_list_t list;
  /* SHA-256 key IDs of the CAs, to tell when two CA options name one CA. */
  uint8_t ids[TRUST_MAX_IDS][32];
  unsigned nids;
};

struct tc_cert_peer {
  gnutls_pubkey_t pub;
  gnutls_sign_algorithm_t sigalg;
  char cn[TC_CN_MAX];
};

static int
sigalg_for_pk(int pk, gnutls_sign_algorithm_t *out)
{
  switch (pk) {
  case GNUTLS_PK_ECDSA: *out = GNUTLS_SIGN_ECDSA_SHA256; return 0;
  case GNUTLS_PK_EDDSA_ED25519: *out = GNUTLS_SIGN_EDDSA_ED25519; return 0;
  case GNUTLS_PK_RSA: *out = GNUTLS_SIGN_RSA_SHA256; return 0;
  default: return -1;
  }
}

static void
crt_cn(gnutls_x509_crt_t crt, char *cn, size_t cnlen)
{
  size_t sz = cnlen;
  if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &sz) < 0)
    snprintf(cn, cnlen, "?");
  /* A CN is printed in log lines: keep it printable. */
  for (char *p = cn; *p; p++)
    if (*p < 0x20 || *p == 0x7f)
      *p = '?';
}

void
tc_cert_der_cn(const uint8_t *der, size_t len, char *cn, size_t cnlen)
{
  gnutls_x509_crt_t crt;
  snprintf(cn, cnlen, "?");
  if (gnutls_x509_crt_init(&crt) < 0)
    return;
  gnutls_datum_t d = { (unsigned char *) der, (unsigned) len };
  if (gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_DER) == 0)
    crt_cn(crt, cn, cnlen);
  gnutls_x509_crt_deinit(crt);
}

void
tc_cert_identity_free(struct tc_cert_identity *id)
{
  if (!id)
    return;
  for (unsigned i = 0; i < id->ncrts; i++) {
    gnutls_x509_crt_deinit(id->crts[i]);
    gnutls_free(id->der[i].data);
  }
  gnutls_free(id->crts);
  if (id->key)
    gnutls_privkey_deinit(id->key);
  free(id);
}

struct tc_cert_identity *
tc_cert_identity_load(const char *cert_file, const char *key_file, int unchecked_key)
{
  gnutls_datum_t d = { NULL, 0 };
  int r;
  struct tc_cert_identity *id = calloc(1, sizeof *id);
  if (!id) {
    tc_error(ENOMEM, "load certificate %s: out of memory", cert_file);
    return NULL;
  }
  if ((r = gnutls_load_file(cert_file, &d)) < 0) {
    tc_error(ENOENT, "load certificate %s: %s", cert_file, gnutls_strerror(r));
    goto fail;
  }
  r = gnutls_x509_crt_list_import2(&id->crts, &id->ncrts, &d, GNUTLS_X509_FMT_PEM, 0);
  gnutls_free(d.data);
  d.data = NULL;
  if (r < 0 || id->ncrts == 0) {
    tc_error(EINVAL, "load certificate %s: %s", cert_file, r < 0 ? gnutls_strerror(r) : "no certificate");
    goto fail;
  }
  if (id->ncrts > TC_CERT_MAX_CHAIN) {
    tc_error(EINVAL, "load certificate %s: chain of %u, at most %d", cert_file, id->ncrts, TC_CERT_MAX_CHAIN);
    goto fail;
  }
  for (unsigned i = 0; i < id->ncrts; i++)
    if ((r = gnutls_x509_crt_export2(id->crts[i], GNUTLS_X509_FMT_DER, &id->der[i])) < 0) {
      tc_error(EINVAL, "load certificate %s: export: %s", cert_file, gnutls_strerror(r));
      goto fail;
    }
  crt_cn(id->crts[0], id->cn, sizeof id->cn);
  if ((r = gnutls_load_file(key_file, &d)) < 0) {
    tc_error(ENOENT, "load private key %s: %s", key_file, gnutls_strerror(r));
    goto fail;
  }
  if ((r = gnutls_privkey_init(&id->key)) < 0 ||
      (r = gnutls_privkey_import_x509_raw(id->key, &d, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
    tc_error(EINVAL, "load private key %s: %s", key_file, gnutls_strerror(r));
    goto fail;
  }
  gnutls_free(d.data);
  d.data = NULL;
  if (sigalg_for_pk(gnutls_privkey_get_pk_algorithm(id->key, NULL), &id->sigalg) < 0) {
    tc_error(EINVAL, "load private key %s: unsupported key type (ECDSA, Ed25519 or RSA)", key_file);
    goto fail;
  }
  if (!unchecked_key) {
    /* Prove the key is the certificate's: sign a probe, verify with the cert. */
    static const char probe[] = "tromcho key check";
    uint8_t sig[TC_CERT_MAX_SIG];
    size_t siglen = sizeof sig;
    gnutls_pubkey_t pub;
    if (tc_cert_sign(id, probe, sizeof probe, sig, &siglen) < 0)
      goto fail;
    if (gnutls_pubkey_init(&pub) < 0)
      goto fail;
    gnutls_datum_t pd = { (unsigned char *) probe, sizeof probe }, sd = { sig, (unsigned) siglen };
    r = gnutls_pubkey_import_x509(pub, id->crts[0], 0);
    if (r >= 0)
      r = gnutls_pubkey_verify_data2(pub, id->sigalg, 0, &pd, &sd);
    gnutls_pubkey_deinit(pub);
    if (r < 0) {
      tc_error(EINVAL, "private key %s does not belong to certificate %s (CN=%s)", key_file, cert_file, id->cn);
      goto fail;
    }
  }
  return id;
fail:
  gnutls_free(d.data);
  tc_cert_identity_free(id);
  return NULL;
}

int
tc_cert_identity_chain_len(const struct tc_cert_identity *id)
{
  return (int) id->ncrts;
}

int
tc_cert_identity_chain(const struct tc_cert_identity *id, int i, const uint8_t **der, size_t *len)
{
  if (i < 0 || (unsigned) i >= id->ncrts)
    return tc_error(EINVAL, "certificate chain: no element %d", i);
  *der = id->der[i].data;
  *len = id->der[i].size;
  return 0;
}

const char *
tc_cert_identity_cn(const struct tc_cert_identity *id)
{
  return id->cn;
}

int
tc_cert_sign(const struct tc_cert_identity *id, const void *data, size_t len,
             uint8_t *sig, size_t *siglen)
{
  gnutls_datum_t d = { (unsigned char *) data, (unsigned) len }, s = { NULL, 0 };
  int r = gnutls_privkey_sign_data2(id->key, id->sigalg, 0, &d, &s);
  if (r < 0)
    return tc_error(EIO, "sign with the key of CN=%s: %s", id->cn, gnutls_strerror(r));
  if (s.size > *siglen) {
    gnutls_free(s.data);
    return tc_error(EOVERFLOW, "sign with the key of CN=%s: signature too long", id->cn);
  }
  memcpy(sig, s.data, s.size);
  *siglen = s.size;
  gnutls_free(s.data);
  return 0;
}

/* Record the key IDs of the CAs in ca_file. */
static int
trust_key_ids(struct tc_cert_trust *t, const char *ca_file)
{
  gnutls_datum_t pem = { NULL, 0 };
  gnutls_x509_crt_t *crts = NULL;
  unsigned n = 0;
  int r = gnutls_load_file(ca_file, &pem);
  if (r < 0)
    return tc_error(ENOENT, "load CA %s: %s", ca_file, gnutls_strerror(r));
  r = gnutls_x509_crt_list_import2(&crts, &n, &pem, GNUTLS_X509_FMT_PEM, 0);
  gnutls_free(pem.data);
  if (r < 0)
    return tc_error(EINVAL, "load CA %s: %s", ca_file, gnutls_strerror(r));
  for (unsigned i = 0; i < n; i++) {
    size_t sz = 32;
    if (t->nids < TRUST_MAX_IDS &&
        gnutls_x509_crt_get_key_id(crts[i], GNUTLS_KEYID_USE_SHA256, t->ids[t->nids], &sz) >= 0 && sz == 32)
      t->nids++;
    gnutls_x509_crt_deinit(crts[i]);
  }
  gnutls_free(crts);
  return 0;
}

struct tc_cert_trust *
tc_cert_trust_load(const char *ca_file)
{
  struct tc_cert_trust *t = calloc(1, sizeof *t);
  if (!t) {
    tc_error(ENOMEM, "load CA %s: out of memory", ca_file);
    return NULL;
  }
  int r = gnutls_x509_trust_list_init(&t->list, 0);
  if (r < 0) {
    free(t);
    tc_error(ENOMEM, "load CA %s: %s", ca_file, gnutls_strerror(r));
    return NULL;
  }
  r = gnutls_x509_trust_list_add_trust_file(t->list, ca_file, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
  if (r <= 0) {
    tc_error(r == 0 ? EINVAL : ENOENT, "load CA %s: %s", ca_file,
             r == 0 ? "no certificate in the file" : gnutls_strerror(r));
    tc_cert_trust_free(t);
    return NULL;
  }
  if (trust_key_ids(t, ca_file) < 0) {
    tc_cert_trust_free(t);
    return NULL;
  }
  return t;
}

int
tc_cert_trust_overlap(const struct tc_cert_trust *a, const struct tc_cert_trust *b)
{
  for (unsigned i = 0; i < a->nids; i++)
    for (unsigned j = 0; j < b->nids; j++)
      if (!memcmp(a->ids[i], b->ids[j], 32))
        return 1;
  return 0;
}

void
tc_cert_trust_free(struct tc_cert_trust *t)
{
  if (!t)
    return;
  gnutls_x509_trust_list_deinit(t->list, 1);
  free(t);
}

void
tc_cert_peer_free(struct tc_cert_peer *p)
{
  if (!p)
    return;
  if (p->pub)
    gnutls_pubkey_deinit(p->pub);
  free(p);
}

const char *
tc_cert_peer_cn(const struct tc_cert_peer *p)
{
  return p->cn;
}

struct tc_cert_peer *
tc_cert_verify_chain(const struct tc_cert_trust *trust, const uint8_t *const *der,
                     const size_t *len, int n, enum tc_cert_purpose purpose)
{
  gnutls_x509_crt_t crts[TC_CERT_MAX_CHAIN];
  struct tc_cert_peer *p = NULL;
  int ncrts = 0, r;
  char cn[TC_CN_MAX] = "?";
  if (n < 1 || n > TC_CERT_MAX_CHAIN) {
    tc_error(EINVAL, "certificate chain of %d certificates (1 to %d allowed)", n, TC_CERT_MAX_CHAIN);
    return NULL;
  }
  for (; ncrts < n; ncrts++) {
    gnutls_datum_t d = { (unsigned char *) der[ncrts], (unsigned) len[ncrts] };
    if (gnutls_x509_crt_init(&crts[ncrts]) < 0) {
      tc_error(ENOMEM, "certificate chain: out of memory");
      goto out;
    }
    if ((r = gnutls_x509_crt_import(crts[ncrts], &d, GNUTLS_X509_FMT_DER)) < 0) {
      gnutls_x509_crt_deinit(crts[ncrts]);
      tc_error(EBADMSG, "certificate %d of the chain does not parse: %s", ncrts, gnutls_strerror(r));
      goto out;
    }
  }
  crt_cn(crts[0], cn, sizeof cn);
  unsigned status = 0;
  /* The extended key usage must fit the peer's part (GnuTLS checks the
   * whole chain; a certificate without the extension fits any purpose). */
  gnutls_typed_vdata_st vdata = { .type = GNUTLS_DT_KEY_PURPOSE_OID,
    .data = (unsigned char *) (purpose == TC_CERT_SERVER ? GNUTLS_KP_TLS_WWW_SERVER : GNUTLS_KP_TLS_WWW_CLIENT) };
  r = gnutls_x509_trust_list_verify_crt2(trust->list, crts, n, purpose == TC_CERT_ANY ? NULL : &vdata,
                                         purpose == TC_CERT_ANY ? 0 : 1, 0, &status, NULL);
  if (r < 0) {
    tc_error(EACCES, "certificate CN=%s: verification failed: %s", cn, gnutls_strerror(r));
    goto out;
  }
  if (status) {
    gnutls_datum_t txt = { NULL, 0 };
    gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &txt, 0);
    /* ESRCH: this CA is not the issuer (the caller may try another CA). */
    tc_error(status & GNUTLS_CERT_SIGNER_NOT_FOUND ? ESRCH : EACCES, "certificate CN=%s: %s%s", cn,
             txt.data ? (char *) txt.data : "not trusted",
             status & GNUTLS_CERT_PURPOSE_MISMATCH ? (purpose == TC_CERT_SERVER
               ? " (its extended key usage lacks serverAuth, needed to serve)"
               : " (its extended key usage lacks clientAuth, needed to connect as a client)") : "");
    gnutls_free(txt.data);
    goto out;
  }
  unsigned ku = 0, crit = 0;
  if (gnutls_x509_crt_get_key_usage(crts[0], &ku, &crit) >= 0 && !(ku & GNUTLS_KEY_DIGITAL_SIGNATURE)) {
    tc_error(EACCES, "certificate CN=%s: key usage does not allow digitalSignature", cn);
    goto out;
  }
  p = calloc(1, sizeof *p);
  if (!p) {
    tc_error(ENOMEM, "certificate chain: out of memory");
    goto out;
  }
  snprintf(p->cn, sizeof p->cn, "%s", cn);
  if ((r = gnutls_pubkey_init(&p->pub)) < 0 || (r = gnutls_pubkey_import_x509(p->pub, crts[0], 0)) < 0) {
    tc_error(EINVAL, "certificate CN=%s: public key: %s", cn, gnutls_strerror(r));
    tc_cert_peer_free(p);
    p = NULL;
    goto out;
  }
  if (sigalg_for_pk(gnutls_pubkey_get_pk_algorithm(p->pub, NULL), &p->sigalg) < 0) {
    tc_error(EINVAL, "certificate CN=%s: unsupported key type", cn);
    tc_cert_peer_free(p);
    p = NULL;
  }
out:
  for (int i = 0; i < ncrts; i++)
    gnutls_x509_crt_deinit(crts[i]);
  return p;
}

int
tc_cert_peer_check_sig(const struct tc_cert_peer *p, const void *data, size_t len,
                       const uint8_t *sig, size_t siglen)
{
  gnutls_datum_t d = { (unsigned char *) data, (unsigned) len }, s = { (unsigned char *) sig, (unsigned) siglen };
  int r = gnutls_pubkey_verify_data2(p->pub, p->sigalg, 0, &d, &s);
  if (r < 0)
    return tc_error(EBADMSG, "signature of CN=%s does not verify: %s", p->cn, gnutls_strerror(r));
  return 0;
}
