/* One request sent to several OSDs at once and waited for, for the admin
 * commands that ask OSDs directly (tromcho describe: DESCRIBE). The
 * connections are this command's own, with the caller's identity (cert,
 * pkey, osd_ca, proto_checksums from cfg), so each OSD checks the caller's
 * rights itself. */
#ifndef TROMCHO_CLI_OSD_CALL_H
#define TROMCHO_CLI_OSD_CALL_H
#include <stddef.h>
#include <stdint.h>
#include "cluster_map.h"
#include "tc_config.h"

struct cli_osd_reply {
  uint64_t osd;
  int status;          /* the reply's status, or -errno when no reply came (-ETIMEDOUT, ...) */
  char *payload;       /* malloc'd, NUL-terminated; NULL if empty */
  size_t len;
};

/* Send opcode (no payload) to each of osds[0..n) and wait up to timeout_ms
 * for all replies; r[i] gets osds[i]'s. -1 (with a message) only when the
 * messenger cannot be set up. Free with cli_osd_replies_free. */
int cli_osd_call_all(const struct tc_config *cfg, const struct tc_osd_addr *osds, size_t n, uint16_t opcode,
                     int timeout_ms, struct cli_osd_reply *r);
void cli_osd_replies_free(struct cli_osd_reply *r, size_t n);

#endif
