#!/usr/bin/env bash
# What rsslab_exporter costs at 64 workers scraped every 15 s (the goal:
# under 1 % of one core and under 30 MiB RSS).
#
# A pre-fork Python service: a master forking RSSLAB_EXPORTER_COST_WORKERS
# (64) workers, each with the package as docs/package/PREFORK.md adds it
# (auto_trim("after_burst"), serve(name="costbench"), so a Control and a
# registry entry each); the workers idle. One rsslab_exporter on loopback
# lists and reads them all. Debian's prometheus scrapes it every
# RSSLAB_EXPORTER_COST_INTERVAL seconds (15), or, without prometheus, a
# plain HTTP GET loop at that interval does. After the first scrape, the
# exporter's CPU (/proc/PID/stat utime+stime) and wall time are measured
# for RSSLAB_EXPORTER_COST_SECONDS (300); prints its CPU as % of one core,
# its RSS (VmRSS) and peak (VmHWM) at the end, the last scrape's duration,
# and the conditions. A benchmark, not a test: run it with nothing else
# running:
#   ./rsslab build && bench/exporter_cost.sh
#   RSSLAB_EXPORTER_COST_PIN=1 bench/exporter_cost.sh            # the exporter on CPU 1
#   RSSLAB_EXPORTER_COST_WORKERS=4 RSSLAB_EXPORTER_COST_SECONDS=20 RSSLAB_EXPORTER_COST_INTERVAL=5 \
#       bench/exporter_cost.sh                                    # a smoke run
# The package: from RSSLAB_FIX_PYTHON (a python with the rsslab wheel
# installed) if that imports it, else the Bazel-built extensions
# (.bazel/bin/python, bazel build //python:_rsslab.so //python:_rsslab_grpc.so).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
PY=${RSSLAB_FIX_PYTHON:-/usr/bin/python3}
WORKERS=${RSSLAB_EXPORTER_COST_WORKERS:-64}
SECONDS_RUN=${RSSLAB_EXPORTER_COST_SECONDS:-300}
INTERVAL=${RSSLAB_EXPORTER_COST_INTERVAL:-15}
PIN=${RSSLAB_EXPORTER_COST_PIN:-}
[[ $WORKERS =~ ^[0-9]+$ ]] && (( WORKERS >= 1 && WORKERS <= 512 )) ||
  { echo "exporter_cost.sh: RSSLAB_EXPORTER_COST_WORKERS must be 1..512, not '$WORKERS'" >&2; exit 2; }
[[ $SECONDS_RUN =~ ^[0-9]+$ ]] && (( SECONDS_RUN >= 10 && SECONDS_RUN <= 86400 )) ||
  { echo "exporter_cost.sh: RSSLAB_EXPORTER_COST_SECONDS must be 10..86400, not '$SECONDS_RUN'" >&2; exit 2; }
[[ $INTERVAL =~ ^[0-9]+$ ]] && (( INTERVAL >= 1 && INTERVAL <= 300 )) ||
  { echo "exporter_cost.sh: RSSLAB_EXPORTER_COST_INTERVAL must be 1..300 seconds, not '$INTERVAL'" >&2; exit 2; }
[ -z "$PIN" ] || { [[ $PIN =~ ^[0-9]+$ ]] && (( PIN < $(nproc) )); } ||
  { echo "exporter_cost.sh: RSSLAB_EXPORTER_COST_PIN must be a CPU number below $(nproc), not '$PIN'" >&2; exit 2; }
EXPORTER=$(find_bin rsslab_exporter exporter) || exit 2

