#!/usr/bin/env python3
"""Capture the TCP packets on the loopback interface that have one of PORTS
as source or destination into FILE (raw frames) until SIGTERM; prints READY
once capturing. A kernel (BPF) filter keeps other traffic of a busy shared
machine out, so nothing of ours is dropped. Needs root (AF_PACKET).

  lo-capture.py FILE PORT [PORT...]
"""
import signal
import socket
import struct
import sys

ports = [int(p) for p in sys.argv[2:]]
# Classic BPF, as `tcpdump -dd 'tcp port P1 or tcp port P2 ...'` on Ethernet
# framing (lo uses it): IPv4, TCP, first fragment, src or dst port in ports.
prog = []
def ins(code, jt, jf, k):
    prog.append((code, jt, jf, k))
n = len(ports)
# layout: 0 ldh[12]; 1 jeq 0x800; 2 ldb[23]; 3 jeq 6; 4 ldh[20]; 5 jset 0x1fff;
# 6 ldxb msh; 7 ldh[x+14]; 8.. n jeq (src); ldh[x+16]; n jeq (dst); ret 0; ret all
accept = 8 + n + 1 + n + 1   # index of "ret all"
drop = accept - 1
ins(0x28, 0, 0, 12)
ins(0x15, 0, drop - 2, 0x800)
ins(0x30, 0, 0, 23)
ins(0x15, 0, drop - 4, 6)
ins(0x28, 0, 0, 20)
ins(0x45, drop - 6, 0, 0x1fff)
ins(0xb1, 0, 0, 14)
ins(0x48, 0, 0, 14)
for i, p in enumerate(ports):
    here = len(prog)
    ins(0x15, accept - here - 1, 0, p)
ins(0x48, 0, 0, 16)
for i, p in enumerate(ports):
    here = len(prog)
    ins(0x15, accept - here - 1, 0, p)
ins(0x06, 0, 0, 0)
ins(0x06, 0, 0, 262144)
assert len(prog) == accept + 1
code = b"".join(struct.pack("HBBI", *i) for i in prog)
import ctypes
buf = ctypes.create_string_buffer(code)
fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))

s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
s.setsockopt(socket.SOL_SOCKET, 26, fprog)   # SO_ATTACH_FILTER
try:
    s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 64 << 20)
except OSError:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
s.bind(("lo", 0))
stop = False
def on_term(sig, frame):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
with open(sys.argv[1], "wb") as f:
    print("READY", flush=True)
    s.settimeout(0.2)
    while True:
        try:
            f.write(s.recv(1 << 18))
            f.flush()
        except socket.timeout:
            if stop:
                break   # drained: nothing more for 0.2 s after the stop
        except InterruptedError:
            pass
