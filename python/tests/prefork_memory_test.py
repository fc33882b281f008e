#!/usr/bin/python3
"""//python:prefork_memory_test: a pre-fork service's memory is its master's
and its workers' together.

A real pre-fork gRPC service (gRPC's multiprocessing pattern with the
package: a master forks 2 workers, each with its own Control registered
under the name "prefork"), the workers holding different amounts of memory
(16 and 48 MiB of ballast), driven by `rsslab_loadgen --control=all:prefork`:

- a run (fill, snapshot, idle, snapshot, a trim step, phase trim): service.csv has, for every
  phase, exactly the master and the 2 workers (pids checked against the
  process tree) and their total; the total is their sum; each process's RSS
  matches /proc/PID/status read by this test right after; summed PSS is
  below summed RSS (the pages shared since the fork count once); summary.csv's
  rss columns are the total; summary.md has a table per process;
- a soak of the same service (refused before: a soak watched one process):
  completes, its watch records carry all 3 processes, and the worker made to
  grow each cycle is the one the flagged cycle names.
"""

import csv
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
LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")
PY = "/usr/bin/python3"
PKG = package_tree.make(WS, TMP)
RUN = os.path.join(TMP, "run")  # XDG_RUNTIME_DIR: where the address files go
os.makedirs(RUN, exist_ok=True)
MIB = 1048576.0

# Worker 0 holds 16 MiB, worker 1 48 MiB; with "grow" in argv worker 1 adds
# 4 MiB every 0.25 s (at most 160 MiB): a leak the soak must pin on it.
SERVICE = r'''
import concurrent.futures as cf, os, signal, sys, threading, time
import grpc
import rsslab
port, grow = int(sys.argv[1]), sys.argv[2] == "grow"
def worker(i):
    ballast = bytearray((16 + 32 * i) << 20)
    for k in range(0, len(ballast), 4096):
        ballast[k] = 1
    leak = []
    def leaking():
        while len(leak) < 40:
            b = bytearray(4 << 20)
            for k in range(0, len(b), 4096):
                b[k] = 1
            leak.append(b)
            time.sleep(0.25)
    if grow and i == 1:
        threading.Thread(target=leaking, daemon=True).start()
    pool = rsslab.track(cf.ThreadPoolExecutor(max_workers=2))
    server = grpc.server(pool, options=[("grpc.so_reuseport", 1)])
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    rsslab.serve("127.0.0.1:0", name="prefork")
    signal.sigwait({signal.SIGTERM})
    rsslab.stop()
    server.stop(1).wait()
    os._exit(0)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
pids = []
for i in range(2):
    pid = os.fork()
    if pid == 0:
        worker(i)
    pids.append(pid)
print(" ".join(map(str, pids)), flush=True)
signal.sigwait({signal.SIGTERM})
for pid in pids:
    os.kill(pid, signal.SIGTERM)
for pid in pids:
    os.waitpid(pid, 0)
'''

RUN_SCENARIO = r'''
name: "prefork"
step { name: "fill" set_phase { phase: "fill" } }
step { name: "after_fill" snapshot { gc: true } }
step { name: "idle" set_phase { phase: "idle" } }
step { name: "after_idle" snapshot { gc: true } }
step { name: "release" trim { } }
step { name: "trim" set_phase { phase: "trim" } }
'''

SOAK_SCENARIO = r'''
name: "prefork-soak"
soak { watch_interval_s: 0.2 growth_threshold_mb: 2 }
step { name: "soak" repeat { times: 3
step { name: "fill" set_phase { phase: "fill" } }
step { name: "idle" set_phase { phase: "idle" } }
step { name: "idle" wait { seconds: 1 } }
step { name: "after_idle" snapshot { gc: true } }
} }
'''


def env():
    return package_tree.service_env(PKG, RUN)


def addr_files(pids):
    return all(os.path.exists(os.path.join(RUN, "rsslab-control-%d.addr" % p)) for p in pids)


def start(grow):
    port = package_tree.free_port()
    p = subprocess.Popen([PY, "-c", SERVICE, str(port), "grow" if grow else "-"], env=env(),
                         cwd=TMP, stdout=subprocess.PIPE, text=True)
    pids = [int(x) for x in p.stdout.readline().split()]
    for _ in range(200):
        if addr_files(pids):
            break
        subprocess.run(["sleep", "0.1"])
    return p, pids


def loadgen(name, scenario_text):
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    scenario = os.path.join(d, "scenario.txtpb")
    with open(scenario, "w") as f:
        f.write(scenario_text)
    out = os.path.join(d, "out")
    r = subprocess.run([LOADGEN, "--scenario=" + scenario, "--control=all:prefork",
                        "--target=127.0.0.1:1", "--out=" + out, "--progress=lines"],
                       capture_output=True, text=True, timeout=60, env=env())
    return r, out


