#!/usr/bin/python3
"""//python:prefork_sweep_test: a sweep of the user's pre-fork HTTP program.

`rsslab_loadgen --builtin=sweep --local --command=app` with gunicorn as the
launched program (`--allow_command=app=/usr/bin/gunicorn`, the port passed
in by `{port}`): a `gthread` Flask app, 2 workers x 8 threads, the package
added in `post_fork` as docs/package/PREFORK.md shows, under the glibc and
jemalloc profiles, short cells, HTTP/1.1 load on its port and the phases
through every worker's Control (`--control=all:gunicorn`):

- every cell completes; each cell's records come from exactly its master's
  2 workers (its own, not another cell's), and each worker's snapshot names
  the cell's allocator (jemalloc mapped in every worker under jemalloc);
- the service's records hold the master and the 2 workers; the sweep's
  summary lists each cell's processes.

A worker not under the profile is refused by procfs::SameAllocatorSetup
(//common/procfs:service_memory_test).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402
LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")
PROFILES = os.path.join(WS, "agent/profiles.textproto")
PKG = package_tree.make(WS, TMP)
RUN = os.path.join(TMP, "run")
os.makedirs(RUN, exist_ok=True)

GUNICORN_CONF = r'''
workers = 2
worker_class = "gthread"
def post_fork(server, worker):
    import rsslab
    rsslab.track_all()
    rsslab.serve("127.0.0.1:0")
'''

FLASK_APP = r'''
import os
from flask import Flask
app = Flask(__name__)
@app.route("/work")
def work():
    keep = [bytearray(4096) for _ in range(16)]
    return "%d %d" % (os.getpid(), len(keep))
'''


def sweep(d, profiles, extra_args=""):
    out = os.path.join(d, "out")
    args = ("app=-c %s/gconf.py --chdir %s -b 127.0.0.1:{port} --threads {threads} "
            "--graceful-timeout 2 %sapp:app" % (d, d, extra_args))
    r = subprocess.run(
        [LOADGEN, "--builtin=sweep", "--local", "--command=app",
         "--allow_command=app=" + shutil.which("gunicorn"), "--allow_command_args=" + args,
         "--allow_command_ready_port=app={port}", "--profile_file=" + PROFILES,
         "--profiles=" + profiles, "--threads_list=8", "--repeats=1", "--scale=0.002",
         "--wait=0.2s", "--target=http://127.0.0.1:1/work", "--connections=4",
         "--control=all:gunicorn", "--out=" + out, "--progress=lines"],
        capture_output=True, text=True, timeout=80,
        env=package_tree.service_env(PKG, RUN))
    records = []
    try:
        with open(os.path.join(out, "events.jsonl")) as f:
            records = [json.loads(line) for line in f]
    except OSError:
        pass
    return r, records, out


def sweep_checks():
    d = os.path.join(TMP, "app")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "gconf.py"), "w") as f:
        f.write(GUNICORN_CONF)
    with open(os.path.join(d, "app.py"), "w") as f:
        f.write(FLASK_APP)
    r, records, out = sweep(d, "glibc,jemalloc")
    text = (r.stdout + r.stderr).strip()
    check(r.returncode == 0 and "sweep: 2 cells, 0 failed" in text,
          "the sweep of gunicorn under glibc and jemalloc: 2 cells ok (exit %d): %s"
          % (r.returncode, text[-1500:]))
    masters = {}
    for e in records:
        if "cell_result" in e:
            masters[e["cell"]] = int(e["cell_result"].get("server", {}).get("pid", 0))
    check(len(masters) == 2, "2 cells, each its own program: %s" % masters)
    for cell, master in sorted(masters.items()):
        workers, allocators, loads, svc = set(), set(), 0, []
        for e in records:
            if e.get("cell") != cell:
                continue
            snap = e.get("snapshot") or e.get("phase", {}).get("snapshot") or \
                e.get("trim", {}).get("after")
            if e.get("worker_pid") and snap:
                workers.add(int(e["worker_pid"]))
                allocators.add(snap.get("allocator", ""))
            if snap and "service" in snap and e.get("label") != "watch":
                svc.append(sorted((p["role"], int(p["pid"])) for p in snap["service"]["processes"]))
            if "load" in e:
                loads += int(e["load"].get("requests_ok", 0))
        want_alloc = "jemalloc" if "jemalloc" in cell else "glibc"
        check(len(workers) == 2 and allocators == {want_alloc},
              "%s: the phases reached the 2 workers of its own program, each running %s: %s %s"
              % (cell, want_alloc, sorted(workers), allocators))
        check(svc and all(s == sorted([("master", master)] + [("worker", w) for w in workers])
                          for s in svc),
              "%s: every service record holds the master %d and its 2 workers: %s"
              % (cell, master, svc[:1]))
        check(loads > 0, "%s: HTTP load answered by the workers: %d requests ok" % (cell, loads))
    md = ""
    try:
        with open(os.path.join(out, "summary.md")) as f:
            md = f.read()
    except OSError:
        pass
    check("## Service processes after idle" in md,
          "the sweep's summary lists each cell's processes: %s"
          % md[md.find("## Service"):][:300])


def main():
    package_tree.run_parts("prefork_sweep_test", (sweep_checks,))


if __name__ == "__main__":
    main()
