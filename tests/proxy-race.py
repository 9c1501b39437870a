#!/usr/bin/env python3
"""A right revoked while a write is decided, for test-gateway-proxy.sh: an
administrator gives the image record INODE_KEY to USER and takes it away
again, over and over, while USER keeps writing the image's index entry
INDEX_KEY (allowed only while USER owns the image). Every put the proxy
acknowledged must have been allowed at the revision it ran at: the image
record read from etcd at that revision names USER as its owner. Both
acknowledged and refused puts must occur (else nothing raced). Exits 0 if
no acknowledged put ran without the right.

usage: proxy-race.py URL CA PKI USER OTHER INODE_KEY INDEX_KEY ROUNDS"""
import base64
import http.client
import json
import ssl
import sys
import threading
import urllib.parse

url, ca, pki, user, other, inode_key, index_key, rounds = sys.argv[1:9]
rounds = int(rounds)
u = urllib.parse.urlparse(url)
b64 = lambda s: base64.b64encode(s.encode()).decode()


def conn(who):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain("%s/%s.crt" % (pki, who), "%s/%s.key" % (pki, who))
    return http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=60)


def call(c, path, body):
    c.request("POST", path, json.dumps(body))
    r = c.getresponse()
    return r.status, json.loads(r.read())


def get(c, key, rev=0):
    q = {"key": b64(key)}
    if rev:
        q["revision"] = str(rev)
    st, r = call(c, "/v3/kv/range", q)
    assert st == 200, r
    kvs = r.get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


admin = conn("admin")
record = json.loads(get(admin, inode_key))
index_value = get(admin, index_key)
assert record.get("owner") == user and index_value, (record, index_value)
done = threading.Event()
errors = []


def toggle():
    try:
        c = conn("admin")
        for i in range(rounds):
            record["owner"] = other if i % 2 == 0 else user
            st, r = call(c, "/v3/kv/put", {"key": b64(inode_key), "value": b64(json.dumps(record))})
            if st != 200:
                errors.append("admin put: %d %s" % (st, r))
                return
        record["owner"] = user
        call(c, "/v3/kv/put", {"key": b64(inode_key), "value": b64(json.dumps(record))})
    finally:
        done.set()


t = threading.Thread(target=toggle)
t.start()
c = conn(user)
acked, refused = [], 0
while not done.is_set():
    st, r = call(c, "/v3/kv/put", {"key": b64(index_key), "value": b64(index_value)})
    if st == 200:
        acked.append(int(r["header"]["revision"]))
    elif st == 403:
        refused += 1
    else:
        errors.append("%s put: %d %s" % (user, st, r))
t.join()
bad = [rev for rev in acked if json.loads(get(admin, inode_key, rev)).get("owner") != user]
print("%d puts acknowledged, %d refused, %d ran without the right, %d errors" %
      (len(acked), refused, len(bad), len(errors)))
if errors:
    sys.exit("errors: %s" % errors[:5])
if bad:
    sys.exit("acknowledged while %s did not own the image, at revisions %s" % (user, bad[:10]))
if not acked or not refused:
    sys.exit("nothing raced (every put acknowledged, or every put refused)")
