/* The OSD operation decoder: checks a request frame against the protocol
 * (common/cluster/osd_proto.h) and extracts its arguments. Pure (no I/O, no
 * state), so the fuzz target (tests/fuzz-osd-decode.c) calls it directly. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <json-c/json.h>
#include "image_meta.h"
#include "osd.h"
#include "pools.h"

_Static_assert(TC_POOL_MAX_BLOCK_SIZE == TC_OSD_MAX_OP_BYTES, "a pool's object fits one OSD operation");

static int bad(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int
bad(char *err, size_t errlen, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen)
    vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return code;
}

/* A data range: 4 KiB aligned, not empty, at most 256 KiB, inside one object. */
static int
check_range(const struct osd_req *r, uint32_t bs, char *err, size_t errlen)
{
  const char *name = tc_osd_op_name(r->op);
  if (r->len == 0 || r->offset % 4096 || r->len % 4096)
    return bad(err, errlen, -EINVAL, "%s: offset %" PRIu64 " length %" PRIu32 " is not whole 4 KiB sectors",
               name, r->offset, r->len);
  if (r->len > TC_OSD_MAX_OP_BYTES)
    return bad(err, errlen, -EINVAL, "%s: length %" PRIu32 " is over %u", name, r->len, TC_OSD_MAX_OP_BYTES);
  if (r->offset > UINT64_MAX - r->len || r->offset / bs != (r->offset + r->len - 1) / bs)
    return bad(err, errlen, -EINVAL, "%s: offset %" PRIu64 " length %" PRIu32 " crosses an object boundary (%" PRIu32 ")",
               name, r->offset, r->len, bs);
  return 0;
}

/* The length of a data range, checked against the payload it comes with. */
static int
rw_range(struct osd_req *r, const struct tc_osd_op_rw *v, uint32_t bs, char *err, size_t errlen)
{
  r->len = v->len;
  return check_range(r, bs, err, errlen);
}

/* SEC_* data operations carry the primary's version of the object. */
static int
sec_version(struct osd_req *r, const struct tc_osd_op_rw *v, char *err, size_t errlen)
{
  r->version = v->version;
  if (!r->version)
    return bad(err, errlen, -EINVAL, "%s: version 0", tc_osd_op_name(r->op));
  return 0;
}

/* A PG filter: pg of pg_count, or none (pg_count 0). */
static int
pg_filter(struct osd_req *r, uint32_t pg, uint32_t pg_count, char *err, size_t errlen)
{
  r->pg = pg;
  r->pg_count = pg_count;
  if ((pg || pg_count) && pg >= pg_count)
    return bad(err, errlen, -EINVAL, "%s: PG %" PRIu32 " of %" PRIu32 " does not exist", tc_osd_op_name(r->op),
               pg, pg_count);
  return 0;
}

