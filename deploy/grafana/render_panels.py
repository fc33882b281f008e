#!/usr/bin/python3
"""Draws a Grafana dashboard's panels from a Prometheus, without Grafana.

Runs every query of the dashboard's timeseries panels as a query_range
against the Prometheus given, and draws each panel (its title, its series
with their legends, bytes in MiB) into one PNG with matplotlib:

  deploy/grafana/render_panels.py --prometheus=127.0.0.1:9090 \\
      --dashboard=deploy/grafana/service.json --out=panels.png \\
      --minutes=10 --var=job=rsslab_exporter --row='Per worker'

Dashboard variables are given with --var=NAME=VALUE (a regex where the
dashboard matches with =~; unset ones match everything), and
$__rate_interval is four times --step. //exporter:prometheus_test
imports expand() and targets() to run the same queries as instant ones.
"""

import argparse
import json
import re
import sys
import time
import urllib.parse
import urllib.request

MAX_SERIES = 12  # per panel drawn: a legend stays readable


def load(path):
    with open(path) as f:
        return json.load(f)


def panels(dashboard, row=None):
    """The dashboard's panels with queries, in order (rows' nested ones
    too); with `row`, only those under the row of that title."""
    current = None
    for p in dashboard.get("panels", []):
        if p.get("type") == "row":
            current = p.get("title")
        if p.get("targets") and row in (None, current):
            yield p
        for q in p.get("panels", []):
            if q.get("targets") and row in (None, p.get("title")):
                yield q


def targets(dashboard):
    """[(panel title, target)] for every query of the dashboard."""
    return [(p["title"], t) for p in panels(dashboard) for t in p["targets"]]


def expand(expr, variables, rate_interval="1m"):
    """The query with the dashboard's variables filled in: those given, ".*"
    for any other, $__rate_interval as given."""
    expr = expr.replace("$__rate_interval", rate_interval)

    def var(m):
        return variables.get(m.group(1) or m.group(2), ".*")
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", var, expr)


def api(prom, path, params, timeout=10):
    url = "http://%s/api/v1/%s?%s" % (prom, path, urllib.parse.urlencode(params))
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body = json.loads(r.read().decode())
    if body.get("status") != "success":
        raise RuntimeError("%s: %s" % (params.get("query"), body.get("error")))
    return body["data"]["result"]


def query_range(prom, expr, start, end, step):
    """[(labels, [(t, v)])] of one range query."""
    got = api(prom, "query_range", {"query": expr, "start": start, "end": end, "step": step})
    return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in got]


def legend(fmt, labels):
    if not fmt:
        return ",".join("%s=%s" % kv for kv in sorted(labels.items()) if kv[0] != "__name__")
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()


def byte_scale(largest):
    """(divisor, unit) that shows `largest` bytes as a plain number."""
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if largest >= div:
            return div, unit
    return 1, "bytes"


def render(prom, dashboard, out, start, end, step, variables, title_regex=None, columns=2,
           row=None):
    """Draws the panels whose title matches title_regex (under the row
    titled `row`, if given); returns how many series each drew ({title: n})."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [p for p in panels(dashboard, row)
              if title_regex is None or re.search(title_regex, p["title"])]
    if not chosen:
        raise ValueError("no panel%s%s in %s" % (
            " under the row %r" % row if row is not None else "",
            " whose title matches %r" % title_regex if title_regex is not None else "",
            dashboard.get("title", "the dashboard")))
    rows = (len(chosen) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(7.5 * columns, 3.4 * rows), squeeze=False)
    drawn = {}
    for ax, p in zip([a for r in axes for a in r], chosen):
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        series = []
        for t in p["targets"]:
            expr = expand(t["expr"], variables, "%ds" % (4 * step))
            for labels, values in query_range(prom, expr, start, end, step):
                series.append((legend(t.get("legendFormat", ""), labels), values))
        series = series[:MAX_SERIES]
        div, ylabel = 1, "" if unit in ("", "short") else unit
        if unit == "bytes":
            div, ylabel = byte_scale(max([abs(v) for _, vs in series for _, v in vs] or [0]))
        for name, values in series:
            ax.plot([x - start for x, _ in values], [v / div for _, v in values], label=name,
                    linewidth=1.2, marker="." if len(values) < 3 else None)
        n = len(series)
        drawn[p["title"]] = n
        ax.set_xlim(0, end - start)
        ax.set_title(p["title"], fontsize=10)
        ax.set_xlabel("seconds", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if n:
            ax.legend(fontsize=6, loc="upper left", ncol=2 if n > 6 else 1)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    for ax in [a for r in axes for a in r][len(chosen):]:
        ax.axis("off")
    fig.suptitle("%s (Prometheus %s, %d s)" % (dashboard.get("title", ""), prom, end - start),
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return drawn


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prometheus", required=True, help="HOST:PORT of Prometheus's HTTP API")
    ap.add_argument("--dashboard", required=True, help="a Grafana dashboard JSON file")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--minutes", type=float, default=10, help="the range drawn, ending now")
    ap.add_argument("--step", type=int, default=0, help="seconds between points (default: range/200)")
    ap.add_argument("--var", action="append", default=[], help="NAME=VALUE of a dashboard variable")
    ap.add_argument("--panels", default=None, help="only panels whose title matches this regex")
    ap.add_argument("--row", default=None, help="only panels under the row of this title")
    a = ap.parse_args(argv)
    if not 0 < a.minutes <= 7 * 24 * 60:
        ap.error("--minutes must be more than 0 and at most a week")
    variables = {}
    for v in a.var:
        name, sep, value = v.partition("=")
        if not sep or not re.fullmatch(r"\w+", name):
            ap.error("--var must be NAME=VALUE, got %r" % v)
        variables[name] = value
    end = int(time.time())
    start = end - int(a.minutes * 60)
    step = a.step or max(1, (end - start) // 200)
    try:
        drawn = render(a.prometheus, load(a.dashboard), a.out, start, end, step, variables,
                       a.panels, row=a.row)
    except (OSError, ValueError, RuntimeError, KeyError) as e:  # one line, not a traceback
        sys.exit("render_panels.py: %s" % e)
    for title, n in drawn.items():
        print("%-50s %d series" % (title, n))
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main(sys.argv[1:])
