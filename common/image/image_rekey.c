/* Online re-key (see image_admin.h and common/README.md, "Layer switch and
 * re-key").
 *
 * The state lives in the records, so a crash at any point resumes:
 *   start   one transaction: NAME's new inode N (new key, parent = the old
 *           top O, rekey_from = O, rekey_done = 0) becomes /index/image/NAME;
 *           O becomes read-only and hidden with next_id = N. From then on
 *           the OSDs refuse writes to O (the fence), open handles move to N
 *           (client.c) and new opens get N.
 *   copy    every object of O, in offset order: READ it at the fence's KV
 *           revision (so no write to it can still land after), decrypt with
 *           O's key, encrypt with N's, and WRITE_IF "absent" each sector into
 *           N: a sector a user wrote to N meanwhile is newer and stays
 *           (-ESTALE). rekey_done in N's record is the watermark.
 *   retire  after a SYNC, one transaction: N's parent becomes O's parent
 *           (rekey_done = size); O becomes retired, with no key. Fence at
 *           that revision (reads of O are refused from then on: handles
 *           still reading through it reload), delete O's objects, then clear
 *           rekey_from. O's record stays as the fence of its inode. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cluster.h"
#include "crypto.h"
#include "error.h"
#include "evloop.h"
#include "image_admin_int.h"
#include "log.h"

/* The start transaction (retried while NAME changes). */
static int
rekey_start(struct tc_client *cl, const char *name, const char *newkey)
{
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    struct tc_image_meta m;
    int64_t nrev, irev;
    if (tc_client_lookup(cl, name, &m, &nrev, &irev) < 0)
      return -1;
    if (m.rekey_from) {   /* someone else started one meanwhile */
      tc_image_meta_clear(&m);
      return 0;
    }
    char oldname[300];
    snprintf(oldname, sizeof oldname, "%s@.rekey", name);
    struct tc_image_meta old = m, live = m;
    old.name = oldname;
    old.readonly = true;
    old.hidden = true;
    live.parent_pool = m.pool;
    live.parent_id = m.id;
    live.enc_key = (char *) newkey;   /* borrowed; m keeps (and clears) its own */
    live.rekey_from = m.id;
    live.rekey_done = 0;
    char kidx[512], kold[256];
    tc_client_key(cl, kidx, sizeof kidx, "/index/image/%s", name);
    tc_client_key(cl, kold, sizeof kold, "/config/inode/%" PRIu64 "/%" PRIu64, m.pool, m.id);
    struct tc_kv_cmp cmp[2] = {
      { .key = kidx, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = nrev },
      { .key = kold, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = irev },
    };
    struct tc_kv_op ops[1] = { { .type = TC_KV_PUT, .key = kold } };
    int r = tc_admin_alloc_txn_succ(cl, &live, cmp, 2, ops, 1, &old);
    tc_image_meta_clear(&m);
    if (r != 0)
      return r < 0 ? -1 : 0;
  }
  return tc_error(EAGAIN, "image %s: kept changing while starting the re-key, try again", name);
}

struct keys {
  struct tc_xts *from, *to;   /* NULL: that layer is not encrypted */
};

static void
keys_free(struct keys *k)
{
  tc_xts_free(k->from);
  tc_xts_free(k->to);
}

static int
xts_of(struct tc_client *cl, const struct tc_image_meta *m, struct tc_xts **x)
{
  *x = NULL;
  if (!m->enc_key)
    return 0;
  uint8_t key[TC_XTS_KEY_SIZE];
  int r = tc_client_key_resolve(cl, m->name, m->enc_key, key);
  if (r == 0)
    r = tc_xts_new(x, key);
  tc_wipe(key, sizeof key);
  return r;
}

static int
cmp_offset(const void *a, const void *b)
{
  uint64_t x = ((const struct tc_osd_list_entry *) a)->offset, y = ((const struct tc_osd_list_entry *) b)->offset;
  return x < y ? -1 : x > y;
}

/* Record the watermark in N's record (retried while it changes). */
static int
save_done(struct tc_client *cl, const char *name, uint64_t pool, uint64_t id, uint64_t done)
{
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    struct tc_image_meta n;
    int64_t rev;
    if (tc_client_read_inode(cl, pool, id, &n, &rev) < 0)
      return tc_error(errno, "image %s: %s", name, tc_last_error());
    n.rekey_done = done;
    int r = tc_client_put_record(cl, &n, rev, NULL, "recording the re-key's progress");
    tc_image_meta_clear(&n);
    if (r != 0)
      return r < 0 ? -1 : 0;
  }
  return tc_error(EAGAIN, "image %s: its record kept changing while recording the re-key's progress", name);
}

