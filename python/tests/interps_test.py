#!/usr/bin/python3
"""//python:interps_test: the cp313 and cp314 wheels on CPython 3.13 and 3.14.

Each interpreter is the private root ./rsslab setup unpacks into .deps/
(tools/setup/python_root.sh), started through tools/pyroot.sh. Per version:
the wheel is packed from the cp3XY/ extensions (python/abi.bzl) and installed
by that root's own pip (`pip install --no-index --target`, which checks the
wheel's tag and Requires-Python against the interpreter); then:
- under glibc, jemalloc, mimalloc (2.0.9; 3.0.1 when fetched), preloaded
  through the launcher: the allocator detected and mapped, a snapshot of
  this interpreter, a release reaching all 16 workers of a pool that
  track_all() tracked, on that version's ThreadPoolExecutor;
- a release waiting for a busy worker does not hold the pool, the pool's
  idle count after a release while every worker is busy;
- mimalloc's free-block purge changes no live block;
- cap_arenas at import leaves at most 2 arenas after 16 threads, after them
  it raises; every call's bad arguments;
- serve(transport="native"): rsslab_ctl snapshot and trim against it, a
  snapshot while the GIL is held 8 s, exit with serve and auto_trim running
  under 2 s, `python -m rsslab run`;
- threading._register_atexit (private; the grpcio transport ends its watch
  streams with it) still runs before the interpreter joins its threads;
- with that suite's python3-grpcio (1.51, in the root): /metrics through
  grpc_interceptor(), gRPC C++ mapped only for the native transport, exit
  with a watch stream open, package_test's transport checks over grpcio and
  serve(server=), and docs/PACKAGE.md's five lines in a grpcio service.

The checks and snippets shared with //python:package_test are its own
(imported); a root that is missing is one "skip" line, both missing fail.
"""

import json
import os
import re
import subprocess
import sys
import time

import package_test as pt
from package_test import check, run, snippet

WS = pt.WS
TMP = pt.TMP
PYROOT = os.path.join(WS, "tools/pyroot.sh")
VERSIONS = ("3.13", "3.14")

# One tracked pool of 16 (track_all, as `python -m rsslab run` does) on
# this interpreter's ThreadPoolExecutor, a release, and what the package
# says about the allocator and the process.
ALLOC = r"""
import concurrent.futures as cf, json, rsslab, sys, time
rsslab.track_all()
pool = cf.ThreadPoolExecutor(max_workers=16)
list(pool.map(lambda i: bytearray(1 << 16), range(400)))
while len(pool._threads) < 16:
    list(pool.map(time.sleep, [0.01] * 32))
r = rsslab.release()
a = rsslab.allocator()
s = rsslab.snapshot()
lib = {"glibc": "libc.so", "jemalloc": "libjemalloc", "mimalloc": "libmimalloc"}.get(a["name"], "?")
print(json.dumps({"name": a["name"], "maps": a["maps"], "library": a["library"],
                  "reached": r["threads_reached"], "not_reached": len(r["threads_not_reached"]),
                  "python": s["python"]["version"], "rss": s["status"]["rssBytes"],
                  "mapped": any(lib in l for l in open("/proc/self/maps"))}))
"""

CAP_AT_IMPORT = r"""
import threading, rsslab
rsslab.cap_arenas(2)
bar = threading.Barrier(17)
def work():
    keep = [bytearray(1000) for _ in range(2000)]
    bar.wait(); bar.wait()
ts = [threading.Thread(target=work) for _ in range(16)]
[t.start() for t in ts]; bar.wait()
print("arenas", rsslab.snapshot()["allocatorStats"]["glibc"]["mallocInfoArenas"])
bar.wait(); [t.join() for t in ts]
"""

