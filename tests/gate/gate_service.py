#!/usr/bin/python3
"""A small grpcio service with the rsslab package, for the gate's tests and
bench/gate_rates.sh: rsslab.v1.Load/Handle with the seed's handler and a
byte-bounded cache (bench/peer's State and Load), the package's Control
through serve(), and two changes a memory gate should catch:

  --pool_per_request  seed 002's bug: a new ThreadPoolExecutor per request,
                      kept and never shut down, so its thread outlives the
                      request
  --cache_scale=F     the cache holds F times what each phase asks for (a
                      larger cache: 1.10 is a 10 % larger one)
  --retain_mb=M       keeps M MiB (written, so resident) from the first fill
                      on: a retained buffer of a known size

  gate_service.py --port=PORT --threads=4 --handler=server/handlers/web_worker.py \
      --peer_dir=bench/peer [--pool_per_request] [--cache_scale=1.25] [--retain_mb=4.2]

Prints `rsslab_server ready data=127.0.0.1:PORT control=HOST:PORT pid=PID`
once it serves; SIGTERM stops it.
"""

import argparse
import concurrent.futures
import os
import signal
import sys
import threading

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, default=0)
p.add_argument("--threads", type=int, default=4)
p.add_argument("--handler", required=True)
p.add_argument("--peer_dir", required=True)
p.add_argument("--pool_per_request", action="store_true")
p.add_argument("--cache_scale", type=float, default=1.0)
p.add_argument("--retain_mb", type=float, default=0)
args = p.parse_args()
if not 0 < args.cache_scale <= 100:
    sys.exit("gate_service.py: --cache_scale must be in (0, 100]")
if not 0 <= args.retain_mb <= 4096:
    sys.exit("gate_service.py: --retain_mb must be in [0, 4096]")

import rsslab  # noqa: E402  (before grpc: nothing has started a thread yet)

sys.argv = [sys.argv[0], "--handler=" + args.handler, "--threads=%d" % args.threads]
sys.path.insert(0, args.peer_dir)
sys.path.insert(0, os.path.dirname(os.path.abspath(args.handler)))  # its _knob.py
import grpc  # noqa: E402
import peer_server  # noqa: E402  (generates the stubs)
from proto import load_pb2_grpc  # noqa: E402

state = peer_server.State(argparse.Namespace(handler=args.handler, cache_limit_mb=100))
leaked = []  # --pool_per_request: every pool made, so none is collected
retained = []  # --retain_mb


class Load(peer_server.Load):
    def Handle(self, request, context):
        if not args.pool_per_request:
            return super().Handle(request, context)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        leaked.append(pool)
        return pool.submit(super().Handle, request, context).result()


pool = rsslab.track(concurrent.futures.ThreadPoolExecutor(max_workers=args.threads))
server = grpc.server(pool, interceptors=[rsslab.grpc_interceptor()])
for phase in ("fill", "shrink", "idle", "trim"):
    def on_phase(limit, phase=phase):
        if limit is not None:
            state.cache.resize(int(limit * args.cache_scale))
        if phase == "fill" and args.retain_mb and not retained:
            retained.append(bytearray(b"\x01") * int(args.retain_mb * (1 << 20)))
        state.phase = phase
    rsslab.on_phase(phase, on_phase)
rsslab.cache_stats(state.cache.stats)
load_pb2_grpc.add_LoadServicer_to_server(Load(state), server)
port = server.add_insecure_port("127.0.0.1:%d" % args.port)
server.start()
control = rsslab.serve("127.0.0.1:0")
print("rsslab_server ready data=127.0.0.1:%d control=%s pid=%d" % (port, control, os.getpid()),
      flush=True)

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
stop.wait()
server.stop(1).wait()
os._exit(0)  # the leaked pools' threads would hold exit
