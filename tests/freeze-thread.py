#!/usr/bin/env python3
"""Freeze one thread of a process, not the others, for a while: a hung
event loop whose helper threads still run. SIGSTOP would stop the whole
process; ptrace's PTRACE_SEIZE + PTRACE_INTERRUPT stop only the thread.

  freeze-thread.py TID SECONDS

Prints "frozen" once the thread is stopped and "thawed" once it runs
again; exits 1 with the reason if it cannot (no ptrace rights)."""
import ctypes
import os
import sys
import time

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000   # __WALL: wait for a thread that is not a child

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
tid = int(sys.argv[1])
secs = float(sys.argv[2])


def ptrace(req):
    if libc.ptrace(req, tid, None, None) < 0:
        err = ctypes.get_errno()
        sys.exit("freeze-thread.py: ptrace %#x of %d: %s" % (req, tid, os.strerror(err)))


ptrace(PTRACE_SEIZE)
ptrace(PTRACE_INTERRUPT)
os.waitpid(tid, WALL)
print("frozen", flush=True)
time.sleep(secs)
ptrace(PTRACE_DETACH)
print("thawed", flush=True)
