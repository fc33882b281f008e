"""The package as Python imports it, from a test's runfiles, without a wheel,
and the check() the package's tests report with.

  root = package_tree.make(WS, TMP)   # then PYTHONPATH=root: import rsslab
  check(cond, "what was checked")      # a failed one is kept in failures
  run_parts("name_test", (part_a, part_b))  # each timed; exits 1 on a failure
  env = service_env(root, run_dir)     # a service's environment: the package importable
  port = free_port()                   # a loopback port free right now

rsslab/*.py and the two Bazel-built extensions under their CPython names
(the wheel's layout, python/wheel/build_wheel.py), copied into TMP/pkg.
"""

import os
import signal
import shutil
import socket
import subprocess
import sys
import time

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def make(ws, tmp):
    root = os.path.join(tmp, "pkg")
    pkg = os.path.join(root, "rsslab")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(pkg)
    src = os.path.join(ws, "python/rsslab")
    for name in os.listdir(src):
        if name.endswith(".py"):
            shutil.copy(os.path.join(src, name), pkg)
    for so in ("_rsslab", "_rsslab_grpc"):
        shutil.copy(os.path.join(ws, "python", so + ".so"),
                    os.path.join(pkg, so + ".cpython-311-x86_64-linux-gnu.so"))
    return root


def run_parts(test, parts):
    """Runs each part (a function making checks), timed; a process a part
    waited for too long fails that part, not the others. Exits 1 when any
    check failed."""
    t0 = time.monotonic()
    for part in parts:
        t = time.monotonic()
        try:
            part()
        except subprocess.TimeoutExpired as e:  # a process that hung: the case failed
            check(False, "%s: a process did not end within %d s" % (part.__name__, e.timeout))
        print("      %s: %.1f s" % (part.__name__, time.monotonic() - t), flush=True)
    print("%s: %.1f s, %d failure(s)" % (test, time.monotonic() - t0, len(failures)))
    if failures:
        sys.exit(1)


def service_env(pkg_root, run_dir, **extra):
    """This process's environment for a service the test starts: no allocator
    settings of the caller's (a profile is the test's to choose), the package
    importable from pkg_root, address files in run_dir."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("MALLOC_", "GLIBC_TUNABLES", "LD_PRELOAD"))}
    e.update({"PYTHONPATH": pkg_root, "XDG_RUNTIME_DIR": run_dir})
    e.update(extra)
    return e


def free_port():
    """A loopback TCP port nothing listens on at this moment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    """True once something accepts on 127.0.0.1:port, False after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def stop(p):
    """SIGTERM, then SIGKILL after 15 s: a service ended either way."""
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
