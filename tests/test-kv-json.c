/* Without a server: base64 (RFC 4648 vectors), the etcd prefix rule,
 * request encoding, response decoding (int64 as strings, missing zero
 * fields), error mapping, and the /config/pools and /pg/config formats. */
#include <config.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "kv_json.h"
#include "pools.h"
#include "tap.h"

static json_object *
field(json_object *o, const char *path)
{
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *save, *t = strtok_r(buf, ".", &save); t && o; t = strtok_r(NULL, ".", &save)) {
    json_object *next = NULL;
    if (json_object_is_type(o, json_type_array))
      next = json_object_array_get_idx(o, (size_t) atoi(t));
    else
      json_object_object_get_ex(o, t, &next);
    o = next;
  }
  return o;
}

static const char *
sfield(json_object *o, const char *path)
{
  json_object *f = field(o, path);
  return f ? json_object_get_string(f) : "(none)";
}

static void
test_base64(void)
{
  static const char *const vec[][2] = {
    { "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
    { "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
  };
  for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
    char *e = tc_base64_encode(vec[i][0], strlen(vec[i][0]));
    CHECK(e && !strcmp(e, vec[i][1]), "base64(%s) = %s (got %s)", vec[i][0], vec[i][1], e);
    size_t n;
    uint8_t *d = tc_base64_decode(vec[i][1], &n);
    CHECK(d && n == strlen(vec[i][0]) && !memcmp(d, vec[i][0], n) && d[n] == 0, "decode %s", vec[i][1]);
    free(e);
    free(d);
  }
  size_t n;
  CHECK(tc_base64_decode("Zm9v!", &n) == NULL, "bad base64 refused");
  uint8_t all[256];
  for (int i = 0; i < 256; i++)
    all[i] = (uint8_t) i;
  char *e = tc_base64_encode(all, sizeof all);
  uint8_t *d = tc_base64_decode(e, &n);
  CHECK(n == 256 && !memcmp(d, all, 256), "every byte value round-trips");
  free(e);
  free(d);
}

static json_object *
encode(const struct tc_kv_request *req, const char **path)
{
  char *s = tc_kv_encode(req, path);
  json_object *o = s ? json_tokener_parse(s) : NULL;
  free(s);
  return o;
}

static void
test_encode(void)
{
  const char *path;
  /* Prefix "a\xff" ends at "b"; all-0xff ends at "\0" (the whole keyspace after it). */
  struct tc_kv_request r = { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_RANGE, .key = "a\xff", .prefix = true } };
  json_object *o = encode(&r, &path);
  CHECK(!strcmp(path, "/v3/kv/range"), "range path");
  CHECK(!strcmp(sfield(o, "key"), "Yf8=") && !strcmp(sfield(o, "range_end"), "Yg=="), "prefix a\\xff -> b");
  json_object_put(o);
  r.op.key = "\xff\xff";
  o = encode(&r, &path);
  CHECK(!strcmp(sfield(o, "range_end"), "AA=="), "prefix \\xff\\xff -> \\0 (%s)", sfield(o, "range_end"));
  json_object_put(o);
  r.op.key = "/p/";
  o = encode(&r, &path);
  CHECK(!strcmp(sfield(o, "range_end"), "L3Aw"), "prefix /p/ -> /p0");
  json_object_put(o);

  struct tc_kv_request put = { .type = TC_KV_REQ_OP,
                               .op = { .type = TC_KV_PUT, .key = "k", .value = "v", .lease = 0x1234, .prev_kv = true } };
  o = encode(&put, &path);
  CHECK(!strcmp(path, "/v3/kv/put") && !strcmp(sfield(o, "value"), "dg==") && json_object_get_int64(field(o, "lease")) == 0x1234 &&
        json_object_get_boolean(field(o, "prev_kv")), "put body");
  json_object_put(o);
  put.op.prefix = true;
  CHECK(tc_kv_encode(&put, &path) == NULL && errno == EINVAL, "put of a range refused");

  struct tc_kv_cmp c[2] = {
    { .key = "k", .target = TC_KV_CMP_MOD, .result = TC_KV_LESS, .number = 7 },
    { .key = "k", .target = TC_KV_CMP_VALUE, .result = TC_KV_NOT_EQUAL, .value = "x" },
  };
  struct tc_kv_op ops[2] = { { .type = TC_KV_DELETE, .key = "d" }, { .type = TC_KV_RANGE, .key = "r" } };
  struct tc_kv_request txn = { .type = TC_KV_REQ_TXN, .txn = { c, 2, ops, 1, ops + 1, 1 } };
  o = encode(&txn, &path);
  CHECK(!strcmp(path, "/v3/kv/txn"), "txn path");
  CHECK(!strcmp(sfield(o, "compare.0.target"), "MOD") && !strcmp(sfield(o, "compare.0.result"), "LESS") &&
        json_object_get_int64(field(o, "compare.0.mod_revision")) == 7, "compare on mod_revision");
  CHECK(!strcmp(sfield(o, "compare.1.target"), "VALUE") && !strcmp(sfield(o, "compare.1.value"), "eA==") &&
        !strcmp(sfield(o, "compare.1.result"), "NOT_EQUAL"), "compare on value");
  CHECK(!strcmp(sfield(o, "success.0.request_delete_range.key"), "ZA==") &&
        !strcmp(sfield(o, "failure.0.request_range.key"), "cg=="), "success and failure operations");
  json_object_put(o);

  struct tc_kv_request lg = { .type = TC_KV_REQ_LEASE_GRANT, .ttl = 10 };
  o = encode(&lg, &path);
  CHECK(!strcmp(path, "/v3/lease/grant") && json_object_get_int64(field(o, "TTL")) == 10, "lease grant body");
  json_object_put(o);
  struct tc_kv_request lr = { .type = TC_KV_REQ_LEASE_REVOKE, .lease_id = 99 };
  o = encode(&lr, &path);
  CHECK(!strcmp(path, "/v3/lease/revoke") && json_object_get_int64(field(o, "ID")) == 99, "lease revoke body");
  json_object_put(o);
  char *w = tc_kv_encode_watch("/a/", 0, true, 42);
  o = json_tokener_parse(w);
  CHECK(json_object_get_int64(field(o, "create_request.start_revision")) == 42 &&
        !strcmp(sfield(o, "create_request.range_end"), "L2Ew"), "watch create request");
  json_object_put(o);
  free(w);
}

