/* The embedded MVCC store over LMDB (see kvstore.h for the layout). */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include "kvstore.h"
#include "error.h"
#include "log.h"
#include "vector.h"

#define HDR 32          /* create, mod, version, lease: little-endian int64 */
#define LOG_HDR 40      /* type u8, 3 pad, klen u32, HDR */

struct wreq {
  kvs_write_fn fn;
  void (*post)(void *);
  void *arg;
  struct kv_err *err;
  int result;
  bool done;
  struct wreq *next;
};

struct kvs {
  MDB_env *env;
  MDB_dbi kv, log, idx, lease, lkeys, meta;
  int lock_fd;
  uint64_t cluster_id, member_id;
  int64_t term;
  /* group commit */
  pthread_mutex_t wmu;
  pthread_cond_t wcv;
  struct wreq *qhead, *qtail;
  bool leader;
  /* committed revision, for watchers */
  pthread_mutex_t rmu;
  pthread_cond_t rcv;
  int64_t rev;
  unsigned wake_gen;
};

static void prealloc(struct kvs *s);

int
kv_err_set(struct kv_err *e, int code, const char *fmt, ...)
{
  va_list ap;
  e->code = code;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return -1;
}

static int
mdb_fail(struct kv_err *err, int rc, const char *what)
{
  tc_err("store: %s: %s", what, mdb_strerror(rc));
  if (rc == MDB_MAP_FULL)
    return kv_err_set(err, KV_RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded");
  return kv_err_set(err, KV_INTERNAL, "store: %s: %s", what, mdb_strerror(rc));
}

static void
put_be64(uint8_t *p, uint64_t v)
{
  for (int i = 7; i >= 0; i--, v >>= 8)
    p[i] = (uint8_t) v;
}

static uint64_t
get_be64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = v << 8 | p[i];
  return v;
}

static void
hdr_put(uint8_t *p, int64_t c, int64_t m, int64_t v, int64_t l)
{
  memcpy(p, &c, 8); memcpy(p + 8, &m, 8); memcpy(p + 16, &v, 8); memcpy(p + 24, &l, 8);
}

static void
hdr_get(const uint8_t *p, struct kv_rec *r)
{
  memcpy(&r->create_rev, p, 8); memcpy(&r->mod_rev, p + 8, 8);
  memcpy(&r->version, p + 16, 8); memcpy(&r->lease, p + 24, 8);
}

/* Order-preserving escape: 0x00 -> 00 FF, then the terminator 00 01. */
static size_t
esc_key(uint8_t *out, const uint8_t *key, size_t klen, bool term)
{
  size_t n = 0;
  for (size_t i = 0; i < klen; i++) {
    out[n++] = key[i];
    if (key[i] == 0)
      out[n++] = 0xff;
  }
  if (term) {
    out[n++] = 0;
    out[n++] = 1;
  }
  return n;
}

/* Split an idx key into the unescaped key (into kbuf) and (rev, sub). */
static int
idx_parse(const MDB_val *k, uint8_t *kbuf, size_t *klen, int64_t *rev, int64_t *sub)
{
  const uint8_t *p = k->mv_data;
  size_t n = k->mv_size, o = 0, i = 0;
  while (i + 1 < n) {
    if (p[i] == 0) {
      if (p[i + 1] == 1)
        break;
      kbuf[o++] = 0;
      i += 2;
    } else
      kbuf[o++] = p[i++];
  }
  if (i + 2 + 16 != n)
    return -1;
  *klen = o;
  *rev = (int64_t) get_be64(p + i + 2);
  *sub = (int64_t) get_be64(p + i + 10);
  return 0;
}

static int
log_parse(const MDB_val *v, int *type, struct kv_rec *r)
{
  const uint8_t *p = v->mv_data;
  uint32_t klen;
  if (v->mv_size < LOG_HDR)
    return -1;
  memcpy(&klen, p + 4, 4);
  if (v->mv_size < LOG_HDR + (size_t) klen)
    return -1;
  *type = p[0];
  hdr_get(p + 8, r);
  r->key = p + LOG_HDR;
  r->klen = klen;
  r->val = p + LOG_HDR + klen;
  r->vlen = v->mv_size - LOG_HDR - klen;
  return 0;
}

static int
kv_parse(const MDB_val *k, const MDB_val *v, struct kv_rec *r)
{
  if (v->mv_size < HDR)
    return -1;
  hdr_get(v->mv_data, r);
  r->key = k->mv_data;
  r->klen = k->mv_size;
  r->val = (const uint8_t *) v->mv_data + HDR;
  r->vlen = v->mv_size - HDR;
  return 0;
}

static int
meta_get(MDB_txn *t, MDB_dbi dbi, const char *name, int64_t *out)
{
  MDB_val k = { strlen(name), (void *) name }, v;
  int rc = mdb_get(t, dbi, &k, &v);
  if (rc)
    return rc;
  if (v.mv_size != 8)
    return MDB_CORRUPTED;
  memcpy(out, v.mv_data, 8);
  return 0;
}