# serve(transport="native") with a tracked pool of 4; the test's rsslab_ctl
# calls it until stdin closes.
NATIVE = r"""
import concurrent.futures as cf, rsslab, sys
pool = rsslab.track(cf.ThreadPoolExecutor(max_workers=4))
list(pool.map(lambda i: bytearray(1 << 16), range(40)))
print(rsslab.serve("127.0.0.1:0", transport="native"), rsslab.control_transport(), flush=True)
sys.stdin.read()
"""

# package_test's GIL_HELD, the GIL held 8 s rather than 4: under load a
# rsslab_ctl that starts late may find it free within the 2 s deadline.
GIL_HELD = pt.GIL_HELD.replace("usleep(4000000)", "usleep(8000000)")
assert GIL_HELD != pt.GIL_HELD, "package_test.GIL_HELD no longer sleeps 4 s"

# A non-daemon thread waits for what a _register_atexit callback sets: the
# interpreter exits only if the callback runs before it joins the thread.
REGISTER_ATEXIT = r"""
import threading
done = threading.Event()
threading.Thread(target=lambda: print("joined", done.wait(20), flush=True)).start()
threading._register_atexit(done.set)
"""


def make_python(v):
    """TMP/python3.X: the root's interpreter with the installed wheel on its path."""
    abi = "cp" + v.replace(".", "")
    dist = os.path.join(TMP, "dist-" + abi)
    r = run([sys.executable, os.path.join(WS, "python/wheel/build_wheel.py"), "--abi=" + abi,
             "--native=" + os.path.join(WS, "python", abi, "_rsslab.so"), "--out=" + dist])
    wheel = r.stdout.strip()
    check(r.returncode == 0 and re.search(r"-%s-%s-manylinux_2_\d+_x86_64\.whl$" % (abi, abi), wheel),
          "%s: wheel packed: %s" % (v, wheel or r.stderr.strip()[-300:]))
    r = run([sys.executable, os.path.join(WS, "python/wheel/check_wheel.py"), wheel])
    check(r.returncode == 0, "%s: check_wheel.py (NEEDED, tag, Requires-Python): %s"
          % (v, (r.stdout + r.stderr).strip()[-300:]))
    site = os.path.join(TMP, "site-" + v)
    pips = [n for n in os.listdir(os.path.join(root_dir(v), "usr/share/python-wheels"))
            if n.startswith("pip-")]
    pip = os.path.join(root_dir(v), "usr/share/python-wheels", pips[0], "pip") if pips else "pip"
    r = run([PYROOT, v, pip, "install", "--no-index", "--no-deps", "--no-cache-dir",
             "--disable-pip-version-check", "--root-user-action=ignore", "--target=" + site, wheel],
            env=pt.base_env(), timeout=240)
    check(r.returncode == 0, "%s: the root's own pip installs %s: %s"
          % (v, os.path.basename(wheel), (r.stdout + r.stderr).strip()[-300:]))
    py = os.path.join(TMP, "python" + v)
    with open(py, "w") as f:
        f.write('#!/bin/sh\nPYTHONPATH=%s exec %s %s "$@"\n' % (site, PYROOT, v))
    os.chmod(py, 0o755)
    r = snippet(py, "import rsslab, sys; print(rsslab.__file__, '%d.%d' % sys.version_info[:2])")
    check(r.returncode == 0 and r.stdout.startswith(site) and r.stdout.split()[-1:] == [v],
          "%s: rsslab imports from the installed wheel: %s" % (v, (r.stdout + r.stderr).strip()))
    return py


def root_dir(v):
    # The runfiles' .complete is a link into the project's .deps/.
    return os.path.dirname(os.path.realpath(os.path.join(WS, ".deps/python%s/.complete" % v)))


