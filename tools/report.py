#!/usr/bin/python3
"""Plots and advice for a finished rsslab sweep, from its events.jsonl alone.

    tools/report.py RUN_DIR            # writes RUN_DIR/rss_under_load.png,
                                       # RUN_DIR/rss_after_shrink.png and the
                                       # "What to do" section of summary.md
    tools/report.py RUN_DIR --csv OUT  # also the summary table as CSV (the
                                       # same bytes as the loadgen's summary.csv)
    tools/report.py SOAK_RUN_DIR       # a soak: rss_over_time.png and
                                       # post_idle_per_cycle.png
    tools/report.py --compare C.json --png compare.png
                                       # `rsslab_loadgen compare`'s JSON:
                                       # base vs new per figure

Seed 000's figure: resident memory against worker threads per allocator
profile, under load (left panel there, rss_under_load.png here) and after the
cache shrank and the server idled, with the after-trim points
(rss_after_shrink.png). Medians over repeats, bars from min to max.
"What to do" also names the memory figures whose repeats spread by more
than 20 % (not to be trusted from this run) and which profiles meet issue
17's trim goal at 64 threads, as the table marks them.

The aggregation mirrors loadgen/results/sweep_summary.cc exactly (a test compares the
two CSVs), so the advice quotes the same numbers as the table. Needs only the
standard library and, for the PNGs, Debian's python3-matplotlib (Agg).
"""

import argparse
import json
import os
import sys

MIB = 1048576.0

# Column order and keys of loadgen/results/sweep_summary.h's SweepMetric.
METRICS = [
    ("under_load_mib", "under load MiB"),
    ("after_shrink_mib", "after shrink MiB"),
    ("after_idle_mib", "after idle MiB"),
    ("trim_global_mib", "trim (global) MiB"),
    ("trim_per_thread_mib", "trim (per-thread) MiB"),
    ("hwm_mib", "VmHWM MiB"),
    ("qps", "fill QPS"),
    ("p99_ms", "fill p99 ms"),
]
UNDER_LOAD, AFTER_SHRINK, AFTER_IDLE, TRIM_GLOBAL, TRIM_PER_THREAD, HWM, QPS, P99 = range(8)
WHAT_TO_DO = "## What to do"
# loadgen/results/sweep_summary.h: a memory figure (RSS, VmHWM; not QPS or p99)
# whose repeats spread by more than SPREAD_LIMIT of their median is marked.
MEMORY_METRICS = range(UNDER_LOAD, HWM + 1)
SPREAD_LIMIT = 0.20
SPREAD_MARK = "\u2020"  # a dagger, as in the table
# Issue 17's goal: RSS after the per-thread trim <= TRIM_GOAL_RATIO x (RSS
# before any load + 10 MiB of live cache).
TRIM_GOAL_RATIO = 1.25
TRIM_GOAL_LIVE_CACHE_BYTES = 10 * MIB


def fmt(metric, raw):
    if raw < 0:
        return "-"
    if metric == QPS:
        return "%.0f" % raw
    if metric == P99:
        return "%.2f" % (raw / 1000.0)
    return "%.1f" % (raw / MIB)


