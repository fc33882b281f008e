#!/usr/bin/python3
"""//loadgen/results:plots_and_advice_test: the sweep table's spread marks and trim goal as
`rsslab_loadgen report` (loadgen/results/sweep_summary.cc, the one place a
sweep is aggregated) writes them into summary.md, summary.csv and
cells.json, and as loadgen/results/plots_and_advice.py phrases them from cells.json.

Three repeats per cell. At 64 threads jemalloc's after-idle RSS spreads by
25 % of its median (90/100/115 MiB: marked, named in "What to do" as not to
be trusted) and mimalloc's by 15 % (95/100/110: not marked); fill QPS
spreads 50 % everywhere (QPS is not a memory figure: never marked). Against
a base RSS of 26 MiB (the fill set_phase's reply) the per-thread trim is
1.24x (base + 10 MiB) for jemalloc (met, just under 1.25), 1.57x for
mimalloc and 2.00x for glibc (missed). A second run directory has jemalloc
at 1.30x: no profile meets the goal, and "What to do" names the closest.

Shape: plots_and_advice.py's reader (load_table) on the loadgen's cells.json must
give every summary.csv row the same figures (units, keys, goal text); a
cells.json without a field plots_and_advice.py reads is refused in one line naming
it; a sweep directory without cells.json is refused. The committed
docs/sweep (a real full-scale run) goes through the same reader, and its
"What to do" must name the leanest profile summary.csv names.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

MIB = 1048576
WORKSPACE = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
LOADGEN = os.path.join(WORKSPACE, "loadgen/rsslab_loadgen")
REPORT = os.path.join(WORKSPACE, "loadgen/results/plots_and_advice.py")
DAGGER = "\u2020"
PROFILES = ["jemalloc", "mimalloc", "glibc"]
THREADS = [1, 64]
BASE = 26.0


def cell_events(profile, threads, repeat, idle, trim, qps):
    """One cell's records as the runner writes them (RSS in MiB)."""
    tag = {"cell": "%s/t%d/r%d" % (profile, threads, repeat), "profile": profile,
           "threads": threads, "repeat": repeat, "attempt": 1}

    def rec(loadgen_phase, **kw):
        e = dict(tag, loadgen_phase=loadgen_phase)
        e.update(kw)
        return e

    def status(rss):
        return {"status": {"rss_bytes": str(int(rss * MIB)), "hwm_bytes": str(int(300 * MIB))}}

    cache = {"cache_limit_bytes": str(100 * MIB), "cache_bytes": str(100 * MIB),
             "evicted_bytes": str(250 * MIB), "evictions": "1000"}
    after_fill = status(250)
    after_fill["cache"] = cache
    return [
        # The set_phase(fill) reply: the server's RSS before any load.
        rec("fill", phase={"snapshot": status(BASE), "previous_phase": "start"}),
        rec("fill", load={"qps": qps, "latency": {"p99_us": 2000, "p50_us": 500}}),
        rec("fill", snapshot=after_fill, label="after_fill"),
        rec("shrink", snapshot=status(120), label="after_shrink"),
        rec("idle", snapshot=status(idle), label="after_idle"),
        rec("trim", phase={"before": status(idle), "snapshot": status(trim),
                           "trim": {"per_thread": True, "rss_between_bytes": str(int(110 * MIB)),
                                    "rss_after_bytes": str(int(trim * MIB))}}),
        dict(tag, cell_result={"ok": True}),
    ]


def write_run(path, jemalloc_goal):
    os.makedirs(path)
    goal = {"jemalloc": jemalloc_goal, "mimalloc": 1.57, "glibc": 2.00}
    # At 1 thread, ratios that print as the limit with 2 decimals.
    goal_t1 = {"jemalloc": 1.252, "mimalloc": 1.2496, "glibc": 1.00}
    idle = {"jemalloc": [90, 100, 115], "mimalloc": [95, 100, 110], "glibc": [150, 150, 150]}
    events = [{"seq": "1", "header": {
        "scenario_name": "sweep",
        "scenario": {"name": "sweep", "sweep": {"profiles": PROFILES, "threads": THREADS,
                                                "repeats": 3}}}}]
    for t in THREADS:
        for r in range(3):
            for p in PROFILES:
                events += cell_events(p, t, r + 1, idle[p][r] if t == 64 else 80,
                                      (goal if t == 64 else goal_t1)[p] * (BASE + 10),
                                      [1000, 1500, 1200][r])
    events.append({"footer": {"completed": True}})
    with open(os.path.join(path, "events.jsonl"), "w") as f:
        for i, e in enumerate(events):
            e["seq"] = str(i + 1)
            f.write(json.dumps(e) + "\n")


