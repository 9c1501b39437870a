/* Requests of the admin HTTPS API (DESIGN.md section 3), parsed from the
 * method, the path and the JSON body into a plain struct. No I/O: this is
 * what the fuzz target drives (tests/fuzz-admin-api.c).
 *
 *   POST /api/v1/image/list     {}
 *   POST /api/v1/image/create   {"name", "size", "pool", "enc_key", "owner", "owner_group",
 *                                "reader_group", "parent"}; "name": "IMG@SNAP" alone = a snapshot
 *   POST /api/v1/image/delete   {"name"}
 *   POST /api/v1/image/flatten  {"name"}
 *   POST /api/v1/image/modify   {"name", "resize", "rename", "readonly", "owner",
 *                                "owner_group", "reader_group"} ("" clears an owner field)
 *   POST /api/v1/pool/list      {}                       (administrators)
 *   POST /api/v1/user/list      {}                       (administrators)
 *   POST /api/v1/user/set       {"name", "type", "groups"}  (administrators)
 *   POST /api/v1/user/delete    {"name"}                 (administrators)
 *   POST /api/v1/status         {}                       (administrators)
 *
 * Sizes are JSON integers (bytes). An empty body counts as {}. */
#ifndef TROMCHO_ADMIN_REQ_H
#define TROMCHO_ADMIN_REQ_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum admin_call {
  AC_IMAGE_LIST, AC_IMAGE_CREATE, AC_IMAGE_DELETE, AC_IMAGE_FLATTEN, AC_IMAGE_MODIFY,
  AC_POOL_LIST, AC_USER_LIST, AC_USER_SET, AC_USER_DELETE, AC_STATUS, AC_NONE
};

/* An error: the HTTP status and a message that names the call and the cause. */
struct admin_err {
  int status;
  char msg[400];
};
void admin_err_set(struct admin_err *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

struct admin_req {
  enum admin_call call;
  const char *call_name;      /* "image/create" (static) */
  char *name, *pool, *enc_key, *parent, *rename, *type;
  char *owner, *owner_group, *reader_group;   /* NULL: not given; "" clears (modify) */
  char **groups;              /* user/set: NULL-terminated, NULL if not given */
  uint64_t size, resize;      /* 0: not given */
  int readonly;               /* -1 not given, 0, 1 */
};

/* The call of a path ("/api/v1/image/list"), AC_NONE if none. */
enum admin_call admin_call_of(const char *path, const char **call_name);

/* Parse one request. Returns 0, or -1 with e set (400 bad body, 404 unknown
 * path, 405 wrong method). r is cleared in both cases; free it with
 * admin_req_free after success. */
int admin_req_parse(const char *method, const char *path, const char *body, size_t len,
                    struct admin_req *r, struct admin_err *e);
void admin_req_free(struct admin_req *r);

#endif
