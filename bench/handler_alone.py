#!/usr/bin/python3
"""A handler called in a loop, without any server: what the handler itself
costs per request in the interpreter a Python service would run
(Debian's /usr/bin/python3), for bench/seed_overhead.sh.

The request dicts have the fields the server builds (id, seed, empty
payload, params, return_body False, worker 0); the seed is the id, from 1
upwards, where rsslab_loadgen sends SplitMix64(--seed + index). The seed
handlers only seed random.Random with it and key the cache by it, so any
distinct seeds give the same size distribution and the same cache puts. The cache is the Python stand-in of the server's cache
(bench/peer/py_lru.py, same API and limits): the real one, rsslab.cache, is
a C++ module that exists only inside rsslab_server.

  handler_alone.py --handler server/handlers/web_worker.py --requests 20000 \\
      --warmup 1000 --param dict_shape=flat

Prints one line: `requests=N wall_s=W cpu_s=C rps=R cpu_us_per_req=U`.
CPU is this process's user+system time (os.times()) over the measured loop.
"""

import argparse
import importlib.util
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer"))
from py_lru import Cache  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--handler", required=True)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--cache_limit_mb", type=int, default=100)
    ap.add_argument("--param", action="append", default=[], help="k=v handler param")
    a = ap.parse_args()
    if not 0 < a.requests <= 10**7 or not 0 <= a.warmup <= 10**7:
        sys.exit("handler_alone.py: --requests must be 1..10^7 and --warmup 0..10^7")
    params = {}
    for p in a.param:
        k, sep, v = p.partition("=")
        if not sep or not k:
            sys.exit("handler_alone.py: --param takes k=v, got %r" % p)
        params[k] = v
    sys.path.insert(0, os.path.dirname(os.path.abspath(a.handler)))
    spec = importlib.util.spec_from_file_location("rsslab_handler", a.handler)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    handle = mod.handle
    cache = Cache(a.cache_limit_mb << 20)

    def run(first, n):
        for i in range(first, first + n):
            handle({"id": i, "seed": i, "payload": b"", "params": dict(params),
                    "return_body": False, "worker": 0}, cache)

    # The warm-up uses seeds past the measured ones, as the loadgen's does.
    run(10**9, a.warmup)
    t0, c0 = time.perf_counter(), os.times()
    run(1, a.requests)
    t1, c1 = time.perf_counter(), os.times()
    wall = t1 - t0
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    print("requests=%d wall_s=%.3f cpu_s=%.3f rps=%.1f cpu_us_per_req=%.1f" % (
        a.requests, wall, cpu, a.requests / wall, cpu * 1e6 / a.requests))


if __name__ == "__main__":
    main()
