#!/usr/bin/python3
"""truth: rsslab_server against a plain Python process doing the same work.

For every cell (allocator profile x worker threads) it runs, side by side
(at the same time, each in its own process), under the same profile:
  - the reference: /usr/bin/python3 tools/truth/reference_worker.py, with the
    environment `rsslab_run --profile=P --print_env` gives (the profile's
    LD_PRELOAD and variables, set before the process starts), checked with
    `rsslab_run --profile=P --verify_pid=PID` (/proc/PID/maps and environ, as
    a launch checks a server) before its first request;
  - the host: rsslab_server started by `rsslab_run --profile=P` (verified the
    same way, plus the allocator the server reports), driven by
    rsslab_loadgen with the seed scenario's steps at the given shape (the
    scenario file is written from the same shape the reference gets).
Both make the same requests (ids 0..N-1 per load step, seed SplitMix64(1 +
id)): the cache's put count after fill and after shrink must be equal on
both sides, or the cell is an error. Each side's fill RSS and after-idle RSS
are taken minus its own start RSS (the host's: the fill set_phase's reply,
before any request, or after --warm_requests at cache limit 0 on both sides
and a release: the server's trim, the reference's alloc_stats.release_*);
a cell fails when the host's figure differs from the reference's by more
than --bound (fill) or --idle_bound (after idle; --idle_below_bound when the
host holds less) of the reference's and by more than --floor_mib MiB.

  truth.py --bin_dir=bin --profiles_file=agent/profiles.textproto \\
      --profiles=glibc,mimalloc3 --threads=1,16 --fill_requests=19200 \\
      --fill_limit_mb=20 --shrink_limit_mb=2 --idle_s=3 --out=/tmp/truth \\
      --markdown=/tmp/truth/TRUTH.md

Prints a table of every cell and "SKIP <profile>: <why>" for a profile that
cannot run here. Exit 0: every cell that ran is within the bound; 1: a cell
deviates or failed; 2: bad input.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"  # Debian's: what a Python service on this machine runs
MIB = 1 << 20
PHASES = ("start", "fill", "shrink", "idle")
# The host's records: the fill set_phase's reply (before any request), then
# the scenario's gc'd snapshot steps.
HOST_LABELS = {"start": "start", "after_fill": "fill", "after_shrink": "shrink",
               "after_idle": "idle"}
# The fill must store at least this many times the cache limit (seed 000's
# stores 3.5x; docs/FILL.md: churning twice is where the fill is seed 000's).
MIN_CHURN = 2.0


class CellError(Exception):
    """The cell could not be measured (a process failed, the workloads differ)."""


def scenario_text(a):
    """Seed 000's cycle (rsslab_loadgen --print_builtin=seed) at this shape, no
    trim, after the warm-up (its last snapshot is the start record)."""
    warm = [
        'step { name: "warm" set_phase { phase: "fill" cache_limit_mb: 0 } }',
        'step { name: "warm" load { requests: %d } }' % a.warm_requests,
        # What the warm-up freed is not in the start record, on either side
        # (the reference releases the same way): the host's gRPC threads
        # left more of it than the plain process, which the workload then
        # reused, and its figures came out low after idle.
        'step { name: "warm" trim { } }',
        'step { name: "start" snapshot { gc: true } }'] if a.warm_requests else []
    return "\n".join([
        'name: "truth"',
        'description: "tools/truth: seed 000 fill %d at %d MiB, shrink %d at %d MiB, idle %g s"'
        % (a.fill_requests, a.fill_limit_mb, a.shrink_requests, a.shrink_limit_mb, a.idle_s)] + warm + [
        'step { name: "fill" set_phase { phase: "fill" cache_limit_mb: %d } }' % a.fill_limit_mb,
        'step { name: "fill" load { requests: %d } }' % a.fill_requests,
        'step { name: "after_fill" snapshot { gc: true } }',
        'step { name: "shrink" set_phase { phase: "shrink" cache_limit_mb: %d } }' % a.shrink_limit_mb,
        'step { name: "shrink" load { requests: %d } }' % a.shrink_requests,
        'step { name: "after_shrink" snapshot { gc: true } }',
        'step { name: "idle" set_phase { phase: "idle" } }',
        'step { name: "idle" wait { seconds: %g } }' % a.idle_s,
        'step { name: "after_idle" snapshot { gc: true } }',
        ""])


class Tools:
    def __init__(self, a):
        self.run = a.rsslab_run or os.path.join(a.bin_dir, "rsslab_run")
        self.server = a.rsslab_server or os.path.join(a.bin_dir, "rsslab_server")
        self.loadgen = a.rsslab_loadgen or os.path.join(a.bin_dir, "rsslab_loadgen")
        self.profiles_file = a.profiles_file
        self.handler = a.handler
        self.worker = os.path.join(HERE, "reference_worker.py")
        for path in (self.run, self.server, self.loadgen):
            if not os.access(path, os.X_OK):
                raise ValueError("%s is not an executable (build it, or give --bin_dir)" % path)
        for path in (self.profiles_file, self.handler, self.worker, PYTHON):
            if not os.path.isfile(path):
                raise ValueError("%s: no such file" % path)

    def run_args(self, profile):
        return [self.run, "--profile_file=" + self.profiles_file, "--profile=" + profile]


def available_profiles(tools):
    """name -> None (runs here) or why it cannot, from rsslab_run --list_profiles."""
    out = subprocess.run([tools.run, "--profile_file=" + tools.profiles_file, "--list_profiles"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise ValueError("rsslab_run --list_profiles: " + out.stderr.strip())
    found = {}
    for line in out.stdout.splitlines():
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        found[name] = rest[len("UNAVAILABLE: "):].split(";")[0] if rest.startswith("UNAVAILABLE:") else None
    return found


def log_tail(path, n=8):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(f.read().splitlines()[-n:])
    except OSError:
        return "(no log)"


def reference_cell(tools, a, profile, threads, d):
    env_out = subprocess.run(tools.run_args(profile) + ["--print_env"], capture_output=True,
                             timeout=60)
    if env_out.returncode != 0:
        raise CellError("rsslab_run --print_env: " + env_out.stderr.decode(errors="replace").strip())
    env = dict(kv.split("=", 1) for kv in env_out.stdout.decode().split("\0") if "=" in kv)
    argv = [PYTHON, tools.worker, "--threads=%d" % threads, "--handler=" + tools.handler,
            "--fill_requests=%d" % a.fill_requests, "--shrink_requests=%d" % a.shrink_requests,
            "--fill_limit_mb=%d" % a.fill_limit_mb, "--shrink_limit_mb=%d" % a.shrink_limit_mb,
            "--idle_s=%g" % a.idle_s, "--warm_requests=%d" % a.warm_requests, "--wait_go"]
    err_path = os.path.join(d, "reference.err")
    with open(err_path, "w") as err, open(os.path.join(d, "reference.jsonl"), "w") as keep:
        p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=err, text=True)
        try:
            recs = {}
            for line in p.stdout:
                keep.write(line)
                rec = json.loads(line)
                if "phase" in rec:
                    recs[rec["phase"]] = rec
                if "ready" in rec:
                    # Before its first request: the allocator checked in /proc/PID.
                    v = subprocess.run(tools.run_args(profile) + ["--verify_pid=%d" % p.pid],
                                       capture_output=True, text=True, timeout=60)
                    if v.returncode != 0:
                        raise CellError("reference " + v.stderr.strip())
                    verified = v.stderr.strip()
                    p.stdin.write("go\n")
                    p.stdin.close()
            rc = p.wait(timeout=600)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    if rc != 0 or set(recs) != set(PHASES):
        raise CellError("reference exited %d with phases %s: %s" % (rc, sorted(recs), log_tail(err_path)))
    return {ph: {"rss": recs[ph]["rss_bytes"], "cache": recs[ph]["cache"],
                 "stats": recs[ph].get("allocator_stats", {})} for ph in PHASES}, verified


# The figures both sides report, per allocator: the reference's from
# alloc_stats.py, the server's from its snapshot's allocator_stats (the same
# calls in memory/alloc/alloc.cc), under the reference's names.
STATS_KEYS = {
    "glibc": ("arena", "hblkhd", "uordblks", "fordblks", "keepcost"),
    "jemalloc": ("allocated", "active", "resident", "retained", "mapped", "metadata"),
    "mimalloc": ("current_commit", "peak_commit"),
    "tcmalloc": ("current_allocated_bytes", "heap_size", "pageheap_free_bytes",
                 "pageheap_unmapped_bytes"),
}
# The short form a table shows: (label, key) in MiB.
STATS_SHOWN = {
    "glibc": (("used", "uordblks"), ("free", "fordblks"), ("mmap", "hblkhd")),
    "jemalloc": (("alloc", "allocated"), ("active", "active"), ("res", "resident"),
                 ("ret", "retained")),
    "mimalloc": (("commit", "current_commit"),),
    "tcmalloc": (("alloc", "current_allocated_bytes"), ("free", "pageheap_free_bytes"),
                 ("unmapped", "pageheap_unmapped_bytes")),
}


def decimal(v, max_digits=20):
    """v (a str, or what JSON gave) as an int when it is ASCII digits only and
    at most max_digits of them, else None: str.isdigit() also takes other
    scripts' digits and superscripts, which int() then refuses or reads."""
    s = str(v)
    return int(s) if re.fullmatch("[0-9]{1,%d}" % max_digits, s) else None