/* Copy one object of O (at off, present sectors bm) into N. */
static int
copy_object(struct tc_client *cl, const struct tc_image_meta *nm, uint64_t o_inode, uint64_t off, uint32_t bs,
            int64_t fence_rev, struct keys *k, uint8_t *buf, uint8_t *out, struct tc_objop *ops)
{
  uint64_t n_inode = TC_INODE(nm->pool, nm->id);
  uint8_t bm[8] = { 0 };
  struct tc_objop rd = { .code = TC_OBJ_READ, .inode = o_inode, .offset = off, .len = bs, .buf = buf,
                         .bitmap = bm, .min_rev = (uint64_t) fence_rev };
  if (tc_cluster_run(tc_client_cluster(cl), &rd) < 0)
    return tc_error(errno, "image %s: re-key: reading the old layer at %" PRIu64 ": %s", nm->name, off,
                    tc_last_error());
  uint32_t nsec = bs / TC_SECTOR;
  size_t n = 0;
  for (uint32_t s = 0; s < nsec; s++) {
    if (!(bm[s / 8] >> (s % 8) & 1))
      continue;
    uint64_t sector = off / TC_SECTOR + s;
    uint8_t *in = buf + (size_t) s * TC_SECTOR, *o = out + (size_t) s * TC_SECTOR;
    if (k->from && tc_xts_decrypt(k->from, sector, in, in, TC_SECTOR) < 0)
      return -1;
    if (k->to ? tc_xts_encrypt(k->to, sector, in, o, TC_SECTOR) < 0 : (memcpy(o, in, TC_SECTOR), 0))
      return -1;
    ops[n++] = (struct tc_objop) { .code = TC_OBJ_WRITE_IF, .inode = n_inode, .offset = sector * TC_SECTOR,
                                   .len = TC_SECTOR, .buf = o, .if_present = false, .result = 1 };
  }
  tc_wipe(buf, bs);
  /* Submitting stops at the first error: -ESTALE (the user wrote that
   * sector of N meanwhile: it is newer, keep it) is not one here, so run
   * again what was not submitted. */
  struct tc_objstore os = tc_cluster_objstore(tc_client_cluster(cl));
  size_t first = 0;
  while (first < n) {
    tc_objstore_run(&os, ops + first, n - first, 32, NULL, NULL);
    size_t next = n;
    for (size_t i = first; i < n; i++) {
      if (ops[i].result == 1) {   /* not submitted */
        if (next == n)
          next = i;
        continue;
      }
      if (ops[i].result < 0 && ops[i].result != -ESTALE)
        return tc_error(-ops[i].result, "image %s: re-key: writing the new layer at %" PRIu64 ": %s", nm->name,
                        ops[i].offset, strerror(-ops[i].result));
    }
    first = next;
  }
  return 0;
}

