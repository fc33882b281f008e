#!/usr/bin/env bash
# Seed 000's sweep on one machine (./rsslab sweep, after ./rsslab build):
# starts a local rsslab_agent on loopback, runs
# `rsslab_loadgen --builtin=sweep` through it (every cell a fresh server under
# its allocator profile), stops the agent, prints the table and the plots.
#
#   tools/sweep.sh                                   # reduced default, below
#   RSSLAB_SWEEP_SCALE=1 RSSLAB_SWEEP_REPEATS=5 RSSLAB_SWEEP_THREADS=1,4,16,64 tools/sweep.sh  # seed 000 in full
#   RSSLAB_SWEEP_PROFILES=glibc,mimalloc-purge0 RSSLAB_SWEEP_THREADS=1,64 tools/sweep.sh
#   RSSLAB_SWEEP_PROFILES=all ...                    # every profile rsslab_run --list_profiles shows available
#   tools/sweep.sh --print_cells                     # the matrix's numbered cells; runs nothing
#   tools/sweep.sh --concurrency=32                  # extra args go to the loadgen
#   RSSLAB_SWEEP_OUT=results/sweep-X tools/sweep.sh --resume   # continue a killed sweep (same matrix)
#
# Defaults: 7 profiles x threads 1,16,64 x 1 repeat at --scale=0.6 (57,600 +
# 28,800 requests and the 12 s idle per cell; a demo cell of that size took
# about 60 s at 1 and at 16 threads here, so about 21 cells x 1 minute). The
# scale is never reduced below 0.6 by default: from there the fill stores at
# least twice the 100 MiB cache limit, as seed 000's does (docs/FILL.md); a
# cell whose cache never filled is flagged in the table. The matrix is what
# shrinks: threads 1,16,64 instead of 1,4,16,64.
# The full-scale sweep in docs/sweep (scale 1, every profile, threads
# 1,4,16,64, 3 repeats = 132 cells of 96,000 + 48,000 requests) took
# 6,353 s on a 2-core VM (48 s a cell).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
BIN=${RSSLAB_BIN:-$ROOT/bin}
die() { echo "sweep: $*" >&2; exit 1; }
# Seed 000's fill churns the cache twice from here on (docs/FILL.md).
MIN_SCALE=0.6
SCALE=${RSSLAB_SWEEP_SCALE:-$MIN_SCALE}
PROFILES=${RSSLAB_SWEEP_PROFILES:-glibc,glibc-arena2,jemalloc,jemalloc-bg,mimalloc,mimalloc-purge0,tcmalloc}
if [ "$PROFILES" = all ]; then
  [ -x "$BIN/rsslab_run" ] || die "$BIN/rsslab_run missing (run ./rsslab build)"
  PROFILES=$("$BIN/rsslab_run" --profile_file="$ROOT/agent/profiles.textproto" --list_profiles | awk '$2 != "UNAVAILABLE:" { print $1 }' | paste -sd, -)
  [ -n "$PROFILES" ] || die "no profile in $ROOT/agent/profiles.textproto"
fi
THREADS=${RSSLAB_SWEEP_THREADS:-1,16,64}
REPEATS=${RSSLAB_SWEEP_REPEATS:-1}
OUT=${RSSLAB_SWEEP_OUT:-$ROOT/results/sweep-$(date -u +%Y%m%dT%H%M%SZ)}

for b in rsslab_agent rsslab_server rsslab_loadgen; do
  [ -x "$BIN/$b" ] || die "$BIN/$b missing (run ./rsslab build)"
done
LOADGEN_MATRIX=(--builtin=sweep --profiles="$PROFILES" --threads_list="$THREADS" --repeats="$REPEATS" --scale="$SCALE")
# The matrix alone (what a long sweep will run), before any agent or directory.
for a in "$@"; do
  case $a in --print_cells|--print_cells=*) exec "$BIN/rsslab_loadgen" "${LOADGEN_MATRIX[@]}" "$@" ;; esac
done
RESUME=0
for a in "$@"; do [ "$a" = "--resume" ] && RESUME=1; done
if [ "$RESUME" = 0 ]; then
  [ ! -e "$OUT/run/events.jsonl" ] || die "$OUT already holds a run; set RSSLAB_SWEEP_OUT, or pass --resume to continue it"
fi
mkdir -p "$OUT"
if awk "BEGIN{exit !($SCALE < $MIN_SCALE)}"; then
  echo "sweep: scale $SCALE is below $MIN_SCALE: the fill will not churn the 100 MiB cache twice (docs/FILL.md)" >&2
fi
# A resumed sweep starts a new agent: its logs go beside the first agent's,
# never over them (cell records point at those log files).
TAG=""
[ ! -e "$OUT/agent.out" ] || TAG="-$(date -u +%Y%m%dT%H%M%SZ)"

AGENT_PID=""
cleanup() {
  if [ -n "$AGENT_PID" ]; then
    kill -TERM "$AGENT_PID" 2>/dev/null || true  # the agent stops its servers
    wait "$AGENT_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# The agent prints "rsslab_agent ready listen=HOST:PORT pid=PID" once it
# serves; wait for that line, not for a fixed time.
"$BIN/rsslab_agent" --listen=127.0.0.1:0 --server_binary="$BIN/rsslab_server" \
  --profile_file="$ROOT/agent/profiles.textproto" --handler_dirs="$ROOT/server/handlers" \
  --log_dir="$OUT/agent-logs$TAG" >"$OUT/agent$TAG.out" 2>"$OUT/agent$TAG.err" &
AGENT_PID=$!
AGENT=""
for _ in $(seq 1 300); do
  AGENT=$(sed -n 's/^rsslab_agent ready listen=\([^ ]*\) .*/\1/p' "$OUT/agent$TAG.out" 2>/dev/null)
  [ -n "$AGENT" ] && break
  kill -0 "$AGENT_PID" 2>/dev/null || { cat "$OUT/agent$TAG.err" >&2; die "agent exited before ready"; }
  sleep 0.1
done
[ -n "$AGENT" ] || die "agent not ready after 30 s (see $OUT/agent$TAG.err)"

START=$(date +%s)
echo "sweep: agent $AGENT; profiles $PROFILES; threads $THREADS; repeats $REPEATS; scale $SCALE" >&2
status=0
"$BIN/rsslab_loadgen" "${LOADGEN_MATRIX[@]}" --agent="$AGENT" --out="$OUT/run" \
  --report_tool="$ROOT/loadgen/results/plots_and_advice.py" --progress=lines "$@" || status=$?
cleanup
AGENT_PID=""

# The loadgen printed the table of medians above (stdout).
echo
echo "sweep took $(( $(date +%s) - START )) s; exit status $status"
echo "  table:  $OUT/run/summary.md  (and summary.csv; rebuild: $BIN/rsslab_loadgen report $OUT/run)"
for p in rss_under_load rss_after_shrink; do
  if [ -f "$OUT/run/$p.png" ]; then echo "  plot:   $OUT/run/$p.png"; fi
done
[ -f "$OUT/run/rss_under_load.png" ] || echo "  plots:  /usr/bin/python3 $ROOT/loadgen/results/plots_and_advice.py $OUT/run  (needs python3-matplotlib)"
exit "$status"
