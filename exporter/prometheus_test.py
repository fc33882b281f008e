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
worker is SIGKILLed and replaced (grpcio's and gunicorn's), its series is
gone and the replacement's is there. Every query of
deploy/grafana/service.json returns series, and its panels are drawn from
this Prometheus into the test's undeclared outputs (service_panels.png).
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
GRAFANA = os.path.join(WS, "deploy/grafana")
os.environ.setdefault("MPLCONFIGDIR", os.path.join(TMP, "matplotlib"))  # HOME may be read-only
sys.path.insert(0, GRAFANA)
import render_panels  # noqa: E402

PKG = package_tree.make(WS, TMP)
RUN = os.path.join(TMP, "run")  # XDG_RUNTIME_DIR: where the registry entries go
os.makedirs(RUN, exist_ok=True)

SERVICE = r'''
import concurrent.futures as cf, os, signal, sys, threading
import grpc                      # imported before the fork, as gRPC's example does
import rsslab
port = int(sys.argv[1])
# Recycling as Celery's --max-memory-per-child (KiB) and
# --max-tasks-per-child do it, after a call.
flags = dict(a.split("=") for a in sys.argv[2:])
limit_kib = int(flags.get("--max-memory-per-child", 0))
max_calls = int(flags.get("--max-tasks-per-child", 0))
calls = [0]
def handle(request, context):
    keep = [bytearray(4096) for _ in range(64)]
    with open("/proc/self/statm") as f:
        rss_kib = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    calls[0] += 1
    if (limit_kib and rss_kib > limit_kib) or (max_calls and calls[0] >= max_calls):
        threading.Timer(0.1, os._exit, (0,)).start()
    return bytes([len(keep) % 256])
def worker():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    pool = rsslab.track(cf.ThreadPoolExecutor(max_workers=4))
    server = grpc.server(pool, interceptors=[rsslab.grpc_interceptor()],
                         options=[("grpc.so_reuseport", 1)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "mp.Work", {"Do": grpc.unary_unary_rpc_method_handler(handle)}),))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    rsslab.auto_trim("after_burst")  # keeps the live estimate: retained bytes
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
    rsslab.auto_trim("after_burst")
    rsslab.serve("127.0.0.1:0", metrics="127.0.0.1:0", name="web")
'''

FLASK_APP = r'''
import os
from flask import Flask
import rsslab
app = Flask(__name__)
@app.after_request
def counted(response):
    rsslab.count_request()
    return response
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


UWSGI_APP = r'''
import rsslab, uwsgi
def _serve():                    # in each worker, after the fork
    rsslab.serve("127.0.0.1:0", name="loop")
uwsgi.post_fork_hook = _serve
def application(env, start_response):
    rsslab.count_request()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
