#!/usr/bin/env python3
"""A put load through the gateway for test-gateway-proxy.sh: puts
PREFIX<i> = v<i> one after another (i from 0) over HTTPS with a client
certificate until the file STOP exists, writing each acknowledged i to
ACKED (one a line, flushed) and each failure to stderr. Exits 0 if every
put was acknowledged, 1 otherwise.

usage: proxy-load.py URL CA CERT KEY PREFIX ACKED STOP"""
import base64
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

url, ca, cert, key, prefix, acked_path, stop = sys.argv[1:8]
u = urllib.parse.urlparse(url)
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
conn = None
errors = 0
i = 0
with open(acked_path, "w") as acked:
    while not os.path.exists(stop):
        body = json.dumps({"key": base64.b64encode((prefix + str(i)).encode()).decode(),
                           "value": base64.b64encode(("v%d" % i).encode()).decode()})
        try:
            if conn is None:
                conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=60)
            conn.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            text = r.read().decode()
            if r.status != 200 or "revision" not in text:
                raise RuntimeError("HTTP %d %s" % (r.status, text))
            acked.write("%d\n" % i)
            acked.flush()
        except Exception as e:  # a failure is counted, and the load goes on
            errors += 1
            print("put %d: %s" % (i, e), file=sys.stderr, flush=True)
            conn = None
            time.sleep(0.1)
        i += 1
print("%d puts, %d errors" % (i, errors), file=sys.stderr)
sys.exit(1 if errors else 0)