def host_stats(allocator, snap_stats):
    """The server's snapshot allocator_stats (int64 as JSON strings) as flat ints."""
    sub = snap_stats.get(allocator, {}) if isinstance(snap_stats, dict) else {}
    out = {"allocator": allocator}
    for key in STATS_KEYS.get(allocator, ()):
        n = decimal(sub.get(key, ""))
        if n is not None:
            out[key] = n
    return out


def stats_text(stats):
    """'alloc 12.3 res 40.1 ...' (MiB) for one side's one phase; '-' if none."""
    shown = STATS_SHOWN.get((stats or {}).get("allocator"), ())
    parts = ["%s %.1f" % (label, stats[key] / MIB) for label, key in shown if key in stats]
    return " ".join(parts) or "-"


def read_host_events(path, warm):
    """The start record: the warm-up's snapshot, or without one the fill
    set_phase's reply (before any request)."""
    recs = {}
    with open(path) as f:
        for line in f:
            ev = json.loads(line)
            label = ev.get("label")
            if not warm and label == "fill" and "phase" in ev and "snapshot" in ev["phase"]:
                snap = ev["phase"]["snapshot"]
                ph = "start"
            elif label in HOST_LABELS and "snapshot" in ev and (warm or label != "start"):
                snap, ph = ev["snapshot"], HOST_LABELS[label]
            else:
                continue
            cache = {k: n for k, n in ((k, decimal(v)) for k, v in snap.get("cache", {}).items())
                     if n is not None}
            recs[ph] = {"rss": int(snap["status"]["rss_bytes"]), "cache": cache,
                        "allocator": snap.get("allocator_library") or snap.get("allocator"),
                        "stats": host_stats(snap.get("allocator", ""),
                                            snap.get("allocator_stats", {}))}
    return recs


