#!/usr/bin/env bash
# `rsslab_loadgen compare` on repeated single runs, in about a minute: N runs
# of bench/compare/small.txtpb at 16 workers under glibc, N with
# MALLOC_ARENA_MAX=2, N more under glibc; each run a fresh server. Then
# compare glibc against MALLOC_ARENA_MAX=2 (differ) and glibc against glibc
# (same).
#
#   ./rsslab build && bench/compare_runs.sh [OUT]     # OUT default results/compare-runs
#   RSSLAB_COMPARE_REPEATS=5 bench/compare_runs.sh    # 4 by default
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
BIN=${RSSLAB_BIN:-}   # a directory of binaries; unset: bin/, then .bazel/bin
SERVER=$(find_bin rsslab_server server) || exit 2
LOADGEN=$(find_bin rsslab_loadgen loadgen) || exit 2
OUT=${1:-$ROOT/results/compare-runs}
N=${RSSLAB_COMPARE_REPEATS:-4}
[ ! -e "$OUT" ] || { echo "compare_runs: $OUT exists; give another OUT" >&2; exit 2; }
mkdir -p "$OUT"

runs() {  # NAME [VAR=VALUE]
  local name=$1 env=${2:-}
  for i in $(seq 1 "$N"); do
    # A file per server: the ready line read is this server's.
    local log="$OUT/$name-server$i"
    env $env "$SERVER" --threads=16 --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 \
      --handler="$ROOT/server/handlers/web_worker.py" >"$log.out" 2>"$log.err" &
    local pid=$!
    wait_ready "$pid" "$log.out" "$log.err"
    "$LOADGEN" --scenario="$ROOT/bench/compare/small.txtpb" --target="$DATA" \
      --control="$CTLADDR" --out="$OUT/$name/run$i" --progress=none >/dev/null
    kill "$pid"
    wait "$pid" || true
  done
}

echo "compare_runs: $N runs each; $(uptime)" >&2
runs glibc
runs arena2 MALLOC_ARENA_MAX=2
runs glibc-again
echo "compare_runs: runs done; $(uptime)" >&2
for pair in "differ glibc arena2" "same glibc glibc-again"; do
  set -- $pair
  status=0
  # The arena2 runs differ from glibc's in their start environment on
  # purpose: without this the fingerprint check refuses the pair.
  "$LOADGEN" compare "$OUT/$2" "$OUT/$3" --ignore_fingerprint=MALLOC_ARENA_MAX \
    --plot="$OUT/$1.png" > "$OUT/$1.txt" || status=$?
  "$LOADGEN" compare "$OUT/$2" "$OUT/$3" --ignore_fingerprint=MALLOC_ARENA_MAX \
    --format=md --plot= > "$OUT/$1.md" || true
  echo "compare_runs: $1: exit $status; $OUT/$1.{txt,md,png}" >&2
done
