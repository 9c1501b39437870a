/* The PGs this OSD leads, as the operations see them: find one by number,
 * the one that serves an (inode, offset), which members hold a current
 * copy of an object, and marking a member's copy stale when it missed a
 * write. The table itself is built and changed by peering (osd_peering.c). */
#include <config.h>
#include <errno.h>
#include "image_meta.h"
#include "osd.h"

struct osd_pg *
osd_pg_find(struct osd *o, uint64_t pool, uint32_t pg)
{
  for (size_t i = 0; i < o->n_pgs; i++)
    if (o->pgs[i].pool == pool && o->pgs[i].pg == pg)
      return &o->pgs[i];
  return NULL;
}

struct osd_pg *
osd_pg_instance(struct osd *o, uint64_t pool, uint32_t pg, uint64_t instance)
{
  struct osd_pg *p = osd_pg_find(o, pool, pg);
  return p && p->instance == instance ? p : NULL;
}

struct osd_pg *
osd_pg_for(struct osd *o, uint64_t inode, uint64_t offset, int *err)
{
  *err = -EAGAIN;
  if (!o->ks || !o->ks->map)
    return NULL;
  const struct tc_pool_info *p = tc_map_pool(o->ks->map, TC_INODE_POOL(inode));
  if (!p) {
    *err = -ENOENT;
    return NULL;
  }
  struct osd_pg *pg = osd_pg_find(o, p->id, tc_map_pg_of(p, inode, offset));
  if (!pg || pg->state != PG_ACTIVE) {
    o->eagain++;
    return NULL;
  }
  return pg;
}

uint8_t
osd_pg_good_slots(struct osd *o, struct osd_pg *pg, const struct osd_obj *ob)
{
  uint8_t m = 0;
  for (uint32_t s = 0; s < pg->size; s++)
    if ((pg->up >> s & 1) && pg->osd_set[s] && osd_peer_usable(o, pg->osd_set[s]) &&
        !(ob && (ob->stale >> s & 1)))
      m |= (uint8_t) (1u << s);
  return m;
}

void
osd_pg_mark_stale(struct osd_pg *pg, uint64_t inode, uint64_t obj_offset, int slot)
{
  struct osd_obj *ob = osd_objmap_get(&pg->objs, inode, obj_offset);
  if (!ob || (ob->stale >> slot & 1))
    return;
  if (!ob->stale)
    pg->n_stale++;
  ob->stale |= (uint8_t) (1u << slot);
}
