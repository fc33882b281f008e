#!/usr/bin/python3
"""The same Control calls to rsslab_server and to a grpcio service hosting
the rsslab package (serve(transport="grpcio")): both must answer with the
same fields, the same modes and the same errors, since both host the one
ControlOps (control/ops/control_ops.h).

The sequence, to each host, with the automatic trim off and then on, and
under mimalloc (where the free-block purge runs):
- phases fill, shrink, idle, trim, fill (rsslab_ctl --json): the previous
  phase, and the answer's sections;
- a trim in each mode of the one table (common/trim_modes.h): which parts
  ran (global call, per-thread pass, free-block purge) and the trigger;
- a snapshot: the auto-trim state and the sections ControlOps assembles;
- refused requests, sent as raw bytes over grpcio: an unknown trim mode in
  Trim and in SetPhase, an unknown phase, a cache limit over the ceiling
  (status code and message, byte for byte);
- a per-thread trim while every worker is busy for 4 s, with a 1.5 s
  deadline: each host answers within it, its busy workers not reached.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import grpc

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402

CTL = os.path.join(WS, "ctl/rsslab_ctl")
SERVER = os.path.join(WS, "server/rsslab_server")
HANDLER = os.path.join(WS, "tests/handlers/test_handler.py")
WORKERS = 2
BUSY_S = 4.0

# The package's host: two tracked workers that have run some work, a
# callback for every phase (so no_callback stays empty, as the server's),
# the automatic trim as argv[1] says, and Control over grpcio. A line
# "work" on stdin has both workers allocate and free (their heaps change
# since the last trim); "busy" keeps both busy for BUSY_S.
SERVICE = r"""
import concurrent.futures as cf, sys, time
import grpc, rsslab
pool = rsslab.track(cf.ThreadPoolExecutor(max_workers=%d))
list(pool.map(lambda i: bytearray(1 << 16), range(16)))
for phase in ("fill", "shrink", "idle", "trim", "start"):
    rsslab.on_phase(phase, lambda limit: None)
if sys.argv[1] != "off":
    rsslab.auto_trim(sys.argv[1])
print("control=" + rsslab.serve("127.0.0.1:0", transport="grpcio"), flush=True)
for line in sys.stdin:
    if line.startswith("work"):
        list(pool.map(lambda i: [bytearray(300 << 10) for _ in range(8)], range(32)))
        print("worked", flush=True)
    if line.startswith("busy"):
        for _ in range(%d):
            pool.submit(time.sleep, %f)
        time.sleep(0.3)
        print("busy", flush=True)