static int
meta_set(MDB_txn *t, MDB_dbi dbi, const char *name, int64_t val)
{
  MDB_val k = { strlen(name), (void *) name }, v = { 8, &val };
  return mdb_put(t, dbi, &k, &v, 0);
}

static int
mkdir_p(const char *dir)
{
  char *copy = strdup(dir);
  if (!copy)
    return -1;
  for (char *p = copy + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(copy, 0755) < 0 && errno != EEXIST) {
        free(copy);
        return -1;
      }
      *p = '/';
    }
  free(copy);
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return -1;
  return 0;
}

struct kvs *
kvs_open(const char *dir, int64_t map_size)
{
  struct kvs *s = calloc(1, sizeof *s);
  MDB_txn *t = NULL;
  int rc;
  if (!s) {
    tc_error(ENOMEM, "store: out of memory");
    return NULL;
  }
  s->lock_fd = -1;
  pthread_mutex_init(&s->wmu, NULL);
  pthread_cond_init(&s->wcv, NULL);
  pthread_mutex_init(&s->rmu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->rcv, &ca);
  pthread_condattr_destroy(&ca);

  if (mkdir_p(dir) < 0) {
    tc_error(errno, "gateway_data %s: cannot create the folder: %s", dir, strerror(errno));
    goto fail;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/LOCK", dir);
  s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (s->lock_fd < 0) {
    tc_error(errno, "gateway_data %s: cannot write in the folder: %s", dir, strerror(errno));
    goto fail;
  }
  if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
    tc_error(EBUSY, "gateway_data %s: in use by another tromcho-gateway", dir);
    goto fail;
  }
  if ((rc = mdb_env_create(&s->env)) || (rc = mdb_env_set_maxdbs(s->env, 8)) ||
      (rc = mdb_env_set_mapsize(s->env, (size_t) map_size)) ||
      (rc = mdb_env_set_maxreaders(s->env, 1024))) {
    tc_error(EIO, "gateway_data %s: lmdb: %s", dir, mdb_strerror(rc));
    goto fail;
  }
  /* MDB_NOTLS: read snapshots are not tied to threads' reader slots. */
  if ((rc = mdb_env_open(s->env, dir, MDB_NOTLS | MDB_NORDAHEAD, 0600))) {
    tc_error(rc > 0 ? rc : EIO, "gateway_data %s: cannot open the store: %s", dir, mdb_strerror(rc));
    goto fail;
  }
  int dead;
  mdb_reader_check(s->env, &dead);
  if ((rc = mdb_txn_begin(s->env, NULL, 0, &t)) ||
      (rc = mdb_dbi_open(t, "kv", MDB_CREATE, &s->kv)) ||
      (rc = mdb_dbi_open(t, "log", MDB_CREATE, &s->log)) ||
      (rc = mdb_dbi_open(t, "idx", MDB_CREATE, &s->idx)) ||
      (rc = mdb_dbi_open(t, "lease", MDB_CREATE, &s->lease)) ||
      (rc = mdb_dbi_open(t, "lkeys", MDB_CREATE, &s->lkeys)) ||
      (rc = mdb_dbi_open(t, "meta", MDB_CREATE, &s->meta))) {
    tc_error(EIO, "gateway_data %s: cannot open the tables: %s", dir, mdb_strerror(rc));
    goto fail;
  }
  int64_t v;
  rc = meta_get(t, s->meta, "rev", &v);
  if (rc == MDB_NOTFOUND) {
    uint64_t ids[2];
    if (getrandom(ids, sizeof ids, 0) != sizeof ids) {
      tc_error(EIO, "store: getrandom failed");
      goto fail;
    }
    ids[0] >>= 1;
    ids[1] >>= 1;
    if ((rc = meta_set(t, s->meta, "rev", 1)) || (rc = meta_set(t, s->meta, "compact", 0)) ||
        (rc = meta_set(t, s->meta, "cluster_id", (int64_t) ids[0])) ||
        (rc = meta_set(t, s->meta, "member_id", (int64_t) ids[1])) ||
        (rc = meta_set(t, s->meta, "term", 1)))
      goto lmdb_fail;
  } else if (rc)
    goto lmdb_fail;
  int64_t cid, mid;
  if ((rc = meta_get(t, s->meta, "rev", &s->rev)) || (rc = meta_get(t, s->meta, "cluster_id", &cid)) ||
      (rc = meta_get(t, s->meta, "member_id", &mid)) || (rc = meta_get(t, s->meta, "term", &s->term)))
    goto lmdb_fail;
  s->cluster_id = (uint64_t) cid;
  s->member_id = (uint64_t) mid;
  s->term++;   /* like a restarted etcd member, which holds a new election */
  if ((rc = meta_set(t, s->meta, "term", s->term)))
    goto lmdb_fail;
  rc = mdb_txn_commit(t);
  t = NULL;
  if (rc)
    goto lmdb_fail;
  prealloc(s);
  return s;
lmdb_fail:
  tc_error(EIO, "gateway_data %s: %s", dir, mdb_strerror(rc));
fail:
  if (t)
    mdb_txn_abort(t);
  kvs_close(s);
  return NULL;
}

