/* Base64 (see b64.h). */
#include <config.h>
#include <stdlib.h>
#include <string.h>
#include "b64.h"

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
tc_base64_encode_n(const void *data, size_t n, size_t *outlen)
{
  const uint8_t *p = data;
  size_t len = (n + 2) / 3 * 4;
  char *out = malloc(len + 1), *o = out;
  if (!out)
    return NULL;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t) p[i] << 16 | (uint32_t) p[i + 1] << 8 | p[i + 2];
    *o++ = b64chars[v >> 18];
    *o++ = b64chars[(v >> 12) & 63];
    *o++ = b64chars[(v >> 6) & 63];
    *o++ = b64chars[v & 63];
  }
  if (i < n) {
    uint32_t v = (uint32_t) p[i] << 16 | (i + 1 < n ? (uint32_t) p[i + 1] << 8 : 0);
    *o++ = b64chars[v >> 18];
    *o++ = b64chars[(v >> 12) & 63];
    *o++ = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
  *o = 0;
  if (outlen)
    *outlen = len;
  return out;
}

char *
tc_base64_encode(const void *data, size_t len)
{
  return tc_base64_encode_n(data, len, NULL);
}

static int
b64val(unsigned char c)
{
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

int
tc_base64_decode_n(const char *s, size_t n, uint8_t **out, size_t *outlen)
{
  size_t pad = 0;
  while (n > 0 && s[n - 1] == '=' && pad < 2) {
    n--;
    pad++;
  }
  if (pad && (n + pad) % 4)
    return (int) (n + 1);
  if (n % 4 == 1)
    return (int) n;
  uint8_t *buf = malloc(n / 4 * 3 + 3 + 1);
  if (!buf)
    return -1;
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64val((unsigned char) s[i]);
    if (v < 0) {
      free(buf);
      return (int) i + 1;
    }
    acc = acc << 6 | (uint32_t) v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      buf[o++] = (uint8_t) (acc >> bits);
    }
  }
  buf[o] = 0;
  *out = buf;
  *outlen = o;
  return 0;
}

uint8_t *
tc_base64_decode(const char *text, size_t *len)
{
  uint8_t *out;
  return tc_base64_decode_n(text, strlen(text), &out, len) == 0 ? out : NULL;
}
