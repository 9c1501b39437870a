/* Client bookkeeping: the connections that send this OSD requests (users,
 * admins and other OSDs alike), as the in-flight operations hold them, and
 * the replies, each built in its operation's view of osd_proto.h. A reply
 * to a connection that closed meanwhile is dropped: the client retries. */
#include <config.h>
#include <stdlib.h>
#include <string.h>
#include "osd.h"

/* Send reply header h to request req; the messenger frees payload. */
static void
send_reply(struct tc_msgr_conn *c, const struct tc_frame_hdr *req, struct tc_frame_hdr h, void *payload,
           uint32_t len)
{
  h.opcode = req->opcode;
  h.req_id = req->req_id;
  if (h.status < 0 && osd_metrics_current)
    osd_metrics_reply(osd_metrics_current, req->opcode, h.status, 0);
  struct iovec iov = { payload, len };
  tc_msgr_reply(c, &h, &iov, payload && len ? 1 : 0, TC_MSGR_INPLACE, free, payload);
}

void
osd_reply(struct tc_msgr_conn *c, const struct tc_frame_hdr *req, int status, uint64_t bitmap,
          uint64_t version, void *payload, uint32_t len)
{
  send_reply(c, req, tc_osd_reply_hdr(status, bitmap, version), payload, len);
}

struct osd_client *
osd_client_get(struct tc_msgr_conn *c)
{
  struct osd_client *cl = tc_msgr_conn_get_data(c);
  if (!cl) {
    cl = calloc(1, sizeof *cl);
    if (!cl)
      return NULL;
    cl->c = c;
    cl->refs = 1;   /* the connection's own */
    tc_msgr_conn_set_data(c, cl);
  }
  cl->refs++;
  return cl;
}

void
osd_client_put(struct osd_client *cl)
{
  if (cl && --cl->refs == 0)
    free(cl);
}

void
osd_client_reply(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t bitmap,
                 uint64_t version, void *payload, uint32_t len)
{
  if (!cl->c) {
    free(payload);
    return;
  }
  osd_reply(cl->c, req, status, bitmap, version, payload, len);
}

void
osd_client_reply_flags(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t version,
                       uint16_t flags)
{
  if (!cl->c)
    return;
  struct tc_frame_hdr h = tc_osd_reply_hdr(status, 0, version);
  h.flags = flags;   /* the messenger adds TC_FRAME_REPLY */
  send_reply(cl->c, req, h, NULL, 0);
}

void
osd_client_reply_scrub(struct osd_client *cl, const struct tc_frame_hdr *req, int status, uint64_t repaired)
{
  if (cl->c)
    send_reply(cl->c, req, tc_osd_scrub_reply_hdr(status, repaired), NULL, 0);
}

/* Accepted connections: forget the connection when it closes. */
void
osd_on_conn(struct tc_msgr_conn *c, int event, int err, void *arg)
{
  if (event != TC_MSGR_DOWN)
    return;
  struct osd_client *cl = tc_msgr_conn_get_data(c);
  if (cl) {
    cl->c = NULL;
    tc_msgr_conn_set_data(c, NULL);
    osd_client_put(cl);
  }
}
