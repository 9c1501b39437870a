/* The primary's local writes, run after the fan-out (osd.h, "the
 * primary's local writes"). The messenger queues a request's frame and
 * writes it to the socket at the end of the loop's round (its deferred
 * post); a local tc_store_write made right after tc_msgr_call would still
 * run before the SEC_WRITEs leave. So the primary queues its local write
 * here and a deferred call, queued after the messenger's, runs it: the
 * secondaries receive and write while this store writes.
 *
 * Order: one FIFO for every local write of the OSD, so two writes of one
 * object reach the store in version order; the queue is empty again
 * before the loop waits for the next events, and anything that reads or
 * replaces local objects (WRITE_PARTIAL/WRITE_IF's read of the sectors to
 * patch, recovery, scrub, SEC_READ, SEC_LIST, SEC_WRITE_STABLE) drains it
 * first. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include "error.h"
#include "log.h"
#include "osd.h"

static void
run_one(struct osd *o, struct osd_local_write *lw)
{
  int rc = lw->is_delete ? tc_store_delete_version(o->store, lw->inode, lw->offset, lw->len, lw->version)
                         : tc_store_write(o->store, lw->inode, lw->offset, lw->len, lw->data, lw->version);
  lw->done(o, lw, rc < 0 ? (errno ? errno : EIO) : 0);
}

void
osd_local_drain(struct osd *o)
{
  while (o->lw_head) {
    struct osd_local_write *lw = o->lw_head;
    o->lw_head = lw->next;
    if (!o->lw_head)
      o->lw_tail = NULL;
    lw->next = NULL;
    run_one(o, lw);   /* done may free lw */
  }
}

static void
drain_deferred(struct tc_evloop *loop, void *arg)
{
  (void) loop;
  struct osd *o = arg;
  o->lw_scheduled = false;
  osd_local_drain(o);
}

void
osd_local_queue(struct osd *o, struct osd_local_write *lw)
{
  lw->next = NULL;
  if (o->lw_tail)
    o->lw_tail->next = lw;
  else
    o->lw_head = lw;
  o->lw_tail = lw;
  if (o->lw_scheduled)
    return;
  if (tc_evloop_defer(o->loop, drain_deferred, o) == 0)
    o->lw_scheduled = true;
  else {
    /* No memory for the deferred call: write now (before the fan-out
     * leaves, as before; correct, only not overlapped). */
    tc_warn("osd %" PRIu64 ": %s: writing locally at once", o->osd_num, tc_last_error());
    osd_local_drain(o);
  }
}
