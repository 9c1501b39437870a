#!/usr/bin/env python3
"""KV conformance cases for the etcd v3 JSON API (python3 stdlib only).

Runs the same cases against any server given by its base URL: real etcd or
tromcho-gateway. Each case asserts the semantics; the shapes of the replies
(field names and JSON types) are written to --shapes so that the shell test
can compare etcd's with the gateway's.

  kv_conformance.py --url http://127.0.0.1:2379 --restart-cmd 'CMD' \
                    --shapes out.json [--many 100000] [--only case,case]
  kv_conformance.py --compare etcd.json gateway.json
"""
import argparse
import base64
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse


def b64(s):
    if isinstance(s, str):
        s = s.encode()
    return base64.b64encode(s).decode()


def unb64(s):
    return base64.b64decode(s) if s else b''


def prefix_end(p):
    """etcd's prefix range end: the prefix with its last byte + 1."""
    b = bytearray(p.encode() if isinstance(p, str) else p)
    while b and b[-1] == 0xff:
        b.pop()
    b[-1] += 1
    return bytes(b)


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def shape(v):
    """Field names and JSON types, values dropped."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    if isinstance(v, bool):
        return 'bool'
    if isinstance(v, (int, float)):
        return 'number'
    if v is None:
        return 'null'
    return 'string'


class Client:
    """One persistent HTTP connection."""

    def __init__(self, url, timeout=30):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.timeout = timeout
        self.conn = None

    def call(self, path, body, expect_status=200):
        data = json.dumps(body).encode() if not isinstance(body, (bytes, str)) else (
            body.encode() if isinstance(body, str) else body)
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request('POST', path, data, {'Content-Type': 'application/json'})
                r = self.conn.getresponse()
                text = r.read()
                break
            except (ConnectionError, http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        try:
            j = json.loads(text)
        except ValueError:
            raise Failure('%s: reply is not JSON (%d): %r' % (path, r.status, text[:200]))
        if expect_status is not None and r.status != expect_status:
            raise Failure('%s %s: HTTP %d, expected %d: %s' % (path, str(body)[:200], r.status,
                                                               expect_status, str(j)[:300]))
        return j

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None


class Watch:
    """A /v3/watch stream read in a thread; results collect in .results."""

    def __init__(self, url, create):
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        self.conn.request('POST', '/v3/watch', json.dumps({'create_request': create}).encode(),
                          {'Content-Type': 'application/json'})
        self.resp = self.conn.getresponse()
        self.results = []
        self.lock = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                with self.lock:
                    self.results.append(json.loads(line))
                    self.lock.notify_all()
        except Exception:   # the stream ended or was closed under us
            pass
        with self.lock:
            self.closed = True
            self.lock.notify_all()

    def wait(self, pred, timeout=10):
        end = time.time() + timeout
        with self.lock:
            while not pred(self.results):
                left = end - time.time()
                if left <= 0 or self.closed:
                    return pred(self.results)
                self.lock.wait(left)
            return True

    def events(self):
        with self.lock:
            return [e for r in self.results for e in r.get('result', {}).get('events', [])]

    def close(self):
        try:
            self.conn.sock.shutdown(2)
        except OSError:
            pass
        self.conn.close()


class Suite:
    def __init__(self, args):
        self.url = args.url
        self.args = args
        self.c = Client(self.url)
        self.shapes = {}

    def rec(self, name, reply):
        self.shapes[name] = shape(reply)
        return reply

    def rev(self, reply):
        return int(reply['header']['revision'])

    def put(self, k, v, **kw):
        return self.c.call('/v3/kv/put', dict(key=b64(k), value=b64(v), **kw))

    def get(self, k, **kw):
        r = self.c.call('/v3/kv/range', dict(key=b64(k), **kw))
        return r

    # --- cases ---------------------------------------------------------
    def case_health(self):
        u = urllib.parse.urlparse(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request('GET', '/health')
        r = conn.getresponse()
        j = json.loads(r.read())
        check(r.status == 200 and j.get('health') == 'true', 'health: %r' % j)
        conn.request('GET', '/version')
        r = conn.getresponse()
        j = json.loads(r.read())
        check('etcdserver' in j and 'etcdcluster' in j, 'version: %r' % j)
        self.rec('health', {'health': 'true'})

    def case_put_range(self):
        empty = self.rec('range_empty', self.get('/c/pr/none'))
        check('kvs' not in empty and 'count' not in empty, 'empty range has kvs or count: %r' % empty)
        check(set(empty['header']) == {'cluster_id', 'member_id', 'revision', 'raft_term'},
              'header fields: %r' % empty['header'])
        p = self.rec('put', self.put('/c/pr/k', 'v1'))
        r = self.rec('range', self.get('/c/pr/k'))
        check(r['count'] == '1' and len(r['kvs']) == 1, 'range count: %r' % r)
        kv = r['kvs'][0]
        check(unb64(kv['key']) == b'/c/pr/k' and unb64(kv['value']) == b'v1', 'range kv: %r' % kv)
        check(kv['create_revision'] == kv['mod_revision'] == p['header']['revision'] and kv['version'] == '1',
              'revisions of a new key: %r vs put %r' % (kv, p))
        check('lease' not in kv, 'lease 0 must be omitted: %r' % kv)
        p2 = self.put('/c/pr/k', 'v2')
        check(self.rev(p2) == self.rev(p) + 1, 'revision must grow by one per put')
        kv = self.get('/c/pr/k')['kvs'][0]
        check(kv['version'] == '2' and kv['create_revision'] == p['header']['revision'] and
              kv['mod_revision'] == p2['header']['revision'], 'second put: %r' % kv)
        # an empty value is omitted like etcd does
        self.put('/c/pr/empty', '')
        kv = self.rec('range_empty_value', self.get('/c/pr/empty'))['kvs'][0]
        check('value' not in kv, 'empty value must be omitted: %r' % kv)

    def case_range_prefix(self):
        for k in ['a', 'b', 'c', 'd']:
            self.put('/c/rp/' + k, 'val-' + k)
        self.put('/c/rp0', 'outside')
        end = b64(prefix_end('/c/rp/'))
        r = self.rec('range_prefix', self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end}))
        check([unb64(k['key']) for k in r['kvs']] == [b'/c/rp/a', b'/c/rp/b', b'/c/rp/c', b'/c/rp/d'],
              'prefix keys: %r' % r)
        check(r['count'] == '4' and 'more' not in r, 'prefix count: %r' % r)
        r = self.rec('range_limit', self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end, 'limit': 2}))
        check(len(r['kvs']) == 2 and r['more'] is True and r['count'] == '4', 'limit: %r' % r)
        r = self.rec('range_keys_only', self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end,
                                                                     'keys_only': True}))
        check(len(r['kvs']) == 4 and all('value' not in k for k in r['kvs']), 'keys_only: %r' % r)
        r = self.rec('range_count_only', self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end,
                                                                      'count_only': True}))
        check('kvs' not in r and r['count'] == '4', 'count_only: %r' % r)
        # [key, end) with an explicit end
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rp/b'), 'range_end': b64('/c/rp/d')})
        check([unb64(k['key']) for k in r['kvs']] == [b'/c/rp/b', b'/c/rp/c'], 'key..end: %r' % r)
        # range_end "\0": every key >= key
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rp/c'), 'range_end': 'AA==', 'keys_only': True})
        keys = [unb64(k['key']) for k in r['kvs']]
        check(keys[:3] == [b'/c/rp/c', b'/c/rp/d', b'/c/rp0'], 'key..\\0: %r' % keys[:5])
        # sorting and revision filters (etcd prunes, sorts, then cuts to limit; count is before pruning)
        self.put('/c/rp/b', 'val-b2')
        self.put('/c/rp/a', 'val-a2')
        keys = lambda r: [unb64(k['key']).decode()[-1] for k in r.get('kvs', [])]
        r = self.rec('range_sorted', self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end,
                                                                  'sort_order': 'DESCEND', 'sort_target': 'KEY'}))
        check(keys(r) == ['d', 'c', 'b', 'a'], 'sort by key descending: %r' % keys(r))
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end, 'sort_target': 'MOD'})
        check(keys(r) == ['c', 'd', 'b', 'a'], 'sort by mod revision (ascending by default): %r' % keys(r))
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end, 'sort_order': 'DESCEND',
                                         'sort_target': 'VERSION', 'limit': 2})
        check(set(keys(r)) == {'a', 'b'} and r.get('more') is True and r['count'] == '4', 'sort by version: %r' % r)
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end, 'sort_order': 1,
                                         'sort_target': 'VALUE'})
        check(keys(r) == ['a', 'b', 'c', 'd'], 'sort by value: %r' % keys(r))
        rb = int(self.get('/c/rp/b')['kvs'][0]['mod_revision'])
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end, 'min_mod_revision': rb})
        check(keys(r) == ['a', 'b'] and r['count'] == '4', 'min_mod_revision: %r' % r)
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end, 'max_mod_revision': rb - 1,
                                         'limit': 1})
        check(keys(r) == ['c'] and r.get('more') is True, 'max_mod_revision with limit: %r' % r)
        # int64 fields may come as strings, like etcd accepts them
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rp/'), 'range_end': end, 'limit': '1'})
        check(len(r['kvs']) == 1, 'limit as a string: %r' % r)

    def case_range_revision(self):
        a = self.rev(self.put('/c/rr/k', 'one'))
        b = self.rev(self.put('/c/rr/k', 'two'))
        self.c.call('/v3/kv/deleterange', {'key': b64('/c/rr/k')})
        r = self.rec('range_at_revision', self.get('/c/rr/k', revision=a))
        check(unb64(r['kvs'][0]['value']) == b'one' and r['kvs'][0]['version'] == '1', 'at a: %r' % r)
        r = self.get('/c/rr/k', revision=b)
        check(unb64(r['kvs'][0]['value']) == b'two' and r['kvs'][0]['mod_revision'] == str(b), 'at b: %r' % r)
        r = self.get('/c/rr/k')
        check('kvs' not in r, 'deleted key still read: %r' % r)
        r = self.c.call('/v3/kv/range', {'key': b64('/c/rr/'), 'range_end': b64(prefix_end('/c/rr/')),
                                         'revision': a})
        check(r.get('count') == '1', 'prefix at a: %r' % r)
        e = self.rec('error_future', self.c.call('/v3/kv/range', {'key': b64('/c/rr/k'), 'revision': b + 1000},
                                                 expect_status=400))
        check(e['code'] == 11 and 'future revision' in e['error'], 'future revision: %r' % e)

    def case_put_prev_kv(self):
        r = self.put('/c/pp/k', 'v1', prev_kv=True)
        check('prev_kv' not in r, 'prev_kv of a new key: %r' % r)
        r = self.rec('put_prev_kv', self.put('/c/pp/k', 'v2', prev_kv=True))
        check(unb64(r['prev_kv']['value']) == b'v1' and r['prev_kv']['version'] == '1', 'prev_kv: %r' % r)

    def case_deleterange(self):
        for k in 'abc':
            self.put('/c/dr/' + k, k * 3)
        rev0 = self.rev(self.get('/c/dr/a'))
        r = self.rec('delete_prev_kv', self.c.call('/v3/kv/deleterange', {
            'key': b64('/c/dr/'), 'range_end': b64(prefix_end('/c/dr/')), 'prev_kv': True}))
        check(r['deleted'] == '3' and [unb64(k['value']) for k in r['prev_kvs']] == [b'aaa', b'bbb', b'ccc'],
              'deleterange prev_kv: %r' % r)
        check(self.rev(r) == rev0 + 1, 'one revision for the whole delete')
        r = self.rec('delete_none', self.c.call('/v3/kv/deleterange', {'key': b64('/c/dr/a')}))
        check('deleted' not in r and self.rev(r) == rev0 + 1, 'deleting nothing: %r' % r)

    def case_txn(self):
        c = self.c
        lease = c.call('/v3/lease/grant', {'TTL': 60})['ID']
        p = self.put('/c/tx/k', 'abc')
        self.put('/c/tx/k', 'abd', lease=int(lease))
        kv = self.get('/c/tx/k')['kvs'][0]
        actual = {'VERSION': int(kv['version']), 'CREATE': int(kv['create_revision']),
                  'MOD': int(kv['mod_revision']), 'VALUE': b'abd', 'LEASE': int(lease)}
        field = {'VERSION': 'version', 'CREATE': 'create_revision', 'MOD': 'mod_revision',
                 'VALUE': 'value', 'LEASE': 'lease'}
        ops = {'EQUAL': lambda a, b: a == b, 'GREATER': lambda a, b: a > b,
               'LESS': lambda a, b: a < b, 'NOT_EQUAL': lambda a, b: a != b}
        n = 0
        for target, cur in actual.items():
            probes = [b'abc', b'abd', b'abe'] if target == 'VALUE' else [cur - 1, cur, cur + 1]
            for probe in probes:
                for result, fn in ops.items():
                    want = fn(cur, probe)
                    cmpv = b64(probe) if target == 'VALUE' else str(probe)
                    r = c.call('/v3/kv/txn', {
                        'compare': [{'key': b64('/c/tx/k'), 'target': target, 'result': result, field[target]: cmpv}],
                        'success': [{'request_put': {'key': b64('/c/tx/ok'), 'value': b64('%d' % n)}}],
                        'failure': [{'request_put': {'key': b64('/c/tx/nok'), 'value': b64('%d' % n)}}]})
                    got = r.get('succeeded', False)
                    check(got == want, 'txn %s %s %r (actual %r): succeeded=%r' % (target, result, probe, cur, got))
                    branch = self.get('/c/tx/ok' if want else '/c/tx/nok')
                    check(unb64(branch['kvs'][0]['value']) == b'%d' % n, 'txn branch not applied: %s %s' % (target, result))
                    n += 1
        # numbers for enums, as the protobuf JSON mapping allows
        r = c.call('/v3/kv/txn', {'compare': [{'key': b64('/c/tx/k'), 'target': 3, 'result': 0, 'value': b64('abd')}]})
        check(r.get('succeeded') is True, 'enum numbers: %r' % r)
        # a missing key: version 0 matches, a value compare always fails
        r = c.call('/v3/kv/txn', {'compare': [{'key': b64('/c/tx/missing'), 'target': 'VERSION', 'result': 'EQUAL',
                                               'version': '0'}]})
        check(r.get('succeeded') is True, 'missing key version 0: %r' % r)
        r = c.call('/v3/kv/txn', {'compare': [{'key': b64('/c/tx/missing'), 'target': 'VALUE', 'result': 'NOT_EQUAL',
                                               'value': b64('x')}]})
        check('succeeded' not in r, 'value compare on a missing key must fail: %r' % r)
        # success with put, range, delete and a nested txn
        r = self.rec('txn_mixed', c.call('/v3/kv/txn', {
            'compare': [{'key': b64('/c/tx/k'), 'target': 'VALUE', 'result': 'EQUAL', 'value': b64('abd')}],
            'success': [
                {'request_put': {'key': b64('/c/tx/a'), 'value': b64('1'), 'prev_kv': True}},
                {'request_range': {'key': b64('/c/tx/a')}},
                {'request_delete_range': {'key': b64('/c/tx/ok'), 'prev_kv': True}},
                {'request_txn': {'compare': [{'key': b64('/c/tx/k'), 'target': 'VALUE', 'result': 'EQUAL', 'value': b64('abd')}],
                                 'success': [{'request_put': {'key': b64('/c/tx/b'), 'value': b64('2')}}]}},
                # compares of nested txns see the state before the outer txn (etcd evaluates them first)
                {'request_txn': {'compare': [{'key': b64('/c/tx/a'), 'target': 'VERSION', 'result': 'EQUAL', 'version': 1}],
                                 'success': [{'request_put': {'key': b64('/c/tx/c'), 'value': b64('3')}}]}}]}))
        check(r.get('succeeded') is True and len(r['responses']) == 5, 'mixed txn: %r' % r)
        check(r['responses'][4]['response_txn'] == {'header': {}}, 'nested compare after a put: %r' % r['responses'][4])
        check('kvs' not in self.get('/c/tx/c'), 'nested txn compare saw the outer txn\'s put')
        rr = r['responses'][1]['response_range']
        check(unb64(rr['kvs'][0]['value']) == b'1', 'range inside txn must see the put before it: %r' % rr)
        check(r['responses'][2]['response_delete_range']['deleted'] == '1', 'delete in txn: %r' % r)
        nested = r['responses'][3]['response_txn']
        check(nested.get('succeeded') is True, 'nested txn: %r' % nested)
        check(unb64(self.get('/c/tx/b')['kvs'][0]['value']) == b'2', 'nested put missing')
        rev = self.rev(r)
        check(self.get('/c/tx/a')['kvs'][0]['mod_revision'] == str(rev) == self.get('/c/tx/b')['kvs'][0]['mod_revision'],
              'one revision for a whole txn')
        # a read-only txn does not move the revision
        r = self.rec('txn_read', c.call('/v3/kv/txn', {'success': [{'request_range': {'key': b64('/c/tx/a')}}]}))
        check(self.rev(r) == rev and r.get('succeeded') is True, 'read-only txn: %r' % r)
        # failure branch
        r = self.rec('txn_failure', c.call('/v3/kv/txn', {
            'compare': [{'key': b64('/c/tx/k'), 'target': 'MOD', 'result': 'LESS', 'mod_revision': '1'}],
            'failure': [{'request_range': {'key': b64('/c/tx/k'), 'keys_only': True}}]}))
        check('succeeded' not in r and 'value' not in r['responses'][0]['response_range']['kvs'][0],
              'failure branch: %r' % r)
        # etcd's checks before a txn runs: duplicate keys and the number of operations
        dup = lambda ops: c.call('/v3/kv/txn', {'success': ops}, expect_status=400)
        put_op = lambda k: {'request_put': {'key': b64(k), 'value': b64('1')}}
        e = self.rec('error_duplicate', dup([put_op('/c/tx/d'), put_op('/c/tx/d')]))
        check(e['error'] == 'etcdserver: duplicate key given in txn request', 'duplicate put: %r' % e)
        dup([{'request_delete_range': {'key': b64('/c/tx/'), 'range_end': b64(prefix_end('/c/tx/'))}}, put_op('/c/tx/d')])
        dup([put_op('/c/tx/d'), {'request_txn': {'success': [put_op('/c/tx/d')]}}])
        r = c.call('/v3/kv/txn', {'success': [{'request_txn': {'success': [put_op('/c/tx/d')],
                                                               'failure': [put_op('/c/tx/d')]}}]})
        check('kvs' in self.get('/c/tx/d'), 'the same key in then and else of a nested txn is allowed')
        r = c.call('/v3/kv/txn', {'success': [put_op('/c/tx/d')], 'failure': [put_op('/c/tx/d')]})
        e = c.call('/v3/kv/txn', {'success': [put_op('/c/tx/m%d' % i) for i in range(129)]}, expect_status=400)
        check(e['error'] == 'etcdserver: too many operations in txn request', '129 ops: %r' % e)
        # a refused txn applies nothing, whatever comes before the refused op
        e = self.rec('error_txn_future', c.call('/v3/kv/txn', {'success': [
            {'request_put': {'key': b64('/c/tx/half'), 'value': b64('1')}},
            {'request_range': {'key': b64('/c/tx/a'), 'revision': 1 << 40}}]}, expect_status=400))
        check('future revision' in e['error'], 'txn with a future range: %r' % e)
        e = c.call('/v3/kv/txn', {'success': [
            {'request_put': {'key': b64('/c/tx/half'), 'value': b64('1')}},
            {'request_put': {'key': b64('/c/tx/half2'), 'value': b64('1'), 'lease': 987654321}}]}, expect_status=404)
        check('lease not found' in e['error'], 'txn with an unknown lease: %r' % e)
        check('kvs' not in self.get('/c/tx/half'), 'a refused txn applied its first put')
        # ignore_value keeps the value, ignore_lease the lease
        r = c.call('/v3/kv/put', {'key': b64('/c/tx/k'), 'ignore_value': True, 'lease': int(lease)})
        kv = self.get('/c/tx/k')['kvs'][0]
        check(unb64(kv['value']) == b'abd' and kv['lease'] == lease, 'ignore_value: %r' % kv)
        e = c.call('/v3/kv/put', {'key': b64('/c/tx/none'), 'ignore_value': True}, expect_status=400)
        check('key not found' in e['error'], 'ignore_value on a missing key: %r' % e)
        c.call('/v3/lease/revoke', {'ID': lease})

    def case_lease(self):
        c = self.c
        g = self.rec('lease_grant', c.call('/v3/lease/grant', {'TTL': 30}))
        lid = g['ID']
        check(g['TTL'] == '30' and int(lid) > 0, 'grant: %r' % g)
        g2 = c.call('/v3/lease/grant', {'TTL': 30, 'ID': 7770001})
        check(g2['ID'] == '7770001', 'grant with ID: %r' % g2)
        e = self.rec('error_lease_exists', c.call('/v3/lease/grant', {'TTL': 30, 'ID': 7770001}, expect_status=412))
        check('lease already exists' in e['error'], 'grant twice: %r' % e)
        self.put('/c/ls/a', '1', lease=int(lid))
        self.put('/c/ls/b', '2', lease=int(lid))
        self.put('/c/ls/c', '3', lease=7770001)
        kv = self.get('/c/ls/a')['kvs'][0]
        check(kv['lease'] == lid, 'lease of a key: %r' % kv)
        t = self.rec('lease_ttl', c.call('/v3/lease/timetolive', {'ID': lid, 'keys': True}))
        check(sorted(unb64(k) for k in t['keys']) == [b'/c/ls/a', b'/c/ls/b'] and t['grantedTTL'] == '30'
              and 0 < int(t['TTL']) <= 30, 'timetolive: %r' % t)
        k = self.rec('lease_keepalive', c.call('/v3/lease/keepalive', {'ID': lid}))
        check(k['result']['TTL'] == '30' and k['result']['ID'] == lid, 'keepalive: %r' % k)
        r = self.rec('lease_revoke', c.call('/v3/lease/revoke', {'ID': lid}))
        check('kvs' not in self.get('/c/ls/a') and 'kvs' not in self.get('/c/ls/b'), 'revoke must delete the keys')
        check('kvs' in self.get('/c/ls/c'), 'revoke of one lease deleted another lease\'s key')
        e = self.rec('error_lease_not_found', c.call('/v3/lease/revoke', {'ID': lid}, expect_status=404))
        check(e['code'] == 5 and 'lease not found' in e['error'], 'revoke twice: %r' % e)
        e = c.call('/v3/kv/put', {'key': b64('/c/ls/x'), 'value': b64('1'), 'lease': 424242}, expect_status=404)
        check('lease not found' in e['error'], 'put with an unknown lease: %r' % e)
        k = self.rec('lease_keepalive_gone', c.call('/v3/lease/keepalive', {'ID': lid}))
        check('TTL' not in k['result'], 'keepalive of a revoked lease: %r' % k)
        # a key moved to another lease leaves the first one
        g3 = c.call('/v3/lease/grant', {'TTL': 30})['ID']
        self.put('/c/ls/c', '4', lease=int(g3))
        t = c.call('/v3/lease/timetolive', {'ID': 7770001, 'keys': True})
        check('keys' not in t, 'key still listed under its old lease: %r' % t)
        c.call('/v3/lease/revoke', {'ID': 7770001})
        check('kvs' in self.get('/c/ls/c'), 'revoking the old lease deleted a moved key')
        c.call('/v3/lease/revoke', {'ID': g3})

    def case_lease_expiry(self):
        c = self.c
        lid = c.call('/v3/lease/grant', {'TTL': 2})['ID']
        r = self.put('/c/le/k', 'v', lease=int(lid))
        w = Watch(self.url, {'key': b64('/c/le/k'), 'start_revision': self.rev(r)})
        try:
            t0 = time.time()
            ok = w.wait(lambda res: any(e.get('type') == 'DELETE' for x in res
                                        for e in x.get('result', {}).get('events', [])), timeout=10)
            check(ok, 'no DELETE event after lease expiry: %r' % w.results)
            dt = time.time() - t0
            check(dt > 1.0, 'lease expired too early (%.1f s)' % dt)
            check('kvs' not in self.get('/c/le/k'), 'expired lease left its key')
            t = c.call('/v3/lease/timetolive', {'ID': lid})
            check(t['TTL'] == '-1', 'timetolive of an expired lease: %r' % t)
            self.shapes['lease_ttl_gone'] = shape(t)
        finally:
            w.close()

    def case_watch(self):
        c = self.c
        r1 = self.rev(self.put('/c/w/a', '1'))
        self.put('/c/w/a', '2')
        self.put('/c/wx', 'outside')
        self.c.call('/v3/kv/deleterange', {'key': b64('/c/w/a')})
        w = Watch(self.url, {'key': b64('/c/w/'), 'range_end': b64(prefix_end('/c/w/')), 'start_revision': r1,
                             'prev_kv': True})
        try:
            check(w.wait(lambda res: len(res) >= 1), 'no created reply')
            self.rec('watch_created', w.results[0])
            check(w.results[0]['result'].get('created') is True, 'created: %r' % w.results[0])
            check(w.wait(lambda res: sum(len(x['result'].get('events', [])) for x in res) >= 3), 'replay: %r' % w.results)
            ev = w.events()
            check([e.get('type', 'PUT') for e in ev] == ['PUT', 'PUT', 'DELETE'], 'replayed types: %r' % ev)
            check(unb64(ev[1]['kv']['value']) == b'2' and unb64(ev[1]['prev_kv']['value']) == b'1', 'prev_kv: %r' % ev)
            check(unb64(ev[2]['prev_kv']['value']) == b'2' and 'value' not in ev[2]['kv'], 'delete event: %r' % ev[2])
            self.rec('watch_events', w.results[1])
            self.put('/c/w/b', 'live')
            check(w.wait(lambda res: sum(len(x['result'].get('events', [])) for x in res) >= 4), 'no live event')
            ev = w.events()
            check(unb64(ev[3]['kv']['key']) == b'/c/w/b' and 'prev_kv' not in ev[3], 'live event: %r' % ev[3])
        finally:
            w.close()
        # filters
        w = Watch(self.url, {'key': b64('/c/wf'), 'filters': ['NOPUT']})
        try:
            check(w.wait(lambda res: len(res) >= 1), 'no created reply')
            self.put('/c/wf', '1')
            c.call('/v3/kv/deleterange', {'key': b64('/c/wf')})
            check(w.wait(lambda res: len(res) >= 2), 'no event with NOPUT')
            ev = w.events()
            check(len(ev) == 1 and ev[0].get('type') == 'DELETE', 'NOPUT: %r' % ev)
        finally:
            w.close()

    def restart(self):
        cmd = self.args.restart_cmd
        subprocess.run(cmd, shell=True, check=True)
        self.c.close()
        end = time.time() + 30
        while time.time() < end:
            try:
                u = urllib.parse.urlparse(self.url)
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=2)
                conn.request('GET', '/health')
                if json.loads(conn.getresponse().read()).get('health') == 'true':
                    conn.close()
                    # etcd answers health before its first election is done
                    self.c.call('/v3/kv/range', {'key': b64('x')})
                    return
            except (OSError, ValueError, http.client.HTTPException, Failure):
                time.sleep(0.1)
        raise Failure('server did not come back after restart')

    def case_watch_restart(self):
        if not self.args.restart_cmd:
            raise Failure('watch_restart needs --restart-cmd')
        pfx = '/c/wr/'
        start = self.rev(self.get('x')) + 1
        w = Watch(self.url, {'key': b64(pfx), 'range_end': b64(prefix_end(pfx)), 'start_revision': start})
        want = []
        for i in range(30):
            want.append(self.rev(self.put(pfx + '%03d' % i, 'v%d' % i)))
        w.wait(lambda res: sum(len(x['result'].get('events', [])) for x in res) >= 10, timeout=5)
        self.restart()
        w.wait(lambda res: False, timeout=0.2)
        got = w.events()
        w.close()
        for i in range(30, 60):
            want.append(self.rev(self.put(pfx + '%03d' % i, 'v%d' % i)))
        last = int(got[-1]['kv']['mod_revision']) if got else start - 1
        w = Watch(self.url, {'key': b64(pfx), 'range_end': b64(prefix_end(pfx)), 'start_revision': last + 1})
        try:
            check(w.wait(lambda res: len(got) + sum(len(x['result'].get('events', [])) for x in res) >= 60),
                  'resumed watch did not deliver every event: %d of 60' % (len(got) + len(w.events())))
            w.wait(lambda res: False, timeout=0.3)   # nothing more may come
            allev = got + w.events()
            revs = [int(e['kv']['mod_revision']) for e in allev]
            check(revs == want, 'events lost or repeated across a restart: %r vs %r' % (revs, want))
            check([unb64(e['kv']['value']) for e in allev] == [b'v%d' % i for i in range(60)], 'event values')
        finally:
            w.close()

    def case_cas(self):
        key = '/c/cas/counter'
        self.put(key, '0')
        nthreads, per = 16, self.args.cas_per_thread
        errors = []
        retries = [0]

        def worker():
            cl = Client(self.url)
            try:
                done = 0
                while done < per:
                    kv = cl.call('/v3/kv/range', {'key': b64(key)})['kvs'][0]
                    val = int(unb64(kv['value']))
                    r = cl.call('/v3/kv/txn', {
                        'compare': [{'key': b64(key), 'target': 'MOD', 'result': 'EQUAL', 'mod_revision': kv['mod_revision']}],
                        'success': [{'request_put': {'key': b64(key), 'value': b64(str(val + 1))}}]})
                    if r.get('succeeded'):
                        done += 1
                    else:
                        retries[0] += 1
            except Exception as e:   # reported by the main thread
                errors.append(repr(e))
            finally:
                cl.close()
        ts = [threading.Thread(target=worker) for _ in range(nthreads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        check(not errors, 'CAS workers failed: %s' % errors[:3])
        kv = self.get(key)['kvs'][0]
        check(int(unb64(kv['value'])) == nthreads * per, 'lost update: counter %s, expected %d' % (
            unb64(kv['value']), nthreads * per))
        check(int(kv['version']) == nthreads * per + 1, 'version %s' % kv['version'])
        print('  cas: %d increments, %d retries' % (nthreads * per, retries[0]))

    def case_large_value(self):
        big = os.urandom(1 << 20)
        self.c.call('/v3/kv/put', {'key': b64('/c/big'), 'value': b64(big)})
        r = self.get('/c/big')
        check(unb64(r['kvs'][0]['value']) == big, '1 MiB value came back different')
        r = self.c.call('/v3/kv/txn', {'success': [{'request_range': {'key': b64('/c/big')}}]})
        check(unb64(r['responses'][0]['response_range']['kvs'][0]['value']) == big, '1 MiB value in txn')

    def case_many_keys(self):
        n = self.args.many
        pfx = '/c/many/'
        batch = 128   # etcd's default --max-txn-ops
        errors = []
        t0 = time.time()

        def worker(lo, hi):
            cl = Client(self.url)
            try:
                for s in range(lo, hi, batch):
                    ops = [{'request_put': {'key': b64(pfx + '%07d' % i), 'value': b64('value-%d' % i)}}
                           for i in range(s, min(s + batch, hi))]
                    cl.call('/v3/kv/txn', {'success': ops})
            except Exception as e:
                errors.append(repr(e))
            finally:
                cl.close()
        nt = 4
        step = (n + nt - 1) // nt
        step = (step + batch - 1) // batch * batch
        ts = [threading.Thread(target=worker, args=(i * step, min(n, (i + 1) * step))) for i in range(nt)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        check(not errors, 'many keys: %s' % errors[:3])
        t1 = time.time()
        end = b64(prefix_end(pfx))
        r = self.c.call('/v3/kv/range', {'key': b64(pfx), 'range_end': end, 'count_only': True})
        check(r['count'] == str(n), 'count of %d keys: %r' % (n, r))
        r = self.c.call('/v3/kv/range', {'key': b64(pfx), 'range_end': end, 'limit': 10})
        check(len(r['kvs']) == 10 and r['more'] is True and unb64(r['kvs'][9]['key']) == (pfx + '%07d' % 9).encode(),
              'limit over many keys: %r' % r['kvs'][9])
        r = self.get(pfx + '%07d' % (n - 1))
        check(unb64(r['kvs'][0]['value']) == b'value-%d' % (n - 1), 'last key')
        t2 = time.time()
        r = self.c.call('/v3/kv/deleterange', {'key': b64(pfx), 'range_end': end})
        check(r['deleted'] == str(n), 'delete %d keys: %r' % (n, r))
        print('  many: %d keys put in %.1f s, counted in %.2f s, deleted in %.1f s' % (
            n, t1 - t0, t2 - t1, time.time() - t2))

    def case_compaction(self):
        a = self.rev(self.put('/c/cp/k', 'old'))
        b = self.rev(self.put('/c/cp/k', 'new'))
        r = self.rec('compaction', self.c.call('/v3/kv/compaction', {'revision': b}))
        e = self.rec('error_compacted', self.c.call('/v3/kv/range', {'key': b64('/c/cp/k'), 'revision': a},
                                                    expect_status=400))
        check(e['code'] == 11 and e['error'] == 'etcdserver: mvcc: required revision has been compacted', 'compacted read: %r' % e)
        r = self.get('/c/cp/k', revision=b)
        check(unb64(r['kvs'][0]['value']) == b'new', 'read at the compaction revision: %r' % r)
        e = self.c.call('/v3/kv/compaction', {'revision': b}, expect_status=400)
        check('compacted' in e['error'], 'compact twice: %r' % e)
        e = self.c.call('/v3/kv/compaction', {'revision': b + 100000}, expect_status=400)
        check('future revision' in e['error'], 'compact in the future: %r' % e)
        w = Watch(self.url, {'key': b64('/c/cp/k'), 'start_revision': a})
        try:
            check(w.wait(lambda res: len(res) >= 2), 'watch from a compacted revision: %r' % w.results)
            res = w.results[1]['result']
            check(res.get('canceled') is True and res.get('compact_revision') == str(b), 'canceled watch: %r' % res)
            self.rec('watch_compacted', w.results[1])
        finally:
            w.close()

    def case_errors(self):
        e = self.rec('error_json', self.c.call('/v3/kv/put', '{bad', expect_status=400))
        check(e['code'] == 3 and e['error'] and e['message'], 'malformed JSON: %r' % e)
        e = self.rec('error_base64', self.c.call('/v3/kv/put', {'key': '!!!', 'value': 'YQ=='}, expect_status=400))
        check(e['code'] == 3 and 'base64' in e['error'], 'bad base64: %r' % e)
        e = self.rec('error_no_key', self.c.call('/v3/kv/put', {'value': 'YQ=='}, expect_status=400))
        check(e['error'] == 'etcdserver: key is not provided', 'no key: %r' % e)

    CASES = ['health', 'put_range', 'range_prefix', 'range_revision', 'put_prev_kv', 'deleterange', 'txn',
             'lease', 'lease_expiry', 'watch', 'watch_restart', 'cas', 'large_value', 'many_keys',
             'compaction', 'errors']

    def run(self, only):
        failed = 0
        for name in self.CASES:
            if only and name not in only:
                continue
            t0 = time.time()
            try:
                getattr(self, 'case_' + name)()
                print('ok   %-16s %.2f s' % (name, time.time() - t0))
            except Failure as e:
                failed += 1
                print('FAIL %-16s %s' % (name, e))
            except Exception as e:
                failed += 1
                print('FAIL %-16s %s: %s' % (name, type(e).__name__, e))
            sys.stdout.flush()
        return failed


def compare(a_path, b_path):
    a = json.load(open(a_path))
    b = json.load(open(b_path))
    bad = 0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print('shape %s: only in %s' % (name, a_path if name in a else b_path))
            bad += 1
        elif a[name] != b[name]:
            print('shape %s differs:\n  %s: %s\n  %s: %s' % (name, a_path, json.dumps(a[name], sort_keys=True),
                                                           b_path, json.dumps(b[name], sort_keys=True)))
            bad += 1
    print('%d shapes compared, %d differ' % (len(set(a) | set(b)), bad))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--url')
    ap.add_argument('--restart-cmd')
    ap.add_argument('--shapes')
    ap.add_argument('--many', type=int, default=100000)
    ap.add_argument('--cas-per-thread', type=int, default=10)
    ap.add_argument('--only', default='')
    ap.add_argument('--compare', nargs=2)
    args = ap.parse_args()
    if args.compare:
        return 1 if compare(*args.compare) else 0
    s = Suite(args)
    failed = s.run([x for x in args.only.split(',') if x])
    if args.shapes:
        with open(args.shapes, 'w') as f:
            json.dump(s.shapes, f, indent=1, sort_keys=True)
    print('%s: %d case(s) failed' % (args.url, failed) if failed else '%s: all cases passed' % args.url)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
