#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "crypto.h"
#include "memstore.h"

#define NBUCKETS 4096

struct sector {
  uint64_t inode, index;
  uint8_t data[TC_SECTOR];
  struct sector *next;
};

struct queued {
  struct tc_objop *op;
  struct queued *next;
};

struct memstore {
  pthread_mutex_t lock;      /* the sectors and counters */
  struct sector *buckets[NBUCKETS];
  unsigned long counts[TC_OBJ_WRITE_IF + 1];
  unsigned long writes[2];   /* write-type ops without / with TC_OBJ_FUA */
  pthread_mutex_t qlock;     /* the queue of submitted ops */
  pthread_cond_t qcond;
  struct queued *head, **tail;
  bool stopping;
  unsigned delay_us;         /* added to every operation: widens races */
  pthread_t workers[2];
};

static struct sector **
find(struct memstore *m, uint64_t inode, uint64_t index)
{
  struct sector **p = &m->buckets[(inode * 1000003 + index) % NBUCKETS];
  while (*p && ((*p)->inode != inode || (*p)->index != index))
    p = &(*p)->next;
  return p;
}

/* WRITE_PARTIAL and WRITE_IF, under the lock (as the OSD does in one turn). */
static int
apply_partial(struct memstore *m, struct tc_objop *op)
{
  uint64_t a0 = op->offset / TC_SECTOR, a1 = (op->offset + op->len + TC_SECTOR - 1) / TC_SECTOR;
  if (op->len == 0 || (op->code == TC_OBJ_WRITE_IF && (op->offset % TC_SECTOR || op->len != TC_SECTOR)))
    return -EINVAL;
  pthread_mutex_lock(&m->lock);
  m->counts[op->code]++;
  m->writes[(op->flags & TC_OBJ_FUA) != 0]++;
  if (op->code == TC_OBJ_WRITE_IF) {
    struct sector *s = *find(m, op->inode, a0);
    if ((s != NULL) != op->if_present || (s && tc_xxh3_64(s->data, TC_SECTOR) != op->if_hash)) {
      pthread_mutex_unlock(&m->lock);
      return -ESTALE;
    }
  }
  for (uint64_t i = a0; i < a1; i++) {
    struct sector **p = find(m, op->inode, i);
    if (!*p) {
      if (!(*p = calloc(1, sizeof **p))) {
        pthread_mutex_unlock(&m->lock);
        return -ENOMEM;
      }
      (*p)->inode = op->inode;
      (*p)->index = i;
    }
    uint64_t s0 = i * TC_SECTOR, from = op->offset > s0 ? op->offset : s0;
    uint64_t to = op->offset + op->len < s0 + TC_SECTOR ? op->offset + op->len : s0 + TC_SECTOR;
    memcpy((*p)->data + (from - s0), (const uint8_t *) op->buf + (from - op->offset), to - from);
  }
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int
apply(struct memstore *m, struct tc_objop *op)
{
  if (op->code == TC_OBJ_WRITE_PARTIAL || op->code == TC_OBJ_WRITE_IF)
    return apply_partial(m, op);
  if (op->len % TC_SECTOR || op->offset % TC_SECTOR)
    return -EINVAL;
  uint64_t first = op->offset / TC_SECTOR, n = op->len / TC_SECTOR;
  pthread_mutex_lock(&m->lock);
  m->counts[op->code]++;
  if (op->code == TC_OBJ_WRITE || op->code == TC_OBJ_DELETE)
    m->writes[(op->flags & TC_OBJ_FUA) != 0]++;
  for (uint64_t i = 0; i < n; i++) {
    struct sector **p = find(m, op->inode, first + i);
    uint8_t *buf = op->buf ? (uint8_t *) op->buf + i * TC_SECTOR : NULL;
    switch (op->code) {
    case TC_OBJ_READ:
    case TC_OBJ_BITMAP:
      if (*p)
        op->bitmap[i / 8] |= 1 << (i % 8);
      else
        op->bitmap[i / 8] &= ~(1 << (i % 8));
      if (buf)
        memcpy(buf, *p ? (*p)->data : (const uint8_t[TC_SECTOR]) { 0 }, TC_SECTOR);
      break;
    case TC_OBJ_WRITE:
      if (!*p) {
        *p = calloc(1, sizeof **p);
        if (!*p) {
          pthread_mutex_unlock(&m->lock);
          return -ENOMEM;
        }
        (*p)->inode = op->inode;
        (*p)->index = first + i;
      }
      if (!op->transform)
        memcpy((*p)->data, buf, TC_SECTOR);
      else if (op->transform(op->transform_ctx, (first + i) * TC_SECTOR, buf, (*p)->data, TC_SECTOR) < 0) {
        pthread_mutex_unlock(&m->lock);
        return -EIO;
      }
      break;
    case TC_OBJ_DELETE:
      if (*p) {
        struct sector *s = *p;
        *p = s->next;
        free(s);
      }
      break;
    case TC_OBJ_SYNC:
    case TC_OBJ_WRITE_PARTIAL:
    case TC_OBJ_WRITE_IF:
      break;
    }
  }
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static void *
worker(void *arg)
{
  struct memstore *m = arg;
  pthread_mutex_lock(&m->qlock);
  for (;;) {
    while (!m->head && !m->stopping)
      pthread_cond_wait(&m->qcond, &m->qlock);
    if (!m->head)
      break;
    struct queued *q = m->head;
    m->head = q->next;
    if (!m->head)
      m->tail = &m->head;
    unsigned d = m->delay_us;   /* read under qlock */
    pthread_mutex_unlock(&m->qlock);
    if (d)
      usleep(d);
    q->op->result = apply(m, q->op);
    q->op->done(q->op);
    free(q);
    pthread_mutex_lock(&m->qlock);
  }
  pthread_mutex_unlock(&m->qlock);
  return NULL;
}

static int
submit(void *ctx, struct tc_objop *op)
{
  struct memstore *m = ctx;
  struct queued *q = malloc(sizeof *q);
  if (!q)
    return -ENOMEM;
  q->op = op;
  q->next = NULL;
  pthread_mutex_lock(&m->qlock);
  *m->tail = q;
  m->tail = &q->next;
  pthread_cond_signal(&m->qcond);
  pthread_mutex_unlock(&m->qlock);
  return 0;
}

struct memstore *
memstore_new(void)
{
  struct memstore *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  pthread_mutex_init(&m->lock, NULL);
  pthread_mutex_init(&m->qlock, NULL);
  pthread_cond_init(&m->qcond, NULL);
  m->tail = &m->head;
  for (int i = 0; i < 2; i++)
    pthread_create(&m->workers[i], NULL, worker, m);
  return m;
}

void
memstore_free(struct memstore *m)
{
  pthread_mutex_lock(&m->qlock);
  m->stopping = true;
  pthread_cond_broadcast(&m->qcond);
  pthread_mutex_unlock(&m->qlock);
  for (int i = 0; i < 2; i++)
    pthread_join(m->workers[i], NULL);
  for (int b = 0; b < NBUCKETS; b++)
    while (m->buckets[b]) {
      struct sector *s = m->buckets[b];
      m->buckets[b] = s->next;
      free(s);
    }
  free(m);
}

struct tc_objstore
memstore_objstore(struct memstore *m)
{
  return (struct tc_objstore) { submit, m };
}

const uint8_t *
memstore_sector(struct memstore *m, uint64_t inode, uint64_t sector)
{
  pthread_mutex_lock(&m->lock);
  struct sector *s = *find(m, inode, sector);
  pthread_mutex_unlock(&m->lock);
  return s ? s->data : NULL;
}

bool
memstore_contains(struct memstore *m, const void *needle, size_t len)
{
  bool found = false;
  pthread_mutex_lock(&m->lock);
  for (int b = 0; b < NBUCKETS && !found; b++)
    for (struct sector *s = m->buckets[b]; s && !found; s = s->next)
      found = memmem(s->data, TC_SECTOR, needle, len) != NULL;
  pthread_mutex_unlock(&m->lock);
  return found;
}

unsigned long
memstore_ops(struct memstore *m, enum tc_objop_code code)
{
  pthread_mutex_lock(&m->lock);
  unsigned long n = m->counts[code];
  pthread_mutex_unlock(&m->lock);
  return n;
}

unsigned long
memstore_writes(struct memstore *m, bool fua)
{
  pthread_mutex_lock(&m->lock);
  unsigned long n = m->writes[fua];
  pthread_mutex_unlock(&m->lock);
  return n;
}

void
memstore_set_delay(struct memstore *m, unsigned usec)
{
  pthread_mutex_lock(&m->qlock);
  m->delay_us = usec;
  pthread_mutex_unlock(&m->qlock);
}