def run(args, want=0):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, encoding="utf-8")
    assert r.returncode == want, "%s exited %d, not %d: %s%s" % (
        args, r.returncode, want, r.stdout, r.stderr)
    return r.stdout if want == 0 else r.stderr


def load_report_module():
    sys.path.insert(0, os.path.dirname(REPORT))
    import plots_and_advice  # noqa: E402 (from the runfiles)
    return plots_and_advice


def csv_rows(path):
    with open(os.path.join(path, "summary.csv"), encoding="utf-8") as f:
        rows = [line.split(",") for line in f.read().splitlines()]
    return {(r[0], r[1]): dict(zip(rows[0], r)) for r in rows[1:]}


def check_shape(path):
    """plots_and_advice.py's reading of cells.json gives each summary.csv row its
    figures: the same keys, units and texts on both sides."""
    rep = load_report_module()
    s = rep.load_table(path)
    csv = csv_rows(path)
    check(len(s["rows"]) == len(csv), "cells.json and summary.csv have the same rows",
          "%d vs %d" % (len(s["rows"]), len(csv)))
    for r in s["rows"]:
        c = csv.get((r["profile"], str(r["threads"])))
        check(c is not None, "summary.csv has %s/%d" % (r["profile"], r["threads"]))
        for key in rep.USED_FIGURES:
            n, med, lo, hi = r["metric"][key]
            want = "-" if n == 0 else ("%.0f" % med if key == rep.QPS else "%.1f" % (med / MIB))
            check(c[key + "_median"] == want, "%s/%d %s: cells.json %s, summary.csv %s" % (
                r["profile"], r["threads"], key, want, c[key + "_median"]))
        check(c["trim_goal_median"] == (r["goal_ratio"] or "-"), "trim goal ratio", c)
        check(c["trim_goal_met"] == ("-" if r["goal"][0] == 0 else
                                     "yes" if r["goal_met"] else "no"), "trim goal met", c)
        check(c["unfilled_cells"] == str(r["unfilled_cells"]), "unfilled cells", c)
        check(c["allocator"] == (r["allocator"] or "-"), "allocator", c)
        wide = ";".join(r["wide"]) or "none"
        check(c["spread_over_20pct"] == (wide if r["judged"] else "n/a"), "spread", c)
    check(len(s["cells"]) == sum(int(c["cells"]) for c in csv.values()), "every cell listed")
    return s


def both(path):
    """`rsslab_loadgen report` (which runs plots_and_advice.py): the table, summary.md
    with its "What to do", and summary.csv's rows, after the shape check."""
    table = run([LOADGEN, "--report_tool=" + REPORT, "report", path])
    check_shape(path)
    with open(path + "/summary.md", encoding="utf-8") as f:
        md = f.read()
    return table, md, csv_rows(path)


def check_refusals(tmp, path):
    """A cells.json without a field plots_and_advice.py reads, and a sweep without
    cells.json: one line each, exit 1, no traceback."""
    broken = os.path.join(tmp, "broken")
    shutil.copytree(path, broken)
    with open(os.path.join(broken, "cells.json"), encoding="utf-8") as f:
        t = json.load(f)
    del t["rows"][0]["figures"]["after_idle_mib"]
    with open(os.path.join(broken, "cells.json"), "w", encoding="utf-8") as f:
        json.dump(t, f)
    err = run(["/usr/bin/python3", REPORT, broken, "--no-plots"], want=1)
    check("rows[0].figures.after_idle_mib" in err and "Traceback" not in err
          and len(err.strip().splitlines()) == 1, "a missing figure named in one line", err)
    os.remove(os.path.join(broken, "cells.json"))
    err = run(["/usr/bin/python3", REPORT, broken, "--no-plots"], want=1)
    check("has no cells.json" in err and "rsslab_loadgen report" in err,
          "a sweep without cells.json is sent to `rsslab_loadgen report`", err)


