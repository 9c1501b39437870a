/* Operation codes of the OSD protocol (DESIGN.md section 4), carried in
 * tc_frame_hdr.opcode. Client operations first, then OSD-to-OSD ones. */
#ifndef TROMCHO_OSD_OPS_H
#define TROMCHO_OSD_OPS_H

enum tc_osd_op {
  TC_OP_READ = 1,
  TC_OP_WRITE = 2,
  TC_OP_DELETE = 3,
  TC_OP_SYNC = 4,
  TC_OP_SCRUB = 5,
  TC_OP_DESCRIBE = 6,
  TC_OP_PING = 7,
  TC_OP_SHOW_CONFIG = 8,
  TC_OP_SEC_LIST = 9,
  TC_OP_WRITE_PARTIAL = 10,   /* bytes at any offset: the primary patches the sectors */
  TC_OP_WRITE_IF = 11,        /* one sector, only if it still holds what the client read */
  /* OSD-to-OSD only */
  TC_OP_SEC_READ = 32,
  TC_OP_SEC_WRITE = 33,
  TC_OP_SEC_WRITE_STABLE = 34,
  TC_OP_SEC_SYNC = 35,
  TC_OP_SEC_STABILIZE = 36,
  TC_OP_SEC_ROLLBACK = 37,
  TC_OP_SEC_DELETE = 38,
  TC_OP_SEC_READ_BMP = 39,
  TC_OP_SEC_LOCK = 40,
};

/* "READ", "SEC_WRITE", ... or NULL for an unknown code. */
const char *tc_osd_op_name(int op);

#endif
