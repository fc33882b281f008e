#!/usr/bin/env bash
# What the server adds to the seed workload: in one run, for each
# dict shape of web_worker.py (flat, the default, and nested),
#   (a) the handler alone, called in a loop in Debian's /usr/bin/python3
#       (bench/handler_alone.py: the server's request dicts, a Python LRU
#       stand-in for the server's cache, which cannot be imported outside it);
#       and bench/seed_reference.py, the seed's workload written plainly
#       (flat 200-int dict, 12.6 KiB mean body), the same way, as the
#       yardstick for the handler's own cost (ratio_cpu of its line: the
#       handler's CPU per request over the reference's);
#   (b) rsslab_server with the same handler and knobs at 1 and 4 workers,
#       driven by rsslab_loadgen (closed loop, CONC in flight);
# and prints requests/s, CPU per request and the server / alone ratio.
# Shapes: "pinned" runs the handler loop and the server on CPU 0 and the
# loadgen on CPU 1 (so the server gets exactly the one CPU the loop had);
# "unpinned" lets the scheduler place everything. CPU per request is the
# process's utime+stime (/proc/PID/stat for the server, os.times() for the
# loop) over the measured requests. A benchmark, not a test. Run after
# ./rsslab build, on a quiet machine (nothing else busy on its CPUs):
#
#   bench/seed_overhead.sh
#   SHAPES=flat WORKERS=1 MODES=pinned REQUESTS=10000 bench/seed_overhead.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
HANDLER=${HANDLER:-$ROOT/server/handlers/web_worker.py}
PYTHON=${PYTHON:-/usr/bin/python3}
REQUESTS=${REQUESTS:-20000}
WARMUP=${WARMUP:-1000}
CONC=${CONC:-16}
SHAPES=${SHAPES:-flat nested}
WORKERS=${WORKERS:-1 4}
MODES=${MODES:-pinned unpinned}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
for f in "$SERVER" "$LOADGEN" "$HANDLER" "$PYTHON"; do
  [ -e "$f" ] || { echo "seed_overhead: $f is missing (run ./rsslab build)" >&2; exit 1; }
done
for m in $MODES; do
  case $m in pinned|unpinned) ;; *) echo "seed_overhead: MODES takes pinned and/or unpinned, got '$m'" >&2; exit 2 ;; esac
done
OUT=$(mktemp -d /tmp/rsslab-seedoh-XXXXXX)
SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true' EXIT
HZ=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }  # utime + stime


echo "machine: $(nproc) cores, $(uname -r), $(ldd --version | head -1 | sed 's/.*) //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "handler: $HANDLER; $REQUESTS measured requests after $WARMUP warm-up per run; loadgen closed loop, $CONC in flight, 4 channels"
echo "alone: $PYTHON bench/handler_alone.py (Python LRU stand-in for rsslab.cache); server: $SERVER"
echo "ratios: server lines vs the same shape's alone line; alone lines' ratio_cpu vs the reference"
printf "%-8s %-6s %-7s %7s %9s %11s %9s %9s\n" mode shape run workers rps cpu_us_req ratio_rps ratio_cpu
for mode in $MODES; do
  # Command prefixes: taskset when pinned, nothing otherwise.
  SPIN=(taskset -c "$SERVER_CPU") CPIN=(taskset -c "$CLIENT_CPU")
  [ "$mode" = unpinned ] && SPIN=() CPIN=()
  line=$("${SPIN[@]}" "$PYTHON" "$ROOT/bench/handler_alone.py" --handler="$ROOT/bench/seed_reference.py" \
    --requests="$REQUESTS" --warmup="$WARMUP")
  r_rps=$(sed -n 's/.* rps=\([^ ]*\).*/\1/p' <<<"$line")
  r_cpu=$(sed -n 's/.* cpu_us_per_req=\([^ ]*\).*/\1/p' <<<"$line")
  printf "%-8s %-6s %-7s %7s %9.0f %11.1f %9s %9s\n" "$mode" - reference - "$r_rps" "$r_cpu" - 1.00
  for shape in $SHAPES; do
    line=$("${SPIN[@]}" "$PYTHON" "$ROOT/bench/handler_alone.py" --handler="$HANDLER" \
      --requests="$REQUESTS" --warmup="$WARMUP" --param "dict_shape=$shape")
    a_rps=$(sed -n 's/.* rps=\([^ ]*\).*/\1/p' <<<"$line")
    a_cpu=$(sed -n 's/.* cpu_us_per_req=\([^ ]*\).*/\1/p' <<<"$line")
    printf "%-8s %-6s %-7s %7s %9.0f %11.1f %9s %9.2f\n" "$mode" "$shape" alone - "$a_rps" "$a_cpu" 1.00 \
      "$(awk -v a="$a_cpu" -v r="$r_cpu" 'BEGIN { print a / r }')"
    for w in $WORKERS; do
      d=$OUT/$mode-$shape-w$w
      mkdir -p "$d"
      "${SPIN[@]}" "$SERVER" --threads="$w" --handler="$HANDLER" --handler_params="dict_shape=$shape" \
        --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 >"$d/out" 2>"$d/err" &
      SPID=$!
      wait_ready "$SPID" "$d/out" "$d/err"
      drive() {
        "${CPIN[@]}" "$LOADGEN" --target="$DATA" --control= --requests="$1" --concurrency="$CONC" \
          --channels=4 --progress=none --out="$2" >/dev/null
      }
      drive "$WARMUP" "$d/warmup"
      t0=$(ticks "$SPID")
      drive "$REQUESTS" "$d/run"
      t1=$(ticks "$SPID")
      kill -TERM "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""
      "$PYTHON" - "$d/run/events.jsonl" "$((t1 - t0))" "$HZ" "$REQUESTS" "$a_rps" "$a_cpu" \
        "$mode" "$shape" "$w" <<'PY'
import json, sys
path, ticks, hz, n, a_rps, a_cpu, mode, shape, w = sys.argv[1:]
load = next(e["load"] for e in map(json.loads, open(path)) if "load" in e)
failed = int(load.get("requests_failed", 0))
if failed:
    sys.exit("seed_overhead: %s %s w%s: %d requests failed: %s" % (mode, shape, w, failed, load.get("first_error")))
rps = load["qps"]
cpu = int(ticks) * 1e6 / int(hz) / int(n)
print("%-8s %-6s %-7s %7s %9.0f %11.1f %9.2f %9.2f" % (
    mode, shape, "server", w, rps, cpu, rps / float(a_rps), cpu / float(a_cpu)))
PY
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); raw runs: $OUT"
