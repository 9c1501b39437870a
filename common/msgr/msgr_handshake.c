/* The messenger handshake (msgr.h), like TLS 1.3 with X25519:
 *
 *   client                                   server
 *   ClientHello {random, share, mode, force, flags}  ->
 *                       <- ServerHello {random, share, mode chosen, flags, rekey}
 *                       <- Certificate, CertificateVerify, Finished   (keyed)
 *   [Certificate, CertificateVerify] Finished ->                      (keyed)
 *
 * Each message: type (1), version (1), 0 (2), body length (4, LE), body.
 * The transcript is every message, whole, in order. Keys:
 *   master  = HKDF-Extract(salt = SHA-256(ClientHello || ServerHello), X25519 secret)
 *   s_fin, c_fin = HKDF-Expand(master, "tromcho s finished" / "tromcho c finished")
 *   c2s, s2c, salt = HKDF-Expand(master, label || SHA-256(transcript through server Finished))
 * A CertificateVerify signs "tromcho v1 server|client signature" || SHA-256
 * of the transcript before it; Finished = HMAC-SHA256(fin key, SHA-256 of
 * the transcript before it). The chosen mode is in ServerHello, covered by
 * the server's signature and both Finished MACs, so it cannot be changed
 * on the way. An Alert {code, text} explains a refusal before the close. */
#include <config.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "crypto.h"
#include "error.h"
#include "msgr_int.h"

enum { HS_CLIENT_HELLO = 1, HS_SERVER_HELLO = 2, HS_CERT = 3, HS_CERT_VERIFY = 4, HS_FINISHED = 5,
       HS_ALERT = 15 };
enum { HS_VERSION = TC_PROTO_VERSION };
enum { CH_WANT_KEYS = 1, CH_HAS_CERT = 2 };
enum { SH_KEYED = 1 };
#define FORCE_UNSET 0xff
#define CH_SIZE 72
#define SH_SIZE 68
#define HDR 8

enum {
  ST_C_START, ST_C_WAIT_SH, ST_C_WAIT_CERT, ST_C_WAIT_CV, ST_C_WAIT_FIN,
  ST_S_WAIT_CH, ST_S_WAIT_CCERT, ST_S_WAIT_CCV, ST_S_WAIT_CFIN,
  ST_DONE, ST_FAILED
};

static const char SIG_SERVER[] = "tromcho v1 server signature";
static const char SIG_CLIENT[] = "tromcho v1 client signature";

const char *
tc_msgr_mode_name(int mode)
{
  switch (mode) {
  case TC_MODE_NONE: return "none";
  case TC_MODE_PAYLOAD: return "payload";
  case TC_MODE_GCM: return "gcm";
  case TC_MODE_UNSET: return "(unset)";
  default: return "?";
  }
}

int
tc_msgr_mode_parse(const char *s)
{
  if (!s || !*s) return TC_MODE_UNSET;
  if (!strcmp(s, "none")) return TC_MODE_NONE;
  if (!strcmp(s, "payload")) return TC_MODE_PAYLOAD;
  if (!strcmp(s, "gcm")) return TC_MODE_GCM;
  return -2;
}

const char *
tc_peer_role_name(int role)
{
  switch (role) {
  case TC_ROLE_ANON: return "anonymous";
  case TC_ROLE_OSD: return "osd";
  case TC_ROLE_MON: return "mon";
  case TC_ROLE_USER: return "user";
  default: return "?";
  }
}

static int
min_i(int a, int b)
{
  return a < b ? a : b;
}