""" % (WORKERS, WORKERS, BUSY_S)


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_varint(num, n):
    return varint(num << 3) + varint(n)


def field_bytes(num, b):
    return varint((num << 3) | 2) + varint(len(b)) + b


MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"


def preload_env(allocator):
    env = dict(os.environ)
    if allocator == "mimalloc":
        env["LD_PRELOAD"] = MIMALLOC
    return env


class Server:
    def __init__(self, auto, allocator):
        args = [SERVER, "--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                "--threads=%d" % WORKERS, "--handler=" + HANDLER]
        if auto != "off":
            args.append("--auto_trim=" + auto)
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, env=preload_env(allocator))
        line = self.p.stdout.readline()
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        self.data, self.control = fields.get("data", ""), fields.get("control", "")
        self.name = "rsslab_server"
        self.pending = []

    def work(self):
        ch = grpc.insecure_channel(self.data)
        handle = ch.unary_unary("/rsslab.v1.Load/Handle")
        for i in range(32):
            handle(field_varint(2, i) + field_bytes(4, field_bytes(1, b"store")
                                                     + field_bytes(2, b"307200")), timeout=30)
        ch.close()

    def busy(self):
        ch = grpc.insecure_channel(self.data)
        handle = ch.unary_unary("/rsslab.v1.Load/Handle")
        req = field_bytes(4, field_bytes(1, b"sleep_ms") + field_bytes(2, b"%d" % (BUSY_S * 1000)))
        self.pending += [handle.future(req, timeout=30) for _ in range(WORKERS)]
        time.sleep(0.3)

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=30)


class Package:
    def __init__(self, auto, allocator, root):
        env = dict(preload_env(allocator), PYTHONPATH=root)
        self.p = subprocess.Popen(["/usr/bin/python3", "-c", SERVICE, auto], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline()
        self.control = line.strip().split("=", 1)[1] if line.startswith("control=") else ""
        self.name = "the package (grpcio)"

    def work(self):
        self.p.stdin.write("work\n")
        self.p.stdin.flush()
        self.p.stdout.readline()

    def busy(self):
        self.p.stdin.write("busy\n")
        self.p.stdin.flush()
        self.p.stdout.readline()

    def stop(self):
        self.p.stdin.close()
        self.p.terminate()
        self.p.wait(timeout=30)


def ctl(host, *args, timeout="10s"):
    r = subprocess.run([CTL, "--control=" + host.control, "--timeout=" + timeout, "--json"]
                       + list(args), capture_output=True, text=True, timeout=60)
    try:
        return r.returncode, json.loads(r.stdout.strip().splitlines()[-1]), r.stderr
    except (ValueError, IndexError):
        return r.returncode, None, r.stderr


def trim_shape(t):
    """What the mode decides: which parts ran, and the trigger."""
    return {"trigger": t.get("trigger"), "global_call": bool(t.get("call")),
            "per_thread": bool(t.get("per_thread")),
            "purge": "free_block_purge" in t,
            "purge_ran": bool(t.get("free_block_purge", {}).get("ran")),
            "workers": len(t.get("workers", [])),
            "not_reached": sum(1 for w in t.get("workers", []) if not w.get("ran"))}


def snapshot_shape(s):
    """The sections ControlOps assembles, and the auto-trim state."""
    return {"auto_trim": s.get("config", {}).get("auto_trim"), "auto_state": "auto_trim" in s,
            "status": int(s.get("status", {}).get("rss_bytes", 0)) > 0,
            "allocator": s.get("allocator"), "uptime": "uptime_s" in s,
            "trims": int(s.get("trims_total", 0)) > 0, "python": "python" in s}


def run_sequence(host):
    """Every answer, reduced to what both hosts must agree on."""
    out = []
    for phase in ("fill", "shrink", "idle", "trim", "fill"):
        rc, resp, err = ctl(host, "phase", phase)
        keys = sorted(k for k in (resp or {}) if k != "no_callback")
        out.append(("phase " + phase, rc, resp and resp.get("previous_phase"), keys,
                    resp and trim_shape(resp["trim"]) if resp and "trim" in resp else None))
    for mode in ("default", "global", "per_thread", "purge"):
        host.work()  # so every worker has something to release
        rc, resp, err = ctl(host, "trim", "--mode=" + mode)
        out.append(("trim " + mode, rc, resp and trim_shape(resp.get("trim", {})),
                    sorted((resp or {}).keys())))
    rc, resp, err = ctl(host, "snapshot")
    out.append(("snapshot", rc, resp and snapshot_shape(resp)))
    ch = grpc.insecure_channel(host.control)
    refused = [
        ("Trim", field_varint(1, 9)),
        ("SetPhase", field_bytes(1, b"trim") + field_varint(5, 7)),
        ("SetPhase", field_bytes(1, b"bogus")),
        ("SetPhase", field_bytes(1, b"fill") + field_varint(2, 1 << 50)),
    ]
    for method, req in refused:
        try:
            ch.unary_unary("/rsslab.v1.Control/" + method)(req, timeout=10)
            out.append((method, "OK"))
        except grpc.RpcError as e:
            out.append((method, e.code().name, e.details()))
    ch.close()
    return out


def deadline_check(host):
    """A trim longer than the caller's deadline: answered within it."""
    host.busy()
    t0 = time.monotonic()
    rc, resp, err = ctl(host, "trim", "--mode=per_thread", timeout="1500ms")
    took = time.monotonic() - t0
    workers = (resp or {}).get("trim", {}).get("workers", [])
    return rc, took, len(workers), sum(1 for w in workers if not w.get("ran"))


def main():
    root = package_tree.make(WS, TMP)
    # Under mimalloc the modes differ most (the free-block purge runs there).
    rounds = [("off", "glibc"), ("interval", "glibc")]
    if os.path.exists(MIMALLOC):
        rounds.append(("off", "mimalloc"))
    for auto, allocator in rounds:
        answers = {}
        for make in (lambda: Server(auto, allocator), lambda: Package(auto, allocator, root)):
            host = make()
            try:
                check(bool(host.control), "%s (auto trim %s, %s) started"
                      % (host.name, auto, allocator))
                if not host.control:
                    continue
                answers[host.name] = run_sequence(host)
                if (auto, allocator) == ("off", "glibc"):
                    rc, took, workers, missed = deadline_check(host)
                    check(rc == 0 and took < 1.5 and workers == WORKERS and missed == WORKERS,
                          "%s: a per-thread trim with a 1.5 s deadline while %d workers are busy "
                          "for %.0f s answers within it (rc %d, %.2f s, %d workers, %d not "
                          "reached)" % (host.name, WORKERS, BUSY_S, rc, took, workers, missed))
            finally:
                host.stop()
        if len(answers) < 2:
            continue
        server, package = answers["rsslab_server"], answers["the package (grpcio)"]
        for a, b in zip(server, package):
            check(a == b, "%s, auto trim %s, %s: the same answer from both hosts:\n"
                  "      server  %s\n      package %s" % (allocator, auto, a[0], a, b))
        check(len(server) == len(package), "%s, auto trim %s: as many answers" % (allocator, auto))
    package_tree.run_parts("control_parity_test", ())


if __name__ == "__main__":
    main()