def allocator_checks(py, v):
    for allocator in pt.SERVICE_ALLOCATORS:
        name = "mimalloc" if allocator.startswith("mimalloc") else allocator
        env = {"LD_PRELOAD": pt.PRELOAD[allocator]} if pt.PRELOAD[allocator] else None
        r = snippet(py, ALLOC, env_extra=env, timeout=120)
        try:
            got = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            got = {}
        check(got.get("name") == name and got.get("maps") == name and got.get("mapped")
              and got.get("python", "").startswith(v + ".") and got.get("rss", 0) > 0
              and got.get("reached") == 16 and got.get("not_reached") == 0,
              "%s, %s: detected and mapped, a snapshot of this interpreter, a release reached "
              "16 of 16 workers of a track_all() pool: %s"
              % (v, allocator, got or (r.stdout + r.stderr).strip()[-300:]))
    for allocator in ("glibc", "mimalloc"):
        env = {"LD_PRELOAD": pt.PRELOAD[allocator]} if pt.PRELOAD[allocator] else None
        r = snippet(py, pt.BUSY_WORKER, env_extra=env)
        m = re.search(r"work waited ([0-9.]+) s; reached (\d+), not reached (\d+)", r.stdout)
        check(r.returncode == 0 and m is not None and float(m.group(1)) < 0.5
              and int(m.group(2)) >= 15 and int(m.group(2)) + int(m.group(3)) == 16,
              "%s, %s: a release waiting for a busy worker does not hold the pool: %s"
              % (v, allocator, (r.stdout + r.stderr).strip()[-300:]))
    r = snippet(py, pt.IDLE_COUNT)
    m = re.search(r"idle count (\d+), threads (\d+)", r.stdout)
    check(r.returncode == 0 and m is not None and int(m.group(1)) <= int(m.group(2)),
          "%s: the pool's idle count after a release while every worker is busy: %s"
          % (v, (r.stdout + r.stderr).strip()[-200:]))
    r = snippet(py, pt.PURGE, env_extra={"LD_PRELOAD": pt.PRELOAD["mimalloc"]}, timeout=120)
    m = re.search(r"purged (\d+) bytes in (\d+) ranges over \d+ .*corrupted 0 of", r.stdout)
    check(r.returncode == 0 and m is not None and int(m.group(1)) > 8 * pt.MIB,
          "%s, mimalloc: the free-block purge returns pages and changes no live block: %s"
          % (v, (r.stdout + r.stderr).strip()[-300:]))


def arena_checks(py, v):
    r = snippet(py, CAP_AT_IMPORT)
    m = re.search(r"arenas (\d+)", r.stdout)
    check(r.returncode == 0 and m is not None and 1 <= int(m.group(1)) <= 2,
          "%s: cap_arenas(2) at import: at most 2 arenas after 16 threads allocated: %s"
          % (v, (r.stdout + r.stderr).strip()[-200:]))
    r = snippet(py, pt.LATE_CAP)
    check(r.stdout.startswith("raised:") and "too late" in r.stdout,
          "%s: cap_arenas(2) after 16 threads allocated raises: %s"
          % (v, (r.stdout + r.stderr).strip()[:300]))
    r = snippet(py, pt.BAD_ARGS)
    check(r.returncode == 0 and r.stdout.strip() == "done",
          "%s: every call refuses bad arguments with a clear exception: %s"
          % (v, (r.stdout + r.stderr).strip()[-300:]))