def check_committed_sweep(tmp):
    """docs/sweep: plots_and_advice.py reads the committed cells.json, and its "What to
    do" names the profile summary.csv says is leanest after idle at 64
    threads."""
    src = os.path.join(WORKSPACE, "docs/sweep")
    if not os.path.exists(os.path.join(src, "cells.json")):
        check(False, "docs/sweep/cells.json is committed beside summary.csv")
    dst = os.path.join(tmp, "committed")
    os.makedirs(dst)
    for name in ("cells.json", "summary.csv", "summary.md"):
        shutil.copy(os.path.join(src, name), dst)
    check_shape(dst)
    run(["/usr/bin/python3", REPORT, dst, "--no-plots"])
    csv = csv_rows(dst)
    at64 = [(float(r["after_idle_mib_median"]), p) for (p, t), r in csv.items()
             if t == "64" and r["after_idle_mib_median"] != "-"]
    best = min(at64)
    with open(os.path.join(dst, "summary.md"), encoding="utf-8") as f:
        md = f.read()
    advice = md[md.index("## What to do"):]
    check("| 64 | " in advice and ("**%s** %.1f" % (best[1], best[0])) in advice,
          "What to do names %s %.1f at 64 threads" % (best[1], best[0]), advice[:3000])


def check(cond, what, text=""):
    if not cond:
        print("FAILED: %s\n%s" % (what, text), file=sys.stderr)
        sys.exit(1)


def check_goal(rows, profile, threads, ratio, met):
    row = rows[(profile, threads)]
    check((row["trim_goal_median"], row["trim_goal_met"]) == (ratio, met),
          "%s/%s trim goal %s %s" % (profile, threads, ratio, met), row)


def report(tmp, name, goal_ratio):
    """A synthetic run's terminal table, summary.md, CSV rows and What to do."""
    run = os.path.join(tmp, name)
    write_run(run, goal_ratio)
    table, md, rows = both(run)
    return table, md, rows, md[md.index("## What to do"):]


def main():
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    table, md, rows, advice = report(tmp, "met", 1.24)

    # Spread: 25 % marked, 15 % not, QPS (50 %) never.
    check(rows[("jemalloc", "64")]["spread_over_20pct"] == "after_idle_mib", "jemalloc/64 spread",
          rows[("jemalloc", "64")])
    check(rows[("mimalloc", "64")]["spread_over_20pct"] == "none", "mimalloc/64 spread (15 %)",
          rows[("mimalloc", "64")])
    check(rows[("glibc", "1")]["spread_over_20pct"] == "none", "QPS spread is not marked",
          rows[("glibc", "1")])
    check("| 100.0 (90.0-115.0)%s |" % DAGGER in md, "the 25 % median marked", md)
    check("| 100.0 (95.0-110.0) |" in md, "the 15 % median unmarked", md)
    check("| 1200 (1000-1500) |" in md, "QPS unmarked", md)
    check("100.0%s" % DAGGER in table, "the terminal table's mark", table)
    check("**Not to be trusted from this run**" in advice, "What to do names the spread", advice)
    check("jemalloc at 64 threads (after idle 90.0-115.0 MiB)" in advice,
          "What to do names jemalloc/64's after idle", advice)
    check("mimalloc at 64 threads (after idle" not in advice, "mimalloc/64 is not named", advice)
    check("**jemalloc** 100.0%s |" % DAGGER in advice, "the leanest table's mark", advice)

    # The trim goal: base 26 MiB; jemalloc met at 1.24x, the others missed.
    check(rows[("jemalloc", "64")]["base_rss_mib_median"] == "26.0", "base RSS",
          rows[("jemalloc", "64")])
    check_goal(rows, "jemalloc", "64", "1.24", "yes")
    check_goal(rows, "mimalloc", "64", "1.57", "no")
    check("| 1.24x met |" in md and "| 1.57x missed |" in md and "| 2.00x missed |" in md,
          "the trim goal column", md)
    check("at 64 threads: met by **jemalloc** 1.24x; missed by the other 2 profiles." in advice,
          "What to do: the goal met at 64 threads", advice)

    # Next to the limit the ratio gets the digits that show which side it is on.
    check_goal(rows, "jemalloc", "1", "1.252", "no")
    check_goal(rows, "mimalloc", "1", "1.2496", "yes")
    check("| 1.252x missed |" in md and "| 1.2496x met |" in md, "digits next to the limit", md)

    check_refusals(tmp, os.path.join(tmp, "met"))

    _, md, rows, advice = report(tmp, "missed", 1.30)
    check(rows[("jemalloc", "64")]["trim_goal_met"] == "no", "jemalloc at 1.30x missed",
          rows[("jemalloc", "64")])
    check("at 64 threads: no profile meets it; the closest is **jemalloc** at 1.30x "
          "(46.8 MiB after the per-thread trim against a goal of 45.0)." in advice,
          "What to do: no profile meets the goal", advice)
    check_committed_sweep(tmp)
    print("ok")


if __name__ == "__main__":
    main()
