/* The one parser of keys that name an inode (common/cluster/inode_key.c). */
#include <config.h>
#include <string.h>
#include "inode_key.h"
#include "tap.h"

static int
parse(const char *s, uint64_t *p, uint64_t *i)
{
  return tc_inode_key_parse(s, strlen(s), p, i);
}

int
main(void)
{
  uint64_t p = 0, i = 0;
  CHECK(parse("1/5", &p, &i) == 0 && p == 1 && i == 5, "1/5");
  CHECK(parse("65535/281474976710655", &p, &i) == 0 && p == 65535 && i == 281474976710655ULL, "largest");
  static const char *const bad[] = {
    "1/281474976710657", "1/281474976710656", "65536/1", "0/1", "1/0", "01/1", "1/01", "+1/1", "1/+1",
    "-1/1", "1/-1", " 1/1", "1/1 ", "1/1\n", "1/1/", "1//1", "/1", "1/", "", "1", "1/1x", "0x1/1",
    "1/18446744073709551617", "18446744073709551617/1", "1/99999999999999999999999", NULL };
  for (const char *const *b = bad; *b; b++)
    CHECK(parse(*b, &p, &i) < 0, "refused");
  /* Not NUL-terminated: only len bytes count; a NUL inside is refused. */
  CHECK(tc_inode_key_parse("1/23", 3, &p, &i) == 0 && i == 2, "length respected");
  CHECK(tc_inode_key_parse("1/2\0" "3", 5, &p, &i) < 0, "NUL inside refused");
  CHECK(tc_inode_key_parse_full("/t/config/inode/2/7", 19, "/t/config/inode/", &p, &i) == 0 && p == 2 && i == 7,
        "full key");
  CHECK(tc_inode_key_parse_full("/t/config/inodes/2/7", 20, "/t/config/inode/", &p, &i) < 0, "other prefix");
  return DONE();
}