def aggregate(values):
    """(n, median, min, max) over the non-negative values."""
    v = sorted(x for x in values if x >= 0)
    n = len(v)
    if n == 0:
        return (0, 0.0, 0.0, 0.0)
    med = v[n // 2] if n % 2 == 1 else (v[n // 2 - 1] + v[n // 2]) / 2.0
    return (n, float(med), float(v[0]), float(v[-1]))


def spread_too_wide(a):
    """sweep_summary.cc's SpreadTooWide: 2+ values, (max - min) / median > 20 %."""
    n, med, lo, hi = a
    return n >= 2 and med > 0 and (hi - lo) / med > SPREAD_LIMIT


def wide_spread(row):
    """The row's memory measures whose repeats spread too far, in column order."""
    return [m for m in MEMORY_METRICS if spread_too_wide(row["metric"][m])]


def spread_judged(row):
    return any(row["metric"][m][0] >= 2 for m in MEMORY_METRICS)


def goal_met(goal):
    return goal[0] > 0 and goal[1] <= TRIM_GOAL_RATIO


def goal_ratio(ratio):
    """sweep_summary.cc's FormatGoalRatio: 2 decimals, up to 4 when 2 would
    print the limit itself for a ratio on the other side of it."""
    digits = 2
    while (digits < 4 and ratio != TRIM_GOAL_RATIO
           and "%.*f" % (digits, ratio) == "%.*f" % (digits, TRIM_GOAL_RATIO)):
        digits += 1
    return "%.*f" % (digits, ratio)


def num(d, key):
    """A protobuf-JSON number (int64 fields arrive as strings); 0 if absent."""
    return float(d.get(key, 0) or 0)


def read_events(run_dir):
    events = []
    with open(os.path.join(run_dir, "events.jsonl")) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except ValueError:
                pass  # a line cut short by a crash, as the loadgen skips it
    return events


def fresh_cell(cell, profile, threads, repeat):
    return {"cell": cell, "profile": profile, "threads": threads, "repeat": repeat,
            "ok": False, "has_result": False, "rss": {}, "hwm": -1.0, "trim": None,
            "value": [-1.0] * len(METRICS), "allocator": "", "error": "", "exit": "",
            "fill": None, "fill_cache": None, "fill_done": False,
            "base": -1.0, "loaded": False, "goal": -1.0}


# loadgen/results/fill_check.h: the string every summary uses for a fill that never
# reached the cache limit.
CACHE_NEVER_FILLED = "cache never filled: not seed 000's conditions"


def fill_check(cache):
    """loadgen/results/fill_check.cc's CheckFill: (filled, churn) from the cache counters."""
    limit = num(cache, "cache_limit_bytes")
    stored = num(cache, "cache_bytes") + num(cache, "evicted_bytes")
    filled = limit > 0 and num(cache, "evictions") > 0 and stored >= limit
    return {"filled": filled, "churn": stored / limit if limit > 0 else 0.0}


def fill_watch(st, e, phase):
    """loadgen/results/fill_check.cc's FillWatch over one cell's records."""
    if st["fill_done"]:
        return
    sn = None
    if phase == "fill":
        if "snapshot" in e:
            sn = e["snapshot"]
        elif "phase" in e:
            sn = e["phase"].get("snapshot")
        elif "trim" in e:
            sn = e["trim"].get("after")
    if sn is not None:
        st["fill_cache"] = sn.get("cache", {})
        return
    if st["fill_cache"] is not None and (("cell_result" in e) or (phase and phase != "fill")):
        st["fill_done"] = True
        if "cell_result" not in e and "phase" in e and "before" in e["phase"]:
            st["fill_cache"] = e["phase"]["before"].get("cache", {})
        st["fill"] = fill_check(st["fill_cache"])


def build(events):
    """The sweep summary: scenario, cells (run order) and rows."""
    s = {"scenario": "", "agent": "", "completed": False, "cells": [], "rows": []}
    profile_order = []
    order = []
    cells = {}
    for e in events:
        if "header" in e:
            h = e["header"]
            s["scenario"] = h.get("scenario_name", "")
            s["agent"] = h.get("agent", "")
            profile_order.extend(h.get("scenario", {}).get("sweep", {}).get("profiles", []))
            continue
        if "footer" in e:
            s["completed"] = bool(e["footer"].get("completed", False))
            continue
        if "resumed" in e:
            # A --resume rerun: cells without a successful result run again
            # after this record, so what they recorded before is superseded.
            for key, st in list(cells.items()):
                if not st["ok"]:
                    cells[key] = fresh_cell(st["cell"], st["profile"], st["threads"], st["repeat"])
            continue
        cell = e.get("cell", "")
        if not cell:
            continue
        # Per cell and attempt (a cell re-queued or rerun has several; 0 = 1).
        key = (cell, max(1, int(e.get("attempt", 0) or 0)))
        st = cells.get(key)
        if st is None:
            st = fresh_cell(cell, e.get("profile", ""), int(e.get("threads", 0)),
                            int(e.get("repeat", 0)))
            cells[key] = st
            if cell not in order:
                order.append(cell)
        phase = e.get("loadgen_phase", "")
        fill_watch(st, e, phase)

        def snap(sn, after_phase):
            status = sn.get("status", {})
            if after_phase and phase:
                st["rss"][phase] = num(status, "rss_bytes")
            st["hwm"] = max(st["hwm"], num(status, "hwm_bytes"))
            if sn.get("allocator"):
                st["allocator"] = sn["allocator"]

        if "snapshot" in e:
            snap(e["snapshot"], True)
        elif "phase" in e:
            ph = e["phase"]
            # The server's RSS before any load: the fill set_phase's reply.
            if not st["loaded"] and st["base"] < 0 and phase == "fill":
                st["base"] = num(ph.get("snapshot", {}).get("status", {}), "rss_bytes")
            if "before" in ph:
                snap(ph["before"], False)
            snap(ph.get("snapshot", {}), True)
            if "trim" in ph:
                st["trim"] = ph["trim"]
        elif "trim" in e:
            snap(e["trim"].get("after", {}), True)
            st["trim"] = e["trim"].get("trim", {})
        elif "load" in e:
            st["loaded"] = True
            if phase == "fill":
                st["value"][QPS] = num(e["load"], "qps")
                st["value"][P99] = num(e["load"].get("latency", {}), "p99_us")
        elif "cell_result" in e:
            r = e["cell_result"]
            st["has_result"] = True
            st["ok"] = bool(r.get("ok", False))
            st["error"] = r.get("error", "")
            st["exit"] = r.get("server", {}).get("exit", "")
    for cell in order:
        # The latest successful attempt counts; without one, the latest.
        attempts = sorted(k for k in cells if k[0] == cell)
        ok = [k for k in attempts if cells[k]["ok"]]
        st = cells[ok[-1] if ok else attempts[-1]]
        v = st["value"]
        v[UNDER_LOAD] = st["rss"].get("fill", -1.0)
        v[AFTER_SHRINK] = st["rss"].get("shrink", -1.0)
        v[AFTER_IDLE] = st["rss"].get("idle", -1.0)
        t = st["trim"]
        if t is not None:
            per_thread = bool(t.get("per_thread", False))
            v[TRIM_GLOBAL] = num(t, "rss_between_bytes") if per_thread else num(t, "rss_after_bytes")
            if per_thread:
                v[TRIM_PER_THREAD] = num(t, "rss_after_bytes")
        v[HWM] = st["hwm"]
        if st["base"] > 0 and v[TRIM_PER_THREAD] >= 0:
            st["goal"] = v[TRIM_PER_THREAD] / (st["base"] + TRIM_GOAL_LIVE_CACHE_BYTES)
        s["cells"].append(st)
        if st["profile"] not in profile_order:
            profile_order.append(st["profile"])
    groups = {}
    for c in s["cells"]:
        groups.setdefault((profile_order.index(c["profile"]), c["threads"]), []).append(c)
    for key in sorted(groups):
        members = groups[key]
        ok = [c for c in members if c["ok"]]
        s["rows"].append({
            "profile": profile_order[key[0]], "threads": key[1], "cells": len(members),
            "ok_cells": len(ok),
            "unfilled_cells": len([c for c in ok if c["fill"] is not None and not c["fill"]["filled"]]),
            "metric": [aggregate([c["value"][m] for c in ok]) for m in range(len(METRICS))],
            "base": aggregate([c["base"] for c in ok]),
            "goal": aggregate([c["goal"] for c in ok]),
        })
    s["profiles"] = [p for p in profile_order if any(r["profile"] == p for r in s["rows"])]
    s["threads"] = sorted({r["threads"] for r in s["rows"]})
    return s


def csv_text(s):
    cols = ["profile", "threads", "cells", "ok_cells"]
    for key, _ in METRICS:
        cols += ["%s_%s" % (key, x) for x in ("median", "min", "max")]
    cols += ["unfilled_cells", "spread_over_20pct", "base_rss_mib_median", "trim_goal_median",
             "trim_goal_met"]
    out = ",".join(cols) + "\n"
    for r in s["rows"]:
        row = [r["profile"], str(r["threads"]), str(r["cells"]), str(r["ok_cells"])]
        for m, (n, med, lo, hi) in enumerate(r["metric"]):
            row += ["-" if n == 0 else fmt(m, x) for x in (med, lo, hi)]
        row.append(str(r["unfilled_cells"]))
        if not spread_judged(r):
            row.append("n/a")
        else:
            row.append(";".join(METRICS[m][0] for m in wide_spread(r)) or "none")
        row.append("-" if r["base"][0] == 0 else fmt(UNDER_LOAD, r["base"][1]))
        row.append("-" if r["goal"][0] == 0 else goal_ratio(r["goal"][1]))
        row.append("-" if r["goal"][0] == 0 else ("yes" if goal_met(r["goal"]) else "no"))
        out += ",".join(row) + "\n"
    return out


def median_of(s, profile, threads, metric):
    for r in s["rows"]:
        if r["profile"] == profile and r["threads"] == threads and r["metric"][metric][0] > 0:
            return r["metric"][metric][1]
    return None


def row_of(s, profile, threads):
    for r in s["rows"]:
        if r["profile"] == profile and r["threads"] == threads:
            return r
    return None


def leanest(s, threads, metric):
    best = None
    for p in s["profiles"]:
        v = median_of(s, p, threads, metric)
        if v is not None and (best is None or v < best[1]):
            best = (p, v)
    return best


def mark(s, profile, threads, metric):
    """The table's marker when that median's repeats spread too far."""
    r = row_of(s, profile, threads)
    return SPREAD_MARK if r is not None and metric in wide_spread(r) else ""


def thread_word(t):
    return "%d thread%s" % (t, "" if t == 1 else "s")


def spread_lines(s):
    """The cells whose memory figures cannot be trusted from this run."""
    judged = [r for r in s["rows"] if spread_judged(r)]
    if not judged:
        return ["With one repeat per cell no figure here can be checked against another "
                "(rerun with `--repeats=3` or more: the table then marks, with %s, the memory "
                "figures whose repeats spread by more than %.0f %%)." % (
                    SPREAD_MARK, SPREAD_LIMIT * 100), ""]
    wide = [(r, wide_spread(r)) for r in judged if wide_spread(r)]
    if not wide:
        return ["Every memory figure's repeats are within %.0f %% of their median "
                "((max - min) / median)." % (SPREAD_LIMIT * 100), ""]
    parts = []
    for r, ms in wide:
        parts.append("%s at %s (%s)" % (r["profile"], thread_word(r["threads"]), ", ".join(
            "%s %.1f-%.1f MiB" % (METRICS[m][1][:-4], r["metric"][m][2] / MIB,
                                  r["metric"][m][3] / MIB) for m in ms)))
    return ["**Not to be trusted from this run** (marked %s in the table: the repeats spread by "
            "more than %.0f %% of their median, (max - min) / median; run these cells again with "
            "more repeats before choosing from them): %s." % (
                SPREAD_MARK, SPREAD_LIMIT * 100, "; ".join(parts)), ""]


def goal_line(s):
    """Issue 17's trim goal at 64 threads: which profiles meet it."""
    goal = ("The trim goal (RSS after the per-thread trim <= %.2fx (the server's RSS "
            "before any load + 10 MiB); the table's trim goal column)" % TRIM_GOAL_RATIO)
    if 64 not in s["threads"]:
        return ("- %s is stated at 64 threads, which this run did not measure; the column shows "
                "the ratio at %s threads." % (goal, ", ".join(str(t) for t in s["threads"])))
    rows = [r for r in s["rows"] if r["threads"] == 64 and r["goal"][0] > 0]
    if not rows:
        return "- %s: not measured at 64 threads (no per-thread trim or no RSS before load)." % goal

    def untrusted(r):
        return TRIM_PER_THREAD in wide_spread(r)

    met = [r for r in rows if goal_met(r["goal"])]
    if met:
        return "- %s at 64 threads: met by %s; missed by the other %d profile%s." % (
            goal, ", ".join("**%s** %sx%s" % (
                r["profile"], goal_ratio(r["goal"][1]),
                " (per-thread trim spread > 20 %: not to be trusted)" if untrusted(r) else "")
                for r in met),
            len(rows) - len(met), "" if len(rows) - len(met) == 1 else "s")
    best = min(rows, key=lambda r: r["goal"][1])
    return ("- %s at 64 threads: no profile meets it; the closest is **%s** at %sx (%.1f MiB "
            "after the per-thread trim against a goal of %.1f%s)." % (
                goal, best["profile"], goal_ratio(best["goal"][1]),
                best["metric"][TRIM_PER_THREAD][1] / MIB,
                TRIM_GOAL_RATIO * (best["base"][1] + TRIM_GOAL_LIVE_CACHE_BYTES) / MIB,
                "; its repeats spread > 20 %: not to be trusted" if untrusted(best) else ""))


def advice(s, run_dir, plots):
    """The "What to do" section, every sentence from this run's numbers."""
    lines = [WHAT_TO_DO, ""]
    lines.append("Generated by `tools/report.py %s` from this run's medians "
                 "(MiB of resident memory; lower is better)." % run_dir)
    lines.append("")
    unfilled = [r for r in s["rows"] if r["unfilled_cells"] > 0]
    if unfilled:
        churns = [c["fill"]["churn"] for c in s["cells"]
                  if c["ok"] and c["fill"] is not None and not c["fill"]["filled"]]
        lines.append("**%s** in %s: the fill stored at most %.2fx the cache limit, so the cache "
                     "never evicted and these rows are a smaller experiment than seed 000's. "
                     "Do not choose from them; rerun at a larger `--scale` (docs/FILL.md)." % (
                         CACHE_NEVER_FILLED,
                         ", ".join("%s at %d thread%s (%d of %d cells)" % (
                             r["profile"], r["threads"], "" if r["threads"] == 1 else "s",
                             r["unfilled_cells"], r["ok_cells"]) for r in unfilled),
                         max(churns)))
        lines.append("")
    lines.extend(spread_lines(s))
    lines.append("| threads | leanest under load | leanest after shrink + idle (no call) "
                 "| leanest after trim (global + per-thread) | glibc after shrink + idle |")
    lines.append("|---|---|---|---|---|")
    for t in s["threads"]:
        cells = []
        for m in (UNDER_LOAD, AFTER_IDLE, TRIM_PER_THREAD):
            b = leanest(s, t, m)
            if b is None and m == TRIM_PER_THREAD:
                m = TRIM_GLOBAL
                b = leanest(s, t, m)
            if b is None:
                cells.append("-")
                continue
            cells.append("**%s** %.1f%s" % (b[0], b[1] / MIB, mark(s, b[0], t, m)))
        g = median_of(s, "glibc", t, AFTER_IDLE)
        cells.append("-" if g is None else "%.1f%s" % (g / MIB, mark(s, "glibc", t, AFTER_IDLE)))
        lines.append("| %d | %s |" % (t, " | ".join(cells)))
    lines.append("")
    # One sentence per question, quoting the numbers.
    for t in s["threads"]:
        load = leanest(s, t, UNDER_LOAD)
        idle = leanest(s, t, AFTER_IDLE)
        if load is None or idle is None:
            continue
        g_load = median_of(s, "glibc", t, UNDER_LOAD)
        g_idle = median_of(s, "glibc", t, AFTER_IDLE)
        g_trim = median_of(s, "glibc", t, TRIM_GLOBAL)
        sent = "- At %d thread%s: **%s** held least under load (%.1f MiB" % (
            t, "" if t == 1 else "s", load[0], load[1] / MIB)
        if g_load is not None and load[0] != "glibc":
            sent += " against glibc's %.1f" % (g_load / MIB)
        sent += "); after the shrink and idle wait, without any call, **%s** held least (%.1f MiB" % (
            idle[0], idle[1] / MIB)
        if g_idle is not None and idle[0] != "glibc":
            sent += " against glibc's %.1f" % (g_idle / MIB)
        sent += ")"
        if g_trim is not None:
            sent += "; glibc with one `malloc_trim(0)` came to %.1f MiB" % (g_trim / MIB)
        lines.append(sent + ".")
    lines.append("")
    # Throughput cost against glibc at the same thread count.
    if any(median_of(s, "glibc", t, QPS) for t in s["threads"]):
        lines.append("Throughput (fill phase QPS) relative to glibc at the same thread count "
                     "(negative = slower; \"~\" where the two setups' min-max ranges overlap):")
        lines.append("")
        lines.append("| profile | " + " | ".join("%d thr" % t for t in s["threads"]) + " |")
        lines.append("|---|" + "---|" * len(s["threads"]))
        for p in s["profiles"]:
            row = []
            for t in s["threads"]:
                q, g = median_of(s, p, t, QPS), median_of(s, "glibc", t, QPS)
                if q is None or not g:
                    row.append("-")
                    continue
                cell = "%+.1f%%" % (100.0 * (q / g - 1))
                a, b = row_of(s, p, t)["metric"][QPS], row_of(s, "glibc", t)["metric"][QPS]
                if p != "glibc" and a[0] > 1 and b[0] > 1 and a[2] <= b[3] and b[2] <= a[3]:
                    cell = "~" + cell
                row.append(cell)
            lines.append("| %s | %s |" % (p, " | ".join(row)))
        lines.append("")
        most = max(r["metric"][QPS][0] for r in s["rows"])
        if most < 3:
            lines.append("With %d repeat%s per cell these are single measurements: on a busy "
                         "machine they vary by tens of percent between runs, so read them as "
                         "noise unless a sweep with `--repeats=5` agrees." % (
                             most, "" if most == 1 else "s"))
            lines.append("")
    else:
        lines.append("No glibc cells completed, so no throughput baseline.")
        lines.append("")
    # The overall pick: lowest average after-idle (no code change) and after trim.
    def overall(metric):
        best = None
        for p in s["profiles"]:
            vals = [median_of(s, p, t, metric) for t in s["threads"]]
            if any(v is None for v in vals):
                continue
            avg = sum(vals) / len(vals)
            if best is None or avg < best[1]:
                best = (p, avg, vals)
        return best
    no_call = overall(AFTER_IDLE)
    with_trim = overall(TRIM_PER_THREAD) or overall(TRIM_GLOBAL)
    if no_call:
        lines.append("- Without touching code, the setup that gave most back after the busy spell "
                     "across every thread count here is **%s** (%s MiB at %s threads)." % (
                         no_call[0], ", ".join("%.1f" % (v / MIB) for v in no_call[2]),
                         ", ".join(str(t) for t in s["threads"])))
    if with_trim:
        lines.append("- With a trim call after the burst (what the server's trim phase does), "
                     "**%s** ends lowest (%s MiB)." % (
                         with_trim[0], ", ".join("%.1f" % (v / MIB) for v in with_trim[2])))
    lines.append(goal_line(s))
    lines.append("")
    lines.append("These are this machine's numbers for one synthetic workload; rerun the sweep "
                 "where your service runs before choosing.")
    if plots:
        lines.append("")
        lines.append("![RSS under load](rss_under_load.png) ![RSS after shrink](rss_after_shrink.png)")
    return "\n".join(lines) + "\n"


def write_summary_section(run_dir, section):
    path = os.path.join(run_dir, "summary.md")
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    i = text.find(WHAT_TO_DO)
    if i >= 0:
        text = text[:i]
    if text and not text.endswith("\n\n"):
        text = text.rstrip("\n") + "\n\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + section)


def plot(s, run_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    threads = s["threads"]

    def series(profile, metric):
        xs, ys, lo, hi = [], [], [], []
        for t in threads:
            for r in s["rows"]:
                if r["profile"] == profile and r["threads"] == t and r["metric"][metric][0] > 0:
                    n, med, mn, mx = r["metric"][metric]
                    xs.append(t)
                    ys.append(med / MIB)
                    lo.append((med - mn) / MIB)
                    hi.append((mx - med) / MIB)
        return xs, ys, [lo, hi]

    def axes(title):
        fig, ax = plt.subplots(figsize=(10, 5.5), dpi=100)
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads)
        ax.set_xticklabels([str(t) for t in threads])
        ax.set_xlabel("worker threads")
        ax.set_ylabel("resident memory (MiB)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        return fig, ax

    paths = []
    fig, ax = axes("%s: RSS under load (after fill, 100 MiB cache)\nmedian of repeats, bars min-max"
                   % s["scenario"])
    for i, p in enumerate(s["profiles"]):
        xs, ys, err = series(p, UNDER_LOAD)
        if xs:
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=colors[i % len(colors)],
                        label=p)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # room above the highest point
    # Outside the axes: with eight setups a legend inside hides points.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    paths.append(os.path.join(run_dir, "rss_under_load.png"))
    fig.savefig(paths[-1])
    plt.close(fig)

    fig, ax = axes("%s: RSS after shrink to 10 MiB + idle (solid)\nand after trim, global + "
                   "per-thread (dashed)" % s["scenario"])
    for i, p in enumerate(s["profiles"]):
        c = colors[i % len(colors)]
        xs, ys, err = series(p, AFTER_IDLE)
        if xs:
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=c, label=p)
        xs, ys, err = series(p, TRIM_PER_THREAD)
        if not xs:
            xs, ys, err = series(p, TRIM_GLOBAL)
        if xs:
            ax.errorbar(xs, ys, yerr=err, marker="v", capsize=3, color=c, linestyle="--",
                        markerfacecolor="none", label="%s + trim" % p)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # room above the highest point
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    paths.append(os.path.join(run_dir, "rss_after_shrink.png"))
    fig.savefig(paths[-1])
    plt.close(fig)
    return paths


