/* Base64, the one codec of the tree: the standard alphabet with padding
 * when encoding; decoding also takes the URL-safe letters and no padding. */
#ifndef TROMCHO_B64_H
#define TROMCHO_B64_H
#include <stddef.h>
#include <stdint.h>

/* data[0..len) as a NUL-terminated string; *outlen (if not NULL) its
 * length. Caller frees; NULL when out of memory. */
char *tc_base64_encode_n(const void *data, size_t len, size_t *outlen);
/* Decode s[0..n) into a malloc'd buffer (caller frees) with a NUL after
 * its *outlen bytes. Returns 0; -1 when out of memory; else the 1-based
 * position of the first byte that is not base64. */
int tc_base64_decode_n(const char *s, size_t n, uint8_t **out, size_t *outlen);
/* The same for C strings: NULL when not base64 or out of memory. */
char *tc_base64_encode(const void *data, size_t len);
uint8_t *tc_base64_decode(const char *text, size_t *len);

#endif