static void
test_decode(void)
{
  /* etcd 3.4 as it answers: int64 as strings, zero fields left out. */
  json_object *body = json_tokener_parse(
    "{\"header\":{\"cluster_id\":\"14841639068965178418\",\"revision\":\"12\",\"raft_term\":\"2\"},"
    "\"kvs\":[{\"key\":\"YQ==\",\"create_revision\":\"5\",\"mod_revision\":\"12\",\"version\":\"3\","
    "\"value\":\"AP8=\",\"lease\":\"7587869015577264393\"},{\"key\":\"Yg==\",\"create_revision\":\"6\","
    "\"mod_revision\":\"6\",\"version\":\"1\"}],\"more\":true,\"count\":\"9\"}");
  struct tc_kv_request r = { .type = TC_KV_REQ_OP, .op = { .type = TC_KV_RANGE } };
  struct tc_kv_result res;
  CHECK(tc_kv_decode(&r, body, &res) == 0, "decode range");
  CHECK(res.revision == 12 && res.count == 9 && res.more && res.n_kvs == 2, "header, count, more");
  CHECK(res.kvs[0].key_len == 1 && res.kvs[0].key[0] == 'a' && res.kvs[0].value_len == 2 && res.kvs[0].value[0] == 0 &&
        res.kvs[0].value[1] == 0xff && res.kvs[0].create_revision == 5 && res.kvs[0].mod_revision == 12 &&
        res.kvs[0].version == 3 && res.kvs[0].lease == 7587869015577264393LL, "first pair");
  CHECK(res.kvs[1].value_len == 0 && res.kvs[1].value && res.kvs[1].lease == 0, "missing value is empty, lease 0");
  tc_kv_result_free(&res);
  json_object_put(body);

  body = json_tokener_parse("{\"header\":{\"revision\":\"20\"},\"succeeded\":true,\"responses\":["
                            "{\"response_put\":{\"header\":{\"revision\":\"20\"}}},"
                            "{\"response_range\":{\"header\":{\"revision\":\"20\"},\"kvs\":[{\"key\":\"YQ==\"}],\"count\":\"1\"}},"
                            "{\"response_delete_range\":{\"header\":{\"revision\":\"20\"},\"deleted\":\"4\"}}]}");
  struct tc_kv_request t = { .type = TC_KV_REQ_TXN };
  CHECK(tc_kv_decode(&t, body, &res) == 0 && res.succeeded && res.n_responses == 3, "decode txn");
  CHECK(res.responses[1].n_kvs == 1 && res.responses[2].deleted == 4, "txn responses by kind");
  tc_kv_result_free(&res);
  json_object_put(body);

  /* A keepalive of a lease that is gone: TTL missing. */
  body = json_tokener_parse("{\"result\":{\"header\":{\"revision\":\"3\"},\"ID\":\"77\"}}");
  struct tc_kv_request ka = { .type = TC_KV_REQ_LEASE_KEEPALIVE, .lease_id = 77 };
  CHECK(tc_kv_decode(&ka, body, &res) < 0 && errno == ENOENT, "keepalive without TTL: ENOENT");
  json_object_put(body);
  body = json_tokener_parse("{\"result\":{\"header\":{\"revision\":\"3\"},\"ID\":\"77\",\"TTL\":\"9\"}}");
  CHECK(tc_kv_decode(&ka, body, &res) == 0 && res.ttl == 9 && res.lease_id == 77, "keepalive TTL");
  json_object_put(body);

  char msg[256];
  body = json_tokener_parse("{\"error\":\"etcdserver: mvcc: required revision has been compacted\",\"code\":11}");
  CHECK(tc_kv_error_errno(body, 400, msg, sizeof msg) == ERANGE && strstr(msg, "compacted"), "compacted: ERANGE");
  json_object_put(body);
  body = json_tokener_parse("{\"error\":\"etcdserver: requested lease not found\",\"code\":5}");
  CHECK(tc_kv_error_errno(body, 404, msg, sizeof msg) == ENOENT, "lease not found: ENOENT");
  json_object_put(body);
  body = json_tokener_parse("{\"error\":\"etcdserver: permission denied\",\"code\":7}");
  CHECK(tc_kv_error_errno(body, 403, msg, sizeof msg) == EACCES, "permission denied: EACCES");
  json_object_put(body);
  CHECK(tc_kv_error_errno(NULL, 503, msg, sizeof msg) == EAGAIN, "503: EAGAIN (try another endpoint)");
}

