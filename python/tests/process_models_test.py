#!/usr/bin/python3
"""//python:process_models_test: the package where Python services run.

Each model is a real service on loopback, with the package added as
docs/PACKAGE.md shows, driven by real requests; then every worker process's
own Control service (found by its address file, rsslab-control-<pid>.addr)
answers a snapshot and `rsslab_ctl trim` reaches every thread it tracks:

- gunicorn `gthread` (Debian's gunicorn and python3-flask): 2 workers x 8
  threads, `track_all()` and `serve()` in `post_fork`;
- gRPC's multiprocessing pattern: grpc imported, 2 workers forked, each its
  own `grpc.server` on one `SO_REUSEPORT` port and its own Control;
- for both, the service by its name (the registry, registry/registry.h):
  `rsslab_ctl --control=all:NAME` lists both workers, a snapshot and a trim
  reach each (its own pid and figures), a SIGKILLed worker's entry is found
  stale, removed and not used; for gRPC also a stopped worker failing the
  call by name, and the loadgen's phase, snapshot and trim steps reaching
  each worker;
- uWSGI (Debian's uwsgi-core and its python3 plugin): a master and 2
  workers x 4 threads, `serve(name=)` in `uwsgi.post_fork_hook`;
- Celery's prefork pool (Debian's python3-celery, the filesystem:// broker,
  offline): 2 pool processes, `serve(name=)` in `worker_process_init`,
  each counting the tasks it ran;
  for both, every worker by the service's name, its own requests counted,
  a snapshot and a trim reaching each;
- asyncio: nested `asyncio.run()` inside `asyncio.to_thread` workers, the
  outer loop's default executor tracked by `track_all()`;
- `grpc.aio`: `grpc_interceptor(aio=True)` counts the requests and
  `serve(server=aio_server)` is refused in one line.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402
CTL = os.path.join(WS, "ctl/rsslab_ctl")
LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")
PY = "/usr/bin/python3"


PKG = package_tree.make(WS, TMP)
RUN = os.path.join(TMP, "run")  # XDG_RUNTIME_DIR: where the address files go
os.makedirs(RUN, exist_ok=True)


def env():
    return package_tree.service_env(PKG, RUN)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def addresses(pids, want, timeout=20):
    """{pid: HOST:PORT} from each worker's address file, waited for."""
    deadline = time.monotonic() + timeout
    found = {}
    while time.monotonic() < deadline:
        for pid in pids:
            try:
                with open(os.path.join(RUN, "rsslab-control-%d.addr" % pid)) as f:
                    lines = f.read().splitlines()  # HOST:PORT, service=, pid=, start=[, metrics=]
                if len(lines) >= 4:
                    found[pid] = lines[0]
            except OSError:
                pass
        if len(found) >= want:
            break
        time.sleep(0.1)
    return found


def ctl(addr, *args, split=False):
    r = subprocess.run([CTL, "--control=" + addr, "--timeout=20s"] + list(args),
                       capture_output=True, text=True, timeout=60, env=env())
    if split:
        return r.returncode, r.stdout.strip(), r.stderr.strip()
    return r.returncode, (r.stdout + r.stderr).strip()


def listed_pids(out):
    """The pids of `rsslab_ctl --control=all:NAME workers` lines
    ("pid P at HOST:PORT service NAME start TICKS")."""
    pids = []
    for line in out.splitlines():
        w = line.split()
        if len(w) >= 6 and w[0] == "pid" and w[2] == "at" and w[4] == "service":
            pids.append(int(w[1]))
    return sorted(pids)


