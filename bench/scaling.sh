#!/usr/bin/env bash
# How rsslab_server's cost grows with the work.
#
# Part 1, worker threads: the seed workload (--builtin=seed, web_worker
# handler) at 1, 4, 16 and 64 worker threads, each in a fresh server, with
# the same loadgen settings (closed loop, CONC RPCs in flight over CH
# channels). Prints QPS, p50 and p99 of the fill and shrink steps, RSS after
# fill, and the server's thread count. With ROUNDS > 1 the thread counts are
# interleaved round by round, so background load hits all of them.
#
# Part 2, client streams: one server (STREAM_THREADS workers, the test
# handler holding each call HOLD_MS ms with the GIL released) under closed
# loops of 0 (connections only), 1000, 2000, ... RPCs outstanding over
# STREAM_CHANNELS channels. While each level runs, VmRSS is sampled from
# /proc and the server's own queue depth from a Control snapshot (so the
# streams are shown to be at the server, not in the client). Prints RSS per
# level and the growth in MiB per 1,000 streams (least squares).
#
# Run after ./rsslab build:
#   bench/scaling.sh                                 # both parts
#   PARTS=threads THREADS_LIST="1 4" SEED_SCALE=0.05 bench/scaling.sh
#   PARTS=streams STREAMS="0 1000 2000 4000" bench/scaling.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
PARTS=${PARTS:-threads streams}
THREADS_LIST=${THREADS_LIST:-1 4 16 64}
ROUNDS=${ROUNDS:-1}
SEED_SCALE=${SEED_SCALE:-0.1}
CONC=${CONC:-64}
CH=${CH:-4}
STREAM_THREADS=${STREAM_THREADS:-4}
STREAM_CHANNELS=${STREAM_CHANNELS:-8}
STREAMS=${STREAMS:-0 1000 2000 3000}
HOLD_MS=${HOLD_MS:-2}
LEVEL_S=${LEVEL_S:-8}
SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
CTL=${CTL_BIN:-$(find_bin rsslab_ctl ctl)} || exit 1
for b in "$SERVER" "$LOADGEN" "$CTL"; do
  [ -x "$b" ] || { echo "scaling.sh: $b is missing; run ./rsslab build first" >&2; exit 2; }
done
for p in $PARTS; do
  case $p in threads|streams) ;; *) echo "scaling.sh: PARTS takes threads and/or streams, got '$p'" >&2; exit 2 ;; esac
done
OUT=$(mktemp -d /tmp/rsslab-scaling-XXXXXX)
SPID=""
LPID=""
trap '[ -n "$LPID" ] && kill "$LPID" 2>/dev/null; [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; true' EXIT

