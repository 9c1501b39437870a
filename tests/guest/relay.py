#!/usr/bin/env python3
"""relay.py HOST PORT: stdin/stdout <-> one TCP connection with TCP_NODELAY.

QEMU's guestfwd runs this per guest connection (guestfwd=...-cmd:...).
Without TCP_NODELAY on the host side, Nagle holds every small NBD reply
~40 ms behind the delayed ACK (DESIGN.md section 9)."""
import os
import selectors
import socket
import sys

s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.settimeout(None)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj == 0:
            d = os.read(0, 1 << 20)
            if not d:
                s.shutdown(socket.SHUT_WR)
                sel.unregister(0)
                continue
            s.sendall(d)
        else:
            d = s.recv(1 << 20)
            if not d:
                sys.exit(0)
            view = memoryview(d)
            while view:
                n = os.write(1, view)
                view = view[n:]
