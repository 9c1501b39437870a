/* Strict parsing of keys that name an inode (see inode_key.h). */
#include <config.h>
#include <errno.h>
#include <string.h>
#include "error.h"
#include "inode_key.h"

int
tc_parse_canonical_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
  uint64_t v = 0;
  if (len == 0)
    return tc_error(EINVAL, "empty number");
  if (len > 1 && s[0] == '0')
    return tc_error(EINVAL, "number '%.*s' has a leading zero", (int) (len > 40 ? 40 : len), s);
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return tc_error(EINVAL, "'%.*s' is not a decimal number", (int) (len > 40 ? 40 : len), s);
    unsigned d = (unsigned) (s[i] - '0');
    if (v > (max - d) / 10)
      return tc_error(EINVAL, "number '%.*s' is larger than %llu", (int) (len > 40 ? 40 : len), s,
                      (unsigned long long) max);
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int
tc_inode_key_parse(const char *s, size_t len, uint64_t *pool, uint64_t *id)
{
  const char *slash = memchr(s, '/', len);
  if (!slash)
    return tc_error(EINVAL, "inode key '%.*s': expected <pool>/<id>", (int) (len > 80 ? 80 : len), s);
  size_t plen = (size_t) (slash - s);
  uint64_t p, i;
  if (tc_parse_canonical_u64(s, plen, TC_POOL_MAX, &p) < 0 || p == 0)
    return tc_error(EINVAL, "inode key '%.*s': pool must be 1..%llu in canonical decimal",
                    (int) (len > 80 ? 80 : len), s, TC_POOL_MAX);
  if (tc_parse_canonical_u64(slash + 1, len - plen - 1, TC_INODE_ID_MAX, &i) < 0 || i == 0)
    return tc_error(EINVAL, "inode key '%.*s': id must be 1..%llu in canonical decimal",
                    (int) (len > 80 ? 80 : len), s, TC_INODE_ID_MAX);
  *pool = p;
  *id = i;
  return 0;
}

int
tc_inode_key_parse_full(const char *key, size_t klen, const char *prefix, uint64_t *pool, uint64_t *id)
{
  size_t n = strlen(prefix);
  if (klen < n || memcmp(key, prefix, n) != 0)
    return tc_error(EINVAL, "key '%.*s' is not under %s", (int) (klen > 80 ? 80 : klen), key, prefix);
  return tc_inode_key_parse(key + n, klen - n, pool, id);
}