def service_checks(label, name, found, served=None, threads=True):
    """The workers `found` ({pid: addr}) by their service's name: listed, a
    snapshot and a trim reaching each one's own process. `served`: each
    worker's request count seen on its own address (at most what all: sees).
    `threads`: the workers track a pool the trim must reach (uWSGI's and
    Celery's are not ThreadPoolExecutors: 0/0, the global part only)."""
    service = "all:" + name
    t0 = time.monotonic()
    code, out = ctl(service, "workers")
    check(code == 0 and listed_pids(out) == sorted(found),
          "%s: rsslab_ctl --control=%s workers lists both workers %s: %s"
          % (label, service, sorted(found), out[:300]))
    code, out, err = ctl(service, "snapshot", "--json", split=True)
    snaps = {}
    for line in out.splitlines():
        s = json.loads(line)
        snaps[int(s.get("pid", 0))] = s
    check(code == 0 and sorted(snaps) == sorted(found),
          "%s: a snapshot of %s reached each worker's own process (pids %s): %s %s"
          % (label, service, sorted(snaps), code, err[:200]))
    for pid, s in sorted(snaps.items()):
        if served is not None:
            mine = int(s.get("requests_served", 0))
            check(mine >= served.get(pid, 1) > 0,
                  "%s: worker %d's own figure through %s: %d requests served (its own "
                  "address said %d)" % (label, pid, service, mine, served.get(pid, -1)))
    code, out, err = ctl(service, "trim", split=True)
    lines = out.splitlines()
    reached = {}
    for line in lines:
        w = line.split()
        for word in w:
            if "/" in word and word.replace("/", "").isdigit() and w[:1] == ["pid"]:
                n, _, of = word.partition("/")
                reached[int(w[1])] = n == of and (int(of) >= 1 or not threads)
    check(code == 0 and len(lines) == len(found) and sorted(reached) == sorted(found)
          and all(reached.values()),
          "%s: a trim of %s reached each worker, one line each: %s %s"
          % (label, service, lines, err[:200]))
    print("      %s: the service by its name: %.1f s" % (label, time.monotonic() - t0))


def stale_checks(label, name, found, victim):
    """SIGKILL one worker: its entry stays behind (no exit handler ran); the
    registry finds it stale, removes it and lists only the live worker."""
    service = "all:" + name
    t0 = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    entry = os.path.join(RUN, "rsslab-control-%d.addr" % victim)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # dead (a zombie counts) before we look
        try:
            with open("/proc/%d/stat" % victim) as f:
                if f.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    break
        except OSError:
            break
        time.sleep(0.05)
    left = os.path.exists(entry)
    code, out, err = ctl(service, "workers", split=True)
    live = [p for p in found if p != victim]
    listed = listed_pids(out)
    # gunicorn's master may have started a replacement already: it is listed too.
    check(left and victim not in listed and all(p in listed for p in live) and ("rsslab-control-%d.addr" % victim) in err
          and "stale: pid %d" % victim in err and "(removed)" in err
          and not os.path.exists(entry),
          "%s: the SIGKILLed worker %d's entry (left behind: %s) is found stale, removed and "
          "not listed: %s | %s" % (label, victim, left, out[:200], err[:300]))
    code, out, err = ctl(service, "snapshot", "--json", split=True)
    pids = [int(json.loads(l).get("pid", 0)) for l in out.splitlines()]
    check(code == 0 and victim not in pids and all(p in pids for p in live),
          "%s: after the kill, a snapshot of %s reaches only the live worker %s: %s %s"
          % (label, service, live, pids, err[:200]))
    print("      %s: a SIGKILLed worker: %.1f s" % (label, time.monotonic() - t0))


def reach_every_worker(label, found, min_threads):
    """A snapshot, then a release that reaches every tracked thread, per worker."""
    for pid, addr in sorted(found.items()):
        code, out = ctl(addr, "snapshot", "--json")
        snap = json.loads(out) if code == 0 else {}
        alive = int(snap.get("workers", {}).get("alive", 0))
        check(code == 0 and int(snap.get("pid", pid)) == pid and alive >= min_threads,
              "%s: worker %d answers a snapshot on its own Control (%s), %d tracked threads "
              "alive (>= %d)" % (label, pid, addr, alive, min_threads))
        code, out = ctl(addr, "trim")
        reached = ""
        for word in out.split():
            if "/" in word and word.replace("/", "").isdigit():
                reached = word
        n, _, of = reached.partition("/")
        check(code == 0 and n and n == of and int(of) >= min_threads,
              "%s: worker %d: the release reached %s tracked threads: %s"
              % (label, pid, reached or "?", out.splitlines()[0][:160] if out else ""))


GUNICORN_CONF = r'''
workers = 2
threads = 8
worker_class = "gthread"
bind = "127.0.0.1:%(port)d"
def post_fork(server, worker):
    import rsslab
    rsslab.track_all()          # gthread's pool is created after this hook
    rsslab.serve("127.0.0.1:0", metrics="127.0.0.1:0")  # docs/PACKAGE.md's snippet
    server.log.info("rsslab control %%s metrics %%s", rsslab.control_address(), rsslab.metrics_address())
'''