void
kvs_close(struct kvs *s)
{
  if (!s)
    return;
  if (s->env) {
    mdb_env_sync(s->env, 1);   /* without meta sync, the last commits wait for this */
    mdb_env_close(s->env);
  }
  if (s->lock_fd >= 0)
    close(s->lock_fd);
  pthread_mutex_destroy(&s->wmu);
  pthread_cond_destroy(&s->wcv);
  pthread_mutex_destroy(&s->rmu);
  pthread_cond_destroy(&s->rcv);
  free(s);
}

int
kvs_set_meta_sync(struct kvs *s, bool meta_sync)
{
  int rc = mdb_env_set_flags(s->env, MDB_NOMETASYNC, meta_sync ? 0 : 1);
  return rc ? tc_error(EINVAL, "store: %s", mdb_strerror(rc)) : 0;
}

int
kvs_sync(struct kvs *s)
{
  int rc = mdb_env_sync(s->env, 1);
  return rc ? tc_error(EIO, "store: sync: %s", mdb_strerror(rc)) : 0;
}

void
kvs_ids(struct kvs *s, uint64_t *cluster_id, uint64_t *member_id, int64_t *term)
{
  *cluster_id = s->cluster_id;
  *member_id = s->member_id;
  *term = s->term;
}

int64_t
kvs_revision(struct kvs *s)
{
  pthread_mutex_lock(&s->rmu);
  int64_t r = s->rev;
  pthread_mutex_unlock(&s->rmu);
  return r;
}

int
kvs_read_begin(struct kvs *s, struct kvs_txn *tx, struct kv_err *err)
{
  memset(tx, 0, sizeof *tx);
  tx->s = s;
  int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &tx->t);
  if (rc)
    return mdb_fail(err, rc, "read snapshot");
  if ((rc = meta_get(tx->t, s->meta, "rev", &tx->rev)) ||
      (rc = meta_get(tx->t, s->meta, "compact", &tx->compact_rev))) {
    mdb_txn_abort(tx->t);
    tx->t = NULL;
    return mdb_fail(err, rc, "read snapshot");
  }
  tx->base_rev = tx->rev;
  return 0;
}

void
kvs_read_end(struct kvs_txn *tx)
{
  if (tx->t)
    mdb_txn_abort(tx->t);
  tx->t = NULL;
}

int
kvs_get(struct kvs_txn *tx, const uint8_t *key, size_t klen, struct kv_rec *out, struct kv_err *err)
{
  MDB_val k = { klen, (void *) key }, v;
  if (klen == 0 || klen > KV_MAX_KEY)
    return 0;
  int rc = mdb_get(tx->t, tx->s->kv, &k, &v);
  if (rc == MDB_NOTFOUND)
    return 0;
  if (rc)
    return mdb_fail(err, rc, "get");
  if (kv_parse(&k, &v, out) < 0)
    return kv_err_set(err, KV_INTERNAL, "store: corrupt record");
  return 1;
}

int
kv_bytes_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
  size_t n = an < bn ? an : bn;
  int c = n ? memcmp(a, b, n) : 0;   /* an empty key may have no buffer at all */
  if (c)
    return c;
  return an < bn ? -1 : an > bn;
}

bool
kv_in_range(const uint8_t *key, size_t klen, const uint8_t *start, size_t slen,
            const uint8_t *end, size_t elen)
{
  if (elen == 0)
    return klen == slen && (klen == 0 || memcmp(key, start, klen) == 0);
  if (kv_bytes_cmp(key, klen, start, slen) < 0 && !(slen == 1 && start[0] == 0))
    return false;
  if (elen == 1 && end[0] == 0)
    return true;
  return kv_bytes_cmp(key, klen, end, elen) < 0;
}