def stop(srv, server_pid, log):
    """SIGTERM to rsslab_run, which forwards it; SIGKILL to its group if it
    outlives its server by 10 s (it can miss the server's exit under load and
    wait in sigwait for good) or takes over 60 s."""
    if srv.poll() is not None:
        return
    srv.send_signal(signal.SIGTERM)
    deadline, gone_at = time.monotonic() + 60, None
    while srv.poll() is None and time.monotonic() < deadline:
        if gone_at is None and server_pid and not os.path.exists("/proc/%d" % server_pid):
            gone_at = time.monotonic()
        if gone_at is not None and time.monotonic() - gone_at > 10:
            break
        time.sleep(0.2)
    if srv.poll() is None:
        log.write("truth.py: rsslab_run (pid %d) still running %s; SIGKILL to its group\n" % (
            srv.pid, "10 s after its server exited" if gone_at else "60 s after SIGTERM"))
        os.killpg(srv.pid, signal.SIGKILL)
        srv.wait()


def host_cell(tools, a, profile, threads, d, scenario):
    log_path = os.path.join(d, "server.log")
    argv = tools.run_args(profile) + ["--server_binary=" + tools.server, "--",
                                      "--threads=%d" % threads, "--listen=127.0.0.1:0",
                                      "--control_listen=127.0.0.1:0", "--handler=" + tools.handler]
    with open(log_path, "w") as log:
        srv = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True,
                               start_new_session=True)
        try:
            ready = None
            for line in srv.stdout:  # rsslab_run prints the ready line once verified
                log.write(line)
                if line.startswith("rsslab_server ready "):
                    ready = dict(w.split("=", 1) for w in line.split()[2:] if "=" in w)
                    break
            if ready is None:
                srv.wait(timeout=30)
                raise CellError("server under %s not started (exit %s): %s" % (
                    profile, srv.returncode, log_tail(log_path)))
            log.flush()
            drain = threading.Thread(target=lambda: [log.write(l) for l in srv.stdout], daemon=True)
            drain.start()
            run_dir = os.path.join(d, "run")
            lg = subprocess.run([tools.loadgen, "--scenario=" + scenario, "--target=" + ready["data"],
                                 "--control=" + ready["control"], "--progress=none",
                                 "--out=" + run_dir], capture_output=True, text=True, timeout=1200)
            with open(os.path.join(d, "loadgen.log"), "w") as f:
                f.write(lg.stdout + lg.stderr)
            if lg.returncode != 0:
                raise CellError("rsslab_loadgen exited %d: %s" % (
                    lg.returncode, " | ".join((lg.stdout + lg.stderr).strip().splitlines()[-4:])))
        finally:
            stop(srv, (decimal(ready.get("pid", ""), 10) or 0) if ready else 0, log)
    recs = read_host_events(os.path.join(run_dir, "events.jsonl"), a.warm_requests > 0)
    if set(recs) != set(PHASES):
        raise CellError("host events.jsonl has phases %s, not %s" % (sorted(recs), list(PHASES)))
    verified = [l.strip() for l in open(log_path) if "verified in pid" in l]
    return recs, (verified[0] if verified else "")