FLASK_APP = r'''
import os, time
from flask import Flask
app = Flask(__name__)
@app.route("/work")
def work():
    keep = [bytearray(4096) for _ in range(64)]
    time.sleep(0.005)
    return "%d %d" % (os.getpid(), len(keep))
'''


def drive_http(port, workers, concurrency=16, most=4000):
    """Requests from 16 threads until every worker has answered some (the
    kernel hands connections to whichever worker accepts first)."""
    answered = {}
    lock = threading.Lock()
    sent = [0]

    def one():
        while True:
            with lock:
                if sent[0] >= most or (len(answered) >= workers and sent[0] >= 400):
                    return
                sent[0] += 1
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/work" % port, timeout=10) as r:
                    pid = int(r.read().split()[0])
            except OSError:
                pid = 0
            with lock:
                answered[pid] = answered.get(pid, 0) + 1
    ts = [threading.Thread(target=one) for _ in range(concurrency)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return answered


def gunicorn_metrics(log, found):
    """Each worker logged its Control and /metrics addresses (the snippet's
    log line), and its /metrics answers with the process's figures."""
    log.flush()
    log.seek(0)
    pairs = dict(re.findall(r"rsslab control (\S+) metrics (\S+)", log.read()))
    check(sorted(pairs) == sorted(found.values()),
          "gunicorn: each worker logged its Control and metrics address: %s" % pairs)
    for control, metrics in sorted(pairs.items()):
        try:
            with urllib.request.urlopen("http://%s/metrics" % metrics, timeout=10) as r:
                body = r.read().decode()
        except OSError as e:
            body = str(e)
        check("rsslab_process_resident_memory_bytes " in body,
              "gunicorn: the worker at %s serves /metrics on %s: %s"
              % (control, metrics, body[:120].replace("\n", " | ")))


def gunicorn_checks():
    if not shutil.which("gunicorn"):
        check(False, "gunicorn: Debian's gunicorn is installed (./rsslab setup)")
        return
    port = package_tree.free_port()
    d = os.path.join(TMP, "gunicorn")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "gconf.py"), "w") as f:
        f.write(GUNICORN_CONF % {"port": port})
    with open(os.path.join(d, "app.py"), "w") as f:
        f.write(FLASK_APP)
    log = open(os.path.join(d, "gunicorn.log"), "w+")
    p = subprocess.Popen([PY, "-m", "gunicorn", "-c", "gconf.py", "app:app"], cwd=d, env=env(),
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        check(package_tree.wait_port(port), "gunicorn: 2 gthread workers listen on 127.0.0.1:%d" % port)
        answered = drive_http(port, 2)
        workers = children(p.pid)
        check(sorted(answered) == sorted(workers),
              "gunicorn: requests answered by each worker %s, none failed: %s"
              % (workers, answered))
        found = addresses(workers, 2)
        check(len(workers) == 2 and sorted(found) == sorted(workers),
              "gunicorn: each of the 2 workers %s has its own Control (%s); the master none: %s"
              % (workers, found, not os.path.exists(
                  os.path.join(RUN, "rsslab-control-%d.addr" % p.pid))))
        reach_every_worker("gunicorn", found, 1)
        gunicorn_metrics(log, found)
        service_checks("gunicorn", "gunicorn", found)  # the default name: the program's
        if len(found) == 2:
            stale_checks("gunicorn", "gunicorn", found, max(found))
    finally:
        package_tree.stop(p)
        log.seek(0)
        text = log.read()
        check("Traceback" not in text, "gunicorn: its log is clean: %s" % text.strip()[-300:])


GRPC_MP = r'''
import concurrent.futures as cf, os, signal, sys, time
import grpc                      # imported before the fork, as gRPC's example does
import rsslab
port = int(sys.argv[1])
def handle(request, context):
    keep = [bytearray(4096) for _ in range(64)]
    return bytes([len(keep) % 256])
def worker():
    pool = rsslab.track(cf.ThreadPoolExecutor(max_workers=4))
    server = grpc.server(pool, interceptors=[rsslab.grpc_interceptor()],
                         options=[("grpc.so_reuseport", 1)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "mp.Work", {"Do": grpc.unary_unary_rpc_method_handler(handle)}),))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    rsslab.serve("127.0.0.1:0", name="grpc-mp")  # each worker's own Control port
    signal.sigwait({signal.SIGTERM})
    rsslab.stop()
    server.stop(1).wait()
    os._exit(0)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # for sigwait, here and in workers
pids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        worker()
    pids.append(pid)
print(" ".join(map(str, pids)), flush=True)
signal.sigwait({signal.SIGTERM})
for pid in pids:
    os.kill(pid, signal.SIGTERM)
for pid in pids:
    os.waitpid(pid, 0)
'''

GRPC_CLIENT = r'''
import sys, threading, grpc
port, n = int(sys.argv[1]), int(sys.argv[2])
ok = []
def one():
    # New connections (no shared subchannel): SO_REUSEPORT spreads connections.
    for _ in range(n // 8 // 5):
        ch = grpc.insecure_channel("127.0.0.1:%d" % port,
                                   options=[("grpc.use_local_subchannel_pool", 1)])
        call = ch.unary_unary("/mp.Work/Do")
        for _ in range(5):
            ok.append(call(b"x", timeout=10) is not None)
        ch.close()
ts = [threading.Thread(target=one) for _ in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sum(ok), len(ok))
'''


LOADGEN_SCENARIO = r'''
name: "workers"
step { name: "fill" set_phase { phase: "fill" } }
step { name: "after_fill" snapshot { gc: true } }
step { name: "trim" trim { } }
'''


def loadgen_checks(found):
    """The loadgen's phase, snapshot and trim steps reach every worker of the
    service: one record each, stamped with the worker's pid and address."""
    d = os.path.join(TMP, "loadgen-workers")
    os.makedirs(d, exist_ok=True)
    scenario = os.path.join(d, "workers.txtpb")
    with open(scenario, "w") as f:
        f.write(LOADGEN_SCENARIO)
    out = os.path.join(d, "run")
    r = subprocess.run([LOADGEN, "--scenario=" + scenario, "--control=all:grpc-mp",
                        "--target=127.0.0.1:1", "--out=" + out, "--progress=lines"],
                       capture_output=True, text=True, timeout=60, env=env())
    by_step = {}
    try:
        with open(os.path.join(out, "events.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if not e.get("workerPid", e.get("worker_pid")):
                    continue  # the service's own record (master + workers), after each step's
                for kind in ("phase", "snapshot", "trim"):
                    if kind in e:
                        by_step.setdefault(kind, {})[int(e.get("workerPid", e.get(
                            "worker_pid", 0)))] = e.get("workerControl", e.get(
                                "worker_control", ""))
    except OSError:
        pass
    want = {pid: addr for pid, addr in found.items()}
    check(r.returncode == 0 and all(by_step.get(k) == want for k in ("phase", "snapshot", "trim")),
          "gRPC multiprocessing: rsslab_loadgen --control=all:grpc-mp (exit %d): its phase, "
          "snapshot and trim steps reached each worker %s, one record each with its pid and "
          "address: %s | %s" % (r.returncode, want, by_step, (r.stdout + r.stderr).strip()[-400:]))


def stopped_worker_checks(found):
    """A worker that does not answer fails the call by name; the other still
    answers, and the exit status says one failed."""
    a, b = sorted(found)
    os.kill(b, signal.SIGSTOP)
    try:
        r = subprocess.run([CTL, "--control=all:grpc-mp", "--timeout=2s", "snapshot"],
                           capture_output=True, text=True, timeout=30, env=env())
    finally:
        os.kill(b, signal.SIGCONT)
    lines = r.stdout.splitlines()
    check(r.returncode == 1 and len(lines) == 1 and lines[0].startswith("pid %d at" % a)
          and "snapshot failed on 1 of 2 workers: pid %d at" % b in r.stderr,
          "gRPC multiprocessing: a stopped worker %d fails the snapshot by name, worker %d "
          "answers, exit 1: %s | %s" % (b, a, r.stdout.strip()[:200], r.stderr.strip()[-300:]))


def grpc_multiprocessing_checks():
    port = package_tree.free_port()
    p = subprocess.Popen([PY, "-c", GRPC_MP, str(port)], env=env(), cwd=TMP,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = [int(x) for x in p.stdout.readline().split()]
        found = addresses(pids, 2)
        check(len(pids) == 2 and len(found) == 2,
              "gRPC multiprocessing: 2 forked workers on one SO_REUSEPORT port, each with its "
              "own Control: %s" % found)
        r = subprocess.run([PY, "-c", GRPC_CLIENT, str(port), "400"], env=env(), cwd=TMP,
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and r.stdout.split()[:1] == r.stdout.split()[1:2],
              "gRPC multiprocessing: requests answered: %s %s"
              % (r.stdout.strip(), r.stderr.strip()[-200:]))
        served = {}
        for pid, addr in found.items():
            code, out = ctl(addr, "snapshot", "--json")
            served[pid] = int(json.loads(out).get("requests_served", 0)) if code == 0 else -1
        check(len(served) == 2 and all(v > 0 for v in served.values()),
              "gRPC multiprocessing: both workers served requests, counted by their "
              "interceptors: %s" % served)
        reach_every_worker("gRPC multiprocessing", found, 1)
        service_checks("gRPC multiprocessing", "grpc-mp", found, served)
        loadgen_checks(found)
        if len(found) == 2:
            stopped_worker_checks(found)
            stale_checks("gRPC multiprocessing", "grpc-mp", found, max(found))
    finally:
        package_tree.stop(p)
        err = p.stderr.read()
        check("Traceback" not in err, "gRPC multiprocessing: stderr clean: %s" % err[-300:])


UWSGI_APP = r'''
import os
import rsslab
import uwsgi                            # uWSGI's own module, in its workers only
def _serve():                           # in each worker, after the fork
    rsslab.serve("127.0.0.1:0", name="uwsgi-app")  # no grpc here: the native transport
uwsgi.post_fork_hook = _serve
def application(env, start_response):
    rsslab.count_request()
    keep = [bytearray(4096) for _ in range(64)]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"%d %d" % (os.getpid(), len(keep))]
'''


def uwsgi_checks():
    if not shutil.which("uwsgi"):
        check(False, "uWSGI: Debian's uwsgi-core is installed (./rsslab setup)")
        return
    port = package_tree.free_port()
    d = os.path.join(TMP, "uwsgi")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "app.py"), "w") as f:
        f.write(UWSGI_APP)
    log = open(os.path.join(d, "uwsgi.log"), "w+")
    p = subprocess.Popen(["uwsgi", "--plugin", "python3", "--master", "--processes", "2",
                          "--threads", "4", "--http-socket", "127.0.0.1:%d" % port,
                          "--wsgi-file", "app.py", "--die-on-term"],
                         cwd=d, env=env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        check(package_tree.wait_port(port), "uWSGI: a master and 2 workers listen on 127.0.0.1:%d" % port)
        answered = drive_http(port, 2, most=2000)
        workers = children(p.pid)
        found = addresses(workers, 2)
        check(len(workers) == 2 and sorted(found) == sorted(workers)
              and sorted(answered) == sorted(workers),
              "uWSGI: each of the 2 workers %s answered (%s) and has its own Control: %s"
              % (workers, answered, found))
        served = {pid: 1 for pid in answered}
        service_checks("uWSGI", "uwsgi-app", found, served, threads=False)
    finally:
        package_tree.stop(p)
        log.seek(0)
        text = log.read()
        check("Traceback" not in text and "Segmentation" not in text,
              "uWSGI: its log is clean (no traceback, no crash at exit): %s"
              % text.strip()[-300:])


CELERY_APP = r'''
import os
from celery import Celery
from celery.signals import worker_process_init
app = Celery("tasks", broker="filesystem://")
app.conf.broker_transport_options = {"data_folder_in": "queue", "data_folder_out": "queue"}
@worker_process_init.connect
def _serve(**kwargs):                   # in each pool process, after the fork
    import rsslab
    rsslab.serve("127.0.0.1:0", name="celery-app")
@app.task
def work(n):
    import rsslab
    rsslab.count_request()
    keep = [bytearray(4096) for _ in range(64)]
    return os.getpid()
'''


def celery_checks():
    d = os.path.join(TMP, "celery")
    os.makedirs(os.path.join(d, "queue"), exist_ok=True)
    with open(os.path.join(d, "tasks.py"), "w") as f:
        f.write(CELERY_APP)
    e = env()
    e["PYTHONPATH"] = PKG + ":" + d
    log = open(os.path.join(d, "celery.log"), "w+")
    p = subprocess.Popen([PY, "-m", "celery", "-A", "tasks", "worker", "--pool=prefork",
                          "--concurrency=2", "--loglevel=warning", "--without-heartbeat",
                          "--without-mingle", "--without-gossip"],
                         cwd=d, env=e, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        pool = []
        while time.monotonic() < deadline and len(pool) < 2:
            pool = children(p.pid)
            time.sleep(0.1)
        found = addresses(pool, 2)
        check(len(found) == 2, "Celery: 2 prefork pool processes %s, each with its own Control: %s"
              % (pool, found))
        r = subprocess.run([PY, "-c", "from tasks import work\nfor i in range(200): work.delay(i)"],
                           cwd=d, env=e, capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "Celery: 200 tasks sent: %s" % r.stderr.strip()[-200:])
        counts = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(counts.values()) < 200:
            code, out, _ = ctl("all:celery-app", "snapshot", "--json", split=True)
            counts = {int(json.loads(l)["pid"]): int(json.loads(l).get("requests_served", 0))
                      for l in out.splitlines()}
            time.sleep(0.2)
        check(sum(counts.values()) == 200 and all(v > 0 for v in counts.values()),
              "Celery: the 200 tasks ran in both pool processes, each counting its own: %s"
              % counts)
        service_checks("Celery", "celery-app", found, counts, threads=False)
    finally:
        package_tree.stop(p)
        log.seek(0)
        text = log.read()
        check("Traceback" not in text and "Segmentation" not in text and "exitcode" not in text,
              "Celery: its log is clean (no traceback, no crash): %s" % text.strip()[-300:])


ASYNCIO = r'''
import asyncio, os, signal, sys, threading
import rsslab
rsslab.track_all()       # before any loop creates its default executor
def alloc():
    return len([bytearray(4096) for _ in range(64)])
async def inner():
    return sum(await asyncio.gather(*[asyncio.to_thread(alloc) for _ in range(4)]))
def nested():
    return asyncio.run(inner())   # seed 002's shape: a loop inside a worker thread
async def main():
    for _ in range(5):
        await asyncio.gather(*[asyncio.to_thread(nested) for _ in range(12)])
    done = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set)
    print("ready", rsslab.serve("127.0.0.1:0"), flush=True)
    await done.wait()                              # no executor thread kept busy
asyncio.run(main())
rsslab.stop()
'''


def asyncio_checks():
    p = subprocess.Popen([PY, "-c", ASYNCIO], env=env(), cwd=TMP,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().split()
        addr = line[1] if len(line) == 2 else ""
        check(bool(addr), "asyncio: nested asyncio.run() in to_thread workers ran; Control at %s"
              % addr)
        # The outer loop's default executor: min(32, cpus + 4) threads.
        want = min(32, (os.cpu_count() or 1) + 4)
        if addr:
            reach_every_worker("asyncio", {p.pid: addr}, want)
    finally:
        package_tree.stop(p)
        err = p.stderr.read()
        check(p.returncode == 0 and "Traceback" not in err,
              "asyncio: the service exits 0 with a clean stderr: %s" % err[-300:])


AIO = r'''
import asyncio, sys
import grpc, grpc.aio, rsslab
async def handle(request, context):
    return b"ok"
async def main():
    server = grpc.aio.server(interceptors=[rsslab.grpc_interceptor(aio=True)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "aio.Work", {"Do": grpc.unary_unary_rpc_method_handler(handle)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        rsslab.serve("127.0.0.1:%d" % port, server=server)
        print("shared: accepted")
    except (TypeError, ValueError) as e:
        print("shared:", type(e).__name__, e)
    async with grpc.aio.insecure_channel("127.0.0.1:%d" % port) as ch:
        call = ch.unary_unary("/aio.Work/Do")
        for _ in range(20):
            await call(b"x", timeout=10)
    print("counted", rsslab.snapshot()["requestsServed"])
    await server.stop(1)
asyncio.run(main())
'''


def aio_checks():
    r = subprocess.run([PY, "-c", AIO], env=env(), cwd=TMP, capture_output=True, text=True,
                       timeout=60)
    lines = r.stdout.splitlines()
    shared = next((l for l in lines if l.startswith("shared:")), "")
    check(shared.startswith("shared: TypeError serve(server=) cannot share a grpc.aio server")
          and len(shared.splitlines()) == 1,
          "grpc.aio: serve(server=aio_server) refused in one line: %s %s"
          % (shared, r.stderr.strip()[-300:]))
    check("counted 20" in lines, "grpc.aio: grpc_interceptor(aio=True) counted 20 of 20 "
          "requests: %s" % lines[-1:])


def main():
    package_tree.run_parts("process_models_test", (
        gunicorn_checks, grpc_multiprocessing_checks, uwsgi_checks, celery_checks,
        asyncio_checks, aio_checks))


if __name__ == "__main__":
    main()
