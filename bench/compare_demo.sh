#!/usr/bin/env bash
# `rsslab_loadgen compare` on real sweeps: glibc against glibc-arena2 at 64
# worker threads (they differ), and glibc against a second glibc sweep (they
# do not). Each sweep is tools/sweep.sh: a local agent, a fresh server per
# cell, seed 000's phases at --scale (0.5 fills and churns the cache).
#
#   bench/compare_demo.sh                   # all three sweeps, then compare
#   bench/compare_demo.sh glibc-a arena2    # some sweeps only (in turns)
#   bench/compare_demo.sh compare           # the comparisons only
#
# Run the sweeps on a quiet machine: nothing else busy on its CPUs.
#
# A sweep whose directory already holds a run is kept. Outputs go to
# $RSSLAB_COMPARE_OUT (default results/compare-demo): the three sweeps, and
# differ.{txt,md,json,png} and same.{txt,md,json,png}.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
BIN=${RSSLAB_BIN:-$ROOT/bin}   # the directory tools/sweep.sh runs from
LOADGEN=$(find_bin rsslab_loadgen loadgen) || exit 2
OUT=${RSSLAB_COMPARE_OUT:-$ROOT/results/compare-demo}
REPEATS=${RSSLAB_COMPARE_REPEATS:-4}
SCALE=${RSSLAB_COMPARE_SCALE:-0.5}
THREADS=${RSSLAB_COMPARE_THREADS:-64}
declare -A PROFILE=([glibc-a]=glibc [arena2]=glibc-arena2 [glibc-b]=glibc)
mkdir -p "$OUT"

sweep() {
  local name=$1
  if [ -e "$OUT/$name/run/events.jsonl" ]; then
    echo "compare_demo: $OUT/$name already holds a sweep; kept" >&2
    return
  fi
  echo "compare_demo: sweep $name (${PROFILE[$name]}, $THREADS threads, $REPEATS repeats, scale $SCALE); $(uptime)" >&2
  RSSLAB_BIN=$BIN RSSLAB_SWEEP_OUT=$OUT/$name RSSLAB_SWEEP_PROFILES=${PROFILE[$name]} \
    RSSLAB_SWEEP_THREADS=$THREADS RSSLAB_SWEEP_REPEATS=$REPEATS RSSLAB_SWEEP_SCALE=$SCALE \
    tools/sweep.sh > "$OUT/$name.log" 2>&1
  echo "compare_demo: sweep $name done; $(uptime)" >&2
}

compare() {
  local name=$1 base=$2 new=$3 status=0
  "$LOADGEN" compare "$OUT/$base/run" "$OUT/$new/run" --plot="$OUT/$name.png" \
    > "$OUT/$name.txt" || status=$?
  "$LOADGEN" compare "$OUT/$base/run" "$OUT/$new/run" --format=md --plot= > "$OUT/$name.md" || true
  "$LOADGEN" compare "$OUT/$base/run" "$OUT/$new/run" --json --plot= > "$OUT/$name.json" || true
  echo "compare_demo: $name: exit $status; $OUT/$name.{txt,md,json,png}" >&2
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(glibc-a arena2 glibc-b compare)
for t in "${targets[@]}"; do
  case "$t" in
    glibc-a|arena2|glibc-b) sweep "$t" ;;
    compare)
      compare differ glibc-a arena2
      compare same glibc-a glibc-b
      ;;
    *) echo "compare_demo: unknown target $t (glibc-a, arena2, glibc-b, compare)" >&2; exit 2 ;;
  esac
done