'''


def start_uwsgi():
    """uWSGI with --reload-on-rss=1 (MiB): below any fresh worker's size."""
    if not shutil.which("uwsgi"):
        check(False, "uWSGI: Debian's uwsgi-core is installed (./rsslab setup)")
        raise SystemExit(1)
    d = os.path.join(TMP, "uwsgi")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "app.py"), "w") as f:
        f.write(UWSGI_APP)
    return subprocess.Popen(["uwsgi", "--plugin", "python3", "--master", "--processes", "1",
                             "--http-socket", "127.0.0.1:%d" % package_tree.free_port(),
                             "--wsgi-file", "app.py", "--die-on-term", "--reload-on-rss", "1"],
                            cwd=d, env=env(), stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(d, "uwsgi.log"), "w"))


def recycling_checks(prom):
    """The limits read from each server's command line, and the advice."""
    ok, got = wait_for("loop", lambda: (
        [v for _, v in query(prom, 'rsslab_recycle_limit_below_fresh{service="loop"}')] == [1.0],
        query(prom, '{service="loop",__name__=~"rsslab_recycle_.*"}')))
    check(ok, "uWSGI --reload-on-rss=1: its worker's limit is below its own size, "
              "rsslab_recycle_limit_below_fresh 1: %s" % (got,))
    lim = query(prom, 'rsslab_recycle_rss_limit_bytes{service="loop",flag="--reload-on-rss"}')
    check([v for _, v in lim] == [1048576.0], "uWSGI: --reload-on-rss=1 read as 1 MiB: %s" % lim)
    web = query(prom, 'rsslab_recycle_max_requests{job="rsslab",service="web",'
                      'flag="--max-requests"}')
    jit = query(prom, 'rsslab_recycle_max_requests_jitter{job="rsslab",service="web"}')
    check(len(web) == 4 and {v for _, v in web} == {100000.0} and {v for _, v in jit} == {10.0},
          "gunicorn --max-requests 100000 --max-requests-jitter 10 on each worker: %s %s"
          % (web, jit))
    shop = query(prom, 'rsslab_recycle_rss_limit_bytes{job="rsslab",service="shop",'
                       'flag="--max-memory-per-child"}')
    check(len(shop) == 2 and {v for _, v in shop} == {1024.0 ** 3},
          "the grpcio service's --max-memory-per-child=1048576 (KiB) read as 1 GiB: %s" % shop)
    below = query(prom, 'rsslab_recycle_limit_below_fresh{job="rsslab",service="shop"}')
    check({v for _, v in below} == {0.0}, "1 GiB is above its workers: %s" % below)
    # After 100 requests since the exporter first saw it: the growth per
    # request, and requests until its 1 GiB: (1 GiB - first RSS) / growth.
    ok, adv = wait_for("advice", lambda: (all(
        v > 0 for _, v in query(prom, 'rsslab_recycle_suggested_max_requests{service="shop"}'))
        and len(query(prom, 'rsslab_recycle_suggested_max_requests{service="shop"}')) >= 1,
        query(prom, '{service="shop",__name__=~"rsslab_(recycle_suggested|worker_rss_growth).*"}')))
    check(ok, "the grpcio service: growth per request and a suggested max requests: %s" % (adv,))
    g, first, rss, sug = (
        {m["pid"]: v for m, v in query(prom, q)} for q in (
            'rsslab_worker_rss_growth_per_request_bytes{service="shop"}',
            'rsslab_worker_first_rss_bytes{service="shop"}',
            'rsslab_process_resident_memory_bytes{job="rsslab",service="shop",role="worker"}',
            'rsslab_recycle_suggested_max_requests{service="shop"}'))
    for pid, s in sug.items():
        want = (1024 ** 3 - first[pid]) / g[pid] if g.get(pid) else None
        check(want is not None and abs(s - min(1e9, want)) <= 1 + 0.001 * s,
              "pid %s: suggested max requests %d = (1 GiB - first RSS %d) / growth %.1f"
              % (pid, s, first.get(pid, 0), g.get(pid, 0)))


LIMIT = 8 << 30  # the limit the exporter's own cgroup gets, when the test can make one


def limited_cgroup():
    """A child of this test's memory cgroup (v1 or v2) with an 8 GiB limit,
    for the exporter to run in, so the dashboard's limit and headroom
    queries have a limit to show. (None, why) where the hierarchy is not
    writable (a read-only /sys/fs/cgroup, no memory controller)."""
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError as e:
        return None, "cannot read /proc/self/cgroup: %s" % e
    base = None
    for line in lines:
        num, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            base, limit_file = "/sys/fs/cgroup/memory" + path, "memory.limit_in_bytes"
            break
        if num == "0" and ctrls == "":
            base, limit_file = "/sys/fs/cgroup" + path, "memory.max"
    if base is None or not os.path.isdir(base):
        return None, "no memory cgroup directory of this process"
    child = os.path.join(base, "rsslab-exporter-test-%d" % os.getpid())
    try:
        os.mkdir(child)
        with open(os.path.join(child, limit_file), "w") as f:
            f.write(str(LIMIT))
    except OSError as e:
        try:
            os.rmdir(child)
        except OSError:
            pass
        return None, "cannot make a limited cgroup under %s: %s" % (base, e.strerror)
    return child, ""


def join_cgroup(child):
    """A preexec_fn: the new process moves itself into `child`."""
    def join():
        with open(os.path.join(child, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    return join


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


def http_burst(port, n):
    answered = 0
    for _ in range(n):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/work" % port, timeout=10) as r:
                answered += bool(r.read())
        except OSError:
            time.sleep(0.1)
    return answered


def start_gunicorn(port):
    d = os.path.join(TMP, "gunicorn")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "gconf.py"), "w") as f:
        f.write(GUNICORN_CONF % {"port": port})
    with open(os.path.join(d, "app.py"), "w") as f:
        f.write(FLASK_APP)
    return subprocess.Popen([PY, "-m", "gunicorn", "-c", "gconf.py", "--max-requests", "100000",
                             "--max-requests-jitter", "10", "app:app"], cwd=d,
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def gunicorn_checks(prom, g, port):
    """4 gthread workers and their master, one series each."""
    answered = http_burst(port, 200)
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

    # A killed worker: gunicorn's master forks a new one; the exporter's
    # next scrapes drop the dead one's series and show the new one's.
    killed = workers[0]
    os.kill(killed, signal.SIGKILL)
    ok, now = wait_for("respawn", lambda: (len(children(g.pid)) == 4 and killed not in
                                            children(g.pid), children(g.pid)))
    check(ok, "gunicorn replaced worker %d: %s" % (killed, now))
    fresh = [w for w in now if w not in workers]

    def replaced():
        got = query(prom, 'rsslab_process_resident_memory_bytes{service="web",role="worker"}')
        pids = sorted(int(m["pid"]) for m, _ in got)
        return pids == sorted(now), pids
    ok, pids = wait_for("gunicorn replaced", replaced)
    check(ok, "gunicorn: killed worker %d's series gone, its replacement %s's there (PromQL): %s"
          % (killed, fresh, pids))
    q = 'rsslab_process_resident_memory_bytes{pid="%d"}' % killed
    ok, stale = wait_for("gunicorn gone", lambda: (query(prom, q) == [], query(prom, q)))
    check(ok, "gunicorn: no series of the killed worker %d in either job: %s" % (killed, stale))


def dashboard_checks(prom, cgroup):
    """Every query of deploy/grafana/service.json returns series now."""
    d = render_panels.load(os.path.join(GRAFANA, "service.json"))
    limits = query(prom, 'rsslab_cgroup_memory_limit_bytes{job="rsslab"}')
    limited = bool(limits)
    if cgroup:
        check([v for _, v in limits] == [float(LIMIT)],
              "the exporter's cgroup limit %d is exported: %s" % (LIMIT, limits))
    empty, n = [], 0
    for title, t in render_panels.targets(d):
        expr = render_panels.expand(t["expr"], {"job": "rsslab"}, "5s")
        if "rsslab_cgroup_memory_limit_bytes" in expr and not limited:
            continue  # this cgroup has no limit: the exporter rightly exports none
        n += 1
        if not query(prom, expr):
            empty.append("%s: %s" % (title, expr))
    check(n >= 12 and not empty, "service.json: all %d queries return series%s: %s"
          % (n, "" if limited else " (the limit's skipped: this cgroup has none)", empty))


def draw(prom, t_prom):
    """The dashboard's per-worker panels over this test's run, as a PNG among the
    test's undeclared outputs (docs/results/2026-12-06-service-panels.md)."""
    out = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or TMP
    path = os.path.join(out, "service_panels.png")
    end = int(time.time()) + 1
    first = render_panels.query_range(prom, 'rsslab_exporter_workers{job="rsslab"}',
                                      int(t_prom), end, 1)
    start = int(first[0][1][0][0]) - 1 if first else int(t_prom)  # from its first scrape
    drawn = render_panels.render(prom, render_panels.load(os.path.join(GRAFANA, "service.json")),
                                 path, start, end, 1, {"job": "rsslab"}, row="Per worker")
    check(os.path.getsize(path) > 10000 and drawn.get("Worker RSS", 0) >= 8,
          "the panels drawn from this Prometheus into %s: %s" % (path, drawn))


def main():
    procs = []
    cgroup = None
    svc_proc = []  # the grpcio master, killed with its process group
    t0 = time.monotonic()
    try:
        cgroup, why = limited_cgroup()
        if not cgroup:
            print("prometheus_test: the exporter runs in this test's own cgroup: " + why)
        exp = subprocess.Popen([EXPORTER, "--listen=127.0.0.1:0"], env=env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=join_cgroup(cgroup) if cgroup else None)
        procs.append(exp)
        ready = exp.stdout.readline().split()
        check(ready[:2] == ["rsslab_exporter", "ready"], "the exporter's ready line: %s" % ready)
        exp_addr = ready[2].split("=", 1)[1]

        port = package_tree.free_port()
        svc = subprocess.Popen([PY, "-c", SERVICE, str(port), "--max-memory-per-child=1048576",
                                "--max-tasks-per-child=100000"],
                               env=env(), cwd=TMP,
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
        procs.append(svc)
        svc_proc.append(svc)
        workers = [int(svc.stdout.readline()), int(svc.stdout.readline())]

        gport = package_tree.free_port()
        g = start_gunicorn(gport)
        procs.append(g)
        procs.append(start_uwsgi())

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
        t_prom = time.time()  # its first scrapes: where the panels drawn start
        # The exporter's first scrape of both workers before any request:
        # their first RSS is a fresh worker's (the recycling advice's F).
        first = 'rsslab_worker_first_rss_bytes{job="rsslab",service="shop"}'
        ok, seen = wait_for("first", lambda: (len(query(prom, first)) == 2, query(prom, first)))
        check(ok, "the exporter saw both workers before the first request: %s" % (seen,))

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

        # The next burst after the trim: its end (a scrape with no new
        # request) gives what it took back, its faults and its requests.
        r = subprocess.run([PY, "-c", CLIENT, str(port), "300"], env=env(), cwd=TMP,
                           capture_output=True, text=True, timeout=60)
        check(r.stdout.strip() == "300", "a second burst of 300 requests answered: %s"
              % r.stdout.strip())
        bq = 'rsslab_trim_burst_requests{job="rsslab",service="shop"}'
        ok, burst = wait_for("burst", lambda: (
            len(query(prom, bq)) == 2 and sum(v for _, v in query(prom, bq)) >= 150,
            query(prom, '{job="rsslab",service="shop",__name__=~"rsslab_trim_burst.*"}')))
        check(ok, "the burst after the trim seen to its end per worker (requests, bytes taken "
                  "back, faults): %s" % (burst,))
        recycling_checks(prom)

        dashboard_checks(prom, cgroup)

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
        draw(prom, t_prom)
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
        if cgroup:
            try:
                os.rmdir(cgroup)
            except OSError:
                pass
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
