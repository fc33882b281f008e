#!/usr/bin/python3
"""//exporter:prometheus_test: rsslab_exporter under a real Prometheus.

Debian's `prometheus` on loopback scrapes rsslab_exporter every second,
and discovers the workers' own /metrics through the exporter's /sd
(http_sd). The service: grpcio with the package, a master forking 2
workers, each calling rsslab.serve(name="shop", metrics=...) and forking a
replacement when one dies; and gunicorn `gthread` (4 workers, Flask), the
package in `post_fork`. Checked with PromQL over Prometheus's HTTP API:
one series per process with the right labels (service, pid, role,
allocator, allocator_version), the master from /proc only, every worker's
Control answering, both workers' own /metrics up through /sd; after a
worker is SIGKILLed and replaced, its series is gone and the replacement's
is there.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402
EXPORTER = os.path.join(WS, "exporter/rsslab_exporter")
CTL = os.path.join(WS, "ctl/rsslab_ctl")
PY = "/usr/bin/python3"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"

PKG = package_tree.make(WS, TMP)
RUN = os.path.join(TMP, "run")  # XDG_RUNTIME_DIR: where the registry entries go
os.makedirs(RUN, exist_ok=True)

SERVICE = r'''
import concurrent.futures as cf, os, signal, sys
import grpc                      # imported before the fork, as gRPC's example does
import rsslab
port = int(sys.argv[1])
def handle(request, context):
    keep = [bytearray(4096) for _ in range(64)]
    return bytes([len(keep) % 256])
def worker():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    pool = rsslab.track(cf.ThreadPoolExecutor(max_workers=4))
    server = grpc.server(pool, options=[("grpc.so_reuseport", 1)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "mp.Work", {"Do": grpc.unary_unary_rpc_method_handler(handle)}),))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    rsslab.serve("127.0.0.1:0", metrics="127.0.0.1:0", name="shop")
    signal.pause()
def spawn():
    pid = os.fork()
    if pid == 0:
        worker()
        os._exit(0)
    print(pid, flush=True)
for _ in range(2):
    spawn()
while True:                      # a worker that dies is replaced
    os.wait()
    spawn()
'''

GUNICORN_CONF = r'''
workers = 4
threads = 4
worker_class = "gthread"
bind = "127.0.0.1:%(port)d"
def post_fork(server, worker):
    import rsslab
    rsslab.track_all()
    rsslab.serve("127.0.0.1:0", metrics="127.0.0.1:0", name="web")
'''

FLASK_APP = r'''
import os
from flask import Flask
app = Flask(__name__)
@app.route("/work")
def work():
    keep = [bytearray(4096) for _ in range(64)]
    return "%d %d" % (os.getpid(), len(keep))
'''

CLIENT = r'''
import sys, grpc
port, n = int(sys.argv[1]), int(sys.argv[2])
ok = 0
for _ in range(n // 5):
    ch = grpc.insecure_channel("127.0.0.1:%d" % port,
                               options=[("grpc.use_local_subchannel_pool", 1)])
    call = ch.unary_unary("/mp.Work/Do")
    for _ in range(5):
        ok += call(b"x", timeout=10) is not None
    ch.close()
print(ok)
'''


def env():
    return package_tree.service_env(PKG, RUN)


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(prom, q):
    """[(labels, value)] of an instant PromQL query."""
    body = json.loads(get("http://%s/api/v1/query?%s" % (prom, urllib.parse.urlencode({"query": q}))))
    return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]


def wait_for(what, fn, timeout=15):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last[0]:
                return last
        except OSError as e:
            last = (False, str(e))
        time.sleep(0.25)
    return last or (False, "nothing")


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return sorted(int(p) for p in f.read().split())
    except OSError:
        return []


def start_gunicorn(port):
    d = os.path.join(TMP, "gunicorn")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "gconf.py"), "w") as f:
        f.write(GUNICORN_CONF % {"port": port})
    with open(os.path.join(d, "app.py"), "w") as f:
        f.write(FLASK_APP)
    return subprocess.Popen([PY, "-m", "gunicorn", "-c", "gconf.py", "app:app"], cwd=d,
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def gunicorn_checks(prom, g, port):
    """4 gthread workers and their master, one series each."""
    answered = 0
    for _ in range(200):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/work" % port, timeout=10) as r:
                answered += bool(r.read())
        except OSError:
            time.sleep(0.1)
    check(answered == 200, "gunicorn: a burst of 200 requests answered: %d" % answered)
    workers = children(g.pid)

    def series():
        got = query(prom, 'rsslab_process_resident_memory_bytes{job="rsslab",service="web"}')
        roles = {int(m["pid"]): m["role"] for m, _ in got}
        want = {w: "worker" for w in workers}
        want[g.pid] = "master"
        return len(workers) == 4 and roles == want, (workers, roles)
    ok, got = wait_for("gunicorn", series)
    check(ok, "gunicorn gthread: one series per worker (4) and the master %d: %s" % (g.pid, got))


def main():
    procs = []
    svc_proc = []  # the grpcio master, killed with its process group
    t0 = time.monotonic()
    try:
        exp = subprocess.Popen([EXPORTER, "--listen=127.0.0.1:0"], env=env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(exp)
        ready = exp.stdout.readline().split()
        check(ready[:2] == ["rsslab_exporter", "ready"], "the exporter's ready line: %s" % ready)
        exp_addr = ready[2].split("=", 1)[1]

        port = package_tree.free_port()
        svc = subprocess.Popen([PY, "-c", SERVICE, str(port)], env=env(), cwd=TMP,
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
        procs.append(svc)
        svc_proc.append(svc)
        workers = [int(svc.stdout.readline()), int(svc.stdout.readline())]

        gport = package_tree.free_port()
        g = start_gunicorn(gport)
        procs.append(g)

        prom_port = package_tree.free_port()
        prom = "127.0.0.1:%d" % prom_port
        cfg = os.path.join(TMP, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
                    "scrape_configs:\n"
                    "  - job_name: rsslab\n"
                    "    static_configs: [{targets: ['%s']}]\n"
                    "  - job_name: workers\n"
                    "    http_sd_configs: [{url: 'http://%s/sd', refresh_interval: 1s}]\n"
                    % (exp_addr, exp_addr))
        p = subprocess.Popen([PROMETHEUS, "--config.file=" + cfg,
                              "--storage.tsdb.path=" + os.path.join(TMP, "tsdb"),
                              "--web.listen-address=" + prom], cwd=TMP,
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "prom.log"), "w"))
        procs.append(p)
        check(wait_for("prometheus", lambda: (get("http://%s/-/ready" % prom) != "", ""))[0],
              "Prometheus is ready on %s" % prom)

        r = subprocess.run([PY, "-c", CLIENT, str(port), "100"], env=env(), cwd=TMP,
                           capture_output=True, text=True, timeout=60)
        check(r.stdout.strip() == "100", "a burst of 100 requests answered: %s %s"
              % (r.stdout.strip(), r.stderr.strip()[-200:]))

        rss = 'rsslab_process_resident_memory_bytes{job="rsslab",service="shop"}'

        def series():
            got = query(prom, rss)
            by_pid = {int(m["pid"]): m for m, _ in got}
            roles = {pid: m["role"] for pid, m in by_pid.items()}
            want = {workers[0]: "worker", workers[1]: "worker", svc.pid: "master"}
            return roles == want and len(got) == 3, got
        ok, got = wait_for("series", series)
        check(ok, "one RSS series per process: 2 workers %s and the master %d: %s"
              % (workers, svc.pid, got))
        labels = [m for m, _ in got]
        check(all(m.get("allocator") == "glibc" for m in labels)
              and all(m.get("allocator_version", "").startswith("2.") for m in labels),
              "each series says allocator glibc and its version: %s"
              % [(m.get("allocator"), m.get("allocator_version")) for m in labels])
        up = query(prom, 'rsslab_control_up{service="shop"}')
        check(sorted(int(m["pid"]) for m, v in up if v == 1) == sorted(workers),
              "both workers' Control answered, the master has none: %s" % up)
        trims = query(prom, 'rsslab_trims_total{job="rsslab",service="shop"}')
        check(len(trims) == 2, "trims counted per worker: %s" % trims)
        ok, sd = wait_for("sd", lambda: (len([v for _, v in query(prom, 'up{job="workers",service="shop"}')
                                               if v == 1]) == 2, query(prom, 'up{job="workers",service="shop"}')))
        check(ok, "Prometheus found both workers' own /metrics through /sd and scraped them: %s"
              % sd)

        gunicorn_checks(prom, g, gport)

        # The ledger: a manual trim of every worker, counted by the exporter
        # as each worker's own /metrics counts it.
        r = subprocess.run([CTL, "--control=all:shop", "--timeout=10s", "trim"], env=env(),
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "rsslab_ctl --control=all:shop trim: %s" % r.stderr.strip()[-300:])

        def ledger():
            q = 'rsslab_trims_by_trigger_total{service="shop",trigger="manual",job="%s"}'
            mine = {m["pid"]: v for m, v in query(prom, q % "rsslab")}
            theirs = {m["pid"]: v for m, v in query(prom, q % "workers")}
            return mine == theirs and sorted(mine.values()) == [1.0, 1.0], (mine, theirs)
        ok, got = wait_for("ledger", ledger)
        check(ok, "the exporter's manual trims per worker equal each worker's own count (1): %s"
              % (got,))
        freed = query(prom, 'rsslab_trim_freed_bytes_total{job="rsslab",service="shop",'
                            'trigger="manual"}')
        check(len(freed) == 2, "bytes returned by trigger per worker: %s" % freed)
        ok, regrowth = wait_for("regrowth", lambda: (len(query(
            prom, 'rsslab_trim_regrowth_bytes{job="rsslab",service="shop"}')) == 2, query(
            prom, 'rsslab_trim_regrowth_bytes{job="rsslab",service="shop"}')))
        check(ok, "the regrowth after the trim followed per worker: %s" % (regrowth,))

        killed = workers[0]
        os.kill(killed, signal.SIGKILL)
        replacement = int(svc.stdout.readline())

        def replaced():
            pids = sorted(int(m["pid"]) for m, _ in
                          query(prom, rss.replace("}", ',role="worker"}')))
            return pids == sorted([workers[1], replacement]), pids
        ok, pids = wait_for("replaced", replaced)
        check(ok, "after worker %d was killed and replaced by %d, its series is gone: workers %s"
              % (killed, replacement, pids))
        # The direct scrape drops it too, once /sd no longer lists it.
        q = '%s{pid="%d"}' % (rss.split("{")[0], killed)
        ok, stale = wait_for("gone", lambda: (query(prom, q) == [], query(prom, q)))
        check(ok, "no series of the killed worker %d in either job: %s" % (killed, stale))
    finally:
        for p in procs:
            if p.poll() is None:
                if p in svc_proc:
                    os.killpg(p.pid, signal.SIGKILL)
                else:
                    p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    print("prometheus_test: %.1f s, %d failure(s)" % (time.monotonic() - t0,
                                                       len(package_tree.failures)))
    if package_tree.failures:
        try:
            print(open(os.path.join(TMP, "prom.log")).read()[-1500:])
        except OSError:
            pass
        sys.exit(1)


if __name__ == "__main__":
    main()