PHASE_COLORS = {"fill": "#fde0c5", "shrink": "#d5e8d4", "idle": "#dae8fc",
                "trim": "#e1d5e7", "start": "#eeeeee"}


def is_soak(events):
    for e in events:
        if "header" in e:
            return "soak" in e["header"].get("scenario", {})
    return False


def soak_series(events):
    """Watch records over time, phase bands and post-idle RSS per cycle."""
    t0 = None
    for e in events:
        if "header" in e:
            t0 = num(e["header"], "start_unix_nanos")
    watch = []
    bands = []  # [phase, start_s, end_s]
    post_idle = {}  # cycle (1-based) -> MiB
    lost_at = None
    for e in events:
        t = num(e, "unix_nanos")
        if t0 is None or t0 == 0:
            t0 = t
        ts = (t - t0) / 1e9
        if "server_lost" in e:
            lost_at = (num(e["server_lost"], "unix_nanos") - t0) / 1e9
        sn = e.get("snapshot")
        if sn is None:
            continue
        st = sn.get("status", {})
        if e.get("label") == "watch":
            lat = e.get("interval_latency")
            watch.append({
                "t": ts,
                "rss": num(st, "rss_bytes") / MIB,
                "anon": num(st, "anon_bytes") / MIB,
                "arena": num(sn.get("memory_map", {}), "arena_rss_bytes") / MIB,
                "threads": num(st, "threads"),
                "p99": num(lat, "p99_us") / 1000 if lat else None,
            })
            phase = e.get("loadgen_phase", "")
            if bands and bands[-1][0] == phase:
                bands[-1][2] = ts
            else:
                if bands:
                    bands[-1][2] = ts
                bands.append([phase, ts, ts])
        elif e.get("loadgen_phase") == "idle":
            post_idle[int(num(e, "cycle")) + 1] = num(st, "rss_bytes") / MIB
    return watch, bands, post_idle, lost_at


