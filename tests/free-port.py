#!/usr/bin/python3
# Print a TCP port on 127.0.0.1 that is free now, chosen outside the
# kernel's ephemeral range (net.ipv4.ip_local_port_range): a port bound
# to 0 comes from that range, and any connect() on the machine (a daemon
# of another test, running in parallel) may take it as its local port
# before the server meant for it binds ("address already in use").
import random
import socket

try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
except (OSError, ValueError):
    lo, hi = 32768, 60999
ranges = [r for r in ((10000, lo - 1), (hi + 1, 65535)) if r[1] - r[0] >= 1000]
for _ in range(200):
    a, b = random.choice(ranges) if ranges else (lo, hi)
    port = random.randint(a, b)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("free-port.py: no free port found after 200 tries")