int
osd_req_decode(const struct tc_frame_hdr *hdr, const void *payload, uint32_t block_size,
               struct osd_req *r, char *err, size_t errlen)
{
  const union tc_osd_hdr h = tc_osd_hdr_of(hdr);
  memset(r, 0, sizeof *r);
  r->op = hdr->opcode;
  const char *name = tc_osd_op_name(r->op);
  if (!name)
    return bad(err, errlen, -EINVAL, "unknown opcode %u", (unsigned) hdr->opcode);
  if (block_size < 4096 || block_size > TC_OSD_MAX_OP_BYTES || (block_size & (block_size - 1)))
    return bad(err, errlen, -EINVAL, "%s: this OSD's block size %" PRIu32 " is unusable", name, block_size);
  if (hdr->len && !payload)
    return bad(err, errlen, -EINVAL, "%s: payload missing", name);
  /* FUA: a write (or delete) durable before its reply; other bits of the
   * flags are the messenger's or unassigned (ignored, as before FUA). */
  r->fua = hdr->flags & TC_OSD_FLAG_FUA;
  if (r->fua && r->op != TC_OP_WRITE && r->op != TC_OP_WRITE_PARTIAL && r->op != TC_OP_WRITE_IF &&
      r->op != TC_OP_DELETE && r->op != TC_OP_SEC_WRITE && r->op != TC_OP_SEC_DELETE)
    return bad(err, errlen, -EINVAL, "%s: FUA on an operation that writes nothing", name);
  if (hdr->flags & TC_OSD_FLAG_REPLAY) {
    if (r->op != TC_OP_WRITE && r->op != TC_OP_WRITE_PARTIAL && r->op != TC_OP_WRITE_IF && r->op != TC_OP_DELETE)
      return bad(err, errlen, -EINVAL, "%s: REPLAY on an operation that is not a client's write", name);
    if (!(r->replay_version = h.rw.version))
      return bad(err, errlen, -EINVAL, "%s: a replay of version 0", name);
  }
  const uint8_t *p = payload;
  int rc;
  switch (r->op) {
  case TC_OP_READ:
  case TC_OP_SEC_READ:
  case TC_OP_SEC_READ_BMP:
  case TC_OP_DELETE:
  case TC_OP_SEC_DELETE:
    if (hdr->len)
      return bad(err, errlen, -EINVAL, "%s: unexpected payload of %" PRIu32 " bytes", name, hdr->len);
    r->inode = h.rw.inode;
    r->offset = h.rw.offset;
    if ((rc = rw_range(r, &h.rw, block_size, err, errlen)) < 0)
      return rc;
    if (r->op == TC_OP_READ)
      r->version = h.rw.version;   /* the fence: the KV revision to serve at (0: any) */
    return r->op == TC_OP_SEC_DELETE ? sec_version(r, &h.rw, err, errlen) : 0;
  case TC_OP_WRITE:
  case TC_OP_SEC_WRITE:
    r->inode = h.rw.inode;
    r->offset = h.rw.offset;
    if (h.rw.len != hdr->len)
      return bad(err, errlen, -EINVAL, "%s: length %" PRIu32 " but a payload of %" PRIu32 " bytes", name,
                 h.rw.len, hdr->len);
    r->data = p;
    if ((rc = rw_range(r, &h.rw, block_size, err, errlen)) < 0)
      return rc;
    return r->op == TC_OP_SEC_WRITE ? sec_version(r, &h.rw, err, errlen) : 0;
  case TC_OP_WRITE_PARTIAL:
    r->inode = h.rw.inode;
    r->offset = h.rw.offset;
    r->len = h.rw.len;
    r->data = p;
    if (h.rw.len != hdr->len)
      return bad(err, errlen, -EINVAL, "%s: length %" PRIu32 " but a payload of %" PRIu32 " bytes", name,
                 h.rw.len, hdr->len);
    if (r->len == 0 || r->len > TC_OSD_MAX_OP_BYTES)
      return bad(err, errlen, -EINVAL, "%s: length %" PRIu32 " is not 1..%u", name, r->len, TC_OSD_MAX_OP_BYTES);
    if (r->offset > UINT64_MAX - r->len || r->offset / block_size != (r->offset + r->len - 1) / block_size)
      return bad(err, errlen, -EINVAL, "%s: offset %" PRIu64 " length %" PRIu32 " crosses an object boundary (%"
                 PRIu32 ")", name, r->offset, r->len, block_size);
    return 0;
  case TC_OP_WRITE_IF:
    r->inode = h.rw.inode;
    r->offset = h.rw.offset;
    if (h.rw.len != 4096 || hdr->len != sizeof r->cond + 4096)
      return bad(err, errlen, -EINVAL, "%s: length %" PRIu32 " and payload %" PRIu32 " must be 4096 and %zu + 4096"
                 " bytes", name, h.rw.len, hdr->len, sizeof r->cond);
    memcpy(&r->cond, p, sizeof r->cond);
    if (r->cond.present > 1)
      return bad(err, errlen, -EINVAL, "%s: 'present' is %" PRIu64 ", not 0 or 1", name, (uint64_t) r->cond.present);
    r->data = p + sizeof r->cond;
    return rw_range(r, &h.rw, block_size, err, errlen);
  case TC_OP_SEC_WRITE_STABLE:
    r->inode = h.rw.inode;
    r->offset = h.rw.offset;
    if (r->offset % block_size)
      return bad(err, errlen, -EINVAL, "%s: offset %" PRIu64 " is not an object's start", name, r->offset);
    if (h.rw.len != block_size || hdr->len != 8 + block_size)
      return bad(err, errlen, -EINVAL, "%s: length %" PRIu32 " and payload %" PRIu32 " must be %" PRIu32
                 " and 8 + %" PRIu32 " bytes", name, h.rw.len, hdr->len, block_size, block_size);
    memcpy(&r->bitmap, p, 8);
    if (block_size / 4096 < 64 && (r->bitmap >> (block_size / 4096)))
      return bad(err, errlen, -EINVAL, "%s: bitmap %#" PRIx64 " names sectors past the object", name, r->bitmap);
    r->data = p + 8;
    r->len = block_size;
    return sec_version(r, &h.rw, err, errlen);
  case TC_OP_SEC_LIST:
    if (hdr->len)
      return bad(err, errlen, -EINVAL, "%s: unexpected payload", name);
    r->inode = h.list.inode_first;
    r->inode_last = h.list.inode_last;
    if (r->inode_last < r->inode)
      return bad(err, errlen, -EINVAL, "%s: inode range %#" PRIx64 "..%#" PRIx64 " is empty", name,
                 r->inode, r->inode_last);
    return pg_filter(r, h.list.pg, h.list.pg_count, err, errlen);
  case TC_OP_SEC_LOCK:
    if (hdr->len)
      return bad(err, errlen, -EINVAL, "%s: unexpected payload", name);
    if (h.lock.pool == 0 || h.lock.pool > TC_POOL_MAX_ID)
      return bad(err, errlen, -EINVAL, "%s: pool %" PRIu64 " does not exist", name, h.lock.pool);
    if (!h.lock.pg_count)
      return bad(err, errlen, -EINVAL, "%s: no PG", name);
    r->pool = h.lock.pool;
    r->inode = TC_INODE(h.lock.pool, 0);
    r->epoch = h.lock.epoch;
    r->claim_osd = h.lock.primary;
    return pg_filter(r, h.lock.pg, h.lock.pg_count, err, errlen);
  case TC_OP_SCRUB:
    if (hdr->len)
      return bad(err, errlen, -EINVAL, "%s: unexpected payload", name);
    r->inode = h.obj.inode;
    r->offset = h.obj.offset - h.obj.offset % block_size;
    r->len = block_size;
    return 0;
  case TC_OP_SHOW_CONFIG:
    if (hdr->len) {
      if (hdr->len > 4096)
        return bad(err, errlen, -EINVAL, "%s: payload of %" PRIu32 " bytes is too large", name, hdr->len);
      json_tokener *tok = json_tokener_new();
      if (!tok)
        return bad(err, errlen, -ENOMEM, "%s: out of memory", name);
      json_object *o = json_tokener_parse_ex(tok, (const char *) p, (int) hdr->len);
      int ok = json_tokener_get_error(tok) == json_tokener_success && json_object_is_type(o, json_type_object);
      json_tokener_free(tok);
      json_object *f;
      if (ok && json_object_object_get_ex(o, "osd_num", &f)) {
        if (!json_object_is_type(f, json_type_int) || json_object_get_int64(f) <= 0)
          ok = 0;
        else
          r->claim_osd = (uint64_t) json_object_get_int64(f);
      }
      json_object_put(o);
      if (!ok)
        return bad(err, errlen, -EINVAL, "%s: payload is not {\"osd_num\": N}", name);
    }
    return 0;
  case TC_OP_SYNC:
  case TC_OP_SEC_SYNC:
  case TC_OP_PING:
  case TC_OP_DESCRIBE:
  case TC_OP_SEC_STABILIZE:
  case TC_OP_SEC_ROLLBACK:
    if (hdr->len)
      return bad(err, errlen, -EINVAL, "%s: unexpected payload", name);
    return 0;
  }
  return bad(err, errlen, -EINVAL, "unknown opcode %u", (unsigned) hdr->opcode);
}
