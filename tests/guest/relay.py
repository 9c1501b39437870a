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
# QEMU's slirp hands the guest's connection over as a TCP socket on loopback
# (a socket pair that carries out-of-band data) on which slirp leaves Nagle
# on: it writes a request in the pieces the guest's segments brought, holds
# each piece until the one before is ACKed, and this side delayed its ACKs
# (4 KiB O_DIRECT writes at QD1 took 44 ms each). So no Nagle on this side
# and an ACK at once for everything read.
guest = None
try:
    guest = socket.socket(fileno=os.dup(0))
    guest.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
except OSError:
    guest = None  # not a TCP socket (a pipe when run by hand)
# QEMU's slirp hands the guest's connection over as a TCP socket on loopback
# (a socket pair with out-of-band data): Nagle there held each reply to the
# guest ~40 ms behind the previous one's delayed ACK (4 KiB O_DIRECT writes
# at QD1: 44 ms each, 1.8 ms with TCP_NODELAY on it too).
try:
    socket.socket(fileno=os.dup(0)).setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
except OSError:
    pass  # not a TCP socket (a pipe when run by hand)
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj == 0:
            d = os.read(0, 1 << 20)
            if guest is not None:
                guest.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
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
