#!/usr/bin/python3
"""reference_worker: seed 000's workload in a plain /usr/bin/python3, no C++
host: what a Python service with the same handler, cache and threads holds,
for tools/truth/truth.py to compare rsslab_server against.

N threads take requests from a queue.Queue and call the same handle() the
server calls (server/handlers/web_worker.py by default, loaded as the server
loads it: module "rsslab_handler", its directory first on sys.path), with
the server's cache semantics (bench/peer/py_lru.py, the Python stand-in of
the server's cache). Requests are what rsslab_loadgen sends in a seed
scenario's load step: ids 0..N-1, each step starting again at 0, seed
SplitMix64(--seed + id), no params, an empty payload. The main thread feeds
the queue, at most --in_flight requests ahead (the loadgen's --concurrency,
64 by default).

Phases, as the seed scenario runs them in the server:
  warm    --warm_requests requests at cache limit 0 (every put refused): the
          threads and the allocator have taken their first memory, as the
          server's gRPC threads and buffers have in its start record; then
          the allocator's release on every thread and once for the process
          (alloc_stats.release_begin/_thread/_end), as the server's trim
  start   after import, threads started, warmed
  fill    cache limit --fill_limit_mb, --fill_requests requests
  shrink  cache limit --shrink_limit_mb (evicts at once), then
          --shrink_requests requests (default half the fill's)
  idle    --idle_s seconds with nothing to do
After each, on the control thread (one long-lived thread for the phase-end
jobs, as the server's Python control thread; it also does the shrink's
resize), gc.collect(), VmRSS from /proc/self/status and the allocator's own
statistics (alloc_stats.py): one JSON line on stdout per phase ({"phase",
"rss_bytes", "allocator_stats", "cache", ...}), after a first "config" line.
With --wait_go it prints {"ready": PID} once its threads run and waits for
one line on stdin before the first request, so a launcher can check
/proc/PID first.

  reference_worker.py --threads=16 --fill_requests=96000 --idle_s=12
"""

import argparse
import gc
import importlib.util
import json
import os
import queue
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "peer"))
from py_lru import Cache  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import alloc_stats  # noqa: E402

MIB = 1 << 20
MASK = (1 << 64) - 1