/* Past revision: walk the index, per key the last change at or before at_rev. */
static int
range_past(struct kvs_txn *tx, const uint8_t *key, size_t klen, const uint8_t *end, size_t elen,
           int64_t at_rev, kvs_rec_cb cb, void *opaque, struct kv_err *err)
{
  MDB_cursor *c;
  uint8_t seek[2 * KV_MAX_KEY + 2];
  uint8_t cur[KV_MAX_KEY + 1], kb[2 * KV_MAX_KEY + 20];
  size_t curlen = 0, kblen;
  int64_t best_rev = 0, best_sub = 0, r, sub;
  bool have_cur = false;
  int rc = mdb_cursor_open(tx->t, tx->s->idx, &c);
  if (rc)
    return mdb_fail(err, rc, "range");
  MDB_val k = { esc_key(seek, key, klen, elen == 0), seek }, v;
  int ret = 0, op = MDB_SET_RANGE;
  for (;;) {
    rc = mdb_cursor_get(c, &k, &v, op);
    op = MDB_NEXT;
    bool done = rc == MDB_NOTFOUND;
    if (rc && !done) {
      ret = mdb_fail(err, rc, "range");
      break;
    }
    if (!done) {
      if (k.mv_size > sizeof kb || idx_parse(&k, kb, &kblen, &r, &sub) < 0) {
        ret = kv_err_set(err, KV_INTERNAL, "store: corrupt index");
        break;
      }
      if (!kv_in_range(kb, kblen, key, klen, end, elen)) {
        if (elen == 0 || kv_bytes_cmp(kb, kblen, key, klen) >= 0)
          done = true;   /* past the end of the range */
        else
          continue;
      }
    }
    bool new_key = done || !have_cur || kblen != curlen || memcmp(kb, cur, kblen) != 0;
    if (new_key && have_cur && best_rev) {
      /* Emit the previous key's record as of at_rev. */
      uint8_t lk[16];
      put_be64(lk, (uint64_t) best_rev);
      put_be64(lk + 8, (uint64_t) best_sub);
      MDB_val lkv = { 16, lk }, lv;
      int type;
      struct kv_rec rec;
      rc = mdb_get(tx->t, tx->s->log, &lkv, &lv);
      if (rc) {
        ret = mdb_fail(err, rc, "range: history");
        break;
      }
      if (log_parse(&lv, &type, &rec) < 0) {
        ret = kv_err_set(err, KV_INTERNAL, "store: corrupt history");
        break;
      }
      if (type == KV_EV_PUT && cb(opaque, &rec))
        break;
    }
    if (done)
      break;
    if (new_key) {
      memcpy(cur, kb, kblen);
      curlen = kblen;
      have_cur = true;
      best_rev = 0;
    }
    if (r <= at_rev) {
      best_rev = r;
      best_sub = sub;
    }
  }
  mdb_cursor_close(c);
  return ret;
}

int
kvs_range(struct kvs_txn *tx, const uint8_t *key, size_t klen, const uint8_t *end, size_t elen,
          int64_t at_rev, kvs_rec_cb cb, void *opaque, struct kv_err *err)
{
  struct kv_rec rec;
  if (klen > KV_MAX_KEY)
    return 0;
  if (at_rev > 0 && at_rev < tx->rev)
    return range_past(tx, key, klen, end, elen, at_rev, cb, opaque, err);
  if (elen == 0) {
    int rc = kvs_get(tx, key, klen, &rec, err);
    if (rc <= 0)
      return rc;
    cb(opaque, &rec);
    return 0;
  }
  MDB_cursor *c;
  int rc = mdb_cursor_open(tx->t, tx->s->kv, &c);
  if (rc)
    return mdb_fail(err, rc, "range");
  bool all_from_start = klen == 1 && key[0] == 0;
  MDB_val k = { all_from_start ? 0 : klen, (void *) key }, v;
  int ret = 0;
  rc = k.mv_size ? mdb_cursor_get(c, &k, &v, MDB_SET_RANGE) : mdb_cursor_get(c, &k, &v, MDB_FIRST);
  for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    if (!(elen == 1 && end[0] == 0) && kv_bytes_cmp(k.mv_data, k.mv_size, end, elen) >= 0)
      break;
    if (kv_parse(&k, &v, &rec) < 0) {
      ret = kv_err_set(err, KV_INTERNAL, "store: corrupt record");
      break;
    }
    if (cb(opaque, &rec))
      break;
  }
  if (rc && rc != MDB_NOTFOUND)
    ret = mdb_fail(err, rc, "range");
  mdb_cursor_close(c);
  return ret;
}

/* Start a change: the first change of a write takes the next revision. */
static void
next_change(struct kvs_txn *tx)
{
  if (tx->rev == tx->base_rev) {
    tx->rev = tx->base_rev + 1;
    tx->sub = 0;
  } else
    tx->sub++;
}

static int
record_event(struct kvs_txn *tx, int type, const uint8_t *key, size_t klen,
             const uint8_t *hdr, const uint8_t *val, size_t vlen, struct kv_err *err)
{
  uint8_t lk[16];
  put_be64(lk, (uint64_t) tx->rev);
  put_be64(lk + 8, (uint64_t) tx->sub);
  MDB_val k = { 16, lk }, v = { LOG_HDR + klen + vlen, NULL };
  int rc = mdb_put(tx->t, tx->s->log, &k, &v, MDB_RESERVE);
  if (rc)
    return mdb_fail(err, rc, "history");
  uint8_t *p = v.mv_data;
  uint32_t kl = (uint32_t) klen;
  memset(p, 0, 8);
  p[0] = (uint8_t) type;
  memcpy(p + 4, &kl, 4);
  memcpy(p + 8, hdr, HDR);
  memcpy(p + LOG_HDR, key, klen);
  if (vlen)
    memcpy(p + LOG_HDR + klen, val, vlen);
  uint8_t ik[2 * KV_MAX_KEY + 20];
  size_t n = esc_key(ik, key, klen, true);
  memcpy(ik + n, lk, 16);
  uint8_t t8 = (uint8_t) type;
  MDB_val ikv = { n + 16, ik }, iv = { 1, &t8 };
  if ((rc = mdb_put(tx->t, tx->s->idx, &ikv, &iv, 0)))
    return mdb_fail(err, rc, "index");
  return 0;
}

