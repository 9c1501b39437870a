/* X.509 certificates for the messenger and the tools (GnuTLS): loading a
 * certificate chain and its private key, signing and checking handshake
 * signatures, verifying a peer's chain against osd_ca / mon_ca / client_ca
 * (which decides the peer's role, DESIGN.md section 2), and issuing
 * certificates (tromcho make-certs).
 *
 * All calls return 0 (or a pointer) on success and -1 (NULL) with errno and
 * tc_last_error() naming the call and the file or subject on failure. */
#ifndef TROMCHO_CERTS_H
#define TROMCHO_CERTS_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define TC_CERT_MAX_CHAIN 8
#define TC_CERT_MAX_SIG 1024
#define TC_CN_MAX 128

/* Our own identity: a chain (end entity first) and its private key. */
struct tc_cert_identity;

/* Load a PEM chain and PEM key. Unless unchecked_key, proves that the key
 * belongs to the first certificate (signs and verifies a probe). */
struct tc_cert_identity *tc_cert_identity_load(const char *cert_file, const char *key_file,
                                               int unchecked_key);
void tc_cert_identity_free(struct tc_cert_identity *id);
/* DER of the i-th certificate of the chain (borrowed); n = chain length. */
int tc_cert_identity_chain(const struct tc_cert_identity *id, int i, const uint8_t **der, size_t *len);
int tc_cert_identity_chain_len(const struct tc_cert_identity *id);
const char *tc_cert_identity_cn(const struct tc_cert_identity *id);
/* Sign data with the identity's key; the algorithm follows the key type
 * (ECDSA-SHA256, Ed25519, RSA-PKCS#1-SHA256). *siglen <= TC_CERT_MAX_SIG. */
int tc_cert_sign(const struct tc_cert_identity *id, const void *data, size_t len,
                 uint8_t *sig, size_t *siglen);

/* A trust anchor set loaded from one PEM file (one CA or several). */
struct tc_cert_trust;
struct tc_cert_trust *tc_cert_trust_load(const char *ca_file);
/* 1 if a and b hold a common CA (the same key), e.g. osd_ca and client_ca
 * naming one CA -- which would make every user an OSD. */
int tc_cert_trust_overlap(const struct tc_cert_trust *a, const struct tc_cert_trust *b);
void tc_cert_trust_free(struct tc_cert_trust *t);

/* A peer's verified chain: its CN and public key. */
struct tc_cert_peer;
/* What the peer does: its certificate's extended key usage must allow it
 * (clientAuth to connect as a client, serverAuth to serve). */
enum tc_cert_purpose { TC_CERT_ANY = 0, TC_CERT_CLIENT, TC_CERT_SERVER };
/* Verify a chain given as DER blobs (end entity first) against trust at
 * time now: signatures, validity dates, CA constraints, key usage
 * (digitalSignature when the extension is present), extended key usage
 * (purpose, when the extension is present). On failure the message
 * says why (expired, not yet valid, unknown issuer, ...); errno is ESRCH
 * when the issuer is not in trust, EACCES for other reasons. */
struct tc_cert_peer *tc_cert_verify_chain(const struct tc_cert_trust *trust,
                                          const uint8_t *const *der, const size_t *len, int n,
                                          enum tc_cert_purpose purpose);
void tc_cert_peer_free(struct tc_cert_peer *p);
const char *tc_cert_peer_cn(const struct tc_cert_peer *p);
/* Check a signature made by tc_cert_sign with the peer's key (EBADMSG if
 * it does not verify). */
int tc_cert_peer_check_sig(const struct tc_cert_peer *p, const void *data, size_t len,
                           const uint8_t *sig, size_t siglen);
/* The subject CN of a DER certificate, for log lines ("?" if unreadable). */
void tc_cert_der_cn(const uint8_t *der, size_t len, char *cn, size_t cnlen);

/* --- issuing (make-certs) --- */
enum tc_key_type { TC_KEY_ECDSA_P256 = 0, TC_KEY_ED25519, TC_KEY_RSA3072 };
int tc_key_type_parse(const char *name);        /* "ecdsa", "ed25519", "rsa"; -1 if unknown */

struct tc_cert_spec {
  const char *cn;
  int is_ca;            /* basicConstraints CA:TRUE, keyCertSign */
  int server;           /* extended key usage serverAuth (+ SAN localhost, 127.0.0.1, ::1) */
  int client;           /* extended key usage clientAuth */
  const char *const *dns;  /* extra DNS subjectAltNames, NULL-terminated (may be NULL) */
  time_t not_before;    /* 0: now - 1 minute */
  time_t not_after;     /* 0: not_before + days */
  int days;
};

/* Generate a key of type; write it as PEM to key_file (mode 0600). Then
 * issue a certificate for it, signed by the issuer's certificate and key
 * files (NULL: self-signed), written as PEM to cert_file. Files are written
 * to a temporary name and renamed, so a failure leaves no half file. */
int tc_cert_issue(const struct tc_cert_spec *spec, enum tc_key_type type,
                  const char *issuer_cert, const char *issuer_key,
                  const char *cert_file, const char *key_file);

#endif
