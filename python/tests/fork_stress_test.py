#!/usr/bin/python3
"""//python:fork_stress_test: fork() while the package is busy.

A pre-fork master (gunicorn, uWSGI) may load the package, serve Control and
then fork its workers while other threads are inside the package. Each case
is one real parent process that serves Control and keeps it busy (threads
calling GetSnapshot, SetPhase and release() through the package, a client
process calling GetSnapshot and SetPhase over the wire, the automatic trim's
thread) while its main thread forks FORKS children one after another. Each
child takes a snapshot (the package's locks and its GIL helper work in the
child) and ends, half through the interpreter's exit (the package's stop at
exit), half with os._exit. Every child must have exited within a second of
its fork; one that has not is given five more seconds (on a loaded
machine a child can be late: counted and shown, not failed), then counted
as hung, its stack shown (gdb) and killed: any hang fails. Afterwards the
parent's Control still answers, in the process and over the wire, and the
client saw no error.

Cases: the native transport with and without grpcio imported, the grpcio
transport (which imports it).
"""

import json
import os
import subprocess
import sys
import tempfile

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402
CTL = os.path.join(WS, "ctl/rsslab_ctl")
PY = "/usr/bin/python3"
FORKS = int(os.environ.get("RSSLAB_FORK_STRESS_FORKS", "80"))

PKG = package_tree.make(WS, TMP)

# SetPhaseRequest{phase: "fill", gc: false}: no gc.collect() per call.
SET_FILL = b"\x0a\x04fill\x18\x00"

# Over the wire, in a process of its own: the transport's threads busy.
CLIENT = r"""
import grpc, json, sys, threading
addr, req = sys.argv[1], bytes.fromhex(sys.argv[2])
ch = grpc.insecure_channel(addr)
calls = {"GetSnapshot": b"", "SetPhase": req}
ok = {m: 0 for m in calls}
errors = []
stop = threading.Event()
def run(method):
    fn = ch.unary_unary("/rsslab.v1.Control/" + method)
    while not stop.is_set():
        try:
            fn(calls[method], timeout=10)
            ok[method] += 1
        except grpc.RpcError as e:
            errors.append("%s %s %s" % (method, e.code(), e.details()))
ts = [threading.Thread(target=run, args=(m,)) for m in calls]
[t.start() for t in ts]
print("started", flush=True)
sys.stdin.read()  # EOF: the parent is done forking
stop.set()
[t.join() for t in ts]
print(json.dumps({"ok": ok, "errors": errors[:5], "n_errors": len(errors)}), flush=True)
"""

