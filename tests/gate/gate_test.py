#!/usr/bin/python3
"""rsslab_loadgen gate on a real small service (tests/gate/gate_service.py:
grpcio, the rsslab package, the seed's handler and cache), base against
head, interleaved, each run a fresh process:

  leak       head makes a ThreadPoolExecutor per request (seed 002's bug):
             regression, exit 1; the Markdown report says so
  cache      head's cache holds 3x what each phase asks: regression, exit 1
  identical  the same service on both sides: no change, exit 0
  too_few    --max_repeats=2: can't tell, exit 3; so is --time_budget=1s
             after one pair
  env        head starts with MALLOC_ARENA_MAX=2: refused after the first
             pair, exit 2, naming the variable; a head that dies at start:
             exit 2, the base's run kept; a --base_rev that is no commit:
             exit 2
  revs       --base_rev/--head_rev: two commits of a service checked
             out, built (--build) and run, the head's own code as head

Sharded: each shard runs the cases whose index matches it.
"""

import os
import subprocess
import sys
import time

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or "/tmp"
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402

LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")
SERVICE = ("/usr/bin/python3 %s/tests/gate/gate_service.py --port={port} --threads={threads} "
           "--handler=%s/server/handlers/web_worker.py --peer_dir=%s/bench/peer" % (WS, WS, WS))
ENV = package_tree.service_env(package_tree.make(WS, TMP), TMP)


