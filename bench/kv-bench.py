#!/usr/bin/env python3
"""Put and get throughput and latency of an etcd v3 JSON API server.

One client for every server: N processes, each with one persistent HTTP
connection, share OPS operations; put writes distinct keys (VALUE bytes),
get reads keys the put phase wrote. Prints one line per (op, connections):

  kv-bench.py --url http://127.0.0.1:2379 [--ops 10000] [--conns 1,16] [--value 100] [--label NAME]
"""
import argparse
import base64
import http.client
import json
import multiprocessing as mp
import os
import time
import urllib.parse


def worker(url, op, lo, hi, value, prefix, q):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    val = base64.b64encode(os.urandom(value)).decode()
    lat = []
    for i in range(lo, hi):
        key = base64.b64encode(('%s%08d' % (prefix, i)).encode()).decode()
        if op == 'put':
            path, body = '/v3/kv/put', json.dumps({'key': key, 'value': val})
        else:
            path, body = '/v3/kv/range', json.dumps({'key': key})
        t = time.perf_counter()
        c.request('POST', path, body, {'Content-Type': 'application/json'})
        r = c.getresponse()
        data = r.read()
        lat.append(time.perf_counter() - t)
        if r.status != 200 or (op == 'get' and b'"kvs"' not in data):
            raise SystemExit('%s %s: HTTP %d %s' % (op, key, r.status, data[:200]))
    c.close()
    q.put(lat)


def run(url, op, ops, conns, value, prefix):
    q = mp.Queue()
    per = ops // conns
    ps = [mp.Process(target=worker, args=(url, op, i * per, (i + 1) * per, value, prefix, q)) for i in range(conns)]
    t0 = time.perf_counter()
    for p in ps:
        p.start()
    lat = []
    for _ in ps:
        lat += q.get()
    elapsed = time.perf_counter() - t0
    for p in ps:
        p.join()
        if p.exitcode:
            raise SystemExit('worker failed')
    lat.sort()
    return len(lat) / elapsed, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--url', required=True)
    ap.add_argument('--ops', type=int, default=10000)
    ap.add_argument('--conns', default='1,16')
    ap.add_argument('--value', type=int, default=100)
    ap.add_argument('--label', default='')
    args = ap.parse_args()
    label = args.label or args.url
    for conns in [int(x) for x in args.conns.split(',')]:
        prefix = '/bench/%d/%d/' % (os.getpid(), conns)
        for op in ('put', 'get'):
            rate, p50, p99 = run(args.url, op, args.ops, conns, args.value, prefix)
            print('%-10s %-4s %5d conns %8.0f ops/s   p50 %7.3f ms   p99 %7.3f ms' % (
                label, op, conns, rate, p50, p99), flush=True)


if __name__ == '__main__':
    main()