def plot_soak(events, run_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    watch, bands, post_idle, lost_at = soak_series(events)
    paths = []
    fig, (ax, axt, axl) = plt.subplots(3, 1, figsize=(11, 8), sharex=True,
                                       gridspec_kw={"height_ratios": [3, 1, 1]})
    t = [w["t"] for w in watch]
    ax.plot(t, [w["rss"] for w in watch], label="RSS")
    ax.plot(t, [w["anon"] for w in watch], label="anon")
    ax.plot(t, [w["arena"] for w in watch], label="arena RSS")
    axt.plot(t, [w["threads"] for w in watch], color="black", label="threads")
    lt = [w["t"] for w in watch if w["p99"] is not None]
    axl.plot(lt, [w["p99"] for w in watch if w["p99"] is not None], ".-",
             color="tab:red", label="p99 per interval")
    seen = set()
    for phase, a, b in bands:
        for x in (ax, axt, axl):
            x.axvspan(a, b, color=PHASE_COLORS.get(phase, "#ffffff"), lw=0,
                      label=None if phase in seen or x is not ax or not phase
                      else phase)
        seen.add(phase)
    if lost_at is not None:
        for x in (ax, axt, axl):
            x.axvline(lost_at, color="red", ls="--")
        ax.text(lost_at, ax.get_ylim()[1], " server lost", color="red",
                va="top")
    ax.set_ylabel("MiB")
    ax.set_title("Soak: server memory over time (watch records, phase bands)")
    ax.legend(loc="upper left", fontsize="small", ncol=2)
    axt.set_ylabel("threads")
    axl.set_ylabel("p99 ms")
    axl.set_xlabel("seconds since the run began")
    fig.tight_layout()
    path = os.path.join(run_dir, "rss_over_time.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths.append(path)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    cycles = sorted(post_idle)
    ax.plot(cycles, [post_idle[c] for c in cycles], "o-")
    ax.set_xlabel("cycle")
    ax.set_ylabel("post-idle RSS (MiB)")
    ax.set_title("Soak: RSS after each cycle's idle (after gc.collect())")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(run_dir, "post_idle_per_cycle.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths.append(path)
    return paths


def soak_main(events, args):
    if args.no_plots:
        return 0
    try:
        paths = plot_soak(events, args.run_dir)
    except ImportError as e:
        print("report.py: no plots (%s); install python3-matplotlib and rerun: %s %s"
              % (e, sys.argv[0], args.run_dir), file=sys.stderr)
        return 3
    for p in paths:
        print("report.py: plot %s" % p)
    return 0


def plot_compare(data, png):
    """One panel per figure: every repeat of base and new side by side for
    each compared pair, the medians as bars, and the verdict in the label."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = [p for p in data["pairs"] if not p["refused"] or p["forced"]]
    keys = []
    for p in pairs:
        for f in p["figures"]:
            if f["figure"] not in keys:
                keys.append(f["figure"])
    if not keys:
        return None
    cols = 4
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), dpi=100, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, key in enumerate(keys):
        ax = axes[i // cols][i % cols]
        labels = []
        title = key
        for x, p in enumerate(pairs):
            f = next((f for f in p["figures"] if f["figure"] == key), None)
            if f is None:
                labels.append("-")
                continue
            title = f["title"] + (" (%s)" % f["unit"] if f["unit"] else "")
            for dx, vals, med, c, name in ((-0.18, f["base_values"], f["base_median"], colors[0], "base"),
                                           (0.18, f["new_values"], f["new_median"], colors[1], "new")):
                ax.scatter([x + dx] * len(vals), vals, color=c, s=14, zorder=3,
                           label=name if x == 0 and i == 0 else None)
                ax.hlines(med, x + dx - 0.12, x + dx + 0.12, color=c, lw=2)
            verdict = "~" if not f["significant"] else "%+.1f%%" % f["change_pct"]
            labels.append("%s\n%s p=%.3f" % (short(p), verdict, f["p"]))
        ax.set_xticks(range(len(pairs)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_xlim(-0.6, len(pairs) - 0.4)
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    for j in range(len(keys), rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.legend(loc="upper right", fontsize=8)
    fig.suptitle("base %s vs new %s: each repeat, bar = median; ~ = no significant change "
                 "(Mann-Whitney U, alpha %g)" % (data["base"], data["new"], data["alpha"]),
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(png)
    plt.close(fig)
    return png


def short(pair):
    """A pair's label short enough for a tick."""
    if pair["base"] == pair["new"]:
        return pair["base"]
    return "%s ->\n%s" % (pair["base"], pair["new"])


def compare_main(args):
    try:
        with open(args.compare) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print("report.py: %s" % e, file=sys.stderr)
        return 1
    png = args.png or os.path.join(os.path.dirname(os.path.abspath(args.compare)), "compare.png")
    try:
        path = plot_compare(data, png)
    except ImportError as e:
        print("report.py: no plot (%s); install python3-matplotlib and rerun: %s --compare %s"
              % (e, sys.argv[0], args.compare), file=sys.stderr)
        return 3
    except OSError as e:
        # One line, not a traceback: a bad --png path is the user's to fix.
        print("report.py: cannot write the plot %s: %s" % (png, e.strerror or e), file=sys.stderr)
        return 1
    if path is None:
        print("report.py: nothing compared, no plot", file=sys.stderr)
        return 0
    print("report.py: plot %s" % path)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", nargs="?", help="a sweep's run directory (holds events.jsonl)")
    ap.add_argument("--csv", help="also write the summary table as CSV here")
    ap.add_argument("--no-plots", action="store_true", help="advice only")
    ap.add_argument("--compare", help="plot `rsslab_loadgen compare --json` output instead")
    ap.add_argument("--png", help="with --compare: where to write the plot")
    args = ap.parse_args()
    if args.compare:
        return compare_main(args)
    if not args.run_dir:
        ap.error("a run directory (or --compare FILE) is required")
    try:
        events = read_events(args.run_dir)
    except OSError as e:
        print("report.py: %s" % e, file=sys.stderr)
        return 1
    if is_soak(events):
        return soak_main(events, args)
    s = build(events)
    if not s["cells"]:
        print("report.py: %s holds no sweep cells" % args.run_dir, file=sys.stderr)
        return 1
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(csv_text(s))
    paths = []
    missing = None
    if not args.no_plots:
        try:
            paths = plot(s, args.run_dir)
        except ImportError as e:
            missing = e
    write_summary_section(args.run_dir, advice(s, args.run_dir, bool(paths)))
    print("report.py: \"What to do\" written to %s" % os.path.join(args.run_dir, "summary.md"))
    for p in paths:
        print("report.py: plot %s" % p)
    if missing is not None:
        print("report.py: no plots (%s); install python3-matplotlib and rerun: %s %s"
              % (missing, sys.argv[0], args.run_dir), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