def check_same_work(a, host, ref):
    """The same requests on both sides, and a fill that churned the cache."""
    for ph in ("fill", "shrink"):
        hp, rp = host[ph]["cache"].get("puts"), ref[ph]["cache"].get("puts")
        if hp != rp:
            raise CellError("cache puts after %s differ: host %s, reference %s (not the same "
                            "requests)" % (ph, hp, rp))
    for side, recs in (("host", host), ("reference", ref)):
        c = recs["fill"]["cache"]
        churn = (c.get("bytes", 0) + c.get("evicted_bytes", 0)) / float(a.fill_limit_mb * MIB)
        if churn < MIN_CHURN:
            raise CellError("%s fill stored %.2fx the %d MiB cache, under %.1fx: not seed 000's "
                            "fill" % (side, churn, a.fill_limit_mb, MIN_CHURN))


def deviation(host, ref):
    return (host - ref) / ref if ref > 0 else float("inf")


def cell_dir(a, profile, threads, attempt=1):
    """Where one try of a cell keeps its records: each try in a directory of
    its own (the loadgen never writes a run over another)."""
    return os.path.join(a.out, "%s-t%d" % (profile, threads) + ("" if attempt == 1 else "-try%d" % attempt))


def measure(tools, a, profile, threads, scenario, attempt=1):
    d = cell_dir(a, profile, threads, attempt)
    os.makedirs(d, exist_ok=True)
    cell = {"profile": profile, "threads": threads}
    # The two sides run at the same time (separate processes: neither's RSS
    # sees the other; only their speed does).
    sides = {"reference": lambda: reference_cell(tools, a, profile, threads, d),
             "host": lambda: host_cell(tools, a, profile, threads, d, scenario)}
    results = {}

    def run(side):
        t0 = time.monotonic()
        try:
            results[side] = sides[side]()
        except Exception as e:  # noqa: BLE001 -- a side that breaks is the cell's error
            results[side] = e if isinstance(e, CellError) else CellError(
                "%s %s: %s" % (side, type(e).__name__, e))
        cell[side + "_s"] = round(time.monotonic() - t0, 1)

    host_thread = threading.Thread(target=run, args=("host",))
    host_thread.start()
    run("reference")
    host_thread.join()
    try:
        for side in ("reference", "host"):
            if isinstance(results[side], CellError):
                raise results[side]
        (ref, cell["reference_verified"]), (host, cell["host_verified"]) = (
            results["reference"], results["host"])
        check_same_work(a, host, ref)
    except CellError as e:
        # One line: it goes into a table row and a progress line.
        cell.update(status="error", error=" / ".join(str(e).split("\n")).strip())
        return cell
    for side, recs in (("host", host), ("reference", ref)):
        cell[side] = {ph: recs[ph]["rss"] for ph in PHASES}
        cell[side + "_stats"] = {ph: recs[ph]["stats"] for ph in PHASES}
    cell["host_allocator"] = host["start"]["allocator"]
    failed = False
    for fig in ("fill", "idle"):
        h = (host[fig]["rss"] - host["start"]["rss"]) / MIB
        r = (ref[fig]["rss"] - ref["start"]["rss"]) / MIB
        dev = deviation(h, r)
        cell[fig] = {"host_mib": round(h, 1), "reference_mib": round(r, 1), "deviation": dev}
        # A difference within --floor_mib passes at any ratio: a few MiB is
        # one allocator region purged or not, not the host's own memory.
        bound = a.bound if fig == "fill" else a.idle_bound
        if fig == "idle" and dev < 0:
            bound = a.idle_below_bound if a.idle_below_bound > 0 else float("inf")
        failed = failed or (abs(dev) > bound and abs(h - r) > a.floor_mib)
    cell["status"] = "FAIL" if failed else "pass"
    return cell


