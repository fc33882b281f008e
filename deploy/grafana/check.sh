#!/usr/bin/env bash
# Runs a real Prometheus (Debian's `prometheus` package) against a real
# rsslab_server and rsslab_loadgen on loopback, then evaluates every query
# of deploy/grafana/rsslab.json and lists those that return no series.
# For whoever edits the dashboard; //tests/loadgen_it:grafana_dashboard_test
# (no Prometheus needed) checks the metric names on every test run.
#
#   apt-get install prometheus     # once; its service is not needed
#   ./rsslab build && deploy/grafana/check.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
ROOT=$PWD
BIN=${RSSLAB_BIN:-$ROOT/bin}
command -v prometheus >/dev/null || { echo "check.sh: needs prometheus (apt-get install prometheus)" >&2; exit 2; }
W=$(mktemp -d /tmp/rsslab-grafana-check.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
promtool check config deploy/grafana/prometheus.yml
# The shipped config on other ports, scraped every second so a short run fills it.
sed 's/9464/19464/; s/9465/19465/; s/scrape_interval: 5s/scrape_interval: 1s/; s/scrape_timeout: 4s/scrape_timeout: 900ms/' \
  deploy/grafana/prometheus.yml > "$W/prom.yml"
"$BIN/rsslab_server" --threads=4 --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 \
  --metrics_listen=127.0.0.1:19464 --handler="$ROOT/server/handlers/web_worker.py" >"$W/srv.out" 2>"$W/srv.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q ready "$W/srv.out" && break; sleep 0.1; done
DATA=$(sed -n 's/.*data=\([^ ]*\).*/\1/p' "$W/srv.out")
CONTROL=$(sed -n 's/.*control=\([^ ]*\).*/\1/p' "$W/srv.out")
prometheus --config.file="$W/prom.yml" --storage.tsdb.path="$W/data" \
  --web.listen-address=127.0.0.1:19090 >"$W/prom.log" 2>&1 &
PIDS+=($!)
sleep 3  # Prometheus has no ready line; its first scrapes
"$BIN/rsslab_loadgen" --builtin=quick --scale=2 --target="$DATA" --control="$CONTROL" --out="$W/run" \
  --progress=none --metrics_listen=127.0.0.1:19465 --metrics_hold=60s >"$W/lg.out" 2>"$W/lg.err" &
PIDS+=($!)
for _ in $(seq 600); do grep -q "run over" "$W/lg.err" && break; sleep 0.2; done
sleep 12  # a few more scrapes after the run, so rates over 20 s have two points
/usr/bin/python3 - "$ROOT/deploy/grafana/rsslab.json" <<'PY'
import json, sys, urllib.parse, urllib.request
d = json.load(open(sys.argv[1]))
def panels(p):
    for q in p.get("panels", []):
        yield q
        yield from panels(q)
api = "http://127.0.0.1:19090/api/v1/"
n, empty = 0, []
for p in panels(d):
    for t in p.get("targets", []):
        e = (t["expr"].replace("$server", ".*").replace("$loadgen", ".*")
             .replace("$__rate_interval", "20s"))
        r = json.load(urllib.request.urlopen(api + "query?" + urllib.parse.urlencode({"query": e})))
        n += 1
        if r["status"] != "success" or not r["data"]["result"]:
            empty.append("%s: %s" % (p["title"], e))
print("check.sh: %d queries, %d without series (glibc server: the allocator figures only "
      "jemalloc, mimalloc and tcmalloc report are expected here)" % (n, len(empty)))
for x in empty:
    print("  " + x)
for v in d["templating"]["list"]:
    if v["type"] == "query":
        metric = v["definition"].split("(")[1].split(",")[0]
        r = json.load(urllib.request.urlopen(api + "series?" + urllib.parse.urlencode({"match[]": metric})))
        print("check.sh: variable %s lists %s" % (v["name"], sorted({s["instance"] for s in r["data"]})))
PY
