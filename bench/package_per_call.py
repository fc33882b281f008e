#!/usr/bin/python3
"""What the package's own Python adds to each request, without a server:
the interceptor's intercept_service plus its wrapper around a handler, and
a tracked executor's submit wrapper (counted_submit + _marked), each
against the same work without the package. Run with the wheel installed:

  venv/bin/python bench/package_per_call.py [--calls 200000] [--rounds 5]

Prints one line per part: the median over rounds of microseconds per call
(time.process_time, this one thread), bare and with the package. Isolates
the per-request cost that bench/service_cost.sh can only see through a
whole service's noise.
"""

import argparse
import concurrent.futures as cf
import statistics
import sys
import time
import weakref

try:
    import grpc
    import rsslab
    from rsslab import _grpc
except ImportError as e:
    sys.exit("package_per_call.py: %s (needs grpcio and the rsslab wheel)" % e)


def per_call_us(fn, calls):
    t0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if not 1000 <= a.calls <= 10**7 or not 1 <= a.rounds <= 50:
        sys.exit("package_per_call.py: --calls must be 1000..10^7 and --rounds 1..50")
    handler = grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)

    class Details:
        method = "/bench.S/M"

    ic = _grpc.Interceptor()
    cont = lambda d: handler  # noqa: E731 (what grpcio's generic handler returns)
    ex = rsslab.track(cf.ThreadPoolExecutor(max_workers=1))
    ref = weakref.ref(ex)
    work = lambda: None  # noqa: E731
    parts = {
        "interceptor": (lambda: cont(Details).unary_unary(b"x", None),
                        lambda: ic.intercept_service(cont, Details).unary_unary(b"x", None)),
        # The submit side (count) and the worker side (_marked) of one task.
        "tracked submit": (lambda: work(*(), **{}),
                           lambda: (rsslab._native.note_work(),
                                    rsslab._marked(ref, work, (), {}))),
    }
    for name, (bare, package) in parts.items():
        b = statistics.median(per_call_us(bare, a.calls) for _ in range(a.rounds))
        p = statistics.median(per_call_us(package, a.calls) for _ in range(a.rounds))
        print("%-15s bare %.2f us  package %.2f us  added %.2f us per call" % (name, b, p, p - b))
    ex.shutdown()


if __name__ == "__main__":
    main()
