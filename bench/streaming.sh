#!/usr/bin/env bash
# Benchmark (not a test): rsslab_loadgen streaming rsslab.v1.Load/HandleStream
# through --proto/--call/--data (dynamic messages on gRPC's generic stub)
# against bench/streaming/stream_client.cc (the generated stub, same shape),
# on the same rsslab_server with the no-op handler, in the same run. Prints
# the median messages per second of each over ROUNDS runs and their ratio
# (goal: dynamic >= 0.9 x generated), pinned and unpinned.
#
#   bench/streaming.sh                    # after ./rsslab build and bazel build //bench:stream_client
#   PIN=1 bench/streaming.sh              # only pinned: server CPU 0, clients CPU 1
#   PIN=0 bench/streaming.sh              # only shared: nothing pinned
#   S=4000 M=10 C=16 CH=4 THREADS=4 ROUNDS=5 bench/streaming.sh
#
# Fairness: the same server, streams in flight, channels, streams and
# messages per stream, warm-up; one unmeasured run of each first; rounds
# interleaved with the order alternating. Both send HandleRequest{id, seed}
# per message (the template: {"id": {{seq}}, "seed": {{msg}}}).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
S=${S:-4000}; M=${M:-10}; C=${C:-16}; CH=${CH:-4}; THREADS=${THREADS:-4}; ROUNDS=${ROUNDS:-5}
WARM=${WARM:-200}
both_shapes median "pinned (server CPU 0, clients CPU 1): " "shared (nothing pinned):             "
pin_shape
SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
CLIENT=${CLIENT:-$(find_bin stream_client bench)} || exit 1
bench_workdir

print_machine
start_noop_server "$WORK" "$THREADS" "$ROOT/server/handlers/noop.py"

# Prints messages received per second.
run() {
  local kind=$1 s=$2
  if [ "$kind" = generated ]; then
    "${CLI_PIN[@]}" "$CLIENT" --target="$DATA" --concurrency="$C" --channels="$CH" --messages="$M" \
      --streams="$s" --warmup_streams="$WARM" | sed -n 's/.*messages_per_s=\([0-9.]*\).*/\1/p'
    return
  fi
  rm -rf "$WORK/lg"
  "${CLI_PIN[@]}" "$LOADGEN" --target="$DATA" --control= --proto="$ROOT/proto/load.proto" \
    --call=rsslab.v1.Load/HandleStream '--data={"id": {{seq}}, "seed": {{msg}}}' \
    --stream_messages="$M" --requests="$s" --concurrency="$C" --channels="$CH" \
    --warmup_requests="$WARM" --progress=none --out="$WORK/lg" >/dev/null
  /usr/bin/python3 -c 'import json,sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if "load" in e: print(e["load"].get("messages_per_s", 0)); break' "$WORK/lg/events.jsonl"
}

run generated 500 >/dev/null
run dynamic 500 >/dev/null
echo "pinning: PIN=$PIN$([ "$PIN" = 1 ] && echo ' (server CPU 0, clients CPU 1)')"
echo "server: threads=$THREADS, handler=noop; $S streams of $M messages per run, $C streams in flight over $CH channels, warm-up $WARM streams"
printf '%-6s %-10s %12s\n' round kind messages/s
: >"$WORK/rounds"
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order="generated dynamic"; else order="dynamic generated"; fi
  for k in $order; do
    q=$(run "$k" "$S")
    printf '%-6s %-10s %12.0f\n' "$r" "$k" "$q"
    echo "$r $k $q" >>"$WORK/rounds"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
med() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
qg=$(awk '$2=="generated"{print $3}' "$WORK/rounds" | med)
qd=$(awk '$2=="dynamic"{print $3}' "$WORK/rounds" | med)
awk '{rq[$1, $2] = $3} END {rs = ""; for (r = 1; (r, "generated") in rq; r++) rs = rs sprintf(" %.2f", rq[r, "dynamic"] / rq[r, "generated"]); print "per-round ratio:" rs}' "$WORK/rounds"
awk -v g="$qg" -v d="$qd" 'BEGIN{printf "median: generated %.0f msg/s, dynamic %.0f msg/s, ratio %.2f (goal >= 0.90)\n", g, d, d / g}'
