#!/usr/bin/python3
"""//loadgen/http:http_service_test: rsslab_loadgen's HTTP load on real servers.

- gunicorn `gthread` (Debian's gunicorn and python3-flask), 2 workers x 8
  threads, the rsslab package added as docs/package/PREFORK.md shows
  (`track_all()` and `serve()` in `post_fork`), driven over HTTP/1.1
  keep-alive: the requests the workers counted equal the loadgen's, exactly,
  and the scenario's phases (`--control=all:NAME`) reached each worker's
  Control (each worker's on_phase callbacks ran);
- hypercorn (python3-hypercorn) serving h2c: the requests it counted, each
  over HTTP/2, equal the loadgen's exactly, on a closed and an open loop;
- nginx (nginx-light) serving h2c and closing each connection after 1000
  requests (its default): its access log holds exactly the loadgen's requests, each over
  HTTP/2.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402

LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")
PY = "/usr/bin/python3"
PKG = package_tree.make(WS, TMP)
RUN = os.path.join(TMP, "run")  # XDG_RUNTIME_DIR: the Control address files
os.makedirs(RUN, exist_ok=True)
SEEN = os.path.join(TMP, "seen")  # what each worker saw, a file per worker and phase
os.makedirs(SEEN, exist_ok=True)

GUNICORN_CONF = r'''
workers = 2
threads = 8
worker_class = "gthread"
bind = "127.0.0.1:%(port)d"
def post_fork(server, worker):
    import rsslab
    rsslab.track_all()
    import app
    app.register()  # before serve(): the first phase may come as soon as it listens
    rsslab.serve("127.0.0.1:0", name="httpsvc")
'''

# Counts its requests; each phase callback writes "PID COUNT" to SEEN/PHASE-PID.
FLASK_APP = r'''
import os, threading
from flask import Flask, request
app = Flask(__name__)
lock = threading.Lock()
count = [0]
@app.route("/hit/<int:n>", methods=["GET", "POST"])
def hit(n):
    with lock:
        count[0] += 1
    return "%%d %%d" %% (os.getpid(), len(request.get_data()))
def register():
    import rsslab
    for phase in ("fill", "idle"):
        def seen(limit, phase=phase):
            with lock:
                with open(os.path.join(%(seen)r, "%%s-%%d" %% (phase, os.getpid())), "w") as f:
                    f.write("%%d %%d" %% (os.getpid(), count[0]))
        rsslab.on_phase(phase, seen)
'''

SCENARIO = r'''
name: "http"
step { name: "fill" set_phase { phase: "fill" } }
step { name: "load" load { } }
step { name: "snap" snapshot { } }
step { name: "idle" set_phase { phase: "idle" } }
'''

H2_APP = r'''
import collections
counts = collections.Counter()
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/count":
        body = repr(sorted(counts.items())).encode()
    else:
        counts[scope["http_version"]] += 1
        body = b"ok"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
'''


def loadgen(args, out):
    r = subprocess.run([LOADGEN, "--out=" + out, "--progress=lines"] + args,
                       capture_output=True, text=True, timeout=60,
                       env=package_tree.service_env(PKG, RUN))
    records = []
    try:
        with open(os.path.join(out, "events.jsonl")) as f:
            records = [json.loads(l) for l in f]
    except OSError:
        pass
    return r, records


def loads(records):
    return [e["load"] for e in records if "load" in e]


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def wait_workers(master, want, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = children(master)
        if len(kids) == want and all(
                os.path.exists(os.path.join(RUN, "rsslab-control-%d.addr" % k)) for k in kids):
            return kids
        time.sleep(0.1)
    return children(master)


def gunicorn_part():
    port = package_tree.free_port()
    d = os.path.join(TMP, "gunicorn")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "gconf.py"), "w") as f:
        f.write(GUNICORN_CONF % {"port": port})
    with open(os.path.join(d, "app.py"), "w") as f:
        f.write(FLASK_APP % {"seen": SEEN})
    with open(os.path.join(d, "http.txtpb"), "w") as f:
        f.write(SCENARIO)
    log = open(os.path.join(d, "gunicorn.log"), "w+")
    p = subprocess.Popen([PY, "-m", "gunicorn", "-c", "gconf.py", "app:app"], cwd=d,
                         env=package_tree.service_env(PKG, RUN), stdout=log,
                         stderr=subprocess.STDOUT)
    try:
        check(package_tree.wait_port(port), "gunicorn: 2 gthread workers listen on 127.0.0.1:%d" % port)
        workers = sorted(wait_workers(p.pid, 2))
        n = 1200
        r, records = loadgen(["--target=http://127.0.0.1:%d/hit/{{seq}}" % port,
                              "--connections=8", "--requests=%d" % n,
                              "--body={\"k\": \"{{rand_str 16}}\"}",
                              "--header=X-Seq: {{seq}}", "--control=all:httpsvc",
                              "--scenario=" + os.path.join(d, "http.txtpb")],
                             os.path.join(d, "run"))
        ls = loads(records)
        ok = ls[0].get("requests_ok") if ls else None
        check(r.returncode == 0 and len(ls) == 1 and int(ok or 0) == n
              and ls[0].get("status_counts") == {"200": str(n)},
              "gunicorn: rsslab_loadgen sent %d POSTs over HTTP/1.1, all 200 (exit %d): %s | %s"
              % (n, r.returncode, ls and ls[0].get("status_counts"), r.stderr[-300:]))
        seen = {}
        for phase in ("fill", "idle"):
            for w in workers:
                try:
                    with open(os.path.join(SEEN, "%s-%d" % (phase, w))) as f:
                        seen[(phase, w)] = int(f.read().split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        check(len(workers) == 2 and all((ph, w) in seen for ph in ("fill", "idle") for w in workers),
              "gunicorn: phases fill and idle reached each worker %s's Control (on_phase ran in "
              "each): %s" % (workers, sorted(seen)))
        counted = sum(seen.get(("idle", w), 0) for w in workers)
        check(counted == n and all(seen.get(("fill", w), -1) == 0 for w in workers),
              "gunicorn: the workers counted %d requests after the load step (none before), "
              "the loadgen %d: %s" % (counted, n, seen))
        snaps = [e for e in records if "snapshot" in e]
        pids = sorted(int(e.get("worker_pid", 0)) for e in snaps if e.get("worker_pid"))
        check(pids == workers, "gunicorn: the snapshot step recorded each worker %s: %s"
              % (workers, pids))
        # After the workers' records, the service's: the master and both workers.
        svc = [sorted(int(p["pid"]) for p in e["snapshot"].get("service", {}).get("processes", []))
               for e in snaps if not e.get("worker_pid")]
        check(svc == [sorted(workers + [p.pid])],
              "gunicorn: the service's snapshot record holds the master %d and both workers: %s"
              % (p.pid, svc))
    finally:
        package_tree.stop(p)
        log.close()


def hypercorn_part():
    if not shutil.which("hypercorn"):
        check(False, "hypercorn: Debian's python3-hypercorn is installed (./rsslab setup)")
        return
    port = package_tree.free_port()
    d = os.path.join(TMP, "hypercorn")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "h2app.py"), "w") as f:
        f.write(H2_APP)
    log = open(os.path.join(d, "hypercorn.log"), "w+")
    p = subprocess.Popen([PY, "-m", "hypercorn", "--bind", "127.0.0.1:%d" % port, "h2app:app"],
                         cwd=d, stdout=log, stderr=subprocess.STDOUT)
    try:
        check(package_tree.wait_port(port), "hypercorn: listens on 127.0.0.1:%d" % port)
        runs = (("closed", ["--requests=400", "--connections=2", "--concurrency=16"]),
                ("open", ["--rate=200", "--duration=1s", "--connections=2"]))
        total = 0
        for name, args in runs:
            r, records = loadgen(["--target=http://127.0.0.1:%d/x" % port, "--http_version=h2c"]
                                 + args, os.path.join(d, name))
            ls = loads(records)
            ok = int(ls[0].get("requests_ok", 0)) if ls else 0
            total += ok
            check(r.returncode == 0 and ok > 0 and int(ls[0].get("requests_failed", 0)) == 0,
                  "hypercorn: h2c %s loop: %d ok, none failed (exit %d): %s"
                  % (name, ok, r.returncode, r.stderr[-300:]))
        with urllib.request.urlopen("http://127.0.0.1:%d/count" % port, timeout=10) as resp:
            counted = resp.read().decode()
        check(counted == repr([("2", total)]),
              "hypercorn: the server counted every request over HTTP/2, as many as the "
              "loadgen (%d): %s" % (total, counted))
    finally:
        package_tree.stop(p)
        log.close()


# `user root root`: as root (the suite's user) nginx would hand its worker
# and its temporary directories to nobody, whom the sandbox does not map;
# as another user the line is ignored.
NGINX_CONF = r'''
user root root;
worker_processes 1;
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events { worker_connections 256; }
http {
  log_format proto "$server_protocol $status";
  access_log %(d)s/access.log proto;
  client_body_temp_path %(d)s/body;
  proxy_temp_path %(d)s/proxy;
  fastcgi_temp_path %(d)s/fastcgi;
  uwsgi_temp_path %(d)s/uwsgi;
  scgi_temp_path %(d)s/scgi;
  server {
    listen 127.0.0.1:%(port)d http2;
    location / { return 200 "ok"; }
  }
}
'''


def nginx_part():
    """nginx (nginx-light) over h2c, ending each connection after 1000
    requests (keepalive_requests' default): the loadgen opens new ones as it goes,
    and nginx's access log holds exactly its requests, each over HTTP/2."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        check(False, "nginx: Debian's nginx-light is installed (./rsslab setup)")
        return
    port = package_tree.free_port()
    d = os.path.join(TMP, "nginx")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF % {"d": d, "port": port})
    log = open(os.path.join(d, "nginx.out"), "w+")
    p = subprocess.Popen([nginx, "-c", os.path.join(d, "nginx.conf"), "-p", d + "/"],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        up = package_tree.wait_port(port)
        log.seek(0)
        check(up, "nginx: listens (h2c) on 127.0.0.1:%d: %s" % (port, log.read()[-300:]))
        if not up:
            return
        n = 5000
        r, records = loadgen(["--target=http://127.0.0.1:%d/" % port, "--http_version=h2c",
                              "--requests=%d" % n, "--connections=2", "--concurrency=16"],
                             os.path.join(d, "run"))
        ls = loads(records)
        package_tree.stop(p)
        with open(os.path.join(d, "access.log")) as f:
            lines = f.read().splitlines()
        check(r.returncode == 0 and ls and int(ls[0].get("requests_ok", 0)) == n
              and lines == ["HTTP/2.0 200"] * n,
              "nginx: %d h2c requests over connections closed every 1000 requests: the access "
              "log holds %d, all HTTP/2.0 200 (%s) (exit %d): %s"
              % (n, len(lines), sorted(set(lines)), r.returncode, r.stderr[-300:]))
    finally:
        if p.poll() is None:
            package_tree.stop(p)


if __name__ == "__main__":
    package_tree.run_parts("http_service_test", (gunicorn_part, hypercorn_part, nginx_part))