def gate(name, *extra, plots=False):
    """Runs the gate; returns (exit code, stdout, stderr, its directory).
    Without `plots` no PNG is drawn (each run's and the report's): not what
    most cases test, and a second or two each."""
    out = os.path.join(TMP, name)
    cmd = [LOADGEN, "gate", "--out=" + out, "--service=" + SERVICE,
           r"--ready=^rsslab_server ready .*control=(?P<control>\S+)",
           "--scenario=" + os.path.join(WS, "tests/gate/burst.textproto"),
           "--profile_file=" + os.path.join(WS, "agent/profiles.textproto"),
           "--report_md=" + out + ".md"] + ([] if plots else ["--report_tool=/bin/true"]) + list(extra)
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=240)
    print("---- %s: exit %d\n%s%s" % (name, r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    return r.returncode, r.stdout, r.stderr, out


def leak():
    rc, out, err, d = gate("leak", "--head_command=" + SERVICE + " --pool_per_request",
                           "--min_repeats=4", "--max_repeats=6", plots=True)
    check(rc == 1, "leak: exit 1 (regression)")
    check("gate: regression" in out, "leak: the verdict line says regression")
    check("runs in " + d in out, "leak: the verdict line names the runs' directory")
    md = open(d + ".md").read() if os.path.exists(d + ".md") else ""
    check(md.startswith("## Memory gate: regression"), "leak: the report's title is the verdict")
    for want in ("| RSS under load (MiB) |", "| RSS after idle (MiB) |",
                 "| RSS after global trim (MiB) |", "**regression**", "```text", "  base |",
                 "  head |", "Fingerprint", "4 base vs 4 head runs", "--pool_per_request"):
        check(want in md, "leak: the report has %r" % want)
    check(os.path.getsize(d + ".png") > 1000 if os.path.exists(d + ".png") else False,
          "leak: compare's PNG beside the report")
    check(os.path.isdir(os.path.join(d, "base/run-04")) and
          not os.path.exists(os.path.join(d, "base/run-05")),
          "leak: stopped at 4 runs a side, once every verdict was clear")


def cache():
    # Bodies 4x the seed's median, so the fill overfills the 3x cache too.
    rc, out, _, _ = gate("cache", "--head_command=" + SERVICE + " --cache_scale=3",
                         "--params=median=16384", "--min_repeats=4", "--max_repeats=6")
    check(rc == 1 and "gate: regression" in out, "cache: a 3x cache is a regression, exit 1")


def identical():
    rc, out, _, d = gate("identical", "--min_repeats=4", "--max_repeats=8")
    check(rc == 0, "identical: exit 0")
    check("gate: pass" in out, "identical: the verdict line says pass")
    md = open(d + ".md").read() if os.path.exists(d + ".md") else ""
    check(md.count("**no change**") == 3, "identical: no change on each of the 3 gated figures")


def too_few():
    rc, out, _, d = gate("too_few", "--max_repeats=2")
    check(rc == 3, "too_few: exit 3 (can't tell)")
    check("gate: can't tell (stopped: --max_repeats=2" in out, "too_few: says why it stopped")
    md = open(d + ".md").read() if os.path.exists(d + ".md") else ""
    check("[none]" in md, "too_few: the report shows there is no interval")
    rc, out, _, d = gate("budget", "--time_budget=1s", "--min_repeats=2", "--max_repeats=10")
    check(rc == 3 and "gate: can't tell (stopped: --time_budget=1s" in out,
          "budget: a pair that would pass --time_budget is not started: can't tell, exit 3")
    check(not os.path.exists(os.path.join(d, "base/run-02")), "budget: one pair only")


def env():
    rc, _, err, d = gate("env", "--head_env=MALLOC_ARENA_MAX=2")
    check(rc == 2, "env: exit 2 (fingerprints differ)")
    check("differ in MALLOC_ARENA_MAX at start (unset vs 2)" in err, "env: names the variable")
    check(os.path.isdir(os.path.join(d, "head/run-01")) and
          not os.path.exists(os.path.join(d, "base/run-02")), "env: refused after the first pair")
    rc, _, err, d = gate("dies", "--head_command=" + SERVICE + " --no_such_flag")
    check(rc == 2, "dies: exit 2")
    check("head run 1 failed (loadgen exit 1)" in err and "exited before it was ready" in err,
          "dies: names the side, the run and why")
    check(os.path.exists(os.path.join(d, "base/run-01/events.jsonl")), "dies: the base's run stays")
    rc, _, err, _ = gate("bad_rev", "--base_rev=no-such-rev", "--head_rev=HEAD",
                         "--repo=" + TMP)
    check(rc == 2 and "--base_rev=no-such-rev: not a commit in" in err,
          "bad_rev: a revision that is not a commit is one line, exit 2")


def revs():
    """Two commits of a service, checked out, built and run by the gate."""
    repo = os.path.join(TMP, "repo")
    os.makedirs(repo, exist_ok=True)
    git = ["git", "-C", repo, "-c", "user.email=gate@test", "-c", "user.name=gate"]
    src = open(os.path.join(WS, "tests/gate/gate_service.py")).read()
    subprocess.run(git + ["init", "-q"], check=True)
    for i, text in enumerate((src, src.replace('"--retain_mb", type=float, default=0',
                                               '"--retain_mb", type=float, default=8'))):
        with open(os.path.join(repo, "svc.py"), "w") as f:
            f.write(text)
        subprocess.run(git + ["add", "svc.py"], check=True)
        subprocess.run(git + ["commit", "-qm", "c%d" % i], check=True)
    svc = SERVICE.replace(os.path.join(WS, "tests/gate/gate_service.py"), "svc.py")
    rc, out, err, d = gate("revs", "--service=" + svc, "--repo=" + repo, "--base_rev=HEAD~1",
                           "--head_rev=HEAD", "--build=touch built", "--max_repeats=2")
    check(rc == 3, "revs: 2 runs a side, exit 3")
    check(all(os.path.exists(os.path.join(d, "src", s, "built")) for s in ("base", "head")),
          "revs: --build ran in each checkout")
    line = next((l for l in out.splitlines() if l.startswith("  RSS under load (MiB)")), "")
    change = line.split()[6] if len(line.split()) > 6 else ""
    check(change.startswith("+") and float(change.strip("+%")) > 10,
          "revs: the head's commit (8 MiB kept) runs as the head: RSS under load %s" % change)


CASES = [leak, cache, identical, too_few, env, revs]

if __name__ == "__main__":
    if os.environ.get("TEST_SHARD_STATUS_FILE"):
        open(os.environ["TEST_SHARD_STATUS_FILE"], "w").close()
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    index = int(os.environ.get("TEST_SHARD_INDEX", "0"))
    package_tree.run_parts("gate_test", [c for i, c in enumerate(CASES) if i % total == index])
