#!/usr/bin/python3
# Concurrent sub-sector writes through several NBD connections (issue 18).
#
#   partial-writes.py race URI URI TRIALS PIECE   two writes in flight at once
#       to different bytes of one 4 KiB sector, one on each connection; the
#       sector must hold both afterwards. PIECE: 2048, 512 or 0 (random
#       byte ranges). Batches of trials are in flight together.
#   partial-writes.py fsx SEED OPS URI [URI...]   fsx-style: random unaligned
#       writes and zeroes (and reads) sent at once over every connection,
#       never overlapping in bytes within a batch but sharing sectors, checked
#       against a model in memory after every batch and in full at the end.
#   partial-writes.py files SEED OPS PATH [PATH...]   the same over files (a
#       FUSE mount: tromcho-fuse or nbdfuse), one O_DIRECT descriptor per
#       PATH, each batch's operations run at once from one thread each.
#
# Prints one line with the figures; exits 1 with what was lost on failure.
import os
import random
import sys
import threading

import nbd

SECTOR = 4096


def connect(uris):
    hs = []
    for u in uris:
        h = nbd.NBD()
        h.connect_uri(u)
        hs.append(h)
    return hs


def wait_all(hs, cookies):
    """Run every handle until each of its cookies has completed; raise on error."""
    pending = [set(c) for c in cookies]
    while any(pending):
        for h, p in zip(hs, pending):
            if not p:
                continue
            if h.aio_in_flight() > 0:
                h.poll(0)
            for c in list(p):
                if h.aio_command_completed(c):   # raises on a failed command
                    p.discard(c)


