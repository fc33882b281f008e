#!/usr/bin/python3
"""A grpcio service with the rsslab package, for //python:package_test.

Debian's python3-grpcio, a ThreadPoolExecutor of --workers, rsslab.v1.Load/
Handle in Python with the seed's handler and a byte-bounded dict cache (the
bench/peer/ pieces: peer_server.State/Load, py_lru.Cache), and the package
added the documented way. Prints one JSON line with rsslab.allocator() (and
cap_arenas' answer) and then the ready line the loadgen scripts expect:

  rsslab_server ready data=HOST:PORT control=HOST:PORT pid=PID

  grpc_service.py --workers=16 [--cap_arenas=2] [--auto_trim=after_burst]
                  [--set_env_after_start=MALLOC_ARENA_MAX=2] [--serve_transport=native]
                  [--serve_on_server]
"""

import argparse
import json
import os
import signal
import sys
import threading

p = argparse.ArgumentParser()
p.add_argument("--workers", type=int, default=16)
p.add_argument("--cap_arenas", type=int, default=0)
p.add_argument("--auto_trim", default="")
p.add_argument("--set_env_after_start", default="")
p.add_argument("--no_package", action="store_true",
               help="bench/service_fix.sh (a), (b): the package loaded but not used")
p.add_argument("--bare", action="store_true",
               help="bench/service_idle.sh: the service without the package at all (no "
                    "import, no Control; the ready line has no control=)")
p.add_argument("--metrics", action="store_true", help="also serve /metrics (serve(metrics=))")
p.add_argument("--no_serve", action="store_true",
               help="bench/service_idle.sh: the package without serve() (no Control service; "
                    "the ready line has control= empty)")
p.add_argument("--serve_transport", default="auto", choices=["auto", "grpcio", "native"],
               help="serve(transport=); auto is grpcio here (grpc is imported first)")
p.add_argument("--serve_on_server", action="store_true",
               help="serve(server=): Control on the service's own server and port")
p.add_argument("--empty_second_server", action="store_true",
               help="bench/service_cost.sh: a grpc.server beside the service that serves "
                    "nothing (what a second server costs by itself)")
p.add_argument("--timer_trim_s", type=float, default=0,
               help="the seed's advice as people apply it: malloc_trim(0) from a timer thread")
p.add_argument("--timer_trim_log", default="", help="append each timer trim's Unix time here")
p.add_argument("--collect_serving_s", type=float, default=0,
               help="bench/service_residue.sh, mimalloc only: at most every N s, collect the "
                    "heap of each thread that polls a grpc.server (grpcio's serving loops, "
                    "which no release reaches), with the decommit delay at 0")
p.add_argument("--handler", required=True)
p.add_argument("--peer_dir", required=True, help="bench/peer")
args = p.parse_args()

if not args.bare:
    import rsslab  # noqa: E402  (before grpc: nothing has started a thread yet)

info = {}
if args.cap_arenas:
    info["cap_arenas"] = rsslab.cap_arenas(args.cap_arenas)
if args.set_env_after_start:
    k, _, v = args.set_env_after_start.partition("=")
    os.environ[k] = v  # what seed 002 did: too late to matter

sys.argv = [sys.argv[0], "--handler=" + args.handler, "--threads=%d" % args.workers]
sys.path.insert(0, args.peer_dir)
sys.path.insert(0, os.path.dirname(os.path.abspath(args.handler)))  # its _knob.py
import concurrent.futures  # noqa: E402
import grpc  # noqa: E402
import peer_server  # noqa: E402  (generates the stubs, imports grpc)
from proto import load_pb2_grpc  # noqa: E402

def collect_serving_threads(every_s):
    """A diagnostic, not a fix: grpcio's serving loop (grpc._server._serve)
    reads time.time() each time it wakes (an event, or its 1 s poll
    timeout). Behind that clock, on its own thread, mimalloc's heap is
    collected (mi_collect(true), the decommit delay held at 0) at most every
    `every_s` seconds: what is left after that is not in these threads."""
    import ctypes
    import time as real_time
    import grpc._server as grpc_server

    mi = ctypes.CDLL(None)
    if not hasattr(mi, "mi_collect"):
        sys.exit("grpc_service.py: --collect_serving_s needs mimalloc preloaded")
    delay_option = 15  # mi_option_decommit_delay in 2.0.x, purge_delay in 2.1 and 3
    last = {}

    class Clock:
        def time(self):
            now = real_time.time()
            tid = threading.get_native_id()
            if now - last.get(tid, 0.0) >= every_s:
                last[tid] = now
                before = mi.mi_option_get(delay_option)
                if before > 0:  # 0: a release holds it there now; leave it to restore
                    mi.mi_option_set(delay_option, 0)
                mi.mi_collect(True)
                if before > 0:
                    mi.mi_option_set(delay_option, before)
            return now

    grpc_server.time = Clock()


state = peer_server.State(argparse.Namespace(handler=args.handler, cache_limit_mb=100))

# The package in five lines.
pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.workers)
if args.bare:
    server = grpc.server(pool)
    load_pb2_grpc.add_LoadServicer_to_server(peer_server.Load(state), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("{}", flush=True)
    print("rsslab_server ready data=127.0.0.1:%d pid=%d" % (port, os.getpid()), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    stop.wait()
    server.stop(2).wait()
    sys.exit(0)
if args.no_package:
    server = grpc.server(pool)
else:
    server = grpc.server(rsslab.track(pool), interceptors=[rsslab.grpc_interceptor()])
if args.timer_trim_s > 0:
    import ctypes
    import time

    def timer_trim():
        libc = ctypes.CDLL("libc.so.6")
        while True:
            time.sleep(args.timer_trim_s)
            libc.malloc_trim(0)
            if args.timer_trim_log:
                with open(args.timer_trim_log, "a") as f:
                    f.write("%.3f\n" % time.time())
    threading.Thread(target=timer_trim, name="timer-trim", daemon=True).start()
for phase in ("fill", "shrink", "idle", "trim"):
    def on_phase(limit, phase=phase):
        if limit is not None:
            state.cache.resize(limit)
        state.phase = phase
    rsslab.on_phase(phase, on_phase)
rsslab.cache_stats(state.cache.stats)
if args.auto_trim:
    rsslab.auto_trim(args.auto_trim)

if args.collect_serving_s > 0:
    collect_serving_threads(args.collect_serving_s)
load_pb2_grpc.add_LoadServicer_to_server(peer_server.Load(state), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
if args.empty_second_server:
    empty = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    empty.add_insecure_port("127.0.0.1:0")
    empty.start()
if args.no_serve:
    control = ""
elif args.serve_on_server:
    control = rsslab.serve("127.0.0.1:%d" % port, server=server,
                           metrics="127.0.0.1:0" if args.metrics else None)
else:
    control = rsslab.serve("127.0.0.1:0", metrics="127.0.0.1:0" if args.metrics else None,
                           transport=args.serve_transport)
info["allocator"] = rsslab.allocator()
info["transport"] = rsslab.control_transport()
print(json.dumps(info), flush=True)
print("rsslab_server ready data=127.0.0.1:%d control=%s pid=%d" % (port, control, os.getpid()),
      flush=True)

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
# bench/service_residue.sh: pymalloc's arenas and blocks, on stderr.
signal.signal(signal.SIGUSR1, lambda *a: sys._debugmallocstats())
stop.wait()
server.stop(2).wait()