int
tc_msgr_negotiate(int cmode, int cforce, int smode, int sforce, int keyed, char *why, size_t whylen)
{
  int c = keyed ? cmode : min_i(cmode, TC_MODE_PAYLOAD);
  int s = keyed ? smode : min_i(smode, TC_MODE_PAYLOAD);
  int mode = min_i(c, s);
  /* The seed: with certificates the client may not go below the server's
   * checksums (at most payload) unless force_proto_checksums allows it. */
  int sfloor = sforce != TC_MODE_UNSET ? sforce : keyed ? min_i(smode, TC_MODE_PAYLOAD) : TC_MODE_NONE;
  int cfloor = cforce != TC_MODE_UNSET ? cforce : TC_MODE_NONE;
  if (!keyed && (sforce == TC_MODE_GCM || cforce == TC_MODE_GCM)) {
    snprintf(why, whylen, "force_proto_checksums=gcm on the %s, but there are no keys "
             "(gcm needs osd_cert on the server and osd_ca on the client)",
             sforce == TC_MODE_GCM ? "server" : "client");
    return -1;
  }
  if (mode < sfloor) {
    snprintf(why, whylen, "mode %s (client proto_checksums=%s, server %s) is below the server's "
             "floor %s (force_proto_checksums%s)", tc_msgr_mode_name(mode), tc_msgr_mode_name(cmode),
             tc_msgr_mode_name(smode), tc_msgr_mode_name(sfloor),
             sforce != TC_MODE_UNSET ? "" : " unset: with certificates checksums are required");
    return -1;
  }
  if (mode < cfloor) {
    snprintf(why, whylen, "mode %s (client proto_checksums=%s, server %s) is below the client's "
             "force_proto_checksums=%s", tc_msgr_mode_name(mode), tc_msgr_mode_name(cmode),
             tc_msgr_mode_name(smode), tc_msgr_mode_name(cfloor));
    return -1;
  }
  return mode;
}

int
tc_hs_init(struct tc_hs *hs, const struct tc_hs_cfg *cfg, int is_server)
{
  memset(hs, 0, sizeof *hs);
  hs->cfg = cfg;
  hs->is_server = is_server;
  hs->state = is_server ? ST_S_WAIT_CH : ST_C_START;
  if (tc_random(hs->priv, sizeof hs->priv) < 0)
    return -1;
  tc_x25519_base(hs->pub, hs->priv);
  return 0;
}

void
tc_hs_clear(struct tc_hs *hs)
{
  tc_cert_peer_free(hs->peer);
  hs->peer = NULL;
  if (hs->transcript.p)
    tc_wipe(hs->transcript.p, hs->transcript.cap);
  tc_buf_free(&hs->transcript);
  tc_wipe(hs->priv, sizeof hs->priv);
  tc_wipe(hs->master, sizeof hs->master);
  tc_wipe(hs->c_fin, sizeof hs->c_fin);
  tc_wipe(hs->s_fin, sizeof hs->s_fin);
  tc_wipe(hs->c2s, sizeof hs->c2s);
  tc_wipe(hs->s2c, sizeof hs->s2c);
}

static void
put32(uint8_t *p, uint32_t v)
{
  p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}

