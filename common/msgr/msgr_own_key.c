/* Own-key payloads (msgr.h, "Own keys"): sealing a request's payload under
 * a key of its own, opening one (kept sealed for forwarding when the
 * endpoint asks), and the reference-counted sealed form. Loop thread only. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "msgr_int.h"

struct tc_msgr_sealed *
tc_msgr_sealed_get(struct tc_msgr_sealed *s)
{
  s->refs++;
  return s;
}

void
tc_msgr_sealed_put(struct tc_msgr_sealed *s)
{
  if (!s || --s->refs > 0)
    return;
  free(s->buf);
  tc_wipe(s, sizeof *s);
  free(s);
}

struct tc_msgr_sealed *
tc_msgr_take_sealed(struct tc_msgr_conn *c)
{
  struct tc_msgr_sealed *s = c->cur_sealed;
  c->cur_sealed = NULL;
  return s;
}

void
tc_msgr_set_keep_sealed(struct tc_msgr *m, tc_msgr_keep_cb fn, void *arg)
{
  m->keep_sealed = fn;
  m->keep_arg = arg;
}

int
tc_msgr_build_own(struct tc_msgr_conn *c, struct tc_out *o, int n, const struct iovec *iov, int iovcnt,
                  size_t len, unsigned flags, struct tc_msgr_sealed *sealed)
{
  uint8_t key[TC_GCM_KEY_SIZE];
  if (sealed)
    memcpy(key, sealed->key, sizeof key);
  else if (tc_random(key, sizeof key) < 0)
    return -1;
  /* The key record is the session's record right after the header. */
  int r = tc_frame_seal_keyrec(&c->fr, key, o->keyrec);
  o->iov[n].iov_base = o->keyrec;
  o->iov[n++].iov_len = TC_FRAME_KEYREC;
  if (r == 0 && sealed) {   /* as it came */
    o->sealed = tc_msgr_sealed_get(sealed);
    memcpy(o->tag, sealed->tag, TC_FRAME_TAG);
    o->iov[n].iov_base = sealed->buf;
    o->iov[n++].iov_len = len;
    o->iov[n].iov_base = o->tag;
    o->iov[n++].iov_len = TC_FRAME_TAG;
    o->iovcnt = n;
  }
  else if (r == 0)
    r = tc_msgr_seal_payload(c, o, n, iov, iovcnt, len, flags, key);
  tc_wipe(key, sizeof key);
  if (r < 0)
    return -1;
  o->bytes = tc_frame_hdr_wire(&c->fr) + TC_FRAME_KEYREC + len + TC_FRAME_TAG;
  return 0;
}

int
tc_msgr_open_own(struct tc_msgr_conn *c)
{
  uint8_t key[TC_GCM_KEY_SIZE];
  int r = tc_frame_open_keyrec(&c->fr, &c->cur, c->pl_keyrec, key);
  struct tc_msgr_sealed *s = NULL;
  uint8_t *plain = NULL;
  if (r == 0 && c->pl_keep) {
    /* Kept for forwarding: opened into a second buffer (without memory,
     * opened in place and not kept). */
    s = calloc(1, sizeof *s);
    plain = malloc(c->cur.len);
    if (!s || !plain) {
      free(s);
      free(plain);
      s = NULL;
      plain = NULL;
    }
  }
  if (r == 0)
    r = tc_frame_own_open(&c->fr, &c->cur, key, c->pl, c->pl_tag, plain);
  if (r == 0 && s) {
    s->refs = 1;
    s->len = c->cur.len;
    s->buf = c->pl;
    memcpy(s->tag, c->pl_tag, TC_FRAME_TAG);
    memcpy(s->key, key, sizeof key);
    c->pl = plain;
    c->cur_sealed = s;
  }
  else if (s) {
    free(s);
    free(plain);
  }
  tc_wipe(key, sizeof key);
  return r;
}