def fmt_dev(d):
    return "inf" if d == float("inf") else "%+.0f %%" % (100 * d)


def summary(cell):
    """'fill +49 % idle +12 %' of a measured cell."""
    return "fill %s idle %s" % (fmt_dev(cell["fill"]["deviation"]), fmt_dev(cell["idle"]["deviation"]))


def table_rows(cells):
    rows = []
    for c in cells:
        if c["status"] in ("pass", "FAIL"):
            f, i = c["fill"], c["idle"]
            rows.append([c["profile"], str(c["threads"]),
                         "%.1f" % (c["host"]["start"] / MIB), "%.1f" % (c["reference"]["start"] / MIB),
                         "%.1f" % f["host_mib"], "%.1f" % f["reference_mib"], fmt_dev(f["deviation"]),
                         "%.1f" % i["host_mib"], "%.1f" % i["reference_mib"], fmt_dev(i["deviation"]),
                         c["status"] + "".join(" (earlier: %s)" % t
                                               for t in c.get("earlier_tries", []))])
        else:
            rows.append([c["profile"], str(c["threads"])] + ["-"] * 8 +
                        ["SKIP: " + c["why"] if c["status"] == "skip" else "ERROR: " + c["error"]])
    return rows


HEADER = ["profile", "threads", "host start", "ref start", "fill host", "fill ref", "fill dev",
          "idle host", "idle ref", "idle dev", "result"]


STATS_HEADER = ["profile", "threads", "phase", "host RSS", "ref RSS", "host allocator",
                "ref allocator"]


def stats_rows(cells):
    """Each measured cell's phases: RSS and the allocator's own figures, MiB,
    both sides (absolute, not above start: the allocator does not know start)."""
    rows = []
    for c in cells:
        if c["status"] not in ("pass", "FAIL"):
            continue
        for ph in PHASES:
            rows.append([c["profile"], str(c["threads"]), ph, "%.1f" % (c["host"][ph] / MIB),
                         "%.1f" % (c["reference"][ph] / MIB), stats_text(c["host_stats"][ph]),
                         stats_text(c["reference_stats"][ph])])
    return rows


def print_rows(header, rows):
    rows = [header] + rows
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for r in rows:  # the last column (result, or why not) unpadded
        print("  ".join([v.ljust(w) for v, w in zip(r, widths)] + [r[-1]]))


def print_table(cells):
    print_rows(HEADER, table_rows(cells))
    print()
    print_rows(STATS_HEADER, stats_rows(cells))


