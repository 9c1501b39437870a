/* The object table of a PG this OSD leads: (inode, object offset) ->
 * newest version and which replicas are stale. Open addressing, linear
 * probing; entries are never removed (a deleted object keeps its version
 * as a tombstone), so no deletion markers are needed. */
#include <config.h>
#include <stdlib.h>
#include <string.h>
#include "osd.h"

static size_t
slot_of(uint64_t inode, uint64_t offset, size_t cap)
{
  uint64_t h = inode * 0x9E3779B97F4A7C15ull ^ (offset >> 12) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return (size_t) (h & (cap - 1));
}

struct osd_obj *
osd_objmap_get(struct osd_objmap *m, uint64_t inode, uint64_t offset)
{
  if (!m->cap)
    return NULL;
  for (size_t i = slot_of(inode, offset, m->cap);; i = (i + 1) & (m->cap - 1)) {
    struct osd_obj *e = &m->v[i];
    if (!e->used)
      return NULL;
    if (e->inode == inode && e->offset == offset)
      return e;
  }
}

static int
grow(struct osd_objmap *m)
{
  size_t nc = m->cap ? m->cap * 2 : 1024;
  struct osd_obj *nv = calloc(nc, sizeof *nv);
  if (!nv)
    return -1;
  for (size_t i = 0; i < m->cap; i++)
    if (m->v[i].used) {
      size_t j = slot_of(m->v[i].inode, m->v[i].offset, nc);
      while (nv[j].used)
        j = (j + 1) & (nc - 1);
      nv[j] = m->v[i];
    }
  free(m->v);
  m->v = nv;
  m->cap = nc;
  return 0;
}

struct osd_obj *
osd_objmap_add(struct osd_objmap *m, uint64_t inode, uint64_t offset)
{
  struct osd_obj *e = osd_objmap_get(m, inode, offset);
  if (e)
    return e;
  if ((m->n + 1) * 4 > m->cap * 3 && grow(m) < 0)
    return NULL;
  size_t i = slot_of(inode, offset, m->cap);
  while (m->v[i].used)
    i = (i + 1) & (m->cap - 1);
  e = &m->v[i];
  memset(e, 0, sizeof *e);
  e->inode = inode;
  e->offset = offset;
  e->used = 1;
  m->n++;
  return e;
}

void
osd_objmap_free(struct osd_objmap *m)
{
  free(m->v);
  memset(m, 0, sizeof *m);
}
