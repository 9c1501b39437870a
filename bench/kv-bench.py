#!/usr/bin/env python3
"""Put and get throughput and latency of etcd v3 JSON API servers.

One client for every server: N processes, each with one persistent HTTP
connection, share OPS operations; put writes distinct keys (VALUE bytes),
get reads keys the put phase wrote. With several servers the work is cut
into rounds that alternate between them, so that all see the same
background load on a shared machine. One line per (server, op, connections):

  kv-bench.py --url NAME=http://127.0.0.1:2379 [--url NAME=URL]... [--ops 10000]
              [--conns 1,16] [--value 100] [--rounds 10]
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


def run(url, op, first, ops, conns, value, prefix):
    """ops operations from key number first on; returns (latencies, elapsed)."""
    q = mp.Queue()
    per = ops // conns
    ps = [mp.Process(target=worker, args=(url, op, first + i * per, first + (i + 1) * per, value, prefix, q))
          for i in range(conns)]
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
    return lat, elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--url', action='append', required=True, help='NAME=URL or URL')
    ap.add_argument('--ops', type=int, default=10000)
    ap.add_argument('--conns', default='1,16')
    ap.add_argument('--value', type=int, default=100)
    ap.add_argument('--rounds', type=int, default=10)
    args = ap.parse_args()
    servers = [u.split('=', 1) if '=' in u else (u, u) for u in args.url]
    per_round = args.ops // args.rounds
    print('%-10s %-4s %5s %12s %12s %12s' % ('server', 'op', 'conns', 'ops/s', 'p50 ms', 'p99 ms'))
    for conns in [int(x) for x in args.conns.split(',')]:
        prefix = '/bench/%d/%d/' % (os.getpid(), conns)
        for op in ('put', 'get'):
            lat = {name: [] for name, _ in servers}
            elapsed = {name: 0.0 for name, _ in servers}
            for r in range(args.rounds):
                for name, url in servers:
                    l, e = run(url, op, r * per_round, per_round, conns, args.value, prefix)
                    lat[name] += l
                    elapsed[name] += e
            for name, _ in servers:
                l = sorted(lat[name])
                print('%-10s %-4s %5d %12.0f %12.3f %12.3f' % (name, op, conns, len(l) / elapsed[name],
                                                             l[len(l) // 2] * 1e3, l[int(len(l) * 0.99)] * 1e3),
                      flush=True)


if __name__ == '__main__':
    main()
