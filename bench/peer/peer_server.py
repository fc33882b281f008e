#!/usr/bin/python3
"""The peer a Python team would write instead of rsslab_server.

A grpcio server (Debian's python3-grpcio) with a ThreadPoolExecutor of N
workers, serving the same proto/ contract (Load + the parts of Control the
seed scenario uses) with the same handler file and the same cache semantics
(a byte-bounded LRU of Python objects, evicting at once when resized down),
implemented in Python. Used only by bench/vs_python_peer.sh.

  peer_server.py --threads=4 --handler=server/handlers/web_worker.py \
      --listen=127.0.0.1:0 --control_listen=127.0.0.1:0

Prints `rsslab_server ready data=HOST:PORT control=HOST:PORT pid=PID` like
the real server, so the same scripts drive both.
"""

import argparse
import concurrent.futures
import gc
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stubs():
    """Generates Python stubs from proto/ with Debian's protoc.

    python3-grpc-tools' bundled protoc (3.x of 2018) rejects proto3
    `optional`; /usr/bin/protoc with grpc_python_plugin does not.
    """
    out = tempfile.mkdtemp(prefix="rsslab-peer-stubs-")
    protos = ["proto/load.proto", "proto/snapshot.proto", "proto/control.proto"]
    subprocess.run(["/usr/bin/protoc", "-I", ROOT, "--python_out=" + out, "--grpc_out=" + out,
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin"]
                   + [os.path.join(ROOT, p) for p in protos], check=True)
    sys.path.insert(0, out)


_stubs()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402
from py_lru import Cache  # noqa: E402
from proto import control_pb2, control_pb2_grpc, load_pb2, load_pb2_grpc, snapshot_pb2  # noqa: E402


def _status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


class State:
    def __init__(self, args):
        spec = importlib.util.spec_from_file_location("peer_handler", args.handler)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.handle = mod.handle
        self.cache = Cache(args.cache_limit_mb << 20)
        self.phase = "start"
        self.served = 0
        self.errors = 0
        self.lock = threading.Lock()
        self.start = time.time()

    def snapshot(self, run_gc):
        if run_gc:
            gc.collect()
        st = _status()
        s = snapshot_pb2.Snapshot()
        s.unix_nanos = time.time_ns()
        s.phase = self.phase
        s.uptime_s = time.time() - self.start
        s.requests_served = self.served
        s.handler_errors = self.errors
        s.pid = os.getpid()
        s.status.rss_bytes = int(st["VmRSS"][0]) * 1024
        s.status.hwm_bytes = int(st["VmHWM"][0]) * 1024
        s.status.anon_bytes = int(st["RssAnon"][0]) * 1024
        s.status.threads = int(st["Threads"][0])
        s.allocator = "glibc"
        c = self.cache.stats()
        s.cache.cache_entries = c["entries"]
        s.cache.cache_bytes = c["bytes"]
        s.cache.cache_limit_bytes = c["limit_bytes"]
        s.cache.evictions = c["evictions"]
        s.cache.puts = c["puts"]
        return s


class Load(load_pb2_grpc.LoadServicer):
    def __init__(self, state):
        self.s = state

    def Handle(self, request, context):
        s = self.s
        if s.phase == "idle":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "idle phase")
        req = {"id": request.id, "seed": request.seed, "payload": request.payload,
               "params": dict(request.params), "return_body": request.return_body,
               "worker": threading.get_ident() % 1000}
        try:
            r = s.handle(req, s.cache)
        except Exception as e:  # noqa: BLE001 - the server keeps serving
            with s.lock:
                s.served += 1
                s.errors += 1
            context.abort(grpc.StatusCode.INTERNAL, "%s: %s" % (type(e).__name__, e))
        with s.lock:
            s.served += 1
        resp = load_pb2.HandleResponse(id=request.id)
        if isinstance(r, dict):
            body = r.get("body")
            resp.body_size = r.get("body_size", len(body) if body is not None else 0)
            resp.stored = bool(r.get("stored"))
            if body is not None and request.return_body:
                resp.body = body
        elif isinstance(r, bytes):
            resp.body_size = len(r)
        return resp


class Control(control_pb2_grpc.ControlServicer):
    def __init__(self, state):
        self.s = state

    def SetPhase(self, request, context):
        s = self.s
        if request.phase not in ("fill", "shrink", "idle", "trim", "start"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown phase")
        limit = request.cache_limit_bytes if request.HasField("cache_limit_bytes") else \
            {"fill": 100 << 20, "shrink": 10 << 20}.get(request.phase)
        if limit is not None:
            s.cache.resize(limit)
        prev, s.phase = s.phase, request.phase
        resp = control_pb2.SetPhaseResponse(previous_phase=prev)
        run_gc = request.gc if request.HasField("gc") else True
        if request.phase == "trim":
            # What a Python team does after a burst (seed 000 / 002 advice).
            resp.before.CopyFrom(s.snapshot(run_gc))
            import ctypes
            t0 = time.perf_counter()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            resp.trim.trim_duration_us = int((time.perf_counter() - t0) * 1e6)
            resp.trim.call = "malloc_trim(0)"
            run_gc = False
        resp.snapshot.CopyFrom(s.snapshot(run_gc))
        return resp

    def GetSnapshot(self, request, context):
        return self.s.snapshot(request.gc)

    def Trim(self, request, context):
        import ctypes
        t0 = time.perf_counter()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        resp = control_pb2.TrimResponse()
        resp.trim.trim_duration_us = int((time.perf_counter() - t0) * 1e6)
        resp.after.CopyFrom(self.s.snapshot(False))
        return resp


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--handler", default=os.path.join(ROOT, "server/handlers/web_worker.py"))
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--control_listen", default="127.0.0.1:0")
    p.add_argument("--cache_limit_mb", type=int, default=100)
    args = p.parse_args()
    state = State(args)
    data = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=args.threads))
    load_pb2_grpc.add_LoadServicer_to_server(Load(state), data)
    dport = data.add_insecure_port(args.listen)
    ctl = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    control_pb2_grpc.add_ControlServicer_to_server(Control(state), ctl)
    cport = ctl.add_insecure_port(args.control_listen)
    data.start()
    ctl.start()
    host = args.listen.rsplit(":", 1)[0]
    chost = args.control_listen.rsplit(":", 1)[0]
    print("rsslab_server ready data=%s:%d control=%s:%d pid=%d" % (host, dport, chost, cport,
                                                                    os.getpid()), flush=True)
    stop = threading.Event()
    import signal
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    stop.wait()
    data.stop(5).wait()
    ctl.stop(1).wait()


if __name__ == "__main__":
    main()