def proc_rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / MIB
    return -1


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def run_checks():
    p, pids = start(grow=False)
    try:
        check(len(pids) == 2 and addr_files(pids), "the service forked 2 workers %s, each "
              "with its Control registered" % pids)
        r, out = loadgen("run", RUN_SCENARIO)
        after = {pid: proc_rss(pid) for pid in [p.pid] + pids}  # /proc, read by the test
        text = (r.stdout + r.stderr).strip()
        check(r.returncode == 0 and "master pid %d" % p.pid in text,
              "rsslab_loadgen --control=all:prefork ran (exit %d) and found the master %d: %s"
              % (r.returncode, p.pid, text[-600:]))
        rows = list(csv.DictReader(read(os.path.join(out, "service.csv")).splitlines()))
        for phase in ("fill", "idle", "trim"):
            got = [x for x in rows if x["phase"] == phase]
            procs = sorted((x["role"], int(x["pid"])) for x in got if x["role"] != "total")
            want = sorted([("master", p.pid)] + [("worker", w) for w in pids])
            total = [x for x in got if x["role"] == "total"]
            summed = sum(float(x["rss_mib"]) for x in got if x["role"] != "total")
            check(procs == want and len(total) == 1 and
                  abs(float(total[0]["rss_mib"]) - summed) <= 0.3,
                  "%s: service.csv has exactly the master and the 2 workers %s and their "
                  "total, the sum of theirs: %s" % (phase, want, got))
            if total:
                pss = float(total[0]["pss_mib"]) if total[0]["pss_mib"] != "-" else -1
                check(0 < pss < float(total[0]["rss_mib"]),
                      "%s: summed PSS %.1f MiB is below summed RSS %s MiB (shared pages "
                      "once)" % (phase, pss, total[0]["rss_mib"]))
        trim = {int(x["pid"]): float(x["rss_mib"]) for x in rows
                if x["phase"] == "trim" and x["role"] != "total"}
        check(all(abs(trim.get(pid, -99) - rss) <= 1.5 for pid, rss in after.items()),
              "each process's RSS after the trim matches /proc/PID/status read by the test "
              "(within 1.5 MiB): %s vs %s" % (trim, after))
        if len(pids) == 2:
            w0, w1 = trim.get(pids[0], 0), trim.get(pids[1], 0)
            check(w1 - w0 >= 24, "the workers' own figures, not one copied: worker %d %.1f "
                  "MiB, worker %d (32 MiB more ballast) %.1f MiB" % (pids[0], w0, pids[1], w1))
        summary = list(csv.DictReader(read(os.path.join(out, "summary.csv")).splitlines()))
        idle_total = [x["rss_mib"] for x in rows if x["phase"] == "idle" and x["role"] == "total"]
        check(summary and idle_total and summary[0]["rss_idle_mib"] == idle_total[0],
              "summary.csv's rss_idle_mib is the service's total %s: %s"
              % (idle_total, summary[0] if summary else "no summary.csv"))
        md = read(os.path.join(out, "summary.md"))
        check("## Service memory: master and workers" in md and
              all(("### worker pid %d" % w) in md for w in pids) and
              ("### master pid %d" % p.pid) in md,
              "summary.md has the service's table and one per process: %s"
              % md[md.find("## Service"):][:400])
    finally:
        package_tree.stop(p)


def soak_checks():
    p, pids = start(grow=True)
    try:
        r, out = loadgen("soak", SOAK_SCENARIO)
        text = (r.stdout + r.stderr).strip()
        check(r.returncode == 0, "a soak of the whole service (--control=all:prefork) "
              "completes (exit %d): %s" % (r.returncode, text[-600:]))
        watch = []
        for line in read(os.path.join(out, "events.jsonl")).splitlines():
            e = json.loads(line)
            if e.get("label") == "watch" and "snapshot" in e:
                watch.append(e["snapshot"].get("service", {}).get("processes", []))
        check(watch and all(sorted(int(x["pid"]) for x in w) == sorted([p.pid] + pids)
                            for w in watch),
              "every watch record reads the master and both workers: %d records, first %s"
              % (len(watch), watch[:1]))
        md = read(os.path.join(out, "summary.md"))
        grower = "most in worker pid %d" % pids[1] if len(pids) == 2 else "?"
        check("**FLAGGED**" in md and grower in md,
              "the soak judges the total's growth and names the worker that grows (%s): %s"
              % (grower, md[md.find("| cycle"):][:700]))
    finally:
        package_tree.stop(p)


def main():
    package_tree.run_parts("prefork_memory_test", (run_checks, soak_checks))


if __name__ == "__main__":
    main()