start() {  # dir server-flags... -> sets SPID DATA CTLADDR
  local dir=$1
  shift
  mkdir -p "$dir"
  "$SERVER" --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 "$@" >"$dir/out" 2>"$dir/err" &
  SPID=$!
  wait_ready "$SPID" "$dir/out" "$dir/err"
}
stop() { kill -TERM "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""; }
rss_kib() { awk '/VmRSS/ { print $2 }' "/proc/$1/status"; }

echo "machine: $(nproc) cores, $(uname -r), glibc $(ldd --version | head -1 | sed 's/.* //'), load $(cut -d' ' -f1-3 /proc/loadavg)"

if [[ " $PARTS " == *" threads "* ]]; then
  echo
  echo "part 1: seed workload, scale=$SEED_SCALE, closed loop concurrency=$CONC channels=$CH, rounds=$ROUNDS"
  printf "%-5s %7s %9s %9s %9s %9s %9s %9s %12s %8s\n" round threads fill_qps fill_p50 fill_p99 \
    shr_qps shr_p50 shr_p99 rss_fill_mib threads_os
  for r in $(seq 1 "$ROUNDS"); do
    for t in $THREADS_LIST; do
      d=$OUT/threads-$t-r$r
      start "$d" --threads="$t" --handler="$ROOT/server/handlers/web_worker.py"
      "$LOADGEN" --target="$DATA" --control="$CTLADDR" --builtin=seed --scale="$SEED_SCALE" \
        --concurrency="$CONC" --channels="$CH" --progress=none --out="$d/run" >/dev/null
      stop
      /usr/bin/python3 - "$d/run/events.jsonl" "$r" "$t" <<'PY'
import json, sys
loads = {}; snaps = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if "load" in e:
        loads[e.get("label") or e.get("loadgen_phase")] = e["load"]
    if "snapshot" in e and e.get("label"):
        snaps[e["label"]] = e["snapshot"]
def f(name):
    l = loads[name]
    return "%9.0f %9.1f %9.1f" % (l["qps"], l["latency"]["p50_us"] / 1e3, l["latency"]["p99_us"] / 1e3)
s = snaps["after_fill"]
print("%-5s %7s %s %s %12.1f %8d" % (sys.argv[2], sys.argv[3], f("fill"), f("shrink"),
      int(s["status"]["rss_bytes"]) / 2**20, int(s["status"].get("threads", 0))))
PY
    done
  done
fi

if [[ " $PARTS " == *" streams "* ]]; then
  echo
  echo "part 2: client streams, server --threads=$STREAM_THREADS, tests/handlers/test_handler.py" \
    "sleep_ms=$HOLD_MS, $STREAM_CHANNELS channels, ${LEVEL_S}s per level"
  d=$OUT/streams
  start "$d" --threads="$STREAM_THREADS" --handler="$ROOT/tests/handlers/test_handler.py"
  printf "%8s %12s %12s %12s %14s %10s %12s\n" streams rss_mib_med rss_mib_max server_queue malloc_used_mib qps p99_ms
  : >"$d/levels"
  for n in $STREAMS; do
    : >"$d/rss-$n"
    if [ "$n" -gt 0 ]; then
      "$LOADGEN" --target="$DATA" --control= --concurrency="$n" --channels="$STREAM_CHANNELS" \
        --params="sleep_ms=$HOLD_MS" --duration="${LEVEL_S}s" --warmup=2s --deadline_ms=60000 \
        --progress=none --out="$d/run-$n" >/dev/null &
      LPID=$!
    fi
    # Sample over the middle of the measured part (after the warm-up).
    sleep $((LEVEL_S / 2))
    # Queue depth: the streams are held by the server. malloc in use: how
    # much of the RSS is live heap rather than memory glibc kept.
    read -r queue inuse < <("$CTL" --control="$CTLADDR" snapshot --json | /usr/bin/python3 -c '
import json, sys
s = json.loads(sys.stdin.readline())
print(s["workers"].get("queue_depth", 0), "%.1f" % (int(s["allocator_stats"].get("allocated_bytes", 0)) / 2**20))')
    for _ in $(seq 1 8); do rss_kib "$SPID" >>"$d/rss-$n"; sleep 0.25; done
    qps=- p99=-
    if [ -n "$LPID" ]; then
      wait "$LPID"
      LPID=""
      read -r qps p99 < <(/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if "load" in e: print("%.0f %.1f" % (e["load"]["qps"], e["load"]["latency"]["p99_us"] / 1e3))
' "$d/run-$n/events.jsonl")
    fi
    read -r med max < <(sort -n "$d/rss-$n" | awk '{ a[NR] = $1 } END { printf "%.1f %.1f\n", a[int((NR + 1) / 2)] / 1024, a[NR] / 1024 }')
    echo "$n $med $inuse" >>"$d/levels"
    printf "%8s %12s %12s %12s %14s %10s %12s\n" "$n" "$med" "$max" "$queue" "$inuse" "$qps" "$p99"
  done
  stop
  slope() {  # column label
    awk -v c="$1" -v label="$2" '{ x[NR] = $1; y[NR] = $c; sx += $1; sy += $c } END {
      mx = sx / NR; my = sy / NR
      for (i = 1; i <= NR; i++) { num += (x[i] - mx) * (y[i] - my); den += (x[i] - mx) ^ 2 }
      if (den > 0) printf "%s growth: %.2f MiB per 1,000 outstanding streams (least squares over %d levels)\n", label, 1000 * num / den, NR
    }' "$d/levels"
  }
  slope 2 RSS
  slope 3 "malloc in use"
fi
echo "raw runs: $OUT"
