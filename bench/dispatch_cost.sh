#!/usr/bin/env bash
# Embedded dispatch cost: server CPU per request with the
# no-op handler, split into gRPC, the worker hand-off, and the GIL + Python
# call, using the --dispatch knob of the benchmark server (rsslab_bench_server,
# bench/dispatch/: rsslab_server plus that flag), one binary for every mode:
#   inline  answered in the gRPC callback (gRPC + bookkeeping only)
#   pool    handed to a worker thread, answered there without Python
#   python  the product's dispatcher: worker thread, GIL, handle(request, cache)
# One server per mode, all started up front and pinned to CPU 0; the loadgen
# runs on CPU 1. Rounds are interleaved and the order rotates, so background
# load hits every mode alike. CPU is the server's utime+stime from
# /proc/PID/stat around each loadgen run of exactly REQUESTS requests (each
# server gets one unmeasured warm-up run first). Run after ./rsslab build
# (which builds //bench/dispatch:rsslab_bench_server too):
#
#   bench/dispatch_cost.sh                          # closed loop, 64 in flight
#   RATE=5000 bench/dispatch_cost.sh                # open loop (noisier: no batching)
#   SERVER=... LOADGEN=... ROUNDS=5 REQUESTS=60000 bench/dispatch_cost.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
SERVER=${SERVER:-$(find_bin rsslab_bench_server bench/dispatch)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
THREADS=${THREADS:-4}
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-40000}
RATE=${RATE:-0}
CONC=${CONC:-64}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
MODES=(inline pool python)
HANDLER=$ROOT/tests/handlers/noop.py
OUT=$(mktemp -d /tmp/rsslab-dispatch-XXXXXX)
declare -A PID DATA
cleanup() { for m in "${MODES[@]}"; do [ -n "${PID[$m]:-}" ] && kill "${PID[$m]}" 2>/dev/null; done; true; }
trap cleanup EXIT
for f in "$SERVER" "$LOADGEN" "$HANDLER"; do
  [ -e "$f" ] || { echo "dispatch_cost: $f is missing (run ./rsslab build)" >&2; exit 1; }
done

if [ "$RATE" != 0 ]; then LOAD=(--rate="$RATE" --channels=4); SHAPE="open loop $RATE req/s";
else LOAD=(--concurrency="$CONC" --channels=4); SHAPE="closed loop $CONC in flight"; fi

for m in "${MODES[@]}"; do
  d=$OUT/$m; mkdir -p "$d"
  taskset -c "$SERVER_CPU" "$SERVER" --threads="$THREADS" --handler="$HANDLER" --dispatch="$m" \
    --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 >"$d/out" 2>"$d/err" &
  PID[$m]=$!
  wait_ready "${PID[$m]}" "$d/out" "$d/err"
  DATA[$m]=$DATA
done

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }  # utime + stime
drive() {  # mode requests outdir
  taskset -c "$CLIENT_CPU" "$LOADGEN" --target="${DATA[$1]}" --control= --requests="$2" \
    "${LOAD[@]}" --progress=none --out="$3" >/dev/null
}
# "qps errors" from a run's load summary.
load_summary() {
  /usr/bin/python3 - "$1/events.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if "load" in e:
        l = e["load"]
        print("%.0f %s" % (l.get("qps", 0), l.get("errors", 0)))
        break
PY
}

HZ=$(getconf CLK_TCK)
echo "machine: $(nproc) cores, kernel $(uname -r), glibc $(ldd --version | head -1 | sed 's/.*) //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server: $SERVER --threads=$THREADS --handler=tests/handlers/noop.py, pinned to CPU $SERVER_CPU; loadgen on CPU $CLIENT_CPU"
echo "shape: $SHAPE over 4 channels, $REQUESTS requests per run, $ROUNDS rounds, CPU from /proc/PID/stat (1/$HZ s ticks)"
for m in "${MODES[@]}"; do drive "$m" 2000 "$OUT/$m/warmup"; done

RES=$OUT/results
: >"$RES"
printf "%-5s %-7s %9s %7s %12s\n" round mode qps errors cpu_us_req
for r in $(seq 1 "$ROUNDS"); do
  n=${#MODES[@]}
  for i in $(seq 0 $((n - 1))); do
    m=${MODES[$(((i + r - 1) % n))]}
    before=$(ticks "${PID[$m]}")
    drive "$m" "$REQUESTS" "$OUT/$m/r$r"
    after=$(ticks "${PID[$m]}")
    read -r qps errors < <(load_summary "$OUT/$m/r$r")
    us=$(awk -v t=$((after - before)) -v hz="$HZ" -v n="$REQUESTS" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
    printf "%-5s %-7s %9s %7s %12s\n" "$r" "$m" "$qps" "$errors" "$us"
    echo "$r $m $us" >>"$RES"
  done
done

/usr/bin/python3 - "$RES" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, m, us in rows:
    by.setdefault(int(r), {})[m] = float(us)
def med(f):
    return statistics.median(f(v) for v in by.values())
print()
print("per round: pool-inline = worker hand-off, python-pool = GIL + Python call, python-inline = Python dispatch")
for r in sorted(by):
    v = by[r]
    print("round %d: inline %.2f  pool %.2f  python %.2f  | hand-off %+.2f  GIL+call %+.2f  dispatch %+.2f us/req"
          % (r, v["inline"], v["pool"], v["python"], v["pool"] - v["inline"],
             v["python"] - v["pool"], v["python"] - v["inline"]))
d = med(lambda v: v["python"] - v["inline"])
print("median: gRPC (inline) %.2f us/req; worker hand-off %+.2f; GIL + Python call %+.2f; Python dispatch in all %+.2f us/req"
      % (med(lambda v: v["inline"]), med(lambda v: v["pool"] - v["inline"]),
         med(lambda v: v["python"] - v["pool"]), d))
print("goal: Python dispatch <= 10 us CPU/request: %s" % ("met" if d <= 10 else "NOT met"))
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); raw runs: $OUT"
