/* The gateway's MVCC store and request parser, without HTTP: revisions,
 * reads at past revisions, history and compaction, leases, keys with NUL
 * bytes, group commit under concurrent writers, reopening. */
#include <config.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tap.h"
#include "kvstore.h"
#include "kvrequest.h"

static struct kv_err err;

struct put_args { const char *k; size_t kl; const char *v; int64_t lease; };

static int
put_fn(struct kvs_txn *tx, void *arg, struct kv_err *e)
{
  struct put_args *a = arg;
  return kvs_put(tx, (const uint8_t *) a->k, a->kl, (const uint8_t *) a->v, strlen(a->v), a->lease, e);
}

static int
put(struct kvs *s, const char *k, size_t kl, const char *v, int64_t lease)
{
  struct put_args a = { k, kl, v, lease };
  return kvs_write(s, put_fn, NULL, &a, &err);
}

static int
del_fn(struct kvs_txn *tx, void *arg, struct kv_err *e)
{
  const char *k = arg;
  return kvs_delete(tx, (const uint8_t *) k, strlen(k), e) < 0 ? -1 : 0;
}

/* Refuses before changing anything: fails alone. */
static int
fail_fn(struct kvs_txn *tx, void *arg, struct kv_err *e)
{
  (void) arg; (void) tx;
  return kv_err_set(e, KV_INVALID_ARGUMENT, "refused on purpose");
}

/* Fails after a change: the change must be undone. */
static int
dirty_fail_fn(struct kvs_txn *tx, void *arg, struct kv_err *e)
{
  (void) arg;
  kvs_put(tx, (const uint8_t *) "doomed", 6, (const uint8_t *) "x", 1, 0, e);
  return kv_err_set(e, KV_INTERNAL, "failed on purpose after a change");
}

struct collect { char out[1024]; size_t n; int count; };

/* Append to c->out, never past its end. */
static void
clamp(struct collect *c)
{
  if (c->n >= sizeof c->out)
    c->n = sizeof c->out - 1;
}

static int
collect_cb(void *opaque, const struct kv_rec *r)
{
  struct collect *c = opaque;
  c->n += (size_t) snprintf(c->out + c->n, sizeof c->out - c->n, "%.*s=%.*s@%" PRId64 "v%" PRId64 ";",
                            (int) r->klen, r->key, (int) r->vlen, r->val, r->mod_rev, r->version);
  clamp(c);
  c->count++;
  return 0;
}

static int last_count;   /* keys of the last range_str */

static const char *
range_str(struct kvs *s, const char *k, size_t kl, const char *e, size_t el, int64_t rev)
{
  static struct collect c;
  struct kvs_txn tx;
  memset(&c, 0, sizeof c);
  if (kvs_read_begin(s, &tx, &err) < 0)
    return "ERR";
  if (kvs_range(&tx, (const uint8_t *) k, kl, (const uint8_t *) e, el, rev, collect_cb, &c, &err) < 0)
    strcpy(c.out, "ERR");
  kvs_read_end(&tx);
  last_count = c.count;
  return c.out;
}

static int
event_cb(void *opaque, int type, const struct kv_rec *r)
{
  struct collect *c = opaque;
  c->n += (size_t) snprintf(c->out + c->n, sizeof c->out - c->n, "%c%.*s@%" PRId64 ".%" PRId64 ";",
                            type == KV_EV_PUT ? 'P' : 'D', (int) r->klen, r->key, r->mod_rev, r->sub);
  clamp(c);
  return 0;
}

static const char *
events_str(struct kvs *s, int64_t from)
{
  static struct collect c;
  struct kvs_txn tx;
  memset(&c, 0, sizeof c);
  if (kvs_read_begin(s, &tx, &err) < 0)
    return "ERR";
  if (kvs_events(&tx, from, event_cb, &c, &err) < 0)
    strcpy(c.out, "ERR");
  kvs_read_end(&tx);
  return c.out;
}

struct compact_arg { int64_t rev; };
static int
compact_fn(struct kvs_txn *tx, void *arg, struct kv_err *e)
{
  return kvs_compact(tx, ((struct compact_arg *) arg)->rev, e);
}

