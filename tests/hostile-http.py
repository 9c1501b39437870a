#!/usr/bin/env python3
"""Hostile HTTP(S) peers against the gateway's KV API (issue 12, tests/test-hostile-gateway.sh).

hostile-http.py ATTACK --port P [--from ADDR[,ADDR...]] [--conns N] [--hold S] [--tls [--cert F --key F]]

ATTACK:
  idle          connect and send nothing
  tls-half      send the first half of a TLS ClientHello, then nothing
  slow-headers  (after the TLS handshake with --tls) a request line, then one
                header byte every second, never ending the headers
  big-body      a PUT announcing a 10 GB body, then 1 MiB of it as fast as it goes
  trickle       a put announcing 4096 bytes, then one byte every second

Holds the connections for --hold seconds (or until the server closed them
all) and prints one line: attack=... connected=N closed_by_server=N
replies=STATUS:COUNT,... first_close_s=... last_close_s=...
"""
import argparse
import selectors
import socket
import ssl
import sys
import time

BIG = 10 * 1000 * 1000 * 1000


def client_hello_half():
    """The first half of a real TLS ClientHello, as a stalled handshake sends it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    return hello[:len(hello) // 2]


class Conn:
    def __init__(self, sock, raw):
        self.sock = sock        # the TLS socket (or raw)
        self.raw = raw
        self.pending = b""      # what is left to trickle
        self.closed_at = None
        self.reply = b""


def connect(args, i):
    srcs = args.src.split(",")
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.bind((srcs[i % len(srcs)], 0))
    raw.settimeout(30)
    raw.connect(("127.0.0.1", args.port))
    sock = raw
    if args.tls and args.attack not in ("idle", "tls-half"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if args.cert:
            ctx.load_cert_chain(args.cert, args.key)
        sock = ctx.wrap_socket(raw, server_hostname="localhost")
    return Conn(sock, raw)


def request(path, length, extra=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(length).encode() + b"\r\n" + extra + b"\r\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("attack", choices=["idle", "tls-half", "slow-headers", "big-body", "trickle"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--from", dest="src", default="127.0.0.1")
    p.add_argument("--conns", type=int, default=100)
    p.add_argument("--hold", type=float, default=10)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--cert", help="a client certificate to present (an authenticated attacker)")
    p.add_argument("--key")
    args = p.parse_args()

    conns, refused = [], 0
    start = time.monotonic()
    hello = client_hello_half() if args.attack == "tls-half" else b""
    for i in range(args.conns):
        try:
            c = connect(args, i)
        except (OSError, ssl.SSLError):
            refused += 1      # refused, reset or handshake cut: the server's choice
            continue
        try:
            if args.attack == "tls-half":
                c.sock.sendall(hello)
            elif args.attack == "slow-headers":
                c.sock.sendall(b"POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                c.pending = b"X-Slow: " + b"a" * 100000
            elif args.attack == "big-body":
                c.sock.sendall(request(b"/v3/kv/put", BIG))
                c.pending = b"x" * (1 << 20)
            elif args.attack == "trickle":
                c.sock.sendall(request(b"/v3/kv/put", 4096))
                c.pending = b"{" + b" " * 4095
        except (OSError, ssl.SSLError):
            c.closed_at = time.monotonic() - start
        c.sock.setblocking(False)
        conns.append(c)

    # The test waits for this line before it checks the legitimate clients.
    print("ready connected=%d refused=%d" % (len(conns), refused))
    sys.stdout.flush()
    sel = selectors.DefaultSelector()
    for c in conns:
        if c.closed_at is None:
            sel.register(c.sock, selectors.EVENT_READ, c)
    deadline = time.monotonic() + args.hold
    last_trickle = 0.0
    while time.monotonic() < deadline and len(sel.get_map()):
        now = time.monotonic()
        if args.attack == "big-body":
            for key in list(sel.get_map().values()):
                c = key.data
                if c.pending:
                    try:
                        n = c.sock.send(c.pending[:65536])
                        c.pending = c.pending[n:]
                    except (ssl.SSLWantWriteError, BlockingIOError, ssl.SSLWantReadError):
                        pass
                    except (OSError, ssl.SSLError):
                        pass
        elif args.attack in ("slow-headers", "trickle") and now - last_trickle >= 1:
            last_trickle = now
            for key in list(sel.get_map().values()):
                c = key.data
                if c.pending:
                    try:
                        c.sock.send(c.pending[:1])
                        c.pending = c.pending[1:]
                    except (ssl.SSLWantWriteError, BlockingIOError, ssl.SSLWantReadError):
                        pass
                    except (OSError, ssl.SSLError):
                        pass
        for key, _ in sel.select(timeout=0.05 if args.attack == "big-body" else 0.5):
            c = key.data
            try:
                data = c.sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except (OSError, ssl.SSLError):
                data = b""
            if data:
                c.reply += data
                continue
            c.closed_at = time.monotonic() - start
            sel.unregister(c.sock)
    closes = sorted(c.closed_at for c in conns if c.closed_at is not None)
    replies = {}
    for c in conns:
        if c.reply.startswith(b"HTTP/1."):
            st = c.reply.split(b" ", 2)[1].decode()
            replies[st] = replies.get(st, 0) + 1
    print("attack=%s connected=%d refused=%d closed_by_server=%d replies=%s first_close_s=%s last_close_s=%s" % (
        args.attack, len(conns), refused, len(closes),
        ",".join("%s:%d" % kv for kv in sorted(replies.items())) or "none",
        "%.1f" % closes[0] if closes else "none", "%.1f" % closes[-1] if closes else "none"))
    sys.stdout.flush()
    for c in conns:
        try:
            c.sock.close()
        except OSError:
            pass


if __name__ == "__main__":
    main()
