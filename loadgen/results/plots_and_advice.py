#!/usr/bin/python3
"""Plots and advice for a finished rsslab sweep, from the loadgen's aggregate.

    loadgen/results/plots_and_advice.py RUN_DIR            # a sweep: reads RUN_DIR/cells.json,
                                       # writes RUN_DIR/rss_under_load.png,
                                       # RUN_DIR/rss_after_shrink.png and the
                                       # "What to do" section of summary.md
    loadgen/results/plots_and_advice.py SOAK_RUN_DIR       # a soak: rss_over_time.png and
                                       # post_idle_per_cycle.png
    loadgen/results/plots_and_advice.py --compare C.json --png compare.png
                                       # `rsslab_loadgen compare`'s JSON:
                                       # base vs new per figure

Seed 000's figure: resident memory against worker threads per allocator
profile, under load (left panel there, rss_under_load.png here) and after the
cache shrank and the server idled, with the after-trim points
(rss_after_shrink.png). Medians over repeats, bars from min to max.
"What to do" also names the memory figures whose repeats spread by more
than the table's limit (not to be trusted from this run) and which profiles
meet the trim goal at 64 threads, as the table marks them.

A sweep is aggregated once, by the loadgen (loadgen/results/sweep_summary.cc):
it writes summary.md, summary.csv and cells.json (proto/sweep_table.proto:
every row's medians, ranges, marks and goal, every cell's figures). This
tool only plots and phrases from cells.json, so the advice quotes the
table's numbers; a cells.json without a field it reads is refused in one
line. Needs only the standard library and, for the PNGs, Debian's
python3-matplotlib (Agg).
"""

import argparse
import json
import os
import sys

MIB = 1048576.0
WHAT_TO_DO = "## What to do"
# The sweep's aggregate, written by the loadgen (loadgen/results/sweep_json.cc,
# proto/sweep_table.proto) beside summary.md and summary.csv.
CELLS_JSON = "cells.json"
# The figures this tool phrases and plots, by their cells.json key.
UNDER_LOAD = "under_load_mib"
AFTER_IDLE = "after_idle_mib"
TRIM_GLOBAL = "trim_global_mib"
TRIM_PER_THREAD = "trim_per_thread_mib"
QPS = "qps"
USED_FIGURES = (UNDER_LOAD, AFTER_IDLE, TRIM_GLOBAL, TRIM_PER_THREAD, QPS)


class ShapeError(Exception):
    """cells.json is not what this tool reads: another loadgen wrote it."""


def num(d, key):
    """A protobuf-JSON number (int64 fields arrive as strings); 0 if absent."""
    return float(d.get(key, 0) or 0)


NUMBER = (int, float)


def need(path, d, where, fields):
    """Each (key, type) of fields in d, or ShapeError naming what is not."""
    if not isinstance(d, dict):
        raise ShapeError("%s: %s is not an object" % (path, where or "the file"))
    for key, kind in fields:
        v = d.get(key)
        if v is None or not isinstance(v, kind) or (kind is NUMBER and isinstance(v, bool)):
            raise ShapeError("%s: %s%s is missing or not %s" % (
                path, where, key, "a list" if kind is list else "an object" if kind is dict
                else "a string" if kind is str else "a boolean" if kind is bool else "a number"))
    return d


def figure(path, d, where):
    """A SweepFigure as (n, median, min, max)."""
    need(path, d, where, (("n", NUMBER), ("median", NUMBER), ("min", NUMBER), ("max", NUMBER),
                          ("wide_spread", bool)))
    return (int(d["n"]), float(d["median"]), float(d["min"]), float(d["max"]))