static int
lease_fn(struct kvs_txn *tx, void *arg, struct kv_err *e)
{
  return kvs_lease_put(tx, *(int64_t *) arg, 10, e);
}

static int
revoke_fn(struct kvs_txn *tx, void *arg, struct kv_err *e)
{
  return kvs_lease_delete(tx, *(int64_t *) arg, e);
}

struct writer { struct kvs *s; int id; int failures; };

static void *
writer_thread(void *arg)
{
  struct writer *w = arg;
  for (int i = 0; i < 200; i++) {
    char k[32];
    snprintf(k, sizeof k, "w/%d/%03d", w->id, i);
    struct put_args a = { k, strlen(k), "v", 0 };
    struct kv_err e;
    if (kvs_write(w->s, put_fn, NULL, &a, &e) < 0)
      w->failures++;
    if (i % 10 == 0 && kvs_write(w->s, fail_fn, NULL, NULL, &e) == 0)
      w->failures++;   /* must fail, and alone */
  }
  return NULL;
}

static void
test_store(const char *dir)
{
  struct kvs *s = kvs_open(dir, 1 << 30);
  CHECK(s != NULL, "open");
  if (!s)
    return;
  CHECK(kvs_revision(s) == 1, "a new store is at revision 1");
  CHECK(put(s, "a", 1, "1", 0) == 0 && kvs_revision(s) == 2, "put a");
  CHECK(put(s, "a", 1, "2", 0) == 0 && kvs_revision(s) == 3, "put a again");
  CHECK(put(s, "b", 1, "x", 0) == 0 && kvs_revision(s) == 4, "put b");
  CHECK(kvs_write(s, del_fn, NULL, "a", &err) == 0 && kvs_revision(s) == 5, "delete a");
  CHECK(kvs_write(s, del_fn, NULL, "a", &err) == 0 && kvs_revision(s) == 5, "deleting nothing keeps the revision");
  CHECK(strcmp(range_str(s, "a", 1, "\0", 1, 0), "b=x@4v1;") == 0, "current: %s", range_str(s, "a", 1, "\0", 1, 0));
  CHECK(strcmp(range_str(s, "a", 1, "\0", 1, 3), "a=2@3v2;") == 0, "at 3: %s", range_str(s, "a", 1, "\0", 1, 3));
  CHECK(strcmp(range_str(s, "a", 1, NULL, 0, 2), "a=1@2v1;") == 0, "a at 2: %s", range_str(s, "a", 1, NULL, 0, 2));
  CHECK(strcmp(range_str(s, "a", 1, "\0", 1, 4), "a=2@3v2;b=x@4v1;") == 0, "at 4: %s", range_str(s, "a", 1, "\0", 1, 4));
  CHECK(strcmp(events_str(s, 3), "Pa@3.0;Pb@4.0;Da@5.0;") == 0, "events: %s", events_str(s, 3));

  struct kvs_txn tx;
  struct kv_rec prev;
  kvs_read_begin(s, &tx, &err);
  CHECK(kvs_prev_version(&tx, (const uint8_t *) "a", 1, 5, 0, &prev, &err) == 1 &&
        prev.vlen == 1 && prev.val[0] == '2' && prev.mod_rev == 3, "prev of the delete");
  CHECK(kvs_prev_version(&tx, (const uint8_t *) "a", 1, 2, 0, &prev, &err) == 0, "no prev of the first put");
  kvs_read_end(&tx);

  /* Keys that differ only by NUL bytes keep their order in the index. */
  CHECK(put(s, "k\0", 2, "n1", 0) == 0 && put(s, "k", 1, "n0", 0) == 0 && put(s, "k\0\0", 3, "n2", 0) == 0 &&
        put(s, "k\1", 2, "n3", 0) == 0, "NUL keys");
  int64_t r = kvs_revision(s);
  CHECK(put(s, "k", 1, "m0", 0) == 0, "overwrite k");
  /* %.*s stops at the NUL: k=n0, k=n1 (k\0), k=n2 (k\0\0), k\1=n3 */
  const char *past = range_str(s, "k", 1, "l", 1, r);
  CHECK(last_count == 4 && strstr(past, "k=n0@") == past && strstr(past, ";k=n1@") && strstr(past, ";k=n2@") &&
        strstr(past, "=n3@") && strstr(past, ";k=n1@") < strstr(past, ";k=n2@"),
        "past range over NUL keys in key order: %d keys: %s", last_count, past);
  CHECK(last_count == 4, "past range over NUL keys: %d keys", last_count);
  CHECK(strncmp(range_str(s, "k", 1, NULL, 0, r), "k=n0@", 5) == 0, "k alone at the past revision");

  /* Compaction keeps the last change at or before its revision. */
  struct compact_arg ca = { 4 };
  CHECK(kvs_write(s, compact_fn, NULL, &ca, &err) == 0, "compact at 4: %s", err.msg);
  CHECK(strcmp(range_str(s, "a", 1, "c", 1, 4), "a=2@3v2;b=x@4v1;") == 0, "at 4 after compaction: %s",
        range_str(s, "a", 1, "c", 1, 4));
  CHECK(strncmp(events_str(s, 4), "Pb@4.0;Da@5.0;", 14) == 0, "events from 4: %s", events_str(s, 4));
  CHECK(kvs_write(s, compact_fn, NULL, &ca, &err) < 0 && strstr(err.msg, "compacted"), "compact twice");
  ca.rev = 1000;
  CHECK(kvs_write(s, compact_fn, NULL, &ca, &err) < 0 && strstr(err.msg, "future"), "compact the future");

  /* Leases. */
  int64_t id = 77;
  CHECK(kvs_write(s, lease_fn, NULL, &id, &err) == 0, "lease");
  CHECK(put(s, "l1", 2, "x", 77) == 0 && put(s, "l2", 2, "y", 77) == 0, "put with lease");
  r = kvs_revision(s);
  CHECK(kvs_write(s, revoke_fn, NULL, &id, &err) == 0 && kvs_revision(s) == r + 1, "revoke: one revision");
  CHECK(strcmp(range_str(s, "l", 1, "m", 1, 0), "") == 0, "revoke deleted the keys");

  /* Group commit: concurrent writers, failing writes undone alone. */
  r = kvs_revision(s);
  pthread_t th[8];
  struct writer w[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (struct writer) { s, i, 0 };
    pthread_create(&th[i], NULL, writer_thread, &w[i]);
  }
  int failures = 0;
  for (int i = 0; i < 8; i++) {
    pthread_join(th[i], NULL);
    failures += w[i].failures;
  }
  CHECK(failures == 0, "group commit: %d unexpected results", failures);
  CHECK(kvs_revision(s) == r + 1600, "1600 puts, 1600 revisions: %" PRId64, kvs_revision(s) - r);
  range_str(s, "w/", 2, "w0", 2, 0);
  CHECK(last_count == 1600, "1600 keys written: %d", last_count);
  r = kvs_revision(s);
  CHECK(kvs_write(s, dirty_fail_fn, NULL, NULL, &err) < 0 && strstr(err.msg, "on purpose"), "dirty failure");
  CHECK(strcmp(range_str(s, "doomed", 6, NULL, 0, 0), "") == 0 && kvs_revision(s) == r,
        "a failed write left a change");
  CHECK(put(s, "after", 5, "ok", 0) == 0 && kvs_revision(s) == r + 1, "writes go on after a failed group");
  uint64_t cid, mid;
  int64_t term, term2;
  kvs_ids(s, &cid, &mid, &term);
  int64_t rev_before = kvs_revision(s);
  kvs_close(s);

  s = kvs_open(dir, 1 << 30);
  CHECK(s != NULL, "reopen");
  if (!s)
    return;
  uint64_t cid2, mid2;
  kvs_ids(s, &cid2, &mid2, &term2);
  CHECK(cid == cid2 && mid == mid2 && term2 == term + 1, "ids kept, term moves on");
  CHECK(kvs_revision(s) == rev_before, "revision kept");
  CHECK(strcmp(range_str(s, "b", 1, NULL, 0, 0), "b=x@4v1;") == 0, "data kept");
  /* One flush per commit, then an explicit flush: still all there after reopening. */
  CHECK(kvs_set_meta_sync(s, false) == 0 && put(s, "m", 1, "1", 0) == 0 && kvs_sync(s) == 0, "without meta sync");
  struct kvs *s2 = kvs_open(dir, 1 << 30);
  CHECK(s2 == NULL, "a second open of the same folder is refused");
  kvs_close(s);
  s = kvs_open(dir, 1 << 30);
  CHECK(s && strcmp(range_str(s, "m", 1, NULL, 0, 0), "m=1@") > 0, "a write without meta sync kept");
  kvs_close(s);
}

