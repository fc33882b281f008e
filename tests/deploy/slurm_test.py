#!/usr/bin/python3
"""The Slurm deployment on a real one-node Slurm cluster.

Starts munged, slurmctld and slurmd (Debian's slurm-wlm 22.05) as root with
their own SLURM_CONF, munge socket and state in a temporary directory (/etc
is left alone), submits deploy/slurm/submit.sh's job array (one task per
cell of a small matrix) and its merge job (--dependency=afterany), cancels
one running task and requeues it (scontrol requeue), waits for the queue to
drain, and checks the merge job's table: every cell, the same columns as a
one-machine sweep, the cancelled attempt kept but not counted. Stops the
daemons it started by their pids.

Skips (exit 0, saying why) when not root or when slurm-wlm or munge are not
installed (`./rsslab setup` installs both).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import image_root  # noqa: E402

DEADLINE_S = 100  # the whole test; normally about 30 s

SCENARIO = """name: "slurm-smoke"
sweep { profiles: ["glibc", "jemalloc"] threads: [1, 2] repeats: 1 }
load_defaults { concurrency: 16 channels: 2 }
step { name: "fill" set_phase { phase: "fill" cache_limit_mb: 100 } }
step { name: "fill" load { requests: 3000 } }
step { name: "after_fill" snapshot { gc: true } }
step { name: "shrink" set_phase { phase: "shrink" cache_limit_mb: 10 } }
step { name: "shrink" load { requests: 1500 } }
step { name: "after_shrink" snapshot { gc: true } }
step { name: "idle" set_phase { phase: "idle" } }
step { name: "idle" wait { seconds: 0.5 } }
step { name: "after_idle" snapshot { gc: true } }
step { name: "trim" set_phase { phase: "trim" gc: true } }
"""


def skip(why):
    print("SKIPPED: %s" % why)
    sys.exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged + slurmctld + slurmd in the foreground, children of this test."""

    def __init__(self, d):
        self.d = d
        self.procs = []
        host = socket.gethostname().split(".")[0]
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(d, sub))
        key = os.path.join(d, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(128))
        os.chmod(key, 0o400)
        self.sock = os.path.join(d, "munge.sock")
        with open("/proc/meminfo") as f:
            mem_mb = int(f.readline().split()[1]) // 1024
        conf = "\n".join([
            "ClusterName=rsslabtest",
            # Addresses given: the host name need not resolve.
            "SlurmctldHost=%s(127.0.0.1)" % host,
            "SlurmctldPort=%d" % free_port(),
            "SlurmdPort=%d" % free_port(),
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "AuthInfo=socket=%s" % self.sock,
            "StateSaveLocation=%s/state" % d,
            "SlurmdSpoolDir=%s/spool" % d,
            "SlurmctldPidFile=%s/slurmctld.pid" % d,
            "SlurmdPidFile=%s/slurmd.pid" % d,
            "SlurmctldLogFile=%s/ctld.log" % d,
            "SlurmdLogFile=%s/d.log" % d,
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "KillWait=2",
            "MinJobAge=600",
            "SchedulerParameters=sched_interval=1",
            "NodeName=%s NodeAddr=127.0.0.1 CPUs=%d RealMemory=%d State=UNKNOWN" % (
                host, os.cpu_count(), min(mem_mb // 2, 4000)),
            "PartitionName=main Nodes=%s Default=YES MaxTime=INFINITE State=UP" % host,
        ]) + "\n"
        self.conf = os.path.join(d, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def start(self):
        d = self.d
        self.spawn(["/usr/sbin/munged", "-F", "--force", "--socket=" + self.sock,
                    "--key-file=%s/munge.key" % d, "--pid-file=%s/munged.pid" % d,
                    "--log-file=%s/munged.log" % d, "--seed-file=%s/munged.seed" % d], "munged")
        self.wait_for(lambda: os.path.exists(self.sock), "munged's socket")
        self.spawn(["/usr/sbin/slurmctld", "-D", "-i"], "slurmctld")
        self.spawn(["/usr/sbin/slurmd", "-D"], "slurmd")
        self.wait_for(lambda: "idle" in self.cmd(["sinfo", "-h", "-o", "%T"]), "an idle node",
                      logs=["ctld.log", "d.log"])

    def spawn(self, args, name):
        out = open(os.path.join(self.d, name + ".out"), "w")
        self.procs.append((name, subprocess.Popen(args, env=self.env, stdout=out,
                                                  stderr=subprocess.STDOUT)))

    def cmd(self, args, check=False):
        r = subprocess.run(args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=30)
        if check and r.returncode != 0:
            raise AssertionError("%s: exit %d: %s" % (args, r.returncode, r.stderr))
        return r.stdout

    def wait_for(self, cond, what, timeout=40, logs=()):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return
            for name, p in self.procs:
                if p.poll() is not None:
                    raise AssertionError("%s exited %d while waiting for %s:\n%s" % (
                        name, p.returncode, what, self.tail(name + ".out")))
            time.sleep(0.2)  # polling the daemons' state: they print no ready line
        raise AssertionError("no %s after %d s\n%s" % (
            what, timeout, "\n".join(self.tail(l) for l in logs)))

    def tail(self, name):
        try:
            with open(os.path.join(self.d, name)) as f:
                return "== %s\n%s" % (name, "".join(f.readlines()[-20:]))
        except OSError:
            return "== %s: none" % name

    def stop(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(self.d, ignore_errors=True)


def main():
    if os.geteuid() != 0:
        skip("not root: a Slurm cluster's daemons run as root here (CI runs ./rsslab test as root)")
    for b in ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch"):
        if not os.access(b, os.X_OK):
            skip("%s is not installed: ./rsslab setup installs slurm-wlm and munge" % b)
    start = time.time()
    tmp = os.environ["TEST_TMPDIR"]
    root = os.path.join(tmp, "root")
    bindir = image_root.make(root)
    shared = os.path.join(tmp, "shared")
    os.makedirs(shared)
    scenario = os.path.join(shared, "sweep.txtpb")
    with open(scenario, "w") as f:
        f.write(SCENARIO)
    code, out, err = image_root.run([bindir + "/rsslab_loadgen", "--scenario=" + scenario,
                                     "--print_cells", "--json"])
    assert code == 0, err
    total = json.loads(out)["cells_total"]
    assert total >= 4, total

    # The daemons' sockets (munge's, slurmd's per step) live in this
    # directory and a socket path has at most 108 bytes: TEST_TMPDIR's is
    # longer, so the cluster lives in a short temporary directory (removed
    # at the end).
    cluster_dir = tempfile.mkdtemp(prefix="rsslab-slurm-")
    os.chmod(cluster_dir, 0o755)
    cl = Cluster(cluster_dir)
    try:
        cl.start()
        print("cluster up in %.1f s" % (time.time() - start))
        cl.env.update(RSSLAB_BIN=bindir)
        submitted = cl.cmd([image_root.runfile("deploy/slurm/submit.sh"), scenario, shared],
                           check=True)
        print(submitted.strip())
        array = submitted.split()[2]

        # One running task: cancel it mid-cell, then requeue it.
        running = []
        cl.wait_for(lambda: running.extend(
            cl.cmd(["squeue", "-h", "-t", "R", "-j", array, "-o", "%i"]).split()) or running,
            "a running array task")
        task = running[0]
        index = task.split("_")[1]

        def cell_begun():
            # The task's run directory holds a record of its cell: the cancel
            # interrupts a cell that has begun.
            cells = os.path.join(shared, "cells")
            for d in os.listdir(cells) if os.path.isdir(cells) else []:
                if d.startswith("cell-%s-" % index):
                    with open(os.path.join(cells, d, "events.jsonl")) as f:
                        if '"step":{"step"' in f.read():
                            return True
            return False
        cl.wait_for(cell_begun, "a step of cell %s" % index)
        cl.cmd(["scancel", task], check=True)
        cl.wait_for(lambda: "CANCELLED" in cl.cmd(["squeue", "-h", "-t", "all", "-j", task,
                                                   "-o", "%T"]) or
                    not cl.cmd(["squeue", "-h", "-j", task, "-o", "%T"]).strip(),
                    "the task cancelled")
        cl.cmd(["scontrol", "requeue", task], check=True)
        # A requeued job waits (BeginTime) before it may start again; now.
        cl.cmd(["scontrol", "update", "JobId=" + task, "StartTime=now"])
        print("cancelled and requeued %s after %.1f s" % (task, time.time() - start))

        left = DEADLINE_S - (time.time() - start)
        cl.wait_for(lambda: not cl.cmd(["squeue", "-h", "-o", "%i"]).strip(),
                    "an empty queue", timeout=max(10, left), logs=["ctld.log"])
        merged = os.path.join(shared, "merged")
        outs = sorted(f for f in os.listdir(shared) if f.startswith("rsslab-merge-"))
        assert outs, "the merge job left no output: %s" % os.listdir(shared)
        print(open(os.path.join(shared, outs[-1])).read())
        results = image_root.check_complete_merge(merged, total,
                                                  image_root.runfile("loadgen/results/plots_and_advice.py"))
        # The cancelled attempt is kept (two attempts of one cell), the
        # requeued one counts.
        attempts = {}
        for e in results:
            attempts.setdefault(e.get("cell_index", 0), []).append(e)
        again = [i for i, a in attempts.items() if len(a) > 1]
        assert len(again) == 1, "one cell ran twice: %s" % sorted(attempts)
        first, second = attempts[again[0]][0], attempts[again[0]][1]
        assert not first["cell_result"].get("ok"), first
        assert second["cell_result"].get("ok"), second
        md = open(os.path.join(merged, "summary.md")).read()
        assert "## Attempts that do not count" in md
        print("PASS in %.1f s" % (time.time() - start))
    finally:
        cl.stop()


if __name__ == "__main__":
    main()
