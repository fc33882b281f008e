#!/usr/bin/env bash
# How far seed 000's fill churns the 100 MiB cache at each --scale: runs the
# seed's fill (96,000 requests, same seeds, same concurrency) in 20 slices of
# 4,800 requests (scale 0.05 each) against one fresh server, reads the cache
# counters after each slice, and prints stored bytes (cache + evicted) against
# the limit. The figures are counts, not timings: the request seeds decide
# every body, so they do not depend on the machine or its load.
#
#   bench/fill_curve.sh                  # 4 worker threads
#   BIN=/tmp/mybin THREADS=16 bench/fill_curve.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
SERVER=$(find_bin rsslab_server server) || exit 1
LOADGEN=$(find_bin rsslab_loadgen loadgen) || exit 1
THREADS=${THREADS:-4}
OUT=${OUT:-$(mktemp -d /tmp/rsslab-fillcurve-XXXXXX)}
mkdir -p "$OUT"
export RSSLAB_HOME=$ROOT
SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true' EXIT

# Slice i continues where slice i-1 stopped: the engine seeds request idx of
# a step with SplitMix64(seed + idx), so seed 1 + 4800 i reproduces requests
# 4800 i .. 4800 i + 4799 of the seed's single fill step.
{
  echo 'name: "fill_curve"'
  echo 'step { name: "fill" set_phase { phase: "fill" cache_limit_mb: 100 } }'
  for i in $(seq 0 19); do
    printf 'step { name: "fill_%02d" load { requests: 4800 seed: %d } }\n' $((i + 1)) $((1 + 4800 * i))
    printf 'step { name: "at_%02d" snapshot { gc: false } }\n' $((i + 1))
  done
} >"$OUT/fill_curve.txtpb"

"$SERVER" --threads="$THREADS" --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 \
  >"$OUT/server.out" 2>"$OUT/server.err" &
SPID=$!
wait_ready "$SPID" "$OUT/server.out" "$OUT/server.err"
"$LOADGEN" --target="$DATA" --control="$CTLADDR" --scenario="$OUT/fill_curve.txtpb" \
  --progress=none --out="$OUT/run" >"$OUT/loadgen.out" 2>&1
kill -TERM "$SPID"; wait "$SPID" || true; SPID=""

echo "# seed 000's fill, cache limit 100 MiB, $THREADS worker threads; out=$OUT"
python3 - "$OUT/run/events.jsonl" <<'PY'
import json, sys
print("%6s %9s %7s %10s %11s %6s" % ("scale", "requests", "puts", "evictions", "stored_mib", "churn"))
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if "snapshot" not in e or not e.get("label", "").startswith("at_"):
        continue
    n += 1
    c = e["snapshot"]["cache"]
    stored = int(c.get("cache_bytes", 0)) + int(c.get("evicted_bytes", 0))
    print("%6.2f %9d %7s %10s %11.1f %6.2f" % (0.05 * n, 4800 * n, c.get("puts", 0),
          c.get("evictions", 0), stored / 2**20, stored / int(c["cache_limit_bytes"])))
PY
