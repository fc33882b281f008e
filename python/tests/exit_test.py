#!/usr/bin/python3
"""//python:exit_test: a worker that serves Control ends cleanly, however it ends.

Each case is a real process serving Control (both transports) while a
client process keeps calls in flight (GetSnapshot, SetPhase, a watch
stream); then the process ends one way:

- uWSGI (Debian's uwsgi-core and its python3 plugin), `die-on-term`, SIGTERM
  to the master: each worker is ended by exit() from uWSGI's signal
  handler, which runs C++ static destructors and then Py_FinalizeEx (the
  package's stop at exit) from within that exit();
- exit() (Python's, SystemExit) from a SIGTERM handler;
- the C library's exit() from a SIGTERM handler (Python's atexit never
  runs; static destructors do, with the Control threads alive);
- the C library's exit() on a thread other than the main one;
- sys.exit() in the last thread still running after the main one returned;
- os._exit().

Each must end with status 0 (no signal death, no core), nothing on stderr
saying it crashed, within a few seconds.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402
PY = "/usr/bin/python3"
TRANSPORTS = ("native", "grpcio")
# What a crash leaves in the output: a signal report (uWSGI's, Python's
# faulthandler, the C++ runtime's), never printed by a clean exit.
CRASH_WORDS = ("Segmentation", "Fatal Python error", "terminate called", "Aborted",
               "core dumped", "got signal", "killed by signal", "Traceback")
EXIT_WITHIN_S = 5.0

PKG = package_tree.make(WS, TMP)


def env():
    return package_tree.service_env(PKG, TMP, PYTHONFAULTHANDLER="1")


# Keeps Control busy from a process of its own: GetSnapshot and SetPhase in
# a loop, one watch stream; prints "calling" once each has answered once.
# Errors are expected (the service goes away), so none is reported.
CLIENT = r"""
import grpc, sys, threading
addr = sys.argv[1]
ch = grpc.insecure_channel(addr)
answered = {}
def unary(method, req):
    fn = ch.unary_unary("/rsslab.v1.Control/" + method)
    while True:
        try:
            fn(req, timeout=5)
            answered[method] = True
        except grpc.RpcError:
            pass
def watch():
    fn = ch.unary_stream("/rsslab.v1.Control/WatchSnapshots")
    while True:
        try:
            for _ in fn(b"\x08\x64", timeout=30):  # interval_ms: 100
                answered["WatchSnapshots"] = True
        except grpc.RpcError:
            pass
for t in (threading.Thread(target=unary, args=("GetSnapshot", b""), daemon=True),
          threading.Thread(target=unary, args=("SetPhase", b"\x0a\x04fill\x18\x00"), daemon=True),
          threading.Thread(target=watch, daemon=True)):
    t.start()
import time
deadline = time.monotonic() + 20
while len(answered) < 3 and time.monotonic() < deadline:
    time.sleep(0.02)
print("calling" if len(answered) == 3 else "not calling %s" % sorted(answered), flush=True)
sys.stdin.read()
"""

WORKER = r"""
import ctypes, os, signal, sys, threading, time
tr, how = sys.argv[1], sys.argv[2]
if tr == "grpcio":
    import grpc
import rsslab
rsslab.on_phase("fill", lambda limit: time.sleep(0.02))
addr = rsslab.serve("127.0.0.1:0", transport=tr)
libc = ctypes.CDLL(None)
if how == "exit_in_handler":
    signal.signal(signal.SIGTERM, lambda s, f: exit(0))
elif how == "c_exit_in_handler":
    signal.signal(signal.SIGTERM, lambda s, f: libc.exit(0))
print(addr, flush=True)
sys.stdin.readline()  # the client's calls are in flight
if how == "c_exit_in_thread":
    threading.Thread(target=libc.exit, args=(0,)).start()
    time.sleep(60)
elif how == "sys_exit_in_thread":
    def last():
        time.sleep(0.3)  # after the main thread has returned
        sys.exit(0)
    threading.Thread(target=last).start()
elif how == "os_exit":
    os._exit(0)
else:
    time.sleep(60)  # SIGTERM ends it