def load_table(run_dir):
    """The loadgen's cells.json as this tool's rows and cells; ShapeError if
    it lacks a field this tool reads, OSError/ValueError if unreadable."""
    path = os.path.join(run_dir, CELLS_JSON)
    with open(path, encoding="utf-8") as f:
        t = json.load(f)
    need(path, t, "", (("scenario", str), ("metrics", list), ("rows", list), ("cells", list),
                       ("spread_limit", NUMBER), ("spread_mark", str),
                       ("trim_goal_ratio", NUMBER), ("trim_goal_live_cache_bytes", NUMBER),
                       ("cache_never_filled", str)))
    keys, titles = [], {}
    for i, m in enumerate(t["metrics"]):
        need(path, m, "metrics[%d]." % i, (("key", str), ("title", str), ("memory", bool)))
        keys.append(m["key"])
        titles[m["key"]] = m["title"]
    for k in USED_FIGURES:
        if k not in keys:
            raise ShapeError("%s: metrics has no %s" % (path, k))
    s = {"scenario": t["scenario"], "titles": titles, "rows": [], "cells": [],
         "spread_limit": float(t["spread_limit"]), "spread_mark": t["spread_mark"],
         "goal_limit": float(t["trim_goal_ratio"]),
         "live_cache": float(t["trim_goal_live_cache_bytes"]),
         "never_filled": t["cache_never_filled"]}
    for i, r in enumerate(t["rows"]):
        where = "rows[%d]." % i
        need(path, r, where, (("profile", str), ("allocator", str), ("threads", NUMBER),
                              ("cells", NUMBER), ("ok_cells", NUMBER),
                              ("unfilled_cells", NUMBER), ("figures", dict),
                              ("base_rss", dict), ("trim_goal", dict), ("trim_goal_met", bool),
                              ("trim_goal_ratio", str), ("spread_judged", bool)))
        metric = {k: figure(path, r["figures"].get(k), "%sfigures.%s." % (where, k)) for k in keys}
        s["rows"].append({
            "profile": r["profile"], "allocator": r["allocator"], "threads": int(r["threads"]),
            "cells": int(r["cells"]), "ok_cells": int(r["ok_cells"]),
            "unfilled_cells": int(r["unfilled_cells"]), "metric": metric,
            "wide": [k for k in keys if r["figures"][k]["wide_spread"]],
            "judged": r["spread_judged"],
            "base": figure(path, r["base_rss"], where + "base_rss."),
            "goal": figure(path, r["trim_goal"], where + "trim_goal."),
            "goal_met": r["trim_goal_met"], "goal_ratio": r["trim_goal_ratio"]})
    for i, c in enumerate(t["cells"]):
        need(path, c, "cells[%d]." % i, (("cell", str), ("profile", str), ("threads", NUMBER),
                                         ("status", str)))
        fill = c.get("fill")
        s["cells"].append({
            "cell": c["cell"], "ok": c["status"] == "ok",
            # Absent when the cell recorded no fill; FillCheck's defaults are dropped.
            "fill": None if fill is None else {"filled": bool(fill.get("filled", False)),
                                               "churn": float(fill.get("churn", 0) or 0)}})
    profiles = []
    for r in s["rows"]:
        if r["profile"] not in profiles:
            profiles.append(r["profile"])
    s["profiles"] = profiles
    s["threads"] = sorted({r["threads"] for r in s["rows"]})
    return s


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
    return s["spread_mark"] if r is not None and metric in r["wide"] else ""


def thread_word(t):
    return "%d thread%s" % (t, "" if t == 1 else "s")


def spread_lines(s):
    """The cells whose memory figures cannot be trusted from this run."""
    mark_, limit = s["spread_mark"], s["spread_limit"]
    judged = [r for r in s["rows"] if r["judged"]]
    if not judged:
        return ["With one repeat per cell no figure here can be checked against another "
                "(rerun with `--repeats=3` or more: the table then marks, with %s, the memory "
                "figures whose repeats spread by more than %.0f %%)." % (mark_, limit * 100), ""]
    wide = [r for r in judged if r["wide"]]
    if not wide:
        return ["Every memory figure's repeats are within %.0f %% of their median "
                "((max - min) / median)." % (limit * 100), ""]
    parts = []
    for r in wide:
        parts.append("%s at %s (%s)" % (r["profile"], thread_word(r["threads"]), ", ".join(
            "%s %.1f-%.1f MiB" % (title_of(s, m), r["metric"][m][2] / MIB,
                                  r["metric"][m][3] / MIB) for m in r["wide"])))
    return ["**Not to be trusted from this run** (marked %s in the table: the repeats spread by "
            "more than %.0f %% of their median, (max - min) / median; run these cells again with "
            "more repeats before choosing from them): %s." % (
                mark_, limit * 100, "; ".join(parts)), ""]