static void
test_parser(void)
{
  struct kv_request req;
  const char *b = "{\"compare\":[{\"key\":\"YQ\",\"target\":\"MOD\",\"result\":2,\"mod_revision\":\"12\"}],"
                  "\"success\":[{\"request_put\":{\"key\":\"YQ==\",\"value\":\"-_8=\",\"lease\":\"5\"}}],"
                  "\"failure\":[{\"request_txn\":{\"success\":[{\"request_range\":{\"key\":\"YQ==\",\"limit\":3}}]}}]}";
  CHECK(kv_request_parse(KV_EP_TXN, b, strlen(b), &req, &err) == 0, "txn parse: %s", err.msg);
  CHECK(req.op.txn.ncmp == 1 && req.op.txn.cmp[0].target == KV_CMP_MOD && req.op.txn.cmp[0].result == KV_CMP_LESS &&
        req.op.txn.cmp[0].num == 12 && req.op.txn.cmp[0].key.n == 1, "compare fields");
  CHECK(req.op.txn.nsucc == 1 && req.op.txn.succ[0].put.lease == 5 && req.op.txn.succ[0].put.value.n == 2 &&
        req.op.txn.succ[0].put.value.p[0] == 0xfb && req.op.txn.succ[0].put.value.p[1] == 0xff, "URL-safe base64");
  CHECK(req.op.txn.nfail == 1 && req.op.txn.fail[0].type == KV_OP_TXN &&
        req.op.txn.fail[0].txn.succ[0].range.limit == 3, "nested txn");
  CHECK(kv_op_writes(&req.op), "txn with a put writes");
  kv_request_free(&req);
  const char *bad[][2] = {
    { "{\"key\":\"a$\"}", "illegal base64 data at input byte 1" },
    { "{\"key\":1}", "field key: expected a base64 string" },
    { "{\"limit\":true}", "field limit: expected an integer" },
    { "{\"keys_only\":\"yes\"}", "field keys_only: expected true or false" },
    { "{", "invalid JSON" },
    { "3", "expected a JSON object" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&err, 0, sizeof err);
    CHECK(kv_request_parse(KV_EP_RANGE, bad[i][0], strlen(bad[i][0]), &req, &err) < 0 &&
          err.code == KV_INVALID_ARGUMENT && strstr(err.msg, bad[i][1]), "%s: %s", bad[i][0], err.msg);
  }
  CHECK(kv_request_parse(KV_EP_RANGE, "", 0, &req, &err) == 0, "an empty body is an empty request");
  kv_request_free(&req);
  for (int n = 0; n < 64; n++) {
    uint8_t raw[64];
    for (int i = 0; i < n; i++)
      raw[i] = (uint8_t) (rand() & 0xff);
    size_t len;
    char *enc = kv_b64_encode(raw, (size_t) n, &len);
    struct kv_bytes dec = { 0 };
    CHECK(kv_b64_decode(enc, len, &dec) == 0 && dec.n == (size_t) n && memcmp(dec.p, raw, dec.n) == 0,
          "base64 round trip of %d bytes", n);
    free(enc);
    free(dec.p);
  }
  CHECK(kv_endpoint_of("/v3/kv/txn") == KV_EP_TXN && kv_endpoint_of("/v3/kv/txnx") == KV_EP_NONE, "endpoints");
  CHECK(kv_endpoint_of("/v3beta/kv/range") == KV_EP_RANGE && kv_endpoint_of("/v3alpha/watch") == KV_EP_WATCH &&
        kv_endpoint_of("/v3beta") == KV_EP_NONE && kv_endpoint_of("/v3beta/") == KV_EP_NONE, "older prefixes");
}

int
main(void)
{
  char dir[] = "/tmp/tromcho-test-kvstore.XXXXXX";
  if (!mkdtemp(dir))
    return 1;
  test_store(dir);
  test_parser();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return DONE();
}
