#!/usr/bin/env python3
"""A TCP relay for the messenger tests: forwards every connection to
127.0.0.1:TARGET and appends what passes to PREFIX.c2s and PREFIX.s2c.

  msgr-relay.py TARGET PREFIX [--cut-c2s N]

Prints "PORT n" once listening. --cut-c2s N closes a connection once N
client-to-server bytes have passed (a truncated stream). Runs until killed.
"""
import socket
import sys
import threading

target = int(sys.argv[1])
prefix = sys.argv[2]
cut = None
if len(sys.argv) > 4 and sys.argv[3] == "--cut-c2s":
    cut = int(sys.argv[4])
lock = threading.Lock()


def pump(src, dst, name, limit):
    passed = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if limit is not None and passed + len(data) >= limit:
                data = data[: limit - passed]
            passed += len(data)
            with lock, open(prefix + "." + name, "ab") as f:
                f.write(data)
            dst.sendall(data)
            if limit is not None and passed >= limit:
                break
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(a):
    b = socket.create_connection(("127.0.0.1", target))
    b.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t1 = threading.Thread(target=pump, args=(a, b, "c2s", cut), daemon=True)
    t2 = threading.Thread(target=pump, args=(b, a, "s2c", None), daemon=True)
    t1.start()
    t2.start()
    t1.join()
    t2.join()
    a.close()
    b.close()


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
print("PORT", ls.getsockname()[1], flush=True)
while True:
    conn, _ = ls.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