"""

WAYS = ("exit_in_handler", "c_exit_in_handler", "c_exit_in_thread", "sys_exit_in_thread",
        "os_exit")


def start_client(addr):
    c = subprocess.Popen([PY, "-c", CLIENT, addr], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env(), cwd=TMP)
    return c, c.stdout.readline().strip()


def end_client(c):
    c.kill()
    c.wait()


def plain_checks():
    for tr in TRANSPORTS:
        for how in WAYS:
            label = "%s transport, %s" % (tr, how)
            p = subprocess.Popen([PY, "-c", WORKER, tr, how], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env(), cwd=TMP)
            addr = p.stdout.readline().strip()
            client, calling = start_client(addr) if addr else (None, "no address")
            t0 = time.monotonic()
            try:
                p.stdin.write("go\n")
                p.stdin.flush()
                if how.endswith("in_handler"):
                    time.sleep(0.2)
                    p.send_signal(signal.SIGTERM)
                t0 = time.monotonic()
                out, err = p.communicate(timeout=EXIT_WITHIN_S)
                took = time.monotonic() - t0
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                took = -1
            finally:
                if client:
                    end_client(client)
            crash = [w for w in CRASH_WORDS if w in err]
            check(calling == "calling",
                  "%s: the client's calls were in flight (%s)" % (label, calling))
            check(p.returncode == 0 and not crash and 0 <= took,
                  "%s: exit status %d, %s, ended in %.1f s: %s"
                  % (label, p.returncode, "crash reported %s" % crash if crash else "no crash",
                     took, err.strip()[-400:]))


UWSGI_APP = r'''
import os
import rsslab
import uwsgi
def _serve():
    rsslab.serve("127.0.0.1:0", name="exit-%s" % os.environ["TR"], transport=os.environ["TR"])
uwsgi.post_fork_hook = _serve
def application(env, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"%d" % os.getpid()]
'''


def worker_addresses(master, run, want, timeout=20):
    deadline = time.monotonic() + timeout
    found = {}
    while time.monotonic() < deadline and len(found) < want:
        try:
            with open("/proc/%d/task/%d/children" % (master, master)) as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            pids = []
        for pid in pids:
            try:
                with open(os.path.join(run, "rsslab-control-%d.addr" % pid)) as f:
                    found[pid] = f.readline().strip()
            except OSError:
                pass
        time.sleep(0.1)
    return found


def uwsgi_checks():
    if not shutil.which("uwsgi"):
        check(False, "uWSGI: Debian's uwsgi-core is installed (./rsslab setup)")
        return
    for tr in TRANSPORTS:
        label = "uWSGI, %s transport, die-on-term + SIGTERM" % tr
        d = os.path.join(TMP, "uwsgi-" + tr)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "app.py"), "w") as f:
            f.write(UWSGI_APP)
        e = env()
        e.update({"TR": tr, "XDG_RUNTIME_DIR": d})
        port = package_tree.free_port()
        log = open(os.path.join(d, "uwsgi.log"), "w+")
        p = subprocess.Popen(["uwsgi", "--plugin", "python3", "--master", "--processes", "2",
                              "--threads", "4", "--http-socket", "127.0.0.1:%d" % port,
                              "--wsgi-file", "app.py", "--die-on-term"],
                             cwd=d, env=e, stdout=log, stderr=subprocess.STDOUT)
        clients = []
        took = -1
        try:
            found = worker_addresses(p.pid, d, 2)
            clients = [start_client(a) for a in found.values()]
            check(len(found) == 2 and all(c[1] == "calling" for c in clients),
                  "%s: both workers serve Control, calls in flight: %s %s"
                  % (label, found, [c[1] for c in clients]))
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            p.wait(EXIT_WITHIN_S + 5)
            took = time.monotonic() - t0
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        finally:
            for c, _ in clients:
                end_client(c)
        log.seek(0)
        text = log.read()
        crash = [w for w in CRASH_WORDS if w in text]
        check(p.returncode == 0 and not crash and 0 <= took <= EXIT_WITHIN_S,
              "%s: master exit status %s, %s, ended in %.1f s: %s"
              % (label, p.returncode, "crash in the log %s" % crash if crash else "log clean",
                 took, text.strip()[-600:] if crash or took < 0 else ""))


def main():
    package_tree.run_parts("exit_test", (plain_checks, uwsgi_checks))


if __name__ == "__main__":
    main()
