#!/usr/bin/env python3
"""A misbehaving KV endpoint for the KV client's timeout tests.

  kv-stub.py MODE PORTFILE [SECONDS]

Listens on a free port of 127.0.0.1, writes the port to PORTFILE, then
serves every connection by MODE:

  silent  reads the request and never answers (a server that stopped
          answering: connected, then nothing).
  drip    answers every POST with a valid etcd range reply (no keys,
          revision 7), sending it a byte at a time over SECONDS (default 3):
          a slow server that is still answering.

Runs until killed.
"""
import os
import socket
import sys
import threading
import time

mode, portfile = sys.argv[1], sys.argv[2]
secs = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
BODY = b'{"header":{"revision":"7"},"count":"0"}'


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        rest += chunk
    return head


def serve(conn):
    try:
        while read_request(conn) is not None:
            if mode == "silent":
                # Hold the connection open, answer nothing, until the peer goes.
                while conn.recv(65536):
                    pass
                return
            # drip: pad the JSON with leading spaces so the reply lasts secs.
            body = b" " * 30 + BODY
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body))
            step = secs / len(body)
            for i in range(len(body)):
                conn.sendall(body[i:i + 1])
                time.sleep(step)
    except OSError:
        pass
    finally:
        conn.close()


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(64)
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % srv.getsockname()[1])
os.rename(portfile + ".tmp", portfile)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