static int
lkey_set(struct kvs_txn *tx, int64_t lease, const uint8_t *key, size_t klen, bool add, struct kv_err *err)
{
  uint8_t b[8 + KV_MAX_KEY];
  put_be64(b, (uint64_t) lease);
  memcpy(b + 8, key, klen);
  MDB_val k = { 8 + klen, b }, v = { 0, b };
  int rc = add ? mdb_put(tx->t, tx->s->lkeys, &k, &v, 0) : mdb_del(tx->t, tx->s->lkeys, &k, NULL);
  if (rc && !(rc == MDB_NOTFOUND && !add))
    return mdb_fail(err, rc, "lease keys");
  return 0;
}

int
kvs_put(struct kvs_txn *tx, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
        int64_t lease, struct kv_err *err)
{
  struct kv_rec prev;
  if (klen == 0)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is not provided");
  if (klen > KV_MAX_KEY)
    return kv_err_set(err, KV_INVALID_ARGUMENT, "etcdserver: key is longer than %d bytes", KV_MAX_KEY);
  int had = kvs_get(tx, key, klen, &prev, err);
  if (had < 0)
    return -1;
  next_change(tx);
  uint8_t hdr[HDR];
  hdr_put(hdr, had ? prev.create_rev : tx->rev, tx->rev, had ? prev.version + 1 : 1, lease);
  if (had && prev.lease && prev.lease != lease && lkey_set(tx, prev.lease, key, klen, false, err) < 0)
    return -1;
  if (lease && (!had || prev.lease != lease) && lkey_set(tx, lease, key, klen, true, err) < 0)
    return -1;
  MDB_val k = { klen, (void *) key }, v = { HDR + vlen, NULL };
  int rc = mdb_put(tx->t, tx->s->kv, &k, &v, MDB_RESERVE);
  if (rc)
    return mdb_fail(err, rc, "put");
  memcpy(v.mv_data, hdr, HDR);
  if (vlen)
    memcpy((uint8_t *) v.mv_data + HDR, val, vlen);
  return record_event(tx, KV_EV_PUT, key, klen, hdr, val, vlen, err);
}

int
kvs_delete(struct kvs_txn *tx, const uint8_t *key, size_t klen, struct kv_err *err)
{
  struct kv_rec prev;
  int had = kvs_get(tx, key, klen, &prev, err);
  if (had <= 0)
    return had;
  int64_t lease = prev.lease;
  next_change(tx);
  MDB_val k = { klen, (void *) key };
  int rc = mdb_del(tx->t, tx->s->kv, &k, NULL);
  if (rc)
    return mdb_fail(err, rc, "delete");
  if (lease && lkey_set(tx, lease, key, klen, false, err) < 0)
    return -1;
  uint8_t hdr[HDR];
  hdr_put(hdr, 0, tx->rev, 0, 0);
  if (record_event(tx, KV_EV_DELETE, key, klen, hdr, NULL, 0, err) < 0)
    return -1;
  return 1;
}

int
kvs_lease_exists(struct kvs_txn *tx, int64_t id)
{
  uint8_t b[8];
  put_be64(b, (uint64_t) id);
  MDB_val k = { 8, b }, v;
  int rc = mdb_get(tx->t, tx->s->lease, &k, &v);
  return rc == 0 ? 1 : rc == MDB_NOTFOUND ? 0 : -1;
}

int
kvs_lease_put(struct kvs_txn *tx, int64_t id, int64_t ttl, struct kv_err *err)
{
  uint8_t b[8];
  put_be64(b, (uint64_t) id);
  MDB_val k = { 8, b }, v = { 8, &ttl };
  int rc = mdb_put(tx->t, tx->s->lease, &k, &v, 0);
  return rc ? mdb_fail(err, rc, "lease") : 0;
}

int
kvs_lease_keys(struct kvs_txn *tx, int64_t id, kvs_rec_cb cb, void *opaque, struct kv_err *err)
{
  uint8_t b[8];
  put_be64(b, (uint64_t) id);
  MDB_cursor *c;
  int rc = mdb_cursor_open(tx->t, tx->s->lkeys, &c);
  if (rc)
    return mdb_fail(err, rc, "lease keys");
  MDB_val k = { 8, b }, v;
  int ret = 0;
  for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    if (k.mv_size < 8 || memcmp(k.mv_data, b, 8) != 0)
      break;
    struct kv_rec r = { .key = (const uint8_t *) k.mv_data + 8, .klen = k.mv_size - 8, .lease = id };
    if (cb(opaque, &r))
      break;
  }
  if (rc && rc != MDB_NOTFOUND)
    ret = mdb_fail(err, rc, "lease keys");
  mdb_cursor_close(c);
  return ret;
}