static uint32_t
get32(const uint8_t *p)
{
  return p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

/* Append one message to out and, unless it is an alert, to the transcript. */
static int
emit(struct tc_hs *hs, struct tc_buf *out, int type, const void *body, size_t len)
{
  uint8_t h[HDR] = { type, HS_VERSION, 0, 0 };
  put32(h + 4, (uint32_t) len);
  if (tc_buf_append(out, h, HDR) < 0 || tc_buf_append(out, body, len) < 0)
    return -1;
  if (type == HS_ALERT)
    return 0;
  if (tc_buf_append(&hs->transcript, h, HDR) < 0 || tc_buf_append(&hs->transcript, body, len) < 0)
    return -1;
  return 0;
}

/* Refuse: record the reason, and queue an alert telling the peer. */
static int
refuse(struct tc_hs *hs, struct tc_buf *out, int err, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
static int
refuse(struct tc_hs *hs, struct tc_buf *out, int err, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  hs->state = ST_FAILED;
  uint8_t body[2 + 400];
  size_t n = strnlen(msg, 400);
  body[0] = err & 0xff;
  body[1] = (err >> 8) & 0xff;
  memcpy(body + 2, msg, n);
  if (out)
    emit(hs, out, HS_ALERT, body, 2 + n);
  return tc_error(err, "%s", msg);
}

static void
th_now(const struct tc_hs *hs, uint8_t th[32])
{
  tc_sha256(hs->transcript.p, hs->transcript.len, th);
}

static int
expand_label(const uint8_t prk[32], const char *label, const uint8_t *ctx, size_t ctxlen,
             void *out, size_t outlen)
{
  uint8_t info[64 + 32];
  size_t l = strlen(label);
  memcpy(info, label, l);
  if (ctx)
    memcpy(info + l, ctx, ctxlen);
  return tc_hkdf_expand(prk, info, l + (ctx ? ctxlen : 0), out, outlen);
}

/* After ClientHello and ServerHello are in the transcript. */
static int
derive_master(struct tc_hs *hs)
{
  uint8_t shared[32], th[32];
  if (tc_x25519(shared, hs->priv, hs->peer_pub) < 0)
    return -1;
  th_now(hs, th);
  tc_hkdf_extract(th, sizeof th, shared, sizeof shared, hs->master);
  tc_wipe(shared, sizeof shared);
  if (expand_label(hs->master, "tromcho s finished", NULL, 0, hs->s_fin, 32) < 0 ||
      expand_label(hs->master, "tromcho c finished", NULL, 0, hs->c_fin, 32) < 0)
    return -1;
  return 0;
}

/* After the server's Finished is in the transcript. */
static int
derive_traffic(struct tc_hs *hs)
{
  uint8_t th[32], salt[8];
  th_now(hs, th);
  if (expand_label(hs->master, "tromcho c2s", th, 32, hs->c2s, 32) < 0 ||
      expand_label(hs->master, "tromcho s2c", th, 32, hs->s2c, 32) < 0 ||
      expand_label(hs->master, "tromcho salt", th, 32, salt, 8) < 0)
    return -1;
  memcpy(&hs->salt, salt, 8);
  return 0;
}

static int
emit_cert_and_verify(struct tc_hs *hs, struct tc_buf *out, const char *ctx)
{
  const struct tc_cert_identity *id = hs->cfg->id;
  struct tc_buf b = { 0 };
  int n = tc_cert_identity_chain_len(id);
  uint8_t cnt[2] = { (uint8_t) n, 0 };
  if (tc_buf_append(&b, cnt, 2) < 0)
    goto fail;
  for (int i = 0; i < n; i++) {
    const uint8_t *der;
    size_t len;
    uint8_t l4[4];
    if (tc_cert_identity_chain(id, i, &der, &len) < 0)
      goto fail;
    put32(l4, (uint32_t) len);
    if (tc_buf_append(&b, l4, 4) < 0 || tc_buf_append(&b, der, len) < 0)
      goto fail;
  }
  if (b.len + HDR > TC_HS_MAX_MSG) {
    tc_error(EMSGSIZE, "certificate chain of %zu bytes is too long", b.len);
    goto fail;
  }
  if (emit(hs, out, HS_CERT, b.p, b.len) < 0)
    goto fail;
  tc_buf_free(&b);
  /* CertificateVerify: signature over context || transcript hash */
  uint8_t tbs[64], th[32], body[4 + TC_CERT_MAX_SIG];
  size_t cl = strlen(ctx) + 1, siglen = TC_CERT_MAX_SIG;
  th_now(hs, th);
  memcpy(tbs, ctx, cl);
  memcpy(tbs + cl, th, 32);
  if (tc_cert_sign(id, tbs, cl + 32, body + 4, &siglen) < 0)
    return -1;
  body[0] = body[1] = 0;
  body[2] = siglen & 0xff;
  body[3] = siglen >> 8;
  return emit(hs, out, HS_CERT_VERIFY, body, 4 + siglen);
fail:
  tc_buf_free(&b);
  return -1;
}

static int
emit_finished(struct tc_hs *hs, struct tc_buf *out, const uint8_t key[32])
{
  uint8_t th[32], mac[32];
  th_now(hs, th);
  tc_hmac_sha256(key, 32, th, 32, mac);
  return emit(hs, out, HS_FINISHED, mac, 32);
}

static int
check_finished(struct tc_hs *hs, struct tc_buf *out, const uint8_t *body, size_t len, const uint8_t key[32],
               const char *who)
{
  uint8_t th[32], mac[32];
  if (len != 32)
    return refuse(hs, out, EBADMSG, "%s Finished has %zu bytes, not 32", who, len);
  th_now(hs, th);
  tc_hmac_sha256(key, 32, th, 32, mac);
  if (!tc_memeq_ct(mac, body, 32))
    return refuse(hs, out, EBADMSG, "%s Finished MAC does not match (handshake altered)", who);
  return 0;
}

/* Certificate message -> verified peer chain against trust (tries in order). */
static int
parse_chain(const uint8_t *body, size_t len, const uint8_t **der, size_t *dlen, int *n)
{
  if (len < 2)
    return tc_error(EBADMSG, "Certificate message too short");
  *n = body[0] | body[1] << 8;
  if (*n < 1 || *n > TC_CERT_MAX_CHAIN)
    return tc_error(EBADMSG, "Certificate message with %d certificates", *n);
  size_t off = 2;
  for (int i = 0; i < *n; i++) {
    if (len - off < 4)
      return tc_error(EBADMSG, "Certificate message truncated");
    uint32_t l = get32(body + off);
    off += 4;
    if (l == 0 || l > len - off)
      return tc_error(EBADMSG, "Certificate message: certificate %d truncated", i);
    der[i] = body + off;
    dlen[i] = l;
    off += l;
  }
  if (off != len)
    return tc_error(EBADMSG, "Certificate message: %zu bytes after the chain", len - off);
  return 0;
}

static int
check_cert_verify(struct tc_hs *hs, struct tc_buf *out, const uint8_t *body, size_t len, const char *ctx,
                  const char *who)
{
  if (len < 4 || body[0] || body[1] || (size_t) (body[2] | body[3] << 8) != len - 4)
    return refuse(hs, out, EBADMSG, "%s CertificateVerify malformed", who);
  uint8_t tbs[64];
  size_t cl = strlen(ctx) + 1;
  memcpy(tbs, ctx, cl);
  memcpy(tbs + cl, hs->th_cv, 32);
  if (tc_cert_peer_check_sig(hs->peer, tbs, cl + 32, body + 4, len - 4) < 0)
    return refuse(hs, out, EACCES, "%s CertificateVerify: %s (the peer does not hold the key of its "
                  "certificate CN=%s, or the handshake was altered)", who, tc_last_error(),
                  tc_cert_peer_cn(hs->peer));
  return 0;
}

static int
roles_allowed(const struct tc_hs *hs)
{
  return hs->cfg->allowed_roles ? hs->cfg->allowed_roles : TC_ROLES_ALL;
}

static void
roles_text(unsigned roles, char *buf, size_t len)
{
  buf[0] = 0;
  for (int r = 0; r <= TC_ROLE_USER; r++)
    if (roles & TC_ROLE_BIT(r))
      snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? ", " : "", tc_peer_role_name(r));
}

static int
server_on_client_hello(struct tc_hs *hs, const uint8_t *m, size_t mlen, struct tc_buf *out)
{
  const struct tc_hs_cfg *cfg = hs->cfg;
  const uint8_t *b = m + HDR;
  char why[400];
  if (mlen - HDR != CH_SIZE || memcmp(b, "TRMH", 4))
    return refuse(hs, out, EPROTO, "ClientHello malformed (not a tromcho client?)");
  int cmode = b[68], cforce = b[69] == FORCE_UNSET ? TC_MODE_UNSET : b[69], flags = b[70];
  if (cmode > TC_MODE_GCM || (cforce != TC_MODE_UNSET && cforce > TC_MODE_GCM) || b[71] || (flags & ~3))
    return refuse(hs, out, EPROTO, "ClientHello: bad mode %d / force %d / flags 0x%x", cmode, cforce, flags);
  memcpy(hs->peer_pub, b + 36, 32);
  hs->want_keys = flags & CH_WANT_KEYS;
  if (hs->want_keys && !cfg->id)
    return refuse(hs, out, EACCES, "the client wants an OSD certificate (it has osd_ca) but this "
                  "server has none (osd_cert/osd_pkey unset)");
  hs->keyed = hs->want_keys;
  char rt[64];
  roles_text(roles_allowed(hs), rt, sizeof rt);
  if (!(roles_allowed(hs) & TC_ROLE_BIT(TC_ROLE_ANON)) && !(hs->keyed && (flags & CH_HAS_CERT)))
    return refuse(hs, out, EACCES, "this server accepts only %s; the client presents no certificate%s",
                  rt, hs->keyed ? "" : " (it has no osd_ca, so no keys)");
  int mode = tc_msgr_negotiate(cmode, cforce, cfg->mode, cfg->force, hs->keyed, why, sizeof why);
  if (mode < 0)
    return refuse(hs, out, EPROTO, "%s", why);
  hs->mode = mode;
  hs->rekey_log2 = cfg->rekey_log2 ? cfg->rekey_log2 : TC_REKEY_LOG2_DEFAULT;
  if (tc_buf_append(&hs->transcript, m, mlen) < 0)
    return -1;
  uint8_t sh[SH_SIZE];
  if (tc_random(sh, 32) < 0)
    return -1;
  memcpy(sh + 32, hs->pub, 32);
  sh[64] = (uint8_t) mode;
  sh[65] = hs->keyed ? SH_KEYED : 0;
  sh[66] = (uint8_t) hs->rekey_log2;
  sh[67] = 0;
  if (emit(hs, out, HS_SERVER_HELLO, sh, sizeof sh) < 0)
    return -1;
  if (!hs->keyed) {
    hs->ident.role = TC_ROLE_ANON;
    hs->state = ST_DONE;
    return 1;
  }
  if (derive_master(hs) < 0)
    return refuse(hs, out, EPROTO, "key exchange: %s", tc_last_error());
  if (emit_cert_and_verify(hs, out, SIG_SERVER) < 0 || emit_finished(hs, out, hs->s_fin) < 0 ||
      derive_traffic(hs) < 0)
    return -1;
  hs->state = (flags & CH_HAS_CERT) ? ST_S_WAIT_CCERT : ST_S_WAIT_CFIN;
  return 0;
}

static int
server_on_client_cert(struct tc_hs *hs, const uint8_t *body, size_t len, struct tc_buf *out)
{
  const uint8_t *der[TC_CERT_MAX_CHAIN];
  size_t dlen[TC_CERT_MAX_CHAIN];
  int n;
  if (parse_chain(body, len, der, dlen, &n) < 0)
    return refuse(hs, out, EBADMSG, "client %s", tc_last_error());
  struct { struct tc_cert_trust *t; int role; const char *name; } cas[] = {
    { hs->cfg->osd_ca, TC_ROLE_OSD, "osd_ca" },
    { hs->cfg->mon_ca, TC_ROLE_MON, "mon_ca" },
    { hs->cfg->client_ca, TC_ROLE_USER, "client_ca" },
  };
  char why[600] = "", tried[64] = "";
  char cn[TC_CN_MAX];
  tc_cert_der_cn(der[0], dlen[0], cn, sizeof cn);
  for (int i = 0; i < 3; i++) {
    if (!cas[i].t)
      continue;
    hs->peer = tc_cert_verify_chain(cas[i].t, der, dlen, n, TC_CERT_CLIENT);
    if (hs->peer) {
      hs->ident.role = cas[i].role;
      snprintf(hs->ident.name, sizeof hs->ident.name, "%s", tc_cert_peer_cn(hs->peer));
      break;
    }
    /* Report the CA that issued it (e.g. expired) over those that did not. */
    if (errno != ESRCH && !why[0])
      snprintf(why, sizeof why, "%s: %s", cas[i].name, tc_last_error());
    snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s", tried[0] ? ", " : "", cas[i].name);
  }
  if (!hs->peer) {
    if (why[0])
      return refuse(hs, out, EACCES, "client certificate CN=%s is not trusted: %s", cn, why);
    return refuse(hs, out, EACCES, "client certificate CN=%s is not trusted: its issuer is none of %s", cn,
                  tried[0] ? tried : "(no osd_ca, mon_ca or client_ca configured)");
  }
  if (!(roles_allowed(hs) & TC_ROLE_BIT(hs->ident.role))) {
    char rt[64];
    roles_text(roles_allowed(hs), rt, sizeof rt);
    return refuse(hs, out, EACCES, "client CN=%s is a %s; this server accepts only %s", cn,
                  tc_peer_role_name(hs->ident.role), rt);
  }
  th_now(hs, hs->th_cv);
  hs->state = ST_S_WAIT_CCV;
  return 0;
}

static int
client_on_server_hello(struct tc_hs *hs, const uint8_t *b, size_t len, struct tc_buf *out)
{
  const struct tc_hs_cfg *cfg = hs->cfg;
  char why[400];
  if (len != SH_SIZE || b[67] || (b[65] & ~SH_KEYED))
    return refuse(hs, out, EPROTO, "ServerHello malformed");
  int mode = b[64], keyed = b[65] & SH_KEYED, rekey = b[66];
  if (keyed != hs->want_keys)
    return refuse(hs, out, EPROTO, keyed ? "server chose keys the client did not ask for"
                  : "the server runs without keys but this client requires an OSD certificate (osd_ca is set)");
  if (mode > TC_MODE_GCM || (keyed && (rekey < TC_REKEY_LOG2_MIN || rekey > TC_REKEY_LOG2_MAX)))
    return refuse(hs, out, EPROTO, "ServerHello: bad mode %d or key update interval 2^%d", mode, rekey);
  /* The client checks its own side of the rules. */
  int cmax = keyed ? cfg->mode : min_i(cfg->mode, TC_MODE_PAYLOAD);
  if (mode > cmax)
    return refuse(hs, out, EPROTO, "server chose mode %s, stronger than this client's proto_checksums=%s",
                  tc_msgr_mode_name(mode), tc_msgr_mode_name(cfg->mode));
  if (tc_msgr_negotiate(mode, cfg->force, mode, TC_MODE_UNSET, keyed, why, sizeof why) < 0)
    return refuse(hs, out, EPROTO, "%s", why);
  hs->keyed = keyed;
  hs->mode = mode;
  hs->rekey_log2 = rekey;
  memcpy(hs->peer_pub, b + 32, 32);
  if (!keyed) {
    hs->ident.role = TC_ROLE_ANON;
    hs->state = ST_DONE;
    return 1;
  }
  if (derive_master(hs) < 0)
    return refuse(hs, out, EPROTO, "key exchange: %s", tc_last_error());
  hs->state = ST_C_WAIT_CERT;
  return 0;
}

static int
client_on_server_cert(struct tc_hs *hs, const uint8_t *body, size_t len, struct tc_buf *out)
{
  const uint8_t *der[TC_CERT_MAX_CHAIN];
  size_t dlen[TC_CERT_MAX_CHAIN];
  int n;
  char cn[TC_CN_MAX];
  if (parse_chain(body, len, der, dlen, &n) < 0)
    return refuse(hs, out, EBADMSG, "server %s", tc_last_error());
  tc_cert_der_cn(der[0], dlen[0], cn, sizeof cn);
  hs->peer = tc_cert_verify_chain(hs->cfg->osd_ca, der, dlen, n, TC_CERT_SERVER);
  if (!hs->peer)
    return refuse(hs, out, EACCES, "server certificate CN=%s is not an OSD certificate of this cluster "
                  "(does not verify against osd_ca): %s", cn, tc_last_error());
  hs->ident.role = TC_ROLE_OSD;
  snprintf(hs->ident.name, sizeof hs->ident.name, "%s", cn);
  th_now(hs, hs->th_cv);
  hs->state = ST_C_WAIT_CV;
  return 0;
}

int
tc_hs_start(struct tc_hs *hs, struct tc_buf *out)
{
  const struct tc_hs_cfg *cfg = hs->cfg;
  uint8_t ch[CH_SIZE];
  memcpy(ch, "TRMH", 4);
  if (tc_random(ch + 4, 32) < 0)
    return -1;
  memcpy(ch + 36, hs->pub, 32);
  hs->want_keys = cfg->osd_ca != NULL;
  ch[68] = (uint8_t) cfg->mode;
  ch[69] = cfg->force == TC_MODE_UNSET ? FORCE_UNSET : (uint8_t) cfg->force;
  ch[70] = (hs->want_keys ? CH_WANT_KEYS : 0) | (hs->want_keys && cfg->id ? CH_HAS_CERT : 0);
  ch[71] = 0;
  hs->state = ST_C_WAIT_SH;
  return emit(hs, out, HS_CLIENT_HELLO, ch, sizeof ch);
}

/* One whole message m (header included). */
static int
on_message(struct tc_hs *hs, const uint8_t *m, size_t mlen, struct tc_buf *out)
{
  int type = m[0];
  const uint8_t *body = m + HDR;
  size_t len = mlen - HDR;
  const char *who = hs->is_server ? "client" : "server";
  if (type == HS_ALERT) {
    char text[401];
    size_t n = len > 2 ? (len - 2 > 400 ? 400 : len - 2) : 0;
    for (size_t i = 0; i < n; i++)
      text[i] = body[2 + i] >= 0x20 && body[2 + i] < 0x7f ? body[2 + i] : '?';
    text[n] = 0;
    hs->state = ST_FAILED;
    return tc_error(ECONNREFUSED, "%s refused the handshake: %s", who, text);
  }
  if (hs->state == ST_S_WAIT_CH) {
    if (type != HS_CLIENT_HELLO)
      return refuse(hs, out, EPROTO, "expected ClientHello, got message type %d", type);
    return server_on_client_hello(hs, m, mlen, out);
  }
  /* Every other message joins the transcript after it is checked against
   * the transcript before it. */
  switch (hs->state) {
  case ST_C_WAIT_SH:
    if (type != HS_SERVER_HELLO)
      return refuse(hs, out, EPROTO, "expected ServerHello, got message type %d", type);
    if (tc_buf_append(&hs->transcript, m, mlen) < 0)
      return -1;
    return client_on_server_hello(hs, body, len, out);
  case ST_C_WAIT_CERT:
    if (type != HS_CERT)
      return refuse(hs, out, EPROTO, "expected the server's Certificate, got message type %d", type);
    if (tc_buf_append(&hs->transcript, m, mlen) < 0)
      return -1;
    return client_on_server_cert(hs, body, len, out);
  case ST_C_WAIT_CV:
  case ST_S_WAIT_CCV:
    if (type != HS_CERT_VERIFY)
      return refuse(hs, out, EPROTO, "expected CertificateVerify, got message type %d", type);
    if (check_cert_verify(hs, out, body, len, hs->is_server ? SIG_CLIENT : SIG_SERVER, who) < 0)
      return -1;
    if (tc_buf_append(&hs->transcript, m, mlen) < 0)
      return -1;
    hs->state = hs->is_server ? ST_S_WAIT_CFIN : ST_C_WAIT_FIN;
    return 0;
  case ST_C_WAIT_FIN:
    if (type != HS_FINISHED)
      return refuse(hs, out, EPROTO, "expected the server's Finished, got message type %d", type);
    if (check_finished(hs, out, body, len, hs->s_fin, who) < 0)
      return -1;
    if (tc_buf_append(&hs->transcript, m, mlen) < 0 || derive_traffic(hs) < 0)
      return -1;
    if (hs->cfg->id && emit_cert_and_verify(hs, out, SIG_CLIENT) < 0)
      return -1;
    if (emit_finished(hs, out, hs->c_fin) < 0)
      return -1;
    hs->state = ST_DONE;
    return 1;
  case ST_S_WAIT_CCERT:
    if (type != HS_CERT)
      return refuse(hs, out, EPROTO, "expected the client's Certificate, got message type %d", type);
    if (tc_buf_append(&hs->transcript, m, mlen) < 0)
      return -1;
    return server_on_client_cert(hs, body, len, out);
  case ST_S_WAIT_CFIN:
    if (type != HS_FINISHED)
      return refuse(hs, out, EPROTO, "expected the client's Finished, got message type %d", type);
    if (check_finished(hs, out, body, len, hs->c_fin, who) < 0)
      return -1;
    if (!hs->peer) {
      if (!(roles_allowed(hs) & TC_ROLE_BIT(TC_ROLE_ANON)))
        return refuse(hs, out, EACCES, "the client presents no certificate and this server does not "
                      "accept anonymous clients");
      hs->ident.role = TC_ROLE_ANON;
    }
    hs->state = ST_DONE;
    return 1;
  default:
    return tc_error(EPROTO, "handshake message type %d in state %d", type, hs->state);
  }
}

int
tc_hs_feed(struct tc_hs *hs, const uint8_t *in, size_t len, size_t *used, struct tc_buf *out)
{
  *used = 0;
  while (hs->state != ST_DONE) {
    if (hs->state == ST_FAILED)
      return tc_error(EPROTO, "handshake already failed");
    if (len - *used < HDR)
      return 0;
    const uint8_t *m = in + *used;
    uint32_t blen = get32(m + 4);
    if (m[1] != HS_VERSION || m[2] || m[3])
      return refuse(hs, out, EPROTO, "handshake message with version %d (this is version %d)%s", m[1],
                    HS_VERSION, m[0] == 'T' || m[0] == 'G' ? " - not a tromcho peer?"
                    : m[0] >= HS_CLIENT_HELLO && m[0] <= HS_ALERT && !m[2] && !m[3]
                    ? (m[1] < HS_VERSION ? " - the peer runs an older tromcho: upgrade it"
                                         : " - the peer runs a newer tromcho: upgrade this one") : "");
    if (blen > TC_HS_MAX_MSG)
      return refuse(hs, out, EMSGSIZE, "handshake message of %u bytes (at most %d)", blen, TC_HS_MAX_MSG);
    if (len - *used < HDR + (size_t) blen)
      return 0;
    *used += HDR + blen;
    int r = on_message(hs, m, HDR + blen, out);
    if (r != 0)
      return r;
  }
  return 1;
}
