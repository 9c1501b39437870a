/* The largest payload each OSD request may carry (osd_proto.h): the
 * messenger closes the connection of a peer announcing more, before it
 * reserves or reads a byte of it (msgr.h, "Hostile peers"). */
#include <config.h>
#include <stdint.h>
#include "objstore.h"
#include "osd.h"

#define SHOW_CONFIG_MAX 4096   /* {"osd_num": N}, as osd_decode.c accepts it */

uint32_t
osd_request_max_payload(uint16_t opcode, uint32_t block_size)
{
  uint32_t obj = block_size < TC_OSD_MAX_OP_BYTES ? block_size : TC_OSD_MAX_OP_BYTES;
  switch (opcode) {
  case TC_OP_WRITE:
  case TC_OP_SEC_WRITE:
  case TC_OP_WRITE_PARTIAL:   /* bytes inside one object */
    return obj;
  case TC_OP_WRITE_IF:        /* the condition, then one sector */
    return (uint32_t) sizeof(struct tc_osd_write_if) + TC_SECTOR;
  case TC_OP_SEC_WRITE_STABLE:
    return 8 + obj;
  case TC_OP_SEC_DELETE:
    return 8;
  case TC_OP_SHOW_CONFIG:
    return SHOW_CONFIG_MAX;
  default:
    return 0;   /* every other operation carries no payload */
  }
}
