#!/usr/bin/env bash
# Benchmark (not a test): rsslab_loadgen's maximum unary QPS against h2load
# (Debian nghttp2-client) on the same rsslab_server with a no-op handler, in
# the same run; prints both and the ratio (goal: loadgen >= 0.8 x h2load).
#
#   bench/loadgen_vs_h2load.sh            # after ./rsslab build
#   N=50000 C=64 CH=4 THREADS=4 bench/loadgen_vs_h2load.sh
#
# h2load counts any HTTP 200 as success, gRPC errors included; the server's
# own request counter (snapshot) is printed as the cross-check.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
N=${N:-40000}; C=${C:-64}; CH=${CH:-4}; THREADS=${THREADS:-4}; ROUNDS=${ROUNDS:-2}
SERVER=$ROOT/bin/rsslab_server; LOADGEN=$ROOT/bin/rsslab_loadgen
command -v h2load >/dev/null || { echo "bench: h2load missing (apt-get install nghttp2-client)" >&2; exit 1; }
[ -x "$SERVER" ] && [ -x "$LOADGEN" ] || { echo "bench: run ./rsslab build first" >&2; exit 1; }
WORK=$(mktemp -d)
SERVER_PID=""
trap '[ -n "$SERVER_PID" ] && kill -TERM $SERVER_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT

"$SERVER" --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 --threads="$THREADS" \
  --handler="$ROOT/tests/handlers/noop.py" >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for i in $(seq 1 600); do
  grep -q '^rsslab_server ready ' "$WORK/server.out" 2>/dev/null && break
  kill -0 $SERVER_PID 2>/dev/null || { cat "$WORK/server.err"; exit 1; }
  sleep 0.1
done
DATA=$(sed -n 's/.* data=\([^ ]*\).*/\1/p' "$WORK/server.out")

# An empty HandleRequest is 0 bytes: the gRPC frame is just the 5-byte prefix
# (uncompressed flag + big-endian length 0).
printf '\x00\x00\x00\x00\x00' >"$WORK/req.bin"

run_h2load() {
  h2load -n "$N" -c "$CH" -m $(( (C + CH - 1) / CH )) \
    -H 'content-type: application/grpc' -H 'te: trailers' -d "$WORK/req.bin" \
    "http://$DATA/rsslab.v1.Load/Handle" 2>&1 | tee "$WORK/h2load.txt" >/dev/null
  sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$WORK/h2load.txt"
}
run_loadgen() {
  rm -rf "$WORK/lg"
  "$LOADGEN" --target="$DATA" --control= --requests="$N" --concurrency="$C" --channels="$CH" \
    --warmup_requests=1000 --progress=none --out="$WORK/lg" >/dev/null
  awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="qps") c=i} NR==2{print $c}' "$WORK/lg/summary.csv"
}

run_loadgen >/dev/null  # warm the server (imports, caches) once
best_h=0; best_l=0
for r in $(seq 1 "$ROUNDS"); do
  h=$(run_h2load); l=$(run_loadgen)
  echo "round $r: h2load $h req/s, rsslab_loadgen $l req/s"
  best_h=$(awk -v a="$best_h" -v b="$h" 'BEGIN{print (b>a)?b:a}')
  best_l=$(awk -v a="$best_l" -v b="$l" 'BEGIN{print (b>a)?b:a}')
done
grep -E '^requests:' "$WORK/h2load.txt" | sed 's/^/h2load /'
echo "server: threads=$THREADS, handler=noop; $N requests, $C in flight over $CH connections"
awk -v h="$best_h" -v l="$best_l" 'BEGIN{printf "best: h2load %.0f req/s, rsslab_loadgen %.0f req/s, ratio %.2f (goal >= 0.80)\n", h, l, l/h}'
