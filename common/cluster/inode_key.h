/* Keys that name an inode (DESIGN.md section 3): "<pool>/<id>" after
 * /config/inode/ or /inode/stats/, in canonical decimal only (no sign, no
 * leading zero, no spaces, nothing after), pool 1..65535, id 1..2^48-1.
 * A second spelling of one inode would alias another user's image, so the
 * gateway's filter, the OSDs and the client all parse with this one
 * function and ignore (or refuse) anything else. */
#ifndef TROMCHO_INODE_KEY_H
#define TROMCHO_INODE_KEY_H
#include <stddef.h>
#include <stdint.h>

#define TC_POOL_MAX 65535ULL
#define TC_INODE_ID_MAX ((1ULL << 48) - 1)

/* Parse s (len bytes, need not be NUL-terminated) as "<pool>/<id>".
 * Returns 0, or -1 with errno EINVAL and tc_last_error() saying what is
 * wrong. */
int tc_inode_key_parse(const char *s, size_t len, uint64_t *pool, uint64_t *id);

/* The same for a whole key: prefix (e.g. "/tromcho/config/inode/") then
 * "<pool>/<id>". -1 if the key does not start with prefix. */
int tc_inode_key_parse_full(const char *key, size_t klen, const char *prefix, uint64_t *pool, uint64_t *id);

/* A canonical decimal number (no sign, no leading zero unless "0", digits
 * only) no larger than max. Returns 0 or -1 (EINVAL). */
int tc_parse_canonical_u64(const char *s, size_t len, uint64_t max, uint64_t *out);

#endif