/* The copy phase: every object of O at or past the watermark. */
static int
rekey_copy(struct tc_client *cl, const char *name, tc_admin_progress_fn fn, void *arg)
{
  struct tc_image_meta nm, om;
  int64_t nrev, orev;
  if (tc_client_lookup(cl, name, &nm, NULL, &nrev) < 0)
    return -1;
  struct keys k = { 0 };
  struct tc_osd_list_entry *e = NULL;
  size_t ne = 0;
  uint8_t *buf = NULL, *out = NULL;
  struct tc_objop *ops = NULL;
  int r = -1;
  bool have_o = false;
  uint32_t bs;
  if (tc_client_read_inode(cl, nm.pool, nm.rekey_from, &om, &orev) < 0) {
    tc_error(errno, "image %s: its old layer: %s", name, tc_last_error());
    goto out;
  }
  have_o = true;
  uint64_t o_inode = TC_INODE(om.pool, om.id);
  if (!om.readonly || om.next_id != nm.id) {
    tc_error(EINVAL, "image %s: its old layer %s is not fenced for it (readonly, next_id): not a re-key", name,
             om.name);
    goto out;
  }
  if (tc_client_block_size(cl, nm.pool, &bs) < 0 || xts_of(cl, &om, &k.from) < 0 || xts_of(cl, &nm, &k.to) < 0)
    goto out;
  buf = aligned_alloc(TC_SECTOR, bs);
  out = aligned_alloc(TC_SECTOR, bs);
  ops = calloc(bs / TC_SECTOR, sizeof *ops);
  if (!buf || !out || !ops) {
    tc_error(ENOMEM, "image %s: re-key: out of memory", name);
    goto out;
  }
  if (tc_cluster_list(tc_client_cluster(cl), o_inode, o_inode, 0, &e, &ne) < 0) {
    tc_error(errno, "image %s: listing its old layer: %s", name, tc_last_error());
    goto out;
  }
  if (ne)
    qsort(e, ne, sizeof *e, cmp_offset);
  uint64_t done = nm.rekey_done, total = nm.size;
  uint64_t t0 = tc_now_ms(), start = t0, copied = 0;
  int64_t rate = tc_config_int(tc_client_config(cl), "rekey_rate");
  if (rate < 0)
    rate = 0;
  for (size_t i = 0; i < ne; i++) {
    if (e[i].inode != o_inode || !e[i].bitmap || e[i].offset + bs <= done || (i && e[i].offset == e[i - 1].offset))
      continue;
    if (copy_object(cl, &nm, o_inode, e[i].offset, bs, orev, &k, buf, out, ops) < 0)
      goto out;
    done = e[i].offset + bs;
    copied += bs;
    if (rate) {   /* rekey_rate MiB/s: wait until the copy is back on schedule */
      uint64_t due = start + copied * 1000 / ((uint64_t) rate << 20), now = tc_now_ms();
      if (due > now)
        usleep((useconds_t) (due - now) * 1000);
    }
    if (fn)
      fn(arg, done < total ? done : total, total);
    /* The watermark, every 0.5 s: a crash redoes at most that much (the
     * conditional writes make a redo harmless). */
    if (tc_now_ms() - t0 >= 500) {
      if (save_done(cl, name, nm.pool, nm.id, done) < 0)
        goto out;
      t0 = tc_now_ms();
    }
  }
  if (fn)
    fn(arg, total, total);
  r = 0;
out:
  keys_free(&k);
  free(e);
  if (buf) {
    tc_wipe(buf, bs);
    free(buf);
  }
  if (out)
    free(out);
  free(ops);
  if (have_o)
    tc_image_meta_clear(&om);
  tc_image_meta_clear(&nm);
  return r;
}

/* The retire phase: unlink and retire O (one transaction), fence, delete
 * O's data, clear the re-key. */
static int
rekey_retire(struct tc_client *cl, const char *name)
{
  struct tc_objop sync = { .code = TC_OBJ_SYNC };
  if (tc_cluster_run(tc_client_cluster(cl), &sync) < 0)
    return tc_error(errno, "image %s: re-key: syncing the new layer: %s", name, tc_last_error());
  int64_t rev2 = 0;
  uint64_t pool = 0, nid = 0, oid = 0;
  for (int attempt = 0;; attempt++) {
    if (attempt == ATTEMPTS)
      return tc_error(EAGAIN, "image %s: its records kept changing while finishing the re-key", name);
    struct tc_image_meta nm, om;
    int64_t nrev, orev;
    if (tc_client_lookup(cl, name, &nm, NULL, &nrev) < 0)
      return -1;
    pool = nm.pool;
    nid = nm.id;
    oid = nm.rekey_from;
    if (!oid) {   /* finished meanwhile */
      tc_image_meta_clear(&nm);
      return 0;
    }
    if (tc_client_read_inode(cl, pool, oid, &om, &orev) < 0) {
      tc_image_meta_clear(&nm);
      return tc_error(errno, "image %s: its old layer: %s", name, tc_last_error());
    }
    if (nm.parent_id != oid) {   /* retired already: a resume */
      rev2 = orev;
      tc_image_meta_clear(&nm);
      tc_image_meta_clear(&om);
      break;
    }
    nm.parent_pool = om.parent_pool;
    nm.parent_id = om.parent_id;
    nm.rekey_done = nm.size;
    om.retired = true;
    om.integrity = false;
    om.parent_pool = om.parent_id = 0;   /* a tombstone is nobody's child */
    if (om.enc_key)
      tc_wipe(om.enc_key, strlen(om.enc_key));
    free(om.enc_key);
    om.enc_key = NULL;
    char kn[256], ko[256];
    tc_client_key(cl, kn, sizeof kn, "/config/inode/%" PRIu64 "/%" PRIu64, pool, nid);
    tc_client_key(cl, ko, sizeof ko, "/config/inode/%" PRIu64 "/%" PRIu64, pool, oid);
    char *nj = tc_image_meta_json(&nm), *oj = tc_image_meta_json(&om);
    tc_image_meta_clear(&nm);
    tc_image_meta_clear(&om);
    if (!nj || !oj) {
      free(nj);
      free(oj);
      return -1;
    }
    struct tc_kv_cmp cmp[2] = {
      { .key = kn, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = nrev },
      { .key = ko, .target = TC_KV_CMP_MOD, .result = TC_KV_EQUAL, .number = orev },
    };
    struct tc_kv_op ops[2] = { { .type = TC_KV_PUT, .key = kn, .value = nj }, { .type = TC_KV_PUT, .key = ko, .value = oj } };
    struct tc_kv_txn txn = { cmp, 2, ops, 2, NULL, 0 };
    struct tc_kv_result res = { 0 };
    int t = tc_kv_txn(tc_client_kv(cl), &txn, &res);
    free(nj);
    free(oj);
    if (t < 0)
      return tc_error(errno, "image %s: %s", name, tc_last_error());
    bool ok = res.succeeded;
    rev2 = res.revision;
    tc_kv_result_free(&res);
    if (ok)
      break;
  }
  /* Every PG primary now refuses reads of O: a handle still reading
   * through it reloads its chain, and none reads the deleted data. */
  if (tc_client_fence(cl, TC_INODE(pool, nid), rev2) < 0)
    return tc_error(errno, "image %s: %s", name, tc_last_error());
  if (tc_admin_delete_objects(cl, TC_INODE(pool, oid), NULL, NULL) < 0)
    return tc_error(errno, "image %s: deleting its old layer's data: %s", name, tc_last_error());
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    struct tc_image_meta nm;
    int64_t nrev;
    if (tc_client_read_inode(cl, pool, nid, &nm, &nrev) < 0)
      return tc_error(errno, "image %s: %s", name, tc_last_error());
    nm.rekey_from = 0;
    nm.rekey_done = 0;
    int r = tc_client_put_record(cl, &nm, nrev, NULL, "finishing the re-key");
    tc_image_meta_clear(&nm);
    if (r != 0)
      return r < 0 ? -1 : 0;
  }
  return tc_error(EAGAIN, "image %s: its record kept changing while finishing the re-key", name);
}

