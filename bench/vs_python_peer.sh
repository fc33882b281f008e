#!/usr/bin/env bash
# rsslab_server vs the Python grpcio peer (bench/peer/peer_server.py): same
# loadgen, same worker threads, same handler files, same requests, measured
# in one run with interleaved rounds. Reports QPS and p99 ratios (no-op and
# seed workload), RSS under load and after shrink, and idle baselines.
# Run after ./rsslab build:
#
#   bench/vs_python_peer.sh                      # THREADS=4 ROUNDS=2
#   THREADS=16 ROUNDS=3 NOOP_REQUESTS=40000 bench/vs_python_peer.sh
#   WORKLOADS=seed ROUNDS=4 bench/vs_python_peer.sh             # seed workload only
#   BEFORE=/tmp/rsslab_server.old WORKLOADS=seed bench/vs_python_peer.sh
#       # adds a third server per round, "before" (another rsslab_server
#       # binary), to compare a change against the same peer in one run
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
SERVER=$(find_bin rsslab_server server) || exit 2
LOADGEN=$(find_bin rsslab_loadgen loadgen) || exit 2
THREADS=${THREADS:-4}
ROUNDS=${ROUNDS:-2}
NOOP_REQUESTS=${NOOP_REQUESTS:-20000}
SEED_SCALE=${SEED_SCALE:-0.1}
CONC=${CONC:-64}
WORKLOADS=${WORKLOADS:-noop seed}
BEFORE=${BEFORE:-}
for w in $WORKLOADS; do
  case $w in noop|seed) ;; *) echo "vs_python_peer.sh: WORKLOADS takes noop and/or seed, got '$w'" >&2; exit 2 ;; esac
done
[ -z "$BEFORE" ] || [ -x "$BEFORE" ] || { echo "vs_python_peer.sh: BEFORE=$BEFORE is not an executable" >&2; exit 2; }
# The peer is Debian's grpcio; without it the peer cannot start.
/usr/bin/python3 -c 'import grpc' 2>/dev/null ||
  { echo "vs_python_peer.sh: /usr/bin/python3 cannot import grpc: apt-get install python3-grpcio" >&2; exit 1; }
KINDS="rsslab python"
[ -n "$BEFORE" ] && KINDS="before rsslab python"
OUT=$(mktemp -d /tmp/rsslab-peer-XXXXXX)
SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true' EXIT

start() {  # kind handler dir -> sets SPID DATA CTL
  local kind=$1 handler=$2 dir=$3
  mkdir -p "$dir"
  if [ "$kind" != python ]; then
    local bin=$SERVER
    [ "$kind" = before ] && bin=$BEFORE
    "$bin" --threads="$THREADS" --handler="$handler" \
      --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 >"$dir/out" 2>"$dir/err" &
  else
    /usr/bin/python3 "$ROOT/bench/peer/peer_server.py" --threads="$THREADS" --handler="$handler" \
      --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 >"$dir/out" 2>"$dir/err" &
  fi
  SPID=$!
  wait_ready "$SPID" "$dir/out" "$dir/err"
  CTL=$CTLADDR
}
stop() { kill -TERM "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""; }
rss_mib() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# One JSON line per load summary / phase snapshot -> "qps p99_ms" etc.
summ() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
qps = []; p99 = []; rss = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if "load" in e:
        qps.append(e["load"]["qps"]); p99.append(e["load"]["latency"]["p99_us"] / 1000)
    if "snapshot" in e and e.get("label"):
        rss[e["label"]] = int(e["snapshot"]["status"]["rss_bytes"]) / 2**20
print("%.0f %.1f %.1f %.1f" % (sum(qps) / len(qps), max(p99), rss.get("after_fill", 0),
                                rss.get("after_shrink", 0)))
PY
}

echo "machine: $(nproc) cores, $(uname -r), $(ldd --version | head -1 | sed 's/.*) //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "servers=$KINDS workloads=$WORKLOADS threads=$THREADS concurrency=$CONC noop_requests=$NOOP_REQUESTS seed_scale=$SEED_SCALE rounds=$ROUNDS"
printf "%-5s %-7s %-6s %9s %8s %12s %14s %10s\n" round server load qps p99_ms rss_fill_mib rss_shrink_mib idle_mib
run_noop() {  # round kind
  local r=$1 kind=$2 d=$OUT/r$1-$2-noop idle qps p99
  start "$kind" "$ROOT/server/handlers/noop.py" "$d"
  idle=$(rss_mib "$SPID")
  "$LOADGEN" --target="$DATA" --control= --requests="$NOOP_REQUESTS" \
    --warmup_requests=2000 --concurrency="$CONC" --channels=4 --progress=none --out="$d/run" >/dev/null
  stop
  read -r qps p99 _ _ < <(summ "$d/run/events.jsonl")
  printf "%-5s %-7s %-6s %9s %8s %12s %14s %10s\n" "$r" "$kind" noop "$qps" "$p99" - - "$idle"
}
run_seed() {  # round kind
  local r=$1 kind=$2 d=$OUT/r$1-$2-seed idle qps p99 fill shrink
  start "$kind" "$ROOT/server/handlers/web_worker.py" "$d"
  idle=$(rss_mib "$SPID")
  "$LOADGEN" --target="$DATA" --control="$CTL" --builtin=seed --scale="$SEED_SCALE" \
    --concurrency="$CONC" --channels=4 --progress=none --out="$d/run" >/dev/null
  stop
  read -r qps p99 fill shrink < <(summ "$d/run/events.jsonl")
  printf "%-5s %-7s %-6s %9s %8s %12s %14s %10s\n" "$r" "$kind" seed "$qps" "$p99" "$fill" "$shrink" "$idle"
}
for r in $(seq 1 "$ROUNDS"); do
  order=$KINDS
  # Even rounds run the servers in reverse order, so a burst of background
  # load does not always hit the same one.
  [ $((r % 2)) -eq 0 ] && order=$(echo "$KINDS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for kind in $order; do
    for w in $WORKLOADS; do "run_$w" "$r" "$kind"; done
  done
done
echo "raw runs: $OUT"
