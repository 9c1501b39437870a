/* Who a peer is, from the CA its certificate chains to (DESIGN.md 2):
 * shared by the messenger (which proves it), the KV/API servers and the
 * rights checks (which use it). */
#ifndef TROMCHO_IDENTITY_H
#define TROMCHO_IDENTITY_H

enum tc_peer_role {
  TC_ROLE_ANON = 0,   /* no certificate: trusted-network mode */
  TC_ROLE_OSD = 1,    /* chains to osd_ca */
  TC_ROLE_MON = 2,    /* chains to mon_ca */
  TC_ROLE_USER = 3,   /* chains to client_ca; name = Common Name */
};

#endif
