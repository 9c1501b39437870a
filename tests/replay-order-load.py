#!/usr/bin/python3
# A load for test-client-replay-order.sh: THREADS connections, each
# rewriting its own BLOCKS 4 KiB blocks over and over (one write at a time
# per connection, each read back at once), while one more connection
# flushes every few milliseconds, until STOPFILE exists; then every block
# must hold the last bytes written to it. An OSD killed meanwhile makes a
# flush replay the unsynced writes: a replayed older write must never land
# over a newer one that was acknowledged (read back at once or at the end).
#
#   replay-order-load.py URI STOPFILE [THREADS] [BLOCKS]
import os
import sys
import threading
import time

import nbd

BS = 4096
STRIDE = 131072 + 8192   # a new object, and a new sector in it, per block


def main():
    uri, stop = sys.argv[1], sys.argv[2]
    nthreads = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    nblocks = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    last = {}
    errors = []
    counts = [0] * nthreads
    lock = threading.Lock()

    def content(blk, gen):
        head = b"blk %6d gen %9d " % (blk, gen)
        return (head * (BS // len(head) + 1))[:BS]

    def writer(t):
        h = nbd.NBD()
        h.connect_uri(uri)
        gen = 0
        while not os.path.exists(stop) and not errors:
            gen += 1
            for b in range(nblocks):
                blk = t * nblocks + b
                data = content(blk, gen)
                try:
                    h.pwrite(data, blk * STRIDE)
                    with lock:
                        last[blk] = data
                    got = h.pread(BS, blk * STRIDE)
                except nbd.Error as e:
                    errors.append("block %d gen %d: %s" % (blk, gen, e))
                    return
                if got != data:
                    errors.append("block %d read back right after its write of gen %d: %r"
                                  % (blk, gen, got[:24]))
                    return
            counts[t] = gen
        h.shutdown()

    def flusher():
        h = nbd.NBD()
        h.connect_uri(uri)
        n = 0
        while not os.path.exists(stop) and not errors:
            try:
                h.flush()
            except nbd.Error as e:
                errors.append("flush: %s" % e)
                return
            n += 1
            time.sleep(0.003)
        print("flushes %d" % n, flush=True)
        h.shutdown()

    ths = [threading.Thread(target=writer, args=(t,)) for t in range(nthreads)]
    ths.append(threading.Thread(target=flusher))
    for th in ths:
        th.start()
    print("started", flush=True)
    for th in ths:
        th.join()
    if errors:
        print("FAIL: " + errors[0], flush=True)
        sys.exit(1)
    h = nbd.NBD()
    h.connect_uri(uri)
    wrong = 0
    for blk, data in sorted(last.items()):
        got = h.pread(BS, blk * STRIDE)
        if got != data:
            wrong += 1
            if wrong <= 3:
                print("block %d holds %r, its last write was %r" % (blk, got[:24], data[:24]), flush=True)
    print("writes %d, %d blocks, %d wrong" % (sum(counts) * nblocks, len(last), wrong), flush=True)
    sys.exit(1 if wrong else 0)


main()
