# Shared by the bench/*.sh scripts: `. "$ROOT/bench/lib.sh"` (ROOT: the
# project's top).

# find_bin NAME PACKAGE: the built binary NAME, found as tools/serve.sh finds
# it: $BIN/NAME when BIN (a directory of binaries) is set, else bin/NAME
# (./rsslab build) first, then Bazel's output tree (.bazel/bin/PACKAGE/NAME).
# Prints its path; else says how to build it on stderr and returns 1:
#   LG=$(find_bin rsslab_loadgen loadgen) || exit 2
#   SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 1
find_bin() {
  local name=$1 pkg=$2 c cands
  if [ -n "${BIN:-}" ]; then cands=("$BIN/$name"); else cands=("$ROOT/bin/$name" "$ROOT/.bazel/bin/$pkg/$name"); fi
  for c in "${cands[@]}"; do
    if [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  echo "bench: $name not found (${cands[*]}): run ./rsslab build or bazel build //$pkg:$name${BIN:+, or fix BIN}" >&2
  return 1
}

# find_run_bins: RUN_BIN, SERVER and LOADGEN (rsslab_run, rsslab_server,
# rsslab_loadgen) by find_bin, for the scripts that start the server under
# a profile and drive it; returns 1 (find_bin said why) if one is missing:
#   find_run_bins || exit 1
find_run_bins() {
  RUN_BIN=$(find_bin rsslab_run agent) && SERVER=$(find_bin rsslab_server server) \
    && LOADGEN=$(find_bin rsslab_loadgen loadgen)
}

# mimalloc3_lib: the absolute path of the mimalloc 3 library ./rsslab setup
# unpacks (MIMALLOC3_LIB in tools/setup/mimalloc3.env, which pins it); it
# may be absent (tools/mimalloc3.sh --check says).
mimalloc3_lib() {
  ( . "$ROOT/tools/setup/mimalloc3.env" && echo "$ROOT/$MIMALLOC3_LIB" )
}

# wait_ready PID OUT ERR [PATTERN]: waits for the ready line (by default
# "rsslab_server ready data=... control=...", which the Python peer prints
# too; rsslab_run's differs) in file OUT; exits with ERR's text if PID dies
# first. Sets DATA and CTLADDR.
wait_ready() {
  local pid=$1 out=$2 err=$3 pattern=${4:-'^rsslab_server ready'}
  until grep -q "$pattern" "$out" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { cat "$err" >&2; exit 1; }
    sleep 0.05
  done
  DATA=$(sed -n 's/.*data=\([^ ]*\).*/\1/p' "$out" | head -1)
  CTLADDR=$(sed -n 's/.*control=\([^ ]*\).*/\1/p' "$out" | head -1)
}

# both_shapes TAG PINNED SHARED: with PIN unset, runs this script again
# pinned (PIN=1) and then shared (PIN=0), showing each run, and ends with
# their "TAG: " lines relabelled PINNED and SHARED; then exits. With PIN
# set it returns: the script measures that one shape.
both_shapes() {
  [ -z "${PIN:-}" ] || return 0
  local out="${TMPDIR:-/tmp}/rsslab-shapes-$$"
  PIN=1 "$0" | tee /dev/stderr | sed -n "s/^$1: /$2/p" >"$out"
  PIN=0 "$0" | tee /dev/stderr | sed -n "s/^$1: /$3/p" >>"$out"
  echo; cat "$out"; rm -f "$out"
  exit 0
}

# pin_shape: from PIN (1: server on CPU 0, client on CPU 1; else nothing
# pinned) sets the SRV_PIN and CLI_PIN command prefixes.
pin_shape() {
  if [ "${PIN:-0}" = 1 ]; then
    (( $(nproc) >= 2 )) || { echo "bench: PIN=1 needs 2 cores" >&2; exit 1; }
    SRV_PIN=(taskset -c 0); CLI_PIN=(taskset -c 1)
  else
    SRV_PIN=(); CLI_PIN=()
  fi
}

# bench_workdir: WORK, a temporary directory removed at exit, and
# SERVER_PID (set by start_noop_server), stopped at exit.
bench_workdir() {
  WORK=$(mktemp -d)
  SERVER_PID=""
  trap '[ -n "$SERVER_PID" ] && kill -TERM $SERVER_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
}

# print_machine [EXTRA]: the machine line (cores, CPU model, kernel, then
# EXTRA) and the load average before the benchmark.
print_machine() {
  echo "machine: $(nproc) cores ($(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -1)), kernel $(uname -r)${1:+, $1}"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# start_noop_server WORK THREADS HANDLER: rsslab_server ($SERVER) under
# SRV_PIN on loopback ports; sets SERVER_PID, DATA and CTLADDR.
start_noop_server() {
  "${SRV_PIN[@]}" "$SERVER" --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 --threads="$2" \
    --handler="$3" >"$1/server.out" 2>"$1/server.err" &
  SERVER_PID=$!
  wait_ready "$SERVER_PID" "$1/server.out" "$1/server.err"
}

# write_burst_scenario FILE SCALE NAME: the seed's burst as
# bench/service_fix.sh and bench/service_residue.sh drive it: fill (96,000
# requests x SCALE, cache 100 MiB), shrink (48,000 x SCALE, cache 10 MiB),
# 16 in flight, then 65 s idle with snapshots 12 s and 65 s after the burst.
write_burst_scenario() {
  local fill shrink
  fill=$(awk -v s="$2" 'BEGIN{printf "%d", 96000*s}')
  shrink=$(awk -v s="$2" 'BEGIN{printf "%d", 48000*s}')
  cat > "$1" <<SCEN
name: "$3"
description: "fill, shrink, then 65 s idle with snapshots at 12 s and 65 s after the burst"
step { name: "fill" set_phase { phase: "fill" cache_limit_mb: 100 gc: false } }
step { name: "fill" load { requests: $fill concurrency: 16 } }
step { name: "after_fill" snapshot { gc: false } }
step { name: "shrink" set_phase { phase: "shrink" cache_limit_mb: 10 gc: false } }
step { name: "shrink" load { requests: $shrink concurrency: 16 } }
step { name: "idle" set_phase { phase: "idle" gc: false } }
step { name: "idle" wait { seconds: 12 } }
step { name: "after_12s" snapshot { gc: false } }
step { name: "idle" wait { seconds: 53 } }
step { name: "after_65s" snapshot { gc: false } }
SCEN
}