int
tc_admin_rekey(struct tc_client *cl, const char *name, const char *enc_key, tc_admin_progress_fn fn, void *arg)
{
  if (tc_admin_check_name(name, false) < 0)
    return -1;
  struct tc_image_meta m;
  if (tc_client_lookup(cl, name, &m, NULL, NULL) < 0)
    return -1;
  int r = -1;
  char *newkey = NULL;
  if (!tc_client_may_write(cl, &m)) {
    tc_error(EACCES, "image %s: permission denied (a re-key needs write access)", name);
    goto out;
  }
  if (m.rekey_from) {
    if (enc_key)
      tc_warn("image %s: a re-key is in progress: resuming it (the key given now is not used)", name);
  }
  else if (!enc_key) {
    tc_error(EINVAL, "image %s: no re-key in progress to resume", name);
    goto out;
  }
  else {
    if (m.readonly) {
      tc_error(EROFS, "image %s: read-only, cannot re-key", name);
      goto out;
    }
    if (m.integrity) {
      tc_error(ENOTSUP, "image %s: an authenticated image cannot be re-keyed online yet", name);
      goto out;
    }
    if (!strcmp(enc_key, "none")) {
      tc_error(EINVAL, "image %s: a re-key needs a new key (auto, 128 hex digits or vault:ID)", name);
      goto out;
    }
    if (tc_admin_make_key(cl, name, enc_key, &newkey) < 0)
      goto out;
    /* A key that does not resolve would leave an image nobody can read. */
    uint8_t key[TC_XTS_KEY_SIZE];
    if (tc_client_key_resolve(cl, name, newkey, key) < 0) {
      tc_error(errno, "image %s: the new key: %s", name, tc_last_error());
      goto out;
    }
    tc_wipe(key, sizeof key);
    if (rekey_start(cl, name, newkey) < 0)
      goto out;
  }
  tc_image_meta_clear(&m);
  if (tc_client_lookup(cl, name, &m, NULL, NULL) < 0)
    goto out;
  if (m.rekey_from && m.parent_id == m.rekey_from && rekey_copy(cl, name, fn, arg) < 0)
    goto out;
  if (m.rekey_from && rekey_retire(cl, name) < 0)
    goto out;
  r = 0;
out:
  if (newkey) {
    tc_wipe(newkey, strlen(newkey));
    free(newkey);
  }
  tc_image_meta_clear(&m);
  return r;
}