WORK=$(mktemp -d)
PIDS=()
SVC_PID=""
cleanup() {
  [ -n "$SVC_PID" ] && kill -TERM -- "-$SVC_PID" 2>/dev/null
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/run"
export XDG_RUNTIME_DIR=$WORK/run  # the registry: this run's workers only

if ! "$PY" -c "import rsslab" 2>/dev/null; then
  for so in _rsslab _rsslab_grpc; do
    [ -r "$ROOT/.bazel/bin/python/$so.so" ] || { echo "exporter_cost.sh: $PY cannot import rsslab and .bazel/bin/python/$so.so is missing (bazel build //python:$so.so, or RSSLAB_FIX_PYTHON=a python with the wheel)" >&2; exit 2; }
  done
  mkdir -p "$WORK/pkg/rsslab"
  cp "$ROOT"/python/rsslab/*.py "$WORK/pkg/rsslab/"
  tag=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  for so in _rsslab _rsslab_grpc; do cp "$ROOT/.bazel/bin/python/$so.so" "$WORK/pkg/rsslab/$so$tag"; done
  export PYTHONPATH=$WORK/pkg${PYTHONPATH:+:$PYTHONPATH}
fi

cat > "$WORK/service.py" <<'PY'
import os, signal, sys
import rsslab
n = int(sys.argv[1])
def worker():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    rsslab.auto_trim("after_burst")
    rsslab.serve("127.0.0.1:0", name="costbench")
    signal.pause()
for _ in range(n):
    if os.fork() == 0:
        worker()
        os._exit(0)
signal.signal(signal.SIGTERM, lambda *_: os.killpg(0, signal.SIGKILL))
while True:
    os.wait()
PY
setsid "$PY" "$WORK/service.py" "$WORKERS" >"$WORK/svc.out" 2>"$WORK/svc.err" &
SVC_PID=$!
for _ in $(seq 600); do
  (( $(ls "$WORK/run" | grep -c '^rsslab-control-') >= WORKERS )) && break
  kill -0 "$SVC_PID" 2>/dev/null || { cat "$WORK/svc.err" >&2; exit 1; }
  sleep 0.1
done
found=$(ls "$WORK/run" | grep -c '^rsslab-control-' || true)
(( found >= WORKERS )) || { echo "exporter_cost.sh: only $found of $WORKERS workers registered in 60 s" >&2; exit 1; }

EXP_CMD=("$EXPORTER" --listen=127.0.0.1:0)
[ -n "$PIN" ] && EXP_CMD=(taskset -c "$PIN" "${EXP_CMD[@]}")
"${EXP_CMD[@]}" >"$WORK/exp.out" 2>"$WORK/exp.err" &
EXP_PID=$!
PIDS+=("$EXP_PID")
for _ in $(seq 100); do grep -q "ready" "$WORK/exp.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/.*listen=\([^ ]*\).*/\1/p' "$WORK/exp.out")
[ -n "$ADDR" ] || { echo "exporter_cost.sh: the exporter did not start: $(cat "$WORK/exp.err")" >&2; exit 1; }

get() { "$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())' "$1"; }
SCRAPER=""
if command -v prometheus >/dev/null; then
  SCRAPER="prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}'), scrape_interval ${INTERVAL}s"
  cat > "$WORK/prom.yml" <<EOF
global: {scrape_interval: ${INTERVAL}s, scrape_timeout: $(( INTERVAL < 10 ? INTERVAL : 10 ))s}
scrape_configs:
  - job_name: rsslab_exporter
    static_configs: [{targets: ['$ADDR']}]
EOF
  prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address=127.0.0.1:0 >"$WORK/prom.log" 2>&1 &
  PIDS+=($!)
else
  SCRAPER="an HTTP GET of /metrics every ${INTERVAL}s (no prometheus installed)"
  ( while true; do get "http://$ADDR/metrics" >/dev/null || true; sleep "$INTERVAL"; done ) &
  PIDS+=($!)
fi

cpu_ticks() { awk '{print $14 + $15}' "/proc/$EXP_PID/stat"; }
status_kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$EXP_PID/status"; }
# The first scrapes (a channel to every worker opened) are not measured.
get "http://$ADDR/metrics" >/dev/null
sleep "$INTERVAL"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s.%N); C0=$(cpu_ticks)
sleep "$SECONDS_RUN"
T1=$(date +%s.%N); C1=$(cpu_ticks)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
RSS_KIB=$(status_kib VmRSS); HWM_KIB=$(status_kib VmHWM)
HZ=$(getconf CLK_TCK)
METRICS=$(get "http://$ADDR/metrics")
SEEN=$(sed -n 's/^rsslab_exporter_workers \(.*\)/\1/p' <<<"$METRICS")
ANSWERED=$(sed -n 's/^rsslab_exporter_controls_answered \(.*\)/\1/p' <<<"$METRICS")
SCRAPE_S=$(sed -n 's/^rsslab_exporter_scrape_duration_seconds \(.*\)/\1/p' <<<"$METRICS")
BYTES=$(wc -c <<<"$METRICS")

echo "== rsslab_exporter cost: $WORKERS workers, scraped every ${INTERVAL}s for ${SECONDS_RUN}s"
echo "command:      ${RSSLAB_EXPORTER_COST_WORKERS:+RSSLAB_EXPORTER_COST_WORKERS=$WORKERS }${RSSLAB_EXPORTER_COST_SECONDS:+RSSLAB_EXPORTER_COST_SECONDS=$SECONDS_RUN }${RSSLAB_EXPORTER_COST_INTERVAL:+RSSLAB_EXPORTER_COST_INTERVAL=$INTERVAL }${PIN:+RSSLAB_EXPORTER_COST_PIN=$PIN }bench/exporter_cost.sh"
echo "commit:       $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (with local changes)')"
echo "date:         $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine:      $(nproc) cores, $(uname -r)"
echo "load average: $LOAD_BEFORE before, $LOAD_AFTER after"
if [ -n "$PIN" ]; then echo "pinned:       exporter on CPU $PIN"; else echo "pinned:       no (the scheduler places every process)"; fi
echo "scraper:      $SCRAPER"
echo "workers seen: $SEEN (Control answered: $ANSWERED), last scrape ${SCRAPE_S}s, $BYTES bytes"
awk -v c0="$C0" -v c1="$C1" -v hz="$HZ" -v t0="$T0" -v t1="$T1" -v rss="$RSS_KIB" -v hwm="$HWM_KIB" 'BEGIN {
  cpu = (c1 - c0) / hz; pct = 100 * cpu / (t1 - t0);
  printf "exporter CPU: %.3f s in %.1f s = %.3f %% of one core (goal < 1 %%: %s)\n", cpu, t1 - t0, pct, pct < 1 ? "met" : "missed";
  printf "exporter RSS: %.1f MiB at the end, %.1f MiB peak (goal < 30 MiB: %s)\n", rss / 1024, hwm / 1024, hwm / 1024 < 30 ? "met" : "missed";
}'