struct keylist {
  uint8_t *buf;
  size_t len, cap, count;
  bool oom;
};

/* Append a length-prefixed byte string. */
static int
keylist_add(struct keylist *l, const uint8_t *p, size_t n)
{
  if (tc_grow(&l->buf, &l->cap, l->len + n + sizeof(size_t), 1, 4096) < 0) {
    l->oom = true;
    return 1;
  }
  memcpy(l->buf + l->len, &n, sizeof n);
  memcpy(l->buf + l->len + sizeof n, p, n);
  l->len += n + sizeof n;
  l->count++;
  return 0;
}

static int
collect_key(void *opaque, const struct kv_rec *r)
{
  return keylist_add(opaque, r->key, r->klen);
}

int
kvs_lease_delete(struct kvs_txn *tx, int64_t id, struct kv_err *err)
{
  struct keylist l = { 0 };
  if (kvs_lease_keys(tx, id, collect_key, &l, err) < 0) {
    free(l.buf);
    return -1;
  }
  if (l.oom) {
    free(l.buf);
    return kv_err_set(err, KV_INTERNAL, "lease revoke: out of memory");
  }
  for (size_t o = 0; o < l.len;) {
    size_t n;
    memcpy(&n, l.buf + o, sizeof n);
    if (kvs_delete(tx, l.buf + o + sizeof n, n, err) < 0) {
      free(l.buf);
      return -1;
    }
    o += sizeof n + n;
  }
  free(l.buf);
  uint8_t b[8];
  put_be64(b, (uint64_t) id);
  MDB_val k = { 8, b };
  int rc = mdb_del(tx->t, tx->s->lease, &k, NULL);
  if (rc && rc != MDB_NOTFOUND)
    return mdb_fail(err, rc, "lease");
  return 0;
}

int
kvs_lease_list(struct kvs *s, void (*cb)(void *opaque, int64_t id, int64_t ttl), void *opaque)
{
  struct kvs_txn tx;
  struct kv_err err;
  if (kvs_read_begin(s, &tx, &err) < 0)
    return tc_error(EIO, "%s", err.msg);
  MDB_cursor *c;
  int rc = mdb_cursor_open(tx.t, s->lease, &c);
  if (rc) {
    kvs_read_end(&tx);
    return tc_error(EIO, "store: leases: %s", mdb_strerror(rc));
  }
  MDB_val k, v;
  for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    int64_t ttl;
    if (k.mv_size != 8 || v.mv_size != 8)
      continue;
    memcpy(&ttl, v.mv_data, 8);
    cb(opaque, (int64_t) get_be64(k.mv_data), ttl);
  }
  mdb_cursor_close(c);
  kvs_read_end(&tx);
  return 0;
}