def title_of(s, key):
    """A memory figure's column title without its unit: "after idle"."""
    title = s["titles"][key]
    return title[:-4] if title.endswith(" MiB") else title


def goal_line(s):
    """The trim goal at 64 threads: which profiles meet it."""
    goal = ("The trim goal (RSS after the per-thread trim <= %.2fx (the server's RSS "
            "before any load + %.0f MiB); the table's trim goal column)" % (
                s["goal_limit"], s["live_cache"] / MIB))
    if 64 not in s["threads"]:
        return ("- %s is stated at 64 threads, which this run did not measure; the column shows "
                "the ratio at %s threads." % (goal, ", ".join(str(t) for t in s["threads"])))
    rows = [r for r in s["rows"] if r["threads"] == 64 and r["goal"][0] > 0]
    if not rows:
        return "- %s: not measured at 64 threads (no per-thread trim or no RSS before load)." % goal

    def untrusted(r):
        return TRIM_PER_THREAD in r["wide"]

    met = [r for r in rows if r["goal_met"]]
    if met:
        return "- %s at 64 threads: met by %s; missed by the other %d profile%s." % (
            goal, ", ".join("**%s** %sx%s" % (
                r["profile"], r["goal_ratio"],
                " (per-thread trim spread > 20 %: not to be trusted)" if untrusted(r) else "")
                for r in met),
            len(rows) - len(met), "" if len(rows) - len(met) == 1 else "s")
    best = min(rows, key=lambda r: r["goal"][1])
    return ("- %s at 64 threads: no profile meets it; the closest is **%s** at %sx (%.1f MiB "
            "after the per-thread trim against a goal of %.1f%s)." % (
                goal, best["profile"], best["goal_ratio"],
                best["metric"][TRIM_PER_THREAD][1] / MIB,
                s["goal_limit"] * (best["base"][1] + s["live_cache"]) / MIB,
                "; its repeats spread > 20 %: not to be trusted" if untrusted(best) else ""))


