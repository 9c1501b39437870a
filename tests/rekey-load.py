#!/usr/bin/python3
# A verified write load for test-image-rekey.sh, through NBD connections
# (nbdkit tromcho) and, optionally, a file of a FUSE mount of the same
# image: one writer at a time (so the expected content is known exactly),
# aligned and unaligned writes, zeroes and trims of random ranges, spread
# over the connections in turn, each read back at once, a flush now and
# then, until STOPFILE exists; then every byte of the image is compared
# with the model. Any I/O error or wrong byte is a failure (exit 1).
#
#   rekey-load.py SIZE STOPFILE URI [URI...] [--file PATH]
import os
import random
import sys
import time
import zlib

import nbd


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    path = None
    if "--file" in args:
        i = args.index("--file")
        path = args[i + 1]
        del args[i:i + 2]
    size, stop, uris = int(args[0]), args[1], args[2:]
    hs = []
    for u in uris:
        h = nbd.NBD()
        h.connect_uri(u)
        hs.append(h)
    # O_DIRECT: tromcho-fuse then serves each call itself (no page cache
    # that the NBD writes would leave stale).
    f = os.open(path, os.O_RDWR | os.O_DIRECT) if path else None
    model = bytearray(size)
    rng = random.Random(os.getpid())
    # Start with the whole image written, so the old layer has every object.
    chunk = 1 << 20
    for off in range(0, size, chunk):
        data = rng.randbytes(chunk)
        hs[0].pwrite(data, off)
        model[off:off + chunk] = data
    hs[0].flush()
    print("filled %d bytes" % size, flush=True)
    n = errors = 0
    hist = {}
    t0 = time.time()
    while not os.path.exists(stop):
        who = n % (len(hs) + (1 if f is not None else 0))
        kind = rng.random()
        if kind < 0.45:
            ln = rng.choice([4096, 8192, 65536, 131072, 200000])
            off = rng.randrange(0, size - ln) // 4096 * 4096
        elif kind < 0.9:
            ln = rng.randrange(1, 9000)
            off = rng.randrange(0, size - ln)
        else:
            ln = rng.randrange(1, 300000)
            off = rng.randrange(0, size - ln)
        zero = kind >= 0.95 and who < len(hs)
        data = bytes(ln) if zero else rng.randbytes(ln)
        try:
            if who < len(hs):
                h = hs[who]
                if zero:
                    if rng.random() < 0.5:
                        h.trim(ln, off)
                    else:
                        h.zero(ln, off)
                else:
                    h.pwrite(data, off)
                got = h.pread(ln, off)
            else:
                if os.pwrite(f, data, off) != ln:
                    fail("short write to %s" % path)
                got = os.pread(f, ln, off)
        except Exception as e:  # an NBD or file error reached the client
            fail("op %d (%s %d+%d via %s): %s" % (n, "zero" if zero else "write", off, ln,
                                                  uris[who] if who < len(hs) else path, e))
        model[off:off + ln] = data
        # Each 4 KiB sector's states (op, writer, time, CRC-32): a wrong byte
        # at the end then says which state came back.
        now = time.time()
        for s in range(off // 4096, (off + ln - 1) // 4096 + 1):
            hist.setdefault(s, []).append((n, who, now, zlib.crc32(model[s * 4096:(s + 1) * 4096])))
        if got != data:
            errors += 1
            print("WRONG: read after op %d at %d+%d" % (n, off, ln), flush=True)
        n += 1
        if n % 50 == 0:
            for h in hs:
                h.flush()
            if f is not None:
                os.fsync(f)
    for h in hs:
        h.flush()
    # Everything, through every connection.
    for i, h in enumerate(hs):
        for off in range(0, size, chunk):
            got = h.pread(chunk, off)
            if got != bytes(model[off:off + chunk]):
                bad = next(k for k in range(chunk) if got[k] != model[off + k])
                errors += 1
                print("WRONG: final read via %s at byte %d" % (uris[i], off + bad), flush=True)
                sec = (off + bad) // 4096
                crc = zlib.crc32(got[sec * 4096 - off:(sec + 1) * 4096 - off])
                names = ["nbd%d" % k for k in range(len(hs))] + ["file"]
                for (op, w, t, c) in hist.get(sec, [])[-6:]:
                    print("  sector %d: op %d via %s at %.3f%s" % (sec, op, names[w], t,
                          " <- what it holds" if c == crc else ""), flush=True)
                break
    if f is not None:
        os.close(f)
    with open(stop + ".model", "wb") as m:
        m.write(model)
    print("%d operations in %.1f s, %d wrong" % (n, time.time() - t0, errors), flush=True)
    sys.exit(1 if errors else 0)


main()
