#!/usr/bin/python3
"""Draws a Grafana dashboard's panels from a Prometheus, without Grafana.

Runs every query of the dashboard's timeseries panels as a query_range
against the Prometheus given, and draws each panel (its title, its series
with their legends, bytes in MiB) into one PNG with matplotlib:

  deploy/grafana/render_panels.py --prometheus=127.0.0.1:9090 \\
      --dashboard=deploy/grafana/service.json --out=panels.png \\
      --minutes=10 --var=job=rsslab_exporter --panels='^(Worker|Retained|Trims|Bytes|Regrowth|Container)'

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


def panels(dashboard):
    """The dashboard's panels with queries, in order (rows' nested ones too)."""
    for p in dashboard.get("panels", []):
        if p.get("targets"):
            yield p
        for q in p.get("panels", []):
            if q.get("targets"):
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


def render(prom, dashboard, out, start, end, step, variables, title_regex=None, columns=2):
    """Draws the panels whose title matches title_regex; returns how many
    series each drew ({title: n})."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [p for p in panels(dashboard)
              if title_regex is None or re.search(title_regex, p["title"])]
    if not chosen:
        raise ValueError("no panel title matches %r" % title_regex)
    rows = (len(chosen) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(7.5 * columns, 3.4 * rows), squeeze=False)
    drawn = {}
    for ax, p in zip([a for r in axes for a in r], chosen):
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        scale, suffix = (1 / 1048576, " (MiB)") if unit == "bytes" else (1, " (%s)" % unit
                                                                          if unit not in ("", "short") else "")
        n = 0
        for t in p["targets"]:
            expr = expand(t["expr"], variables, "%ds" % (4 * step))
            for labels, values in query_range(prom, expr, start, end, step):
                if n >= MAX_SERIES:
                    break
                ax.plot([x - start for x, _ in values], [v * scale for _, v in values],
                        label=legend(t.get("legendFormat", ""), labels), linewidth=1.2)
                n += 1
        drawn[p["title"]] = n
        ax.set_title(p["title"], fontsize=10)
        ax.set_xlabel("seconds", fontsize=8)
        ax.set_ylabel(suffix.strip(" ()") or "", fontsize=8)
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
    fig.tight_layout()
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
    drawn = render(a.prometheus, load(a.dashboard), a.out, start, end, step, variables, a.panels)
    for title, n in drawn.items():
        print("%-50s %d series" % (title, n))
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main(sys.argv[1:])