def advice(s, run_dir, plots):
    """The "What to do" section, every sentence from this run's numbers."""
    lines = [WHAT_TO_DO, ""]
    lines.append("Generated by `loadgen/results/plots_and_advice.py %s` from this run's medians "
                 "(MiB of resident memory; lower is better)." % run_dir)
    lines.append("")
    unfilled = [r for r in s["rows"] if r["unfilled_cells"] > 0]
    if unfilled:
        churns = [c["fill"]["churn"] for c in s["cells"]
                  if c["ok"] and c["fill"] is not None and not c["fill"]["filled"]]
        lines.append("**%s** in %s: the fill stored at most %.2fx the cache limit, so the cache "
                     "never evicted and these rows are a smaller experiment than seed 000's. "
                     "Do not choose from them; rerun at a larger `--scale` (docs/FILL.md)." % (
                         s["never_filled"],
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


def legend(s, profile):
    """The profile and, where its cells recorded one, the allocator version
    ("mimalloc3 (mimalloc 3.0.1)"), so 2.0.9 and 3.0.1 lines are told apart."""
    for r in s["rows"]:
        a = r["allocator"]
        if r["profile"] == profile and any(ch.isdigit() for ch in a) and "(" not in a:
            return "%s (%s)" % (profile, a)
    return profile


def plot(s, run_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if len(s["profiles"]) > len(colors):
        # Past the default cycle's 10 colours, lines of two profiles would share one.
        colors = list(plt.get_cmap("tab20").colors)
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
                        label=legend(s, p))
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
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=c, label=legend(s, p))
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


def read_events(run_dir):
    """A soak's records, for its series over time (a sweep's aggregate is
    cells.json, never rebuilt here)."""
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


def read_header(run_dir):
    """The run's header record (the first line), {} without one."""
    with open(os.path.join(run_dir, "events.jsonl")) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            return e.get("header", {})
    return {}


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
        print("plots_and_advice.py: no plots (%s); install python3-matplotlib and rerun: %s %s"
              % (e, sys.argv[0], args.run_dir), file=sys.stderr)
        return 3
    for p in paths:
        print("plots_and_advice.py: plot %s" % p)
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
        print("plots_and_advice.py: %s" % e, file=sys.stderr)
        return 1
    png = args.png or os.path.join(os.path.dirname(os.path.abspath(args.compare)), "compare.png")
    try:
        path = plot_compare(data, png)
    except ImportError as e:
        print("plots_and_advice.py: no plot (%s); install python3-matplotlib and rerun: %s --compare %s"
              % (e, sys.argv[0], args.compare), file=sys.stderr)
        return 3
    except OSError as e:
        # One line, not a traceback: a bad --png path is the user's to fix.
        print("plots_and_advice.py: cannot write the plot %s: %s" % (png, e.strerror or e), file=sys.stderr)
        return 1
    if path is None:
        print("plots_and_advice.py: nothing compared, no plot", file=sys.stderr)
        return 0
    print("plots_and_advice.py: plot %s" % path)
    return 0


def sweep_main(args):
    try:
        s = load_table(args.run_dir)
    except (OSError, ValueError, ShapeError) as e:
        print("plots_and_advice.py: %s (`rsslab_loadgen report %s` rewrites it from events.jsonl)"
              % (e, args.run_dir), file=sys.stderr)
        return 1
    if not s["cells"]:
        print("plots_and_advice.py: %s holds no sweep cells" % args.run_dir, file=sys.stderr)
        return 1
    paths = []
    missing = None
    if not args.no_plots:
        try:
            paths = plot(s, args.run_dir)
        except ImportError as e:
            missing = e
    write_summary_section(args.run_dir, advice(s, args.run_dir, bool(paths)))
    print("plots_and_advice.py: \"What to do\" written to %s" % os.path.join(args.run_dir, "summary.md"))
    for p in paths:
        print("plots_and_advice.py: plot %s" % p)
    if missing is not None:
        print("plots_and_advice.py: no plots (%s); install python3-matplotlib and rerun: %s %s"
              % (missing, sys.argv[0], args.run_dir), file=sys.stderr)
        return 3
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", nargs="?",
                    help="a sweep's run directory (holds cells.json) or a soak's (events.jsonl)")
    ap.add_argument("--no-plots", action="store_true", help="advice only")
    ap.add_argument("--compare", help="plot `rsslab_loadgen compare --json` output instead")
    ap.add_argument("--png", help="with --compare: where to write the plot")
    args = ap.parse_args()
    if args.compare:
        return compare_main(args)
    if not args.run_dir:
        ap.error("a run directory (or --compare FILE) is required")
    if os.path.exists(os.path.join(args.run_dir, CELLS_JSON)):
        return sweep_main(args)
    try:
        header = read_header(args.run_dir)
    except OSError as e:
        print("plots_and_advice.py: %s" % e, file=sys.stderr)
        return 1
    if "soak" in header.get("scenario", {}):
        try:
            events = read_events(args.run_dir)
        except OSError as e:
            print("plots_and_advice.py: %s" % e, file=sys.stderr)
            return 1
        return soak_main(events, args)
    print("plots_and_advice.py: %s has no %s, a sweep's aggregate (`rsslab_loadgen report %s` writes "
          "it), and is not a soak" % (args.run_dir, CELLS_JSON, args.run_dir), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