int
kvs_compact(struct kvs_txn *tx, int64_t rev, struct kv_err *err)
{
  if (rev <= tx->compact_rev)
    return kv_err_set(err, KV_OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted");
  if (rev > tx->rev)
    return kv_err_set(err, KV_OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision");
  /* Per key, drop every change before rev except the last one at or
   * before rev when it is a put (reads at rev still need it). */
  struct keylist drop = { 0 };
  MDB_cursor *c;
  int rc = mdb_cursor_open(tx->t, tx->s->idx, &c);
  if (rc)
    return mdb_fail(err, rc, "compact");
  MDB_val k, v;
  uint8_t kb[2 * KV_MAX_KEY + 20], cur[KV_MAX_KEY + 1];
  uint8_t pend[2 * KV_MAX_KEY + 20];
  size_t kblen, curlen = 0, pendlen = 0;
  int pend_type = 0;
  int64_t r, sub;
  int ret = 0;
  for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    bool done = rc == MDB_NOTFOUND;
    if (rc && !done) {
      ret = mdb_fail(err, rc, "compact");
      break;
    }
    bool new_key = done;
    if (!done) {
      if (k.mv_size > sizeof kb || idx_parse(&k, kb, &kblen, &r, &sub) < 0) {
        ret = kv_err_set(err, KV_INTERNAL, "store: corrupt index");
        break;
      }
      new_key = kblen != curlen || memcmp(kb, cur, kblen) != 0;
    }
    if (pendlen && (new_key || r <= rev)) {
      /* The pending change is superseded, or the key's last before rev. */
      if (!new_key || pend_type == KV_EV_DELETE)
        keylist_add(&drop, pend, pendlen);
      pendlen = 0;
    }
    if (done)
      break;
    if (new_key) {
      memcpy(cur, kb, kblen);
      curlen = kblen;
    }
    if (r < rev) {
      memcpy(pend, k.mv_data, k.mv_size);
      pendlen = k.mv_size;
      pend_type = v.mv_size ? *(uint8_t *) v.mv_data : 0;
    }
  }
  mdb_cursor_close(c);
  if (!ret && drop.oom)
    ret = kv_err_set(err, KV_INTERNAL, "compact: out of memory");
  for (size_t o = 0; !ret && o < drop.len;) {
    size_t n;
    memcpy(&n, drop.buf + o, sizeof n);
    MDB_val ik = { n, drop.buf + o + sizeof n }, lk = { 16, drop.buf + o + sizeof n + n - 16 };
    if ((rc = mdb_del(tx->t, tx->s->idx, &ik, NULL)) ||
        ((rc = mdb_del(tx->t, tx->s->log, &lk, NULL)) && rc != MDB_NOTFOUND))
      ret = mdb_fail(err, rc, "compact");
    o += sizeof n + n;
  }
  free(drop.buf);
  if (ret)
    return ret;
  if ((rc = meta_set(tx->t, tx->s->meta, "compact", rev)))
    return mdb_fail(err, rc, "compact");
  tx->compact_rev = rev;
  tc_info("compacted history before revision %" PRId64 ": %zu changes dropped", rev, drop.count);
  return 0;
}

int
kvs_events(struct kvs_txn *tx, int64_t from_rev, kvs_event_cb cb, void *opaque, struct kv_err *err)
{
  uint8_t lk[16];
  put_be64(lk, (uint64_t) from_rev);
  put_be64(lk + 8, 0);
  MDB_cursor *c;
  int rc = mdb_cursor_open(tx->t, tx->s->log, &c);
  if (rc)
    return mdb_fail(err, rc, "watch history");
  MDB_val k = { 16, lk }, v;
  int ret = 0, type;
  struct kv_rec rec;
  for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    if (k.mv_size != 16 || log_parse(&v, &type, &rec) < 0) {
      ret = kv_err_set(err, KV_INTERNAL, "store: corrupt history");
      break;
    }
    rec.sub = (int64_t) get_be64((const uint8_t *) k.mv_data + 8);
    if (cb(opaque, type, &rec))
      break;
  }
  if (rc && rc != MDB_NOTFOUND)
    ret = mdb_fail(err, rc, "watch history");
  mdb_cursor_close(c);
  return ret;
}

int
kvs_prev_version(struct kvs_txn *tx, const uint8_t *key, size_t klen, int64_t rev, int64_t sub,
                 struct kv_rec *out, struct kv_err *err)
{
  uint8_t ik[2 * KV_MAX_KEY + 20];
  if (klen > KV_MAX_KEY)
    return 0;
  size_t n = esc_key(ik, key, klen, true);
  put_be64(ik + n, (uint64_t) rev);
  put_be64(ik + n + 8, (uint64_t) sub);
  MDB_cursor *c;
  int rc = mdb_cursor_open(tx->t, tx->s->idx, &c);
  if (rc)
    return mdb_fail(err, rc, "prev_kv");
  MDB_val k = { n + 16, ik }, v;
  int ret = 0;
  rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  if (rc == 0 || rc == MDB_NOTFOUND)
    rc = mdb_cursor_get(c, &k, &v, rc == 0 ? MDB_PREV : MDB_LAST);
  if (rc == 0 && k.mv_size == n + 16 && memcmp(k.mv_data, ik, n) == 0 &&
      v.mv_size == 1 && *(uint8_t *) v.mv_data == KV_EV_PUT) {
    MDB_val lk = { 16, (uint8_t *) k.mv_data + n }, lv;
    int type;
    if (mdb_get(tx->t, tx->s->log, &lk, &lv) == 0 && log_parse(&lv, &type, out) == 0)
      ret = 1;
  }
  mdb_cursor_close(c);
  return ret;
}

static int64_t
now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Keep written (not just reserved) space after LMDB's last page: a commit
 * that grows the file makes fdatasync commit the filesystem journal, which
 * on a busy ext4 waits for other files' data; overwriting allocated blocks
 * does not. Runs between commits (by the group-commit leader or at open), so
 * LMDB never writes to the region being filled. */
#define PREALLOC_MARGIN (8 << 20)
#define PREALLOC_CHUNK (16 << 20)
static void
prealloc(struct kvs *s)
{
  MDB_envinfo info;
  MDB_stat st;
  int fd;
  struct stat sb;
  if (mdb_env_info(s->env, &info) || mdb_env_stat(s->env, &st) || mdb_env_get_fd(s->env, &fd) ||
      fstat(fd, &sb) < 0)
    return;
  off_t used = (off_t) (info.me_last_pgno + 1) * st.ms_psize;
  if (sb.st_size - used >= PREALLOC_MARGIN)
    return;
  static const char zeros[1 << 16];
  off_t end = used + PREALLOC_MARGIN + PREALLOC_CHUNK;
  end -= end % (off_t) sizeof zeros;
  for (off_t o = sb.st_size > used ? sb.st_size : used; o < end;) {
    size_t n = sizeof zeros - (size_t) (o % (off_t) sizeof zeros);
    ssize_t w = pwrite(fd, zeros, n, o);
    if (w <= 0) {
      tc_warn("store: preallocating: %s", w < 0 ? strerror(errno) : "short write");
      return;
    }
    o += w;
  }
  if (fdatasync(fd) < 0)
    tc_warn("store: preallocating: fdatasync: %s", strerror(errno));
}

