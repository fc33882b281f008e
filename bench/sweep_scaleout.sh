#!/usr/bin/env bash
# A sweep through one agent, then the same sweep through two:
# does the loadgen keep every agent busy while cells remain?
#
# Two local rsslab_agents on disjoint CPUs (taskset: agent A and its servers
# on CPU_A, agent B and its servers on CPU_B); the loadgen runs the same
# matrix (PROFILES x THREADS x REPEATS, seed 000's steps at SCALE with an
# IDLE_S idle wait) through A alone, then through A and B. For each run it
# prints the loadgen's scheduling efficiency: the sum of every cell
# attempt's duration (launch to stop) / (agents x the sweep's wall time).
# 1.00 means no agent ever waited for a cell while cells remained; the
# cells' own speed does not enter it.
#
# Run after ./rsslab build, on a quiet machine (nothing else busy on its CPUs):
#   bench/sweep_scaleout.sh
#   PROFILES=glibc,jemalloc REPEATS=1 bench/sweep_scaleout.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
PROFILES=${PROFILES:-glibc,jemalloc,mimalloc}
THREADS=${THREADS:-1,2}
REPEATS=${REPEATS:-2}
SCALE=${SCALE:-0.03}
IDLE_S=${IDLE_S:-2}
CPU_A=${CPU_A:-0}
CPU_B=${CPU_B:-1}
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 2
AGENT=${AGENT_BIN:-$(find_bin rsslab_agent agent)} || exit 2
SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 2
for b in "$LOADGEN" "$AGENT" "$SERVER"; do
  [ -x "$b" ] || { echo "sweep_scaleout: $b is not an executable" >&2; exit 2; }
done
WORK=$(mktemp -d /tmp/rsslab-scaleout.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Seed 000's steps at SCALE, the idle wait shortened: the bench measures the
# scheduling, not the allocators.
"$LOADGEN" --print_builtin=sweep | sed "s/wait { seconds: 12 }/wait { seconds: $IDLE_S }/" \
  > "$WORK/sweep.txtpb"
grep -q "seconds: $IDLE_S" "$WORK/sweep.txtpb" || { echo "sweep_scaleout: no idle wait to shorten" >&2; exit 1; }

start_agent() {  # NAME CPU -> sets ADDR
  local name=$1 cpu=$2
  taskset -c "$cpu" "$AGENT" --listen=127.0.0.1:0 --server_binary="$SERVER" \
    --profile_file="$ROOT/agent/profiles.textproto" --handler_dirs="$ROOT/server/handlers" \
    --log_dir="$WORK/$name-logs" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
  wait_ready $! "$WORK/$name.out" "$WORK/$name.err" '^rsslab_agent ready'
  ADDR=$(sed -n 's/.*listen=\([^ ]*\).*/\1/p' "$WORK/$name.out" | head -1)
}
# The plots are not what is measured here.
: >"$WORK/no_report.py"
start_agent a "$CPU_A"; A=$ADDR
start_agent b "$CPU_B"; B=$ADDR

run() {  # LABEL AGENTS
  local label=$1 agents=$2
  "$LOADGEN" --scenario="$WORK/sweep.txtpb" --profiles="$PROFILES" --threads_list="$THREADS" \
    --repeats="$REPEATS" --scale="$SCALE" --agent="$agents" --out="$WORK/$label" \
    --progress=none --report_tool="$WORK/no_report.py" >"$WORK/$label.txt" 2>"$WORK/$label.err" ||
    { cat "$WORK/$label.err" >&2; exit 1; }
  local line cells
  line=$(grep 'scheduling efficiency' "$WORK/$label.txt")
  cells=$(grep -c '"cell_result"' "$WORK/$label/events.jsonl")
  echo "$label: $cells cell attempts; ${line#sweep: }"
}

echo "matrix: $PROFILES x threads $THREADS x $REPEATS repeats, scale $SCALE, idle ${IDLE_S} s;" \
  "agent A on CPU $CPU_A, agent B on CPU $CPU_B; load: $(cut -d' ' -f1-3 /proc/loadavg)"
run one-agent "$A"
run two-agents "$A,$B"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
