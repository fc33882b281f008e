#!/usr/bin/env bash
# Cost of `rsslab_ctl inspect --pid=PID` (the goal: under 1 s for a
# 1,000-thread process). Starts tests/inspect/threads_target with THREADS
# idle threads (each with its own glibc arena until the limit), then runs
# the whole command RUNS times (fresh process each: exec, /proc reads,
# diagnosis, text) and prints the median, min and max wall time, plus the
# time the report itself says it took. Run after ./rsslab build, on a quiet
# machine (nothing else busy on its CPUs):
#
#   bench/inspect_cost.sh     # THREADS=1000 RUNS=21
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
THREADS=${THREADS:-1000}
RUNS=${RUNS:-21}
. "$ROOT/bench/lib.sh"
CTL=${CTL:-$(find_bin rsslab_ctl ctl 2>/dev/null)} || true
TARGET=${TARGET:-$(find_bin threads_target tests/inspect 2>/dev/null)} || true
if [ ! -x "$TARGET" ] || [ ! -x "$CTL" ]; then
  nice -n 19 bazel build //ctl:rsslab_ctl //tests/inspect:threads_target >&2
  [ -x "$CTL" ] || CTL=$(find_bin rsslab_ctl ctl) || exit 1
  [ -x "$TARGET" ] || TARGET=$(find_bin threads_target tests/inspect) || exit 1
fi
OUT=$(mktemp -d /tmp/rsslab-inspectcost-XXXXXX)
TPID=""
trap '[ -n "$TPID" ] && kill "$TPID" 2>/dev/null; rm -rf "$OUT"' EXIT

echo "machine: $(nproc) cores, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
mkfifo "$OUT/ready"
"$TARGET" --threads="$THREADS" --stack_kib=64 --malloc_kib=16 >"$OUT/ready" &
TPID=$!
read -r line <"$OUT/ready"   # "inspect_target ready pid=... threads=..."
echo "target: $line"
for i in $(seq "$RUNS"); do
  s=$(date +%s%N)
  "$CTL" inspect --pid="$TPID" >"$OUT/out" 2>&1 || { cat "$OUT/out" >&2; exit 1; }
  e=$(date +%s%N)
  echo "$(( (e - s) / 1000 )) $(sed -n 's/^inspect took \([0-9]*\)us$/\1/p' "$OUT/out")" >>"$OUT/times"
done
grep -E '^threads|findings|^\s+\[' "$OUT/out" | head -6
/usr/bin/python3 - "$OUT/times" "$THREADS" "$RUNS" <<'PY'
import statistics, sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
wall = [r[0] / 1e3 for r in rows]
own = [r[1] / 1e3 for r in rows]
med = statistics.median(wall)
print(f"inspect of a {sys.argv[2]}-thread process, {sys.argv[3]} runs: wall median {med:.1f} ms "
      f"(min {min(wall):.1f}, max {max(wall):.1f}); report's own time median {statistics.median(own):.1f} ms")
print(f"goal < 1 s: {'met' if med < 1000 else 'NOT met'}")
PY
