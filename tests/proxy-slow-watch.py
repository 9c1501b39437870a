#!/usr/bin/env python3
"""A watcher that falls behind, for test-gateway-proxy.sh: opens a watch on
PREFIX through the gateway and reads nothing while it puts N values of
64 KiB under PREFIX (more than the proxy queues for one watch and the
sockets hold), then reads the stream and checks that every put arrived,
once and in order. Exits 0 if so.

usage: proxy-slow-watch.py URL CA CERT KEY PREFIX N"""
import base64
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

url, ca, cert, key, prefix, n = sys.argv[1:7]
n = int(n)
u = urllib.parse.urlparse(url)
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
b64 = lambda s: base64.b64encode(s).decode()
end = prefix[:-1] + chr(ord(prefix[-1]) + 1)

w = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=120)
w.request("POST", "/v3/watch", json.dumps({"create_request": {"key": b64(prefix.encode()),
                                                              "range_end": b64(end.encode())}}))
stream = w.getresponse()
first = json.loads(stream.readline())
assert first["result"].get("created"), first

p = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=60)
value = os.urandom(48 * 1024)
for i in range(n):
    p.request("POST", "/v3/kv/put", json.dumps({"key": b64(("%s%04d" % (prefix, i)).encode()),
                                                "value": b64(value)}))
    r = p.getresponse()
    text = r.read()
    if r.status != 200:
        sys.exit("put %d: HTTP %d %s" % (i, r.status, text[:300]))

seen = []
deadline = time.time() + 90
while len(seen) < n and time.time() < deadline:
    line = stream.readline()
    if not line:
        break
    res = json.loads(line)["result"]
    assert not res.get("canceled"), res
    for e in res.get("events", []):
        seen.append(base64.b64decode(e["kv"]["key"]).decode())
want = ["%s%04d" % (prefix, i) for i in range(n)]
if seen != want:
    missing = sorted(set(want) - set(seen))
    sys.exit("the slow watch got %d events of %d (missing %s, in order: %s)" %
             (len(seen), n, missing[:10], seen == sorted(seen)))
print("slow watch: all %d events, in order" % n)