PARENT = r"""
import json, os, shutil, signal, subprocess, sys, threading, time
from concurrent import futures
tr, with_grpc, n = sys.argv[1], sys.argv[2] == "grpc", int(sys.argv[3])
if with_grpc:
    import grpc  # a second gRPC core in the process (Debian's python3-grpcio)
import rsslab
from rsslab import _rsslab as native
pool = rsslab.track(futures.ThreadPoolExecutor(max_workers=2))
[f.result() for f in [pool.submit(time.sleep, 0.01) for _ in range(4)]]
rsslab.on_phase("fill", lambda limit: None)
addr = rsslab.serve("127.0.0.1:0", transport=tr)
rsslab.auto_trim("interval", interval_s=1, min_spacing_s=1)
SET_FILL = bytes.fromhex(sys.argv[4])

done = threading.Event()
counts = {"GetSnapshot": 0, "SetPhase": 0, "release": 0}
errors = []
def hammer(what):
    while not done.is_set():
        try:
            if what == "release":
                rsslab.release(timeout=0.5)
            else:
                code, msg, _ = native.control_call(what, SET_FILL if what == "SetPhase" else b"",
                                                   None, 10.0)
                if code:
                    errors.append("%s %d %s" % (what, code, msg))
            counts[what] += 1
        except Exception as e:
            errors.append("%s %r" % (what, e))
threads = [threading.Thread(target=hammer, args=(w,), daemon=True) for w in counts]
[t.start() for t in threads]
client = subprocess.Popen([sys.executable, "-c", sys.argv[5], addr, SET_FILL.hex()],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
client.stdout.readline()  # started
time.sleep(0.3)

late = hung = bad = 0
slowest = 0.0
stuck = []
t_start = time.monotonic()
for i in range(n):
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            rsslab.snapshot()
            if i % 2:
                os._exit(0)
        except BaseException as e:
            os.write(2, ("child: %r\n" % e).encode())
            os._exit(3)
        sys.exit(0)  # the interpreter's exit: atexit runs the package's stop
    status = None
    while status is None:
        got, st = os.waitpid(pid, os.WNOHANG)
        waited = time.monotonic() - t0
        if got:
            status = st
        elif waited > 6.0:  # a second, then five more for a busy machine
            # Where it is stuck: the first hang's stack (gdb, when there is
            # one), the kernel's wait channel for the others.
            where = "?"
            try:
                with open("/proc/%d/wchan" % pid) as f:
                    where = f.read().strip() or "?"
            except OSError:
                pass
            if not stuck and shutil.which("gdb"):
                try:
                    g = subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex", "bt 25"],
                                       capture_output=True, text=True, timeout=60)
                    frames = [l.split(" in ", 1)[-1].split(" (")[0] for l in g.stdout.splitlines()
                              if l.startswith("#")]
                    where = " <- ".join(frames) or where
                except subprocess.TimeoutExpired:
                    pass
            stuck.append(where)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            hung += 1
            status = -1
        else:
            time.sleep(0.002)
    slowest = max(slowest, waited)
    if waited > 1.0:
        late += 1
    if status != -1 and status != 0:
        bad += 1
forking_s = time.monotonic() - t_start
done.set()
[t.join(15) for t in threads]
out, _ = client.communicate(timeout=30)
code, msg, _ = native.control_call("GetSnapshot", b"", None, 10.0)
r = subprocess.run([os.environ["RSSLAB_CTL"], "--control=" + addr, "--timeout=10s", "snapshot"],
                   capture_output=True, text=True, timeout=30)
print(json.dumps({
    "forks": n, "late": late, "hung": hung, "bad_status": bad, "stuck_in": stuck[:5],
    "slowest_s": round(slowest, 3), "forking_s": round(forking_s, 1),
    "in_flight": counts, "errors": errors[:5], "n_errors": len(errors),
    "client": json.loads(out.strip().splitlines()[-1]) if out.strip() else None,
    "control_after": code, "ctl_after": r.returncode,
}))
"""


def env():
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("MALLOC_", "GLIBC_TUNABLES", "LD_PRELOAD"))}
    e.update({"PYTHONPATH": PKG, "RSSLAB_CTL": CTL, "XDG_RUNTIME_DIR": TMP})
    return e


def one_case(tr, grpc_imported):
    label = "%s transport, grpcio %s" % (tr, "imported" if grpc_imported else "not imported")
    r = subprocess.run([PY, "-c", PARENT, tr, "grpc" if grpc_imported else "nogrpc", str(FORKS),
                        SET_FILL.hex(), CLIENT], capture_output=True, text=True, env=env(),
                       cwd=TMP, timeout=60 + 8 * FORKS)
    try:
        out = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        check(False, "%s: the forking parent reported (exit %d): %s"
              % (label, r.returncode, r.stderr.strip()[-500:]))
        return
    print("      %s: %s" % (label, json.dumps(out)), flush=True)
    check(out["hung"] == 0,
          "%s: %d forks with Control calls and a release in flight: %d children hung in "
          "fork or at exit (killed after 6 s; stuck in %s)"
          % (label, out["forks"], out["hung"], out["stuck_in"]))
    print("      %s: %d of %d children took over a second (a loaded machine), slowest "
          "%.2f s" % (label, out["late"] - out["hung"], out["forks"], out["slowest_s"]))
    check(out["bad_status"] == 0, "%s: every child exited 0 (%d did not) %s"
          % (label, out["bad_status"], r.stderr.strip()[-300:]))
    inflight = out["in_flight"]
    client = out["client"] or {"ok": {}, "n_errors": -1, "errors": []}
    check(min(inflight.values()) > 0 and min(client["ok"].values() or [0]) > 0,
          "%s: calls were in flight while forking: in the process %s, over the wire %s"
          % (label, inflight, client["ok"]))
    check(out["n_errors"] == 0 and client["n_errors"] == 0,
          "%s: no call failed meanwhile: %s %s" % (label, out["errors"], client["errors"]))
    check(out["control_after"] == 0 and out["ctl_after"] == 0,
          "%s: the parent's Control answers after the forks (in the process: %d, "
          "rsslab_ctl: %d)" % (label, out["control_after"], out["ctl_after"]))


def fork_stress():
    for tr, grpc_imported in (("native", False), ("native", True), ("grpcio", True)):
        one_case(tr, grpc_imported)


def main():
    package_tree.run_parts("fork_stress_test", (fork_stress,))


if __name__ == "__main__":
    main()