def native_checks(py, v):
    p = subprocess.Popen([py, "-c", NATIVE], env=pt.base_env(), cwd=TMP, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = p.stdout.readline().split()
    addr = head[0] if len(head) == 2 else "none"
    snap = run([pt.CTL, "--control=" + addr, "snapshot", "--json"], timeout=60)
    version = json.loads(snap.stdout).get("python", {}).get("version", "") if snap.returncode == 0 else ""
    trim = run([pt.CTL, "--control=" + addr, "trim"], timeout=60)
    out, err = p.communicate("", timeout=30)
    check(head[1:] == ["native"] and version.startswith(v + ".") and trim.returncode == 0
          and "on 4/4 workers" in trim.stdout and p.returncode == 0,
          "%s: serve(transport='native'): rsslab_ctl snapshot (python %s) and trim (%s) %s"
          % (v, version, trim.stdout.strip()[:160], (trim.stderr + err).strip()[-200:]))
    p = subprocess.Popen([py, "-c", GIL_HELD], env=pt.base_env(), cwd=TMP,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    addr = p.stdout.readline().strip()
    p.stdout.readline()
    t0 = time.monotonic()
    r = run([pt.CTL, "--control=" + addr, "snapshot", "--json"], timeout=60)
    took = time.monotonic() - t0
    why = (json.loads(r.stdout) if r.returncode == 0 else {}).get("python", {}).get("unavailable", "")
    out, err = p.communicate(timeout=30)
    check(took < 7 and "GIL was not free within" in why and "after '' True" in out,
          "%s: GIL held 8 s: the snapshot answered in %.1f s (%r), Python back after: %s"
          % (v, took, why, (out + err).strip()[-200:]))
    pt.exit_fast_check(py, "native", "%s: " % v)
    script = os.path.join(TMP, "user_script.py")
    with open(script, "w") as f:
        f.write(pt.RUN_SCRIPT)
    r = run([py, "-m", "rsslab", "run", "--control=127.0.0.1:0", "--transport=native",
             "--auto_trim=after_burst", "--cap_arenas=4", "--", script, "a1"], env=pt.base_env(),
            cwd=TMP, timeout=60)
    check(r.returncode == 0 and "via native" in r.stdout and "reached 3" in r.stdout
          and "args ['a1']" in r.stdout,
          "%s: python -m rsslab run: %s" % (v, (r.stdout + r.stderr).strip()[-300:]))
    r = snippet(py, REGISTER_ATEXIT, timeout=30)
    check(r.returncode == 0 and r.stdout.strip() == "joined True",
          "%s: threading._register_atexit runs before the threads are joined: %s"
          % (v, (r.stdout + r.stderr).strip()[-200:]))


def grpcio_checks(py, v):
    # That suite's python3-grpcio, in the root: the same checks as on 3.11.
    # package_test's METRICS prints one "NAME True" line per check it makes.
    r = snippet(py, pt.METRICS)
    wrong = [l for l in r.stdout.splitlines() if not l.endswith(" True")]
    check(r.returncode == 0 and r.stdout.count(" True") >= 8 and not wrong,
          "%s: serve(metrics=) with grpc_interceptor() in a grpcio server: %d /metrics checks "
          "true, not %s, exit %d %s" % (v, r.stdout.count(" True"), wrong, r.returncode,
                                        r.stderr.strip()[-300:]))
    r = snippet(py, pt.LAZY_GRPC)
    check(r.returncode == 0 and r.stdout.split() == ["False", "False", "True"],
          "%s: gRPC C++ is mapped only once serve(transport='native') is asked for: %s"
          % (v, (r.stdout + r.stderr).strip()[-300:]))
    pt.exit_fast_check(py, "grpcio", "%s: " % v)
    for transport in ("grpcio", "shared"):
        pt.transport_checks(py, transport)
    pt.five_line_checks(py)


def main():
    present = [v for v in VERSIONS if os.path.exists(os.path.join(WS, ".deps/python%s/.complete" % v))]
    for v in VERSIONS:
        if v not in present:
            print("skip  %s: .deps/python%s is missing (tools/setup/python_root.sh %s)" % (v, v, v))
    check(bool(present), "at least one private root is there (./rsslab setup)")
    for v in present:
        print("----  CPython %s (.deps/python%s)" % (v, v), flush=True)
        t0 = time.monotonic()
        failed = len(pt.failures)
        py = make_python(v)
        if len(pt.failures) > failed:
            continue
        allocator_checks(py, v)
        arena_checks(py, v)
        native_checks(py, v)
        grpcio_checks(py, v)
        print("      %s: %.0f s" % (v, time.monotonic() - t0), flush=True)
    if pt.failures:
        print("\n%d check(s) failed:\n  %s" % (len(pt.failures), "\n  ".join(pt.failures)))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
