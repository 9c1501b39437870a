#!/usr/bin/python3
# 4 KiB random writes with NBD's FUA flag at queue depth 1 (fio's nbd engine
# has no FUA option): one write at a time, each answered only once durable.
#   bench/nbd-fua.py LABEL NAME URI SECONDS SIZE_BYTES
# Prints one line like bench/fio-nbd.sh: "<label> <name> <IOPS> <MB/s>
# <mean lat us>" (a 1 s ramp first, not counted). Never passes or fails on
# the figures; exits 1 if the export does not take FUA or a write fails.
import os
import random
import sys
import time

import nbd

label, name, uri, secs, size = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
h = nbd.NBD()
h.connect_uri(uri)
if not h.can_fua():
    sys.exit("%s: the export does not advertise FUA" % uri)
size = min(size, h.get_size())
bs = 4096
blocks = size // bs
rng = random.Random(1)
buf = os.urandom(bs)


def run(seconds):
    n, lat = 0, 0.0
    end = time.monotonic() + seconds
    while True:
        t0 = time.monotonic()
        if t0 >= end:
            return n, lat
        h.pwrite(buf, rng.randrange(blocks) * bs, nbd.CMD_FLAG_FUA)
        lat += time.monotonic() - t0
        n += 1


run(1.0)   # ramp, as fio --ramp_time=1
t0 = time.monotonic()
n, lat = run(secs)
elapsed = time.monotonic() - t0
h.shutdown()
print("%-22s %-22s %10.0f IOPS %9.1f MB/s %9.1f us" % (label, name, n / elapsed, n * bs / elapsed / 1e6,
                                                      lat / n * 1e6 if n else 0.0))
