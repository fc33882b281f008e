#!/usr/bin/env bash
# Start one rsslab_server under an allocator profile, verified.
#
#   ./rsslab serve --profile=NAME [--profile_file=FILE[,FILE]] [server flags...]
#   ./rsslab serve --list_profiles
#
# Example:
#   ./rsslab serve --profile=jemalloc-bg --threads=16 \
#       --listen=127.0.0.1:50051 --control_listen=127.0.0.1:50052
#
# The profile's LD_PRELOAD and environment are applied before the server
# starts (agent/profiles.textproto; add your own file with
# --profile_file=agent/profiles.textproto,mine.textproto). Once the server
# prints its ready line, rsslab_run checks /proc/PID/maps for the library,
# /proc/PID/environ for every variable and the allocator the server reports;
# if anything is missing it kills the server and exits 2 naming it. Only then
# is the ready line printed on stdout. Ctrl-C / SIGTERM stop the server.
set -euo pipefail
ROOT="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
cd "$ROOT"

find_bin() {  # bin/ (./rsslab build) first, then Bazel's output tree
  local name=$1 rel=$2
  for c in "bin/$name" ".bazel/bin/$rel"; do
    if [ -x "$c" ]; then echo "$ROOT/$c"; return 0; fi
  done
  return 1
}

RUN=$(find_bin rsslab_run agent/rsslab_run) || {
  echo "rsslab serve: rsslab_run not built; building //agent:rsslab_run" >&2
  bazel build //agent:rsslab_run //server:rsslab_server >&2
  RUN=$(find_bin rsslab_run agent/rsslab_run) || { echo "rsslab serve: build did not produce rsslab_run" >&2; exit 1; }
}
SERVER=$(find_bin rsslab_server server/rsslab_server) || {
  echo "rsslab serve: rsslab_server not built (run ./rsslab build)" >&2; exit 1;
}

have_profiles=0
for a in "$@"; do case "$a" in --profile_file=*|--profile_file|--profiles=*|--profiles) have_profiles=1 ;; esac; done
args=(--server_binary="$SERVER")
[ "$have_profiles" = 1 ] || args+=(--profile_file="$ROOT/agent/profiles.textproto")
# The server finds its shipped handler through RSSLAB_HOME wherever it runs.
export RSSLAB_HOME="${RSSLAB_HOME:-$ROOT}"
exec "$RUN" "${args[@]}" "$@"
