#!/usr/bin/env bash
# The automatic trim's goals (docs/TRIM.md): for each shipped allocator profile and thread
# count, a fresh server with --auto_trim=after_burst runs the seed cycle
# (fill, shrink, idle 12 s, trim) through rsslab_loadgen. No manual trim
# happens before the idle snapshot, so:
#   (b) idle RSS (after the automatic trim) vs. baseline (RSS at start) + cache
#   (a) RSS after the scenario's trim step (global + per-thread pass)
# and the allocator's own resident figure before/between/after that trim.
#
#   bench/trim_goals.sh                              # all profiles, 1 and 64 threads
#   PROFILES="glibc mimalloc" THREADS=64 SCALE=0.25 bench/trim_goals.sh
#   BIN=/tmp/mybin bench/trim_goals.sh               # binaries from elsewhere
#   AUTO=off bench/trim_goals.sh                     # no auto trim: the trim step
#                                                    # then shows global vs per-thread
#   REPORT_ONLY=1 OUT=/tmp/dir bench/trim_goals.sh  # the table again from a finished run
#   SERVER_FLAGS=--trim_thread_stats bench/trim_goals.sh   # extra server flags; with this
#                                                    # one, tools/trim_thread_stats.py
#                                                    # summarizes each worker's figures
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
find_run_bins || exit 1
SCALE=${SCALE:-0.25}
AUTO=${AUTO:-after_burst}
read -r -a SERVER_FLAGS <<<"${SERVER_FLAGS:-}"
THREADS=${THREADS:-"64 1"}
PROFILES=${PROFILES:-$(sed -n 's/^  name: "\(.*\)"/\1/p' agent/profiles.textproto)}
OUT=${OUT:-$(mktemp -d /tmp/rsslab-trimgoals-XXXXXX)}
export RSSLAB_HOME=$ROOT
RPID=""
trap '[ -n "$RPID" ] && kill "$RPID" 2>/dev/null || true' EXIT

echo "# machine: $(nproc) cores, $(uname -r); seed --scale=$SCALE; --auto_trim=$AUTO; out=$OUT"
# goal_x = after / (base + 10 MiB of live cache); the trim goal: <= 1.25 (the
# 64-thread rows). delay: the release timer a trim held at 0, before->during
# (mimalloc decommit_delay; "-" where none applies). fill: the fill's churn
# (stored / limit), "!" if the cache never filled (loadgen/results/fill_check.h).
printf "%-16s %4s %9s %8s %9s %6s %10s %10s %10s %6s %14s %14s %9s %9s %7s %5s %6s %6s\n" profile thr base_mib cache_mib idle_mib autos goal_b_x between_mib after_mib goal_a res_between_mib res_after_mib anon_mib file_mib goal_x goal delay fill
for t in $THREADS; do
  for p in $PROFILES; do
    d=$OUT/$p-$t; mkdir -p "$d"
    if [ -z "${REPORT_ONLY:-}" ]; then
    "$RUN_BIN" --profile="$p" --profile_file="$ROOT/agent/profiles.textproto" \
      --server_binary="$SERVER" -- --threads="$t" --listen=127.0.0.1:0 \
      --control_listen=127.0.0.1:0 --auto_trim="$AUTO" "${SERVER_FLAGS[@]}" \
      >"$d/server.out" 2>"$d/server.err" &
    RPID=$!
    wait_ready "$RPID" "$d/server.out" "$d/server.err" 'ready'
    data=$DATA; ctl=$CTLADDR
    "$LOADGEN" --target="$data" --control="$ctl" --builtin=seed --scale="$SCALE" \
      --progress=none --out="$d/run" >"$d/loadgen.out" 2>&1 || true
    kill -TERM $RPID; wait $RPID || true; RPID=""
    fi
    python3 - "$d/run/events.jsonl" "$p" "$t" <<'PY'
import json, sys
M = 1 << 20
snaps, trim, fill = {}, None, None
def walk(o, path=""):
    global trim
    if isinstance(o, dict):
        # A trim step's response also carries the snapshot from just before
        # the release ("before"): not the phase's figures.
        if "phase" in o and "status" in o and "config" in o and path != "before":
            snaps[o["phase"]] = o
        if "rss_between_bytes" in o and o.get("trigger") == "phase":
            trim = o
        for k, v in o.items(): walk(v, k)
    elif isinstance(o, list):
        for v in o: walk(v, path)
for line in open(sys.argv[1]):
    ev = json.loads(line)
    if "fill_check" in ev:
        fill = ev["fill_check"]
    walk(ev)
idle = snaps.get("idle", {})
at = idle.get("auto_trim", {})
base = int(at.get("baseline_rss_bytes", 0)) / M
cache = int(idle.get("cache", {}).get("cache_bytes", 0)) / M
rss_idle = int(idle.get("status", {}).get("rss_bytes", 0)) / M
autos = int(idle.get("auto_trims_total", 0))
gb = rss_idle / (base + cache) if base else float("nan")
if trim is None: trim = {}
bet = int(trim.get("rss_between_bytes", 0)) / M
aft = int(trim.get("rss_after_bytes", 0)) / M
rb = int(trim.get("allocator_resident_between", -1)) / M
ra = int(trim.get("allocator_resident_after", -1)) / M
# RssAnon / RssFile after the trim step: file-backed pages (libpython,
# gRPC, the binary) count toward RSS but no allocator can return them.
after = snaps.get("trim", {}).get("status", {})
gx = aft / (base + 10) if base else float("nan")
delay = "%s->%s" % (trim.get("release_delay_before", 0), trim.get("release_delay_during", 0)) \
    if trim.get("release_delay_option") else "-"
fl = "-" if fill is None else "%.2f%s" % (fill.get("churn", 0), "" if fill.get("filled") else "!")
print("%-16s %4s %9.1f %8.1f %9.1f %6d %10.2f %10.1f %10.1f %6s %14.1f %14.1f %9.1f %9.1f %7.2f %5s %6s %6s" % (
    sys.argv[2], sys.argv[3], base, cache, rss_idle, autos, gb, bet, aft,
    "ok" if aft and aft <= 40 else "MISS", rb, ra,
    int(after.get("anon_bytes", 0)) / M, int(after.get("file_bytes", 0)) / M,
    gx, "ok" if gx <= 1.25 else "MISS", delay, fl))
PY
  done
done