def race(uri_a, uri_b, trials, piece):
    ha, hb = connect([uri_a, uri_b])
    size = ha.get_size()
    rng = random.Random(trials * 7 + piece)
    nsec = min(size // SECTOR, 4096)
    batch = 50
    lost = 0
    done = 0
    base = rng.randrange(0, size // SECTOR - nsec + 1)
    while done < trials:
        n = min(batch, trials - done)
        secs = rng.sample(range(nsec), n)
        # Start each sector from a known pattern (aligned: no read-modify-write).
        init = {}
        ca = []
        for s in secs:
            init[s] = bytes([rng.randrange(256)]) * SECTOR
            ca.append(ha.aio_pwrite(init[s], (base + s) * SECTOR))
        wait_all([ha], [ca])
        expect = {}
        ca, cb = [], []
        for s in secs:
            if piece:
                k = rng.randrange(SECTOR // piece - 1)
                a_off, a_len = k * piece, piece
                b_off, b_len = (k + 1) * piece, piece
            else:
                cut = rng.randrange(1, SECTOR - 1)
                a_off = rng.randrange(0, cut)
                a_len = rng.randrange(1, cut - a_off + 1)
                b_off = rng.randrange(cut, SECTOR)
                b_len = rng.randrange(1, SECTOR - b_off + 1)
                if rng.random() < 0.5:
                    a_off, a_len, b_off, b_len = b_off, b_len, a_off, a_len
            da = bytes([rng.randrange(256) for _ in range(8)]) * (a_len // 8 + 1)
            db = bytes([rng.randrange(256) for _ in range(8)]) * (b_len // 8 + 1)
            da, db = da[:a_len], db[:b_len]
            e = bytearray(init[s])
            e[a_off:a_off + a_len] = da
            e[b_off:b_off + b_len] = db
            expect[s] = bytes(e)
            off = (base + s) * SECTOR
            ca.append(ha.aio_pwrite(da, off + a_off))
            cb.append(hb.aio_pwrite(db, off + b_off))
        wait_all([ha, hb], [ca, cb])
        for s in secs:
            got = ha.pread(SECTOR, (base + s) * SECTOR)
            if got != expect[s]:
                lost += 1
        done += n
    ha.shutdown()
    hb.shutdown()
    print("race piece=%d: %d trials, %d lost" % (piece, trials, lost))
    return lost == 0


def fsx(seed, nops, uris):
    hs = connect(uris)
    size = hs[0].get_size()
    rng = random.Random(seed)
    span = min(size, 256 * 1024)   # small: writes share sectors often
    base = rng.randrange(0, (size - span) // SECTOR + 1) * SECTOR
    model = bytearray(hs[0].pread(span, base))
    ops = 0
    batches = 0
    while ops < nops:
        # A batch: one op per connection (sometimes two), disjoint in bytes.
        taken = []
        plan = []
        for i, h in enumerate(hs):
            for _ in range(rng.choice([1, 1, 2])):
                for _attempt in range(20):
                    ln = rng.choice([1, 7, 100, 511, 512, 513, 1000, 2048, 4095, 4096, 4097, 6000, 9000,
                                     rng.randrange(1, 20000)])
                    off = rng.randrange(0, span - ln)
                    if all(off + ln <= a or b <= off for a, b in taken):
                        taken.append((off, off + ln))
                        kind = rng.choice(["write"] * 6 + ["zero", "read"])
                        plan.append((i, kind, off, ln))
                        break
        cookies = [[] for _ in hs]
        reads = []
        for i, kind, off, ln in plan:
            h = hs[i]
            if kind == "write":
                data = rng.randbytes(ln)
                model[off:off + ln] = data
                cookies[i].append(h.aio_pwrite(data, base + off))
            elif kind == "zero":
                model[off:off + ln] = bytes(ln)
                cookies[i].append(h.aio_zero(ln, base + off))
            else:
                buf = nbd.Buffer(ln)
                reads.append((buf, off, ln))
                cookies[i].append(h.aio_pread(buf, base + off))
        wait_all(hs, cookies)
        for buf, off, ln in reads:
            if buf.to_bytearray() != model[off:off + ln]:
                print("fsx: read of %d+%d in batch %d returned stale data" % (off, ln, batches))
                return False
        ops += len(plan)
        batches += 1
        # Check every written range through another connection.
        for j, (i, kind, off, ln) in enumerate(plan):
            h = hs[(i + 1 + j) % len(hs)]
            got = h.pread(ln, base + off)
            if got != model[off:off + ln]:
                bad = next(k for k in range(ln) if got[k] != model[off + k])
                print("fsx: batch %d: %s %d+%d lost (first bad byte at %d)" % (batches, kind, off, ln, off + bad))
                return False
    got = hs[0].pread(span, base)
    if got != model:
        bad = next(k for k in range(span) if got[k] != model[k])
        print("fsx: final check: byte %d differs from the model" % bad)
        return False
    for h in hs:
        h.shutdown()
    print("fsx seed=%d: %d ops in %d batches over %d connections, image matches the model" %
          (seed, ops, batches, len(hs)))
    return True


def plan_batch(rng, n, span):
    """Operations for n workers (sometimes two each), disjoint in bytes."""
    taken = []
    plan = []
    for i in range(n):
        for _ in range(rng.choice([1, 1, 2])):
            for _attempt in range(20):
                ln = rng.choice([1, 7, 100, 511, 512, 513, 1000, 2048, 4095, 4096, 4097, 6000, 9000,
                                 rng.randrange(1, 20000)])
                off = rng.randrange(0, span - ln)
                if all(off + ln <= a or b <= off for a, b in taken):
                    taken.append((off, off + ln))
                    plan.append((i, rng.choice(["write"] * 7 + ["read"]), off, ln, rng.randbytes(ln)))
                    break
    return plan


def files(seed, nops, paths):
    fds = [os.open(p, os.O_RDWR | os.O_DIRECT) for p in paths]
    size = os.fstat(fds[0]).st_size
    rng = random.Random(seed)
    span = min(size, 256 * 1024)
    base = rng.randrange(0, (size - span) // SECTOR + 1) * SECTOR
    model = bytearray(os.pread(fds[0], span, base))
    ops = batches = 0
    while ops < nops:
        plan = plan_batch(rng, len(fds), span)
        errors = []
        reads = {}

        def worker(i):
            try:
                for j, (w, kind, off, ln, data) in enumerate(plan):
                    if w != i:
                        continue
                    if kind == "write":
                        if os.pwrite(fds[i], data, base + off) != ln:
                            errors.append("short write")
                    else:
                        reads[j] = os.pread(fds[i], ln, base + off)
            except OSError as e:
                errors.append(str(e))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(fds))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            print("files: batch %d: %s" % (batches, errors[0]))
            return False
        for j, (w, kind, off, ln, data) in enumerate(plan):
            if kind == "write":
                model[off:off + ln] = data
        for j, (w, kind, off, ln, data) in enumerate(plan):
            if kind == "read" and reads[j] != model[off:off + ln]:
                print("files: batch %d: read %d+%d returned stale data" % (batches, off, ln))
                return False
            got = os.pread(fds[(w + 1 + j) % len(fds)], ln, base + off)
            if got != model[off:off + ln]:
                bad = next(k for k in range(ln) if got[k] != model[off + k])
                print("files: batch %d: %s %d+%d lost (first bad byte at %d)" % (batches, kind, off, ln, off + bad))
                return False
        ops += len(plan)
        batches += 1
    ok = os.pread(fds[0], span, base) == model
    for fd in fds:
        os.close(fd)
    if not ok:
        print("files: final check: the file differs from the model")
        return False
    print("files seed=%d: %d ops in %d batches over %d descriptors, O_DIRECT, file matches the model" %
          (seed, ops, batches, len(paths)))
    return True


def main():
    if sys.argv[1] == "race":
        ok = race(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "files":
        ok = files(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
    elif sys.argv[1] == "fsx":
        ok = fsx(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit("usage: partial-writes.py race|fsx|files ...")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
