/* The Vault/OpenBao client (DESIGN.md section 6): image keys kept outside
 * the cluster, as `enc_key` = "vault:<ID>".
 *
 * Login: POST {vault_url}/v1/auth/cert/login over TLS with the client's
 * certificate (`cert`/`pkey`, read from disk again at every login, so a
 * rotated certificate is picked up without a restart), checking the server
 * against `vault_ca`. The token is cached, renewed (POST
 * /v1/auth/token/renew-self) once two thirds of its TTL have passed, and
 * replaced by a new login when it has expired, when renewal fails, or when
 * Vault answers 403 (revoked). Key: GET {vault_url}/v1/secret/<ID> (KV v1),
 * field `key`, 128 hex digits, two different halves.
 *
 * The key and the token live only in this process's memory, are wiped when
 * freed, and are never logged. Thread-safe (one request at a time). */
#ifndef TROMCHO_VAULT_H
#define TROMCHO_VAULT_H
#include <stddef.h>
#include <stdint.h>
#include "crypto.h"
#include "tc_config.h"

struct tc_vault;

/* cfg outlives the handle. Never fails for a missing vault_url: that is
 * reported when a key is asked for. NULL only when out of memory. */
struct tc_vault *tc_vault_new(const struct tc_config *cfg);
void tc_vault_free(struct tc_vault *v);

/* The key of image `image` kept in Vault as secret `id` (the part after
 * "vault:"). Returns 0, or -1 with errno and a message naming the image and
 * the cause: EINVAL (vault_url or the certificate not configured, malformed
 * key), EHOSTUNREACH (Vault unreachable), EACCES (TLS failed, login refused,
 * or 403 on the secret), ENOENT (no such secret), EPROTO (a reply that is not Vault's). */
int tc_vault_get_key(struct tc_vault *v, const char *image, const char *id, uint8_t key[TC_XTS_KEY_SIZE]);

/* --- reply parsers (vault_reply.c; fuzzed) --- */

/* A login or renew reply: {"auth": {"client_token": T, "lease_duration": S}}.
 * token gets a copy (caller wipes and frees); ttl in seconds (0: none). */
int tc_vault_parse_auth(const char *body, size_t len, char **token, int64_t *ttl);
/* A secret reply: {"data": {"key": "<128 hex>"}} into key; messages name image. */
int tc_vault_parse_secret(const char *body, size_t len, const char *image, const char *id,
                          uint8_t key[TC_XTS_KEY_SIZE]);
/* Vault's {"errors": [...]} joined into buf (for messages); "" if none. */
void tc_vault_parse_errors(const char *body, size_t len, char *buf, size_t buflen);

#endif
