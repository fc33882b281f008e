#!/usr/bin/env bash
# Seed 004's throughput comparison: the c_buffers handler (C work that mallocs
# 1-64 KiB buffers with the GIL released) under each allocator preload, at 4
# and 16 worker threads, each in a fresh server, driven by rsslab_loadgen.
# Prints QPS and p99 per cell and QPS relative to glibc measured in the same
# round. Run after ./rsslab build:
#
#   bench/c_buffers_allocators.sh                 # 2 rounds, 1500 requests per cell
#   ROUNDS=3 REQUESTS=3000 bench/c_buffers_allocators.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
SERVER=$(find_bin rsslab_server server) || exit 1
CTL_BIN=$(find_bin rsslab_ctl ctl) || exit 1
LOADGEN=$(find_bin rsslab_loadgen loadgen) || exit 1
ROUNDS=${ROUNDS:-2}
REQUESTS=${REQUESTS:-1500}
THREADS=${THREADS:-"4 16"}
LIBDIR=/usr/lib/x86_64-linux-gnu
ALLOCS=(glibc jemalloc tcmalloc mimalloc)
declare -A PRELOAD=([glibc]="" [jemalloc]=$LIBDIR/libjemalloc.so.2 [tcmalloc]=$LIBDIR/libtcmalloc.so.4 [mimalloc]=$LIBDIR/libmimalloc.so.2)
OUT=$(mktemp -d /tmp/rsslab-cbuf-XXXXXX)
SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true' EXIT

run_cell() {  # alloc threads round -> "qps p99_ms"
  local alloc=$1 t=$2 dir=$OUT/r$3-$1-$2
  mkdir -p "$dir"
  env ${PRELOAD[$alloc]:+LD_PRELOAD=${PRELOAD[$alloc]}} "$SERVER" \
    --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 --threads="$t" \
    --handler="$ROOT/server/handlers/c_buffers.py" >"$dir/server.out" 2>"$dir/server.err" &
  SPID=$!
  wait_ready "$SPID" "$dir/server.out" "$dir/server.err"
  local data=$DATA ctl=$CTLADDR
  # The allocator the server actually reports (from /proc/self/maps).
  local seen
  seen=$("$CTL_BIN" --control="$ctl" snapshot --json | sed -n 's/.*"allocator":"\([a-z]*\)".*/\1/p')
  [ "$seen" = "$alloc" ] || { echo "expected $alloc, server reports $seen" >&2; exit 1; }
  "$LOADGEN" --target="$data" --control= --requests="$REQUESTS" \
    --warmup_requests=200 --concurrency="$t" --channels=2 --progress=none \
    --out="$dir/run" >/dev/null 2>"$dir/loadgen.err"
  kill -TERM $SPID; wait $SPID || true
  # qps and p99 (us) from the load summary.
  python3 - "$dir/run/events.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if "load" in e:
        l = e["load"]
        print("%.1f %.1f" % (l["qps"], l["latency"]["p99_us"] / 1000))
PY
}

echo "machine: $(nproc) cores, $(uname -r), $(ldd --version | head -1)"
echo "requests per cell: $REQUESTS (+200 warm-up), concurrency = threads"
printf "%-6s %-7s %-9s %9s %9s %8s\n" round threads allocator qps p99_ms vs_glibc
for r in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    base=""
    for a in "${ALLOCS[@]}"; do
      read -r qps p99 < <(run_cell "$a" "$t" "$r") || { echo "cell $a/$t failed: see $OUT/r$r-$a-$t" >&2; exit 1; }
      [ -z "$base" ] && base=$qps
      printf "%-6s %-7s %-9s %9s %9s %8.2f\n" "$r" "$t" "$a" "$qps" "$p99" "$(awk -v a="$qps" -v b="$base" 'BEGIN { print a / b }')"
    done
  done
done
echo "raw runs: $OUT"