/* One group commit: every queued write in one LMDB transaction. */
static void
run_batch(struct kvs *s, struct wreq *batch)
{
  MDB_txn *t;
  int64_t rev, compact;
  struct kv_err cerr = { 0, "" };
  struct wreq *culprit = NULL;
  int rc = mdb_txn_begin(s->env, NULL, 0, &t);
  if (rc == 0 && ((rc = meta_get(t, s->meta, "rev", &rev)) || (rc = meta_get(t, s->meta, "compact", &compact))))
    mdb_txn_abort(t);
  if (rc) {
    mdb_fail(&cerr, rc, "write");
    goto failed;
  }
  /* One transaction for the group, no nested ones: LMDB's nested
   * transactions allocate megabytes each. A write that fails having changed
   * nothing fails alone; one that fails after changing something (an
   * internal error) takes the whole group with it. */
  for (struct wreq *w = batch; w; w = w->next) {
    struct kvs_txn tx = { .s = s, .t = t, .rev = rev, .base_rev = rev, .compact_rev = compact, .write = true };
    w->result = w->fn(&tx, w->arg, w->err);
    if (w->result < 0) {
      if (tx.rev != tx.base_rev || w->err->code == KV_INTERNAL || w->err->code == KV_RESOURCE_EXHAUSTED) {
        kv_err_set(&cerr, w->err->code == KV_RESOURCE_EXHAUSTED ? KV_RESOURCE_EXHAUSTED : KV_INTERNAL,
                   "write aborted with its commit group: %s", w->err->msg);
        culprit = w;
        mdb_txn_abort(t);
        goto failed;
      }
      continue;
    }
    rev = tx.rev;
    compact = tx.compact_rev;
  }
  if ((rc = meta_set(t, s->meta, "rev", rev))) {
    mdb_txn_abort(t);
    mdb_fail(&cerr, rc, "write");
    goto failed;
  }
  if ((rc = mdb_txn_commit(t))) {
    mdb_fail(&cerr, rc, "commit");
    goto failed;
  }
  for (struct wreq *w = batch; w; w = w->next)
    if (w->result == 0 && w->post)
      w->post(w->arg);
  pthread_mutex_lock(&s->rmu);
  s->rev = rev;
  pthread_cond_broadcast(&s->rcv);
  pthread_mutex_unlock(&s->rmu);
  prealloc(s);
  return;
failed:
  for (struct wreq *w = batch; w; w = w->next) {
    if (w != culprit)   /* the culprit keeps its own error */
      *w->err = cerr;
    w->result = -1;
  }
}

int
kvs_write(struct kvs *s, kvs_write_fn fn, void (*post)(void *arg), void *arg, struct kv_err *err)
{
  struct wreq r = { .fn = fn, .post = post, .arg = arg, .err = err };
  pthread_mutex_lock(&s->wmu);
  if (s->qtail)
    s->qtail->next = &r;
  else
    s->qhead = &r;
  s->qtail = &r;
  while (!r.done) {
    if (s->leader) {
      pthread_cond_wait(&s->wcv, &s->wmu);
      continue;
    }
    s->leader = true;
    struct wreq *batch = s->qhead;
    s->qhead = s->qtail = NULL;
    pthread_mutex_unlock(&s->wmu);
    run_batch(s, batch);
    pthread_mutex_lock(&s->wmu);
    for (struct wreq *w = batch, *next; w; w = next) {
      next = w->next;   /* w may go away once done is seen */
      w->done = true;
    }
    s->leader = false;
    pthread_cond_broadcast(&s->wcv);
  }
  pthread_mutex_unlock(&s->wmu);
  return r.result;
}

int64_t
kvs_wait_revision(struct kvs *s, int64_t rev, int timeout_ms)
{
  int64_t deadline = now_ms() + timeout_ms;
  pthread_mutex_lock(&s->rmu);
  unsigned gen = s->wake_gen;
  while (s->rev < rev && gen == s->wake_gen) {
    int64_t left = deadline - now_ms();
    if (left <= 0)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&s->rcv, &s->rmu, &ts);
  }
  int64_t r = s->rev;
  pthread_mutex_unlock(&s->rmu);
  return r;
}

void
kvs_wake_all(struct kvs *s)
{
  pthread_mutex_lock(&s->rmu);
  s->wake_gen++;
  pthread_cond_broadcast(&s->rcv);
  pthread_mutex_unlock(&s->rmu);
}