static void
test_pools(void)
{
  struct tc_pools p;
  CHECK(tc_pools_parse("{\"1\": {\"name\": \"a\", \"pg_size\": 3, \"pg_count\": 64},"
                       " \"3\": {\"name\": \"b\", \"pg_size\": 2, \"pg_minsize\": 1, \"pg_count\": 8, "
                       "\"block_size\": 262144, \"failure_domain\": \"osd\", \"creator_group\": \"g\"},"
                       " \"2\": {\"name\": \"bad\", \"pg_size\": 3, \"pg_minsize\": 5, \"pg_count\": 8},"
                       " \"4\": {\"name\": \"huge\", \"pg_size\": 1, \"pg_count\": 1, \"block_size\": 1048576},"
                       " \"x\": {\"name\": \"bad2\", \"pg_size\": 1, \"pg_count\": 1}}", &p) == 0, "parse pools");
  CHECK(p.n == 2 && p.v[0].id == 1 && p.v[1].id == 3, "invalid pools (a 1M block among them: no OSD serves it) left out, sorted by id");
  CHECK(p.v[0].pg_minsize == 2 && p.v[0].block_size == 131072 && p.v[0].failure_domain == TC_FD_HOST &&
        !p.v[0].creator_group, "defaults: minsize pg_size-1, 128k, host");
  CHECK(p.v[1].block_size == 262144 && p.v[1].failure_domain == TC_FD_OSD && !strcmp(p.v[1].creator_group, "g"),
        "explicit fields");
  CHECK(tc_pools_find_name(&p, "b") == &p.v[1] && !tc_pools_find_name(&p, "bad"), "find by name");
  char *s = tc_pools_encode(&p);
  struct tc_pools q;
  CHECK(s && tc_pools_parse(s, &q) == 0 && q.n == 2 && !strcmp(q.v[1].name, "b") && q.v[1].pg_count == 8,
        "encode/parse round trip");
  free(s);
  tc_pools_free(&q);
  tc_pools_free(&p);
  CHECK(tc_pools_parse("[1]", &p) < 0, "non-object refused");
  struct tc_pool bad = { .id = 1, .name = "n", .pg_size = 3, .pg_minsize = 2, .pg_count = 8, .block_size = 3000 };
  CHECK(tc_pool_validate(&bad) < 0 && strstr(tc_last_error(), "block_size 3000"), "block size checked");
  bad.block_size = 4096;
  bad.pg_count = 0;
  CHECK(tc_pool_validate(&bad) < 0 && strstr(tc_last_error(), "pg_count 0"), "pg_count checked");

  struct tc_pg_config c;
  const char *text = "{\"items\":{\"2\":{\"1\":{\"osd_set\":[4,5],\"primary\":5},\"0\":{\"osd_set\":[1,0],\"primary\":0}},"
                     "\"1\":{\"0\":{\"osd_set\":[1,2,3],\"primary\":1}}}}";
  CHECK(tc_pg_config_parse(text, &c) == 0 && c.n == 2 && c.v[0].pool_id == 1, "parse /pg/config");
  const struct tc_placement *pl = tc_pg_config_find(&c, 2);
  CHECK(pl && pl->pg_count == 2 && pl->pg_size == 2 && pl->osd_set[2] == 4 && pl->primary[1] == 5 &&
        pl->osd_set[1] == 0 && pl->primary[0] == 0, "pool 2 PGs, 0 = no OSD");
  s = tc_pg_config_encode(&c);
  CHECK(s && !strcmp(s, "{\"items\":{\"1\":{\"0\":{\"osd_set\":[1,2,3],\"primary\":1}},\"2\":{\"0\":{\"osd_set\":[1,0],"
                        "\"primary\":0},\"1\":{\"osd_set\":[4,5],\"primary\":5}}}}"), "canonical text: %s", s);
  free(s);
  tc_pg_config_free(&c);
  CHECK(tc_pg_config_parse("{\"items\":{\"1\":{\"zz\":{\"osd_set\":[1]}}}}", &c) < 0, "bad PG number refused");
}

int
main(void)
{
  test_base64();
  test_encode();
  test_decode();
  test_pools();
  return DONE();
}