def splitmix64(x):
    """rsslab_loadgen's per-request seed (loadgen/engine.cc, SplitMix64)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def vm_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def load_handler(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)) or ".")
    spec = importlib.util.spec_from_file_location("rsslab_handler", path)
    if spec is None:
        raise ValueError("cannot load handler %s: not a Python file" % path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not callable(getattr(mod, "handle", None)):
        raise ValueError("handler %s has no callable handle(request, cache)" % path)
    return mod.handle


class Workers:
    """N threads calling handle() on the requests put into one queue."""

    def __init__(self, handle, cache, threads, in_flight):
        self.handle, self.cache = handle, cache
        self.q = queue.Queue(maxsize=in_flight)
        self.errors = []
        self.threads = [threading.Thread(target=self._run, args=(w,), name="ref-w%d" % w,
                                         daemon=True) for w in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self, worker):
        while True:
            item = self.q.get()
            try:
                if item is None:
                    return
                if callable(item):  # release_each's job: one per thread
                    item()
                    continue
                idx, seed = item
                self.handle({"id": idx, "seed": splitmix64(seed + idx), "payload": b"",
                             "params": {}, "return_body": False, "worker": worker}, self.cache)
            except Exception as e:  # a failed request fails the run, as the loadgen's first error
                self.errors.append("%s: %s" % (type(e).__name__, e))
            finally:
                self.q.task_done()

    def release_each(self, release):
        """release() on every worker thread, each exactly once: a thread that
        took its job waits at the barrier until every thread has taken one."""
        barrier = threading.Barrier(len(self.threads) + 1)

        def job():
            release()
            barrier.wait()

        for _ in self.threads:
            self.q.put(job)
        barrier.wait()
        self.q.join()

    def load(self, requests, seed):
        for idx in range(requests):
            self.q.put((idx, seed))
        self.q.join()
        if self.errors:
            raise RuntimeError("%d requests failed, first: %s" % (len(self.errors), self.errors[0]))


class Control:
    """One long-lived thread that runs the phase-end jobs, as the server's
    Python control thread does: the shrink's resize (so the evicted bodies
    are freed by that thread, oldest first, as the server releases what its
    C++ cache evicted) and each record's gc.collect() and readings. Without
    it the main thread, which also feeds the queue, freed them."""

    def __init__(self):
        self.jobs = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="ref-control", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            fn, done, box = self.jobs.get()
            try:
                box.append(fn())
            except Exception as e:  # noqa: BLE001 -- handed back to the caller
                box.append(e)
            done.set()

    def run(self, fn):
        done, box = threading.Event(), []
        self.jobs.put((fn, done, box))
        done.wait()
        if isinstance(box[0], Exception):
            raise box[0]
        return box[0]


class Args(argparse.ArgumentParser):
    def error(self, message):
        print("reference_worker.py: %s" % message, file=sys.stderr)
        sys.exit(2)


def parse(argv):
    ap = Args(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--fill_requests", type=int, default=96000)
    ap.add_argument("--shrink_requests", type=int, default=-1,
                    help="default: half of --fill_requests")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiplies both request counts, as the loadgen's --scale")
    ap.add_argument("--fill_limit_mb", type=float, default=100.0)
    ap.add_argument("--shrink_limit_mb", type=float, default=10.0)
    ap.add_argument("--idle_s", type=float, default=12.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warm_requests", type=int, default=0)
    ap.add_argument("--in_flight", type=int, default=64)
    ap.add_argument("--handler", default=os.path.join(ROOT, "server/handlers/web_worker.py"))
    ap.add_argument("--wait_go", action="store_true")
    a = ap.parse_args(argv)
    if a.shrink_requests < 0:
        a.shrink_requests = a.fill_requests // 2
    checks = [
        (1 <= a.threads <= 1024, "--threads must be 1..1024"),
        (0 < a.scale <= 100, "--scale must be in (0, 100]"),
        (1 <= a.fill_requests <= 10**8 and 0 <= a.shrink_requests <= 10**8,
         "--fill_requests must be 1..10^8 and --shrink_requests 0..10^8"),
        (0 < a.fill_limit_mb <= 1 << 20 and 0 <= a.shrink_limit_mb <= 1 << 20,
         "--fill_limit_mb must be in (0, 2^20] and --shrink_limit_mb in [0, 2^20]"),
        (0 <= a.idle_s <= 86400, "--idle_s must be 0..86400"),
        (0 <= a.seed <= MASK, "--seed must be 0..2^64-1"),
        (0 <= a.warm_requests <= 10**5, "--warm_requests must be 0..10^5"),
        (1 <= a.in_flight <= 100000, "--in_flight must be 1..100000"),
        (os.path.isfile(a.handler), "--handler %s: no such file" % a.handler),
    ]
    for ok, message in checks:
        if not ok:
            ap.error(message)
    # The loadgen rounds a scaled count to the nearest integer, at least 1.
    a.fill_requests = max(1, int(round(a.fill_requests * a.scale)))
    if a.shrink_requests:
        a.shrink_requests = max(1, int(round(a.shrink_requests * a.scale)))
    return a


def main(argv):
    a = parse(argv)
    try:
        handle = load_handler(a.handler)
    except Exception as e:
        sys.exit("reference_worker.py: %s: %s" % (type(e).__name__, e))
    t0 = time.monotonic()
    cache = Cache(0 if a.warm_requests else int(a.fill_limit_mb * MIB))
    workers = Workers(handle, cache, a.threads, a.in_flight)
    control = Control()
    allocator = alloc_stats.loaded_allocator()

    def reading():
        gc.collect()
        return {"rss_bytes": vm_rss(), "allocator_stats": alloc_stats.read(allocator),
                "cache": cache.stats()}

    def emit(phase):
        rec = {"phase": phase, "t_s": round(time.monotonic() - t0, 3)}
        rec.update(control.run(reading))
        print(json.dumps(rec), flush=True)

    print(json.dumps({"config": {
        "pid": os.getpid(), "python": sys.version.split()[0], "executable": sys.executable,
        "handler": os.path.abspath(a.handler), "threads": a.threads,
        "fill_requests": a.fill_requests, "shrink_requests": a.shrink_requests,
        "fill_limit_bytes": int(a.fill_limit_mb * MIB),
        "shrink_limit_bytes": int(a.shrink_limit_mb * MIB), "idle_s": a.idle_s,
        "seed": a.seed, "in_flight": a.in_flight, "warm_requests": a.warm_requests}}), flush=True)
    if a.wait_go:
        print(json.dumps({"ready": os.getpid()}), flush=True)
        sys.stdin.readline()
    try:
        if a.warm_requests:
            workers.load(a.warm_requests, a.seed)
            # The start record after a release, as the server's (truth.py's
            # scenario trims before it): what the warm-up freed is not in it.
            saved = control.run(lambda: alloc_stats.release_begin(allocator))
            workers.release_each(lambda: alloc_stats.release_thread(allocator))
            control.run(lambda: alloc_stats.release_end(allocator, saved))
            control.run(lambda: cache.resize(int(a.fill_limit_mb * MIB)))
        emit("start")
        workers.load(a.fill_requests, a.seed)
        emit("fill")
        control.run(lambda: cache.resize(int(a.shrink_limit_mb * MIB)))
        workers.load(a.shrink_requests, a.seed)
        emit("shrink")
    except RuntimeError as e:
        sys.exit("reference_worker.py: %s" % e)
    time.sleep(a.idle_s)
    emit("idle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
