#!/usr/bin/python3
"""Captures the /proc fixtures in this directory from a live process.

Run as:  env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 PYTHONMALLOC=malloc \
             /usr/bin/python3 capture.py OUT_PREFIX [THREADS]
(add LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 MALLOC_CONF=... for
the jemalloc fixture). `env -i` keeps the environ fixture free of whatever the
capturing shell had set.

THREADS Python threads each churn through bytearray/zlib allocations (under
PYTHONMALLOC=malloc every object goes through the C allocator, so glibc hands
contending threads their own arenas), keep a few hundred KiB live, then park
on an Event so that their stacks and arenas are mapped while the process
copies its own status, smaps, maps, environ and task/*/comm, and (glibc only)
writes malloc_info(0, fp) XML via ctypes.
"""
import ctypes
import os
import random
import shutil
import sys
import threading
import zlib

prefix = sys.argv[1]
nthreads = int(sys.argv[2]) if len(sys.argv) > 2 else 32
ready = threading.Barrier(nthreads + 1)
release = threading.Event()
keep = []
# Three 3 MiB buffers allocated before anything is freed are over glibc's
# (still initial, 128 KiB) mmap threshold: malloc_info's <total type="mmap">
# then has something to count.
big = [bytearray(3 << 20) for _ in range(3)]
libc = ctypes.CDLL(None)


def worker(i):
    libc.prctl(15, b"churn-%d" % (i % 4), 0, 0, 0)  # PR_SET_NAME
    rng = random.Random(i)
    mine = []
    for n in range(3000):
        b = bytearray(rng.randint(64, 64 * 1024))
        z = zlib.compress(bytes(b[:4096]) * 4)
        if n % 20 == 0:
            mine.append(b)
        del z
    keep.append(mine[: 5 + i % 7])
    ready.wait()
    release.wait()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
for t in threads:
    t.start()
ready.wait()
for name in ("status", "smaps", "maps", "environ"):
    with open("/proc/self/" + name, "rb") as src:
        data = src.read()
    with open("%s.%s" % (prefix, name), "wb") as dst:
        dst.write(data)
comms = {}
for tid in os.listdir("/proc/self/task"):
    with open("/proc/self/task/%s/comm" % tid) as f:
        c = f.read().strip()
    comms[c] = comms.get(c, 0) + 1
with open(prefix + ".comm_counts", "w") as f:
    for c, n in sorted(comms.items(), key=lambda kv: (-kv[1], kv[0])):
        f.write("%d %s\n" % (n, c))
if "LD_PRELOAD" not in os.environ:
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    fp = libc.fopen((prefix + ".malloc_info.xml").encode(), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
release.set()
for t in threads:
    t.join()
