/* An asynchronous seam for the OSD's event loop: store calls run on one
 * worker thread, in submission order (so a SYNC covers every write queued
 * before it), and their completions are delivered on the loop's thread.
 *
 *   tc_store_queue_new(&q, st);
 *   epoll on tc_store_queue_fd(q) (readable when completions wait);
 *   tc_store_submit(q, req)  -- req stays owned by the caller until done();
 *   on readable: tc_store_queue_complete(q) runs each done() in order.
 *
 * One worker is deliberate: the store serialises calls anyway, and FIFO
 * order is what the OSD's per-object versioning needs. */
#ifndef TROMCHO_OSD_STORE_QUEUE_H
#define TROMCHO_OSD_STORE_QUEUE_H
#include <stdint.h>
#include "store.h"

enum tc_store_op { TC_STORE_OP_READ, TC_STORE_OP_WRITE, TC_STORE_OP_DELETE, TC_STORE_OP_SYNC,
                   TC_STORE_OP_SCRUB };

struct tc_store_req {
  enum tc_store_op op;
  uint64_t inode, offset;
  uint32_t len;                  /* READ, WRITE, DELETE */
  void *buf;                     /* READ: filled; WRITE: the data */
  uint8_t *bitmap;               /* READ: present sectors; SCRUB: bad sectors (may be NULL) */
  uint64_t version;              /* WRITE: the version to set; READ: the object's version */
  int result;                    /* the call's return value, or -errno */
  char error[256];               /* the worker's tc_last_error() when result < 0 */
  void (*done)(struct tc_store_req *req);
  void *opaque;                  /* the caller's */
  struct tc_store_req *next;     /* the queue's */
};

struct tc_store_queue;
int tc_store_queue_new(struct tc_store_queue **out, struct tc_store *st);
/* An eventfd: readable while completions wait for tc_store_queue_complete. */
int tc_store_queue_fd(const struct tc_store_queue *q);
/* Queue req (its fields stay untouched by the caller until done runs). */
int tc_store_submit(struct tc_store_queue *q, struct tc_store_req *req);
/* Run done() of every finished request, in submission order, on this
 * thread. Returns how many. */
int tc_store_queue_complete(struct tc_store_queue *q);
/* Finish every queued request, run their done(), stop the worker. The
 * store itself stays open. */
void tc_store_queue_free(struct tc_store_queue *q);

#endif