def markdown(cells, a, argv, started, took, loads):
    out = ["# rsslab_server against a plain Python process", "",
           "Each row is one cell: the reference (`/usr/bin/python3 tools/truth/reference_worker.py`, "
           "no C++ host) and the host (`rsslab_server` through `rsslab_run`), side by side "
           "under the same allocator profile, making the same requests. Figures are MiB of RSS "
           "above that side's own start RSS: after the fill (`fill`) and after the shrink and "
           "the idle wait (`idle`); the deviation is host minus reference, relative to the "
           "reference. A cell fails beyond +/-%.0f %% under load or +%.0f %% / %s after idle, "
           "and %g MiB." % (100 * a.bound, 100 * a.idle_bound,
                            "-%.0f %%" % (100 * a.idle_below_bound) if a.idle_below_bound > 0
                            else "any figure below", a.floor_mib), "",
           "- command: `%s`" % " ".join(shlex.quote(x) for x in argv),
           "- shape: fill %d requests at %d MiB, shrink %d at %d MiB, idle %g s"
           % (a.fill_requests, a.fill_limit_mb, a.shrink_requests, a.shrink_limit_mb, a.idle_s),
           "- started %s UTC, took %d s; %d CPUs, %s, load average %s at the start, %s at the end"
           % (started, took, os.cpu_count(), platform.platform(), loads[0], loads[1]), "",
           "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in table_rows(cells):
        out.append("| " + " | ".join(r) + " |")
    out += ["", "Every phase's RSS and the allocator's own statistics, MiB (absolute; glibc "
            "mallinfo2, jemalloc mallctl stats.*, mimalloc mi_process_info commit, tcmalloc "
            "properties):", "", "| " + " | ".join(STATS_HEADER) + " |",
            "|" + "---|" * len(STATS_HEADER)]
    for r in stats_rows(cells):
        out.append("| " + " | ".join(r) + " |")
    return "\n".join(out) + "\n"


def load_average():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


class Args(argparse.ArgumentParser):
    def error(self, message):
        print("truth.py: %s" % message, file=sys.stderr)
        sys.exit(2)


def int_list(text):
    vals = [int(x) for x in text.split(",") if x.strip()]
    if not vals or any(not 1 <= v <= 1024 for v in vals):
        raise argparse.ArgumentTypeError("want a comma-separated list of 1..1024, got %r" % text)
    return vals


def parse(argv):
    ap = Args(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default="glibc,glibc-arena2,jemalloc,mimalloc,mimalloc3,"
                    "mimalloc3-purge0,tcmalloc")
    ap.add_argument("--threads", type=int_list, default=[1, 4, 16, 64])
    ap.add_argument("--fill_requests", type=int, default=96000)
    ap.add_argument("--shrink_requests", type=int, default=48000)
    ap.add_argument("--fill_limit_mb", type=int, default=100)
    ap.add_argument("--shrink_limit_mb", type=int, default=10)
    ap.add_argument("--idle_s", type=float, default=12.0)
    ap.add_argument("--warm_requests", type=int, default=0,
                    help="requests at cache limit 0 before the start record, on both sides")
    ap.add_argument("--bound", type=float, default=0.25)
    ap.add_argument("--idle_bound", type=float, default=-1,
                    help="the after-idle figure's bound (default: --bound)")
    ap.add_argument("--idle_below_bound", type=float, default=-1,
                    help="the after-idle figure's bound when the host holds less than the "
                         "reference (default: --idle_bound; 0: not checked)")
    ap.add_argument("--parallel", type=int, default=1, help="cells measured at once")
    ap.add_argument("--retry_failed", type=int, default=0,
                    help="a cell beyond its bound is measured again up to this many times; "
                         "it fails only if every try does")
    ap.add_argument("--floor_mib", type=float, default=0.0,
                    help="a figure whose sides differ by at most this many MiB passes")
    ap.add_argument("--bin_dir", default=os.path.join(ROOT, "bin"))
    ap.add_argument("--rsslab_run", default="")
    ap.add_argument("--rsslab_server", default="")
    ap.add_argument("--rsslab_loadgen", default="")
    ap.add_argument("--profiles_file", default=os.path.join(ROOT, "agent/profiles.textproto"))
    ap.add_argument("--handler", default=os.path.join(ROOT, "server/handlers/web_worker.py"))
    ap.add_argument("--out", required=True, help="directory for every cell's logs and records")
    ap.add_argument("--markdown", default="", help="also write the table here as Markdown")
    a = ap.parse_args(argv)
    checks = [
        (1 <= a.fill_requests <= 10**7 and 1 <= a.shrink_requests <= 10**7,
         "--fill_requests and --shrink_requests must be 1..10^7"),
        (1 <= a.fill_limit_mb <= 1 << 20 and 0 <= a.shrink_limit_mb <= a.fill_limit_mb,
         "--fill_limit_mb must be 1..2^20 and --shrink_limit_mb 0..--fill_limit_mb"),
        (0 <= a.idle_s <= 3600, "--idle_s must be 0..3600"),
        (0 <= a.warm_requests <= 10**5, "--warm_requests must be 0..10^5"),
        (0 < a.bound < 10, "--bound must be in (0, 10)"),
        (a.idle_bound == -1 or 0 < a.idle_bound < 10, "--idle_bound must be in (0, 10)"),
        (a.idle_below_bound == -1 or 0 <= a.idle_below_bound < 10,
         "--idle_below_bound must be 0 (not checked) or in (0, 10)"),
        (1 <= a.parallel <= 8, "--parallel must be 1..8"),
        (0 <= a.retry_failed <= 3, "--retry_failed must be 0..3"),
        (0 <= a.floor_mib <= 1024, "--floor_mib must be 0..1024"),
        (all(p.strip() for p in a.profiles.split(",")), "--profiles has an empty name"),
    ]
    for ok, message in checks:
        if not ok:
            ap.error(message)
    if a.idle_bound == -1:
        a.idle_bound = a.bound
    if a.idle_below_bound == -1:
        a.idle_below_bound = a.idle_bound
    return a


def run_cells(tools, a, profiles, known, scenario):
    """Every cell, --parallel at a time (each cell is two processes of its
    own; RSS does not depend on what runs beside it), in matrix order."""
    order = [(p, t) for t in a.threads for p in profiles]
    lock = threading.Lock()
    log = open(os.path.join(a.out, "cells.jsonl"), "w")

    def one(p, threads):
        if known[p] is not None:
            cell = {"profile": p, "threads": threads, "status": "skip", "why": known[p]}
        else:
            cell = measure(tools, a, p, threads, scenario)
            tries = []
            # A cell beyond its bound is measured again (--retry_failed
            # times): one 1-thread run in ten kept an allocator region more
            # on one side; a host that really holds more fails every run.
            while cell["status"] == "FAIL" and len(tries) < a.retry_failed:
                tries.append(summary(cell))
                print("cell %s t%d: FAIL %s; measuring it again" % (p, threads, tries[-1]),
                      flush=True)
                cell = measure(tools, a, p, threads, scenario, attempt=len(tries) + 1)
            if tries:
                cell["earlier_tries"] = tries
        with lock:  # every cell kept as it ends, in case the run is cut off
            log.write(json.dumps(cell) + "\n")
            log.flush()
        if known[p] is not None:
            print("SKIP %s (%d threads): %s" % (p, threads, known[p]), flush=True)
            return cell
        print("cell %s t%d: %s%s" % (p, threads, cell["status"], (
            " (" + cell["error"] + ")") if cell["status"] == "error" else
            " %s (%.0f + %.0f s)" % (summary(cell), cell["reference_s"], cell["host_s"])),
            flush=True)
        return cell

    with log, concurrent.futures.ThreadPoolExecutor(max_workers=a.parallel) as pool:
        futures = [pool.submit(one, p, t) for p, t in order]
        return [f.result() for f in futures]


def main(argv):
    a = parse(argv)
    try:
        tools = Tools(a)
        known = available_profiles(tools)
        os.makedirs(a.out, exist_ok=True)
    except (ValueError, OSError, subprocess.TimeoutExpired) as e:
        print("truth.py: %s" % e, file=sys.stderr)
        return 2
    profiles = [p.strip() for p in a.profiles.split(",")]
    unknown = [p for p in profiles if p not in known]
    if unknown:
        print("truth.py: unknown profile %s (%s has: %s)" % (
            ",".join(unknown), a.profiles_file, " ".join(known)), file=sys.stderr)
        return 2
    scenario = os.path.join(a.out, "truth.textproto")
    with open(scenario, "w") as f:
        f.write(scenario_text(a))
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
    t0, load0 = time.monotonic(), load_average()
    cells = run_cells(tools, a, profiles, known, scenario)
    took = int(time.monotonic() - t0)
    print()
    print_table(cells)
    print("took %d s, load average %s -> %s" % (took, load0, load_average()))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(cells, a, [os.path.relpath(sys.argv[0], ROOT)] + argv, started, took,
                             (load0, load_average())))
    bad = [c for c in cells if c["status"] in ("FAIL", "error")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
