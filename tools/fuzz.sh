#!/usr/bin/env bash
# Fuzzes the parsers of untrusted text with libFuzzer (clang from Debian),
# each for a bounded time: /proc content, malloc_info XML, scenario files,
# profile files, the data plane's request bytes -> handler params check, and
# the --agents_file list (as text and as the file the flag reads). Scenarios
# go on to their plan and their events.jsonl header; the scenario target
# also builds deeply nested repeats itself (tools/fuzz/scenario_fuzz.cc),
# up to 8191 levels, and its corpus holds 16, 40, 100 and 5,000 levels.
# Seeds come from the captured fixtures, the shipped files and the checked-in
# corpus in tools/fuzz/corpus/TARGET (never written to: new inputs go to the
# work directory). `./rsslab test` runs every target for a few seconds
# (RSSLAB_FUZZ_SECONDS, default 5).
# A crash leaves its input in the work directory and makes this exit 1:
# turn it into a regression test next to the parser's *_test.cc.
#
#   tools/fuzz.sh                    # 60 s per target
#   FUZZ_SECONDS=600 tools/fuzz.sh procfs malloc_info
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
SECONDS_PER=${FUZZ_SECONDS:-60}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(procfs malloc_info scenario profiles request_params agents_file)
command -v clang++ >/dev/null && [ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] || {
  echo "fuzz: needs clang and libFuzzer: apt-get install clang libclang-rt-14-dev" >&2; exit 2; }
WORK=${FUZZ_WORK:-$(mktemp -d /tmp/rsslab-fuzz-XXXXXX)}
mkdir -p "$WORK/gen"
protoc -I. --cpp_out="$WORK/gen" proto/snapshot.proto proto/control.proto proto/scenario.proto proto/profile.proto proto/load.proto \
  proto/results.proto proto/agent.proto
CXXFLAGS=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
          -I. -I"$WORK/gen" $(pkg-config --cflags protobuf))
LIBS=($(pkg-config --libs protobuf absl_status absl_statusor absl_strings absl_str_format absl_synchronization absl_time) -ldl -lpthread)
GEN=("$WORK/gen/proto/snapshot.pb.cc" "$WORK/gen/proto/control.pb.cc" "$WORK/gen/proto/scenario.pb.cc" "$WORK/gen/proto/profile.pb.cc" "$WORK/gen/proto/load.pb.cc"
     "$WORK/gen/proto/results.pb.cc" "$WORK/gen/proto/agent.pb.cc")
declare -A SRCS=(
  [procfs]="common/procfs/proc_file.cc common/procfs/status.cc common/procfs/statm.cc common/procfs/smaps.cc common/procfs/maps.cc common/procfs/environ.cc common/procfs/threads.cc common/procfs/internal/parse.cc"
  [malloc_info]="memory/alloc/malloc_info.cc"
  [scenario]="loadgen/scenario.cc loadgen/plan.cc loadgen/results/event_log.cc loadgen/flags_check.cc common/phase.cc common/files.cc common/units.cc common/untrusted_text.cc common/utf8_message.cc"
  [profiles]="agent/profiles.cc common/deps_env.cc common/procfs/proc_file.cc common/procfs/status.cc common/procfs/statm.cc common/procfs/smaps.cc common/procfs/maps.cc common/procfs/environ.cc common/procfs/threads.cc common/procfs/internal/parse.cc common/files.cc common/shipped.cc"
  [request_params]="server/python/knobs.cc common/untrusted_text.cc"
  [agents_file]="loadgen/sweep/agents_list.cc common/untrusted_text.cc common/files.cc"
)
declare -A SEEDS=(
  [procfs]="common/procfs/testdata"
  [malloc_info]="memory/alloc/testdata"
  [scenario]=""
  [profiles]="agent/profiles.textproto"
  [request_params]=""
  [agents_file]=""
)
for t in "${TARGETS[@]}"; do
  [ -n "${SRCS[$t]+x}" ] || { echo "fuzz: unknown target $t (${!SRCS[*]})" >&2; exit 2; }
done
JOBS=$(nproc)
# Runs each command line of stdin (one compile each), $JOBS at a time; the
# first that fails fails the build.
compile_all() { xargs -d '\n' -P "$JOBS" -I{} bash -c '{}'; }
# The generated protobuf code is compiled once (instrumented) and shared by
# every target: it is most of the build time. Then every target is linked,
# each compile on its own core.
echo "== building the generated protobuf code"
GEN_OBJS=()
for g in "${GEN[@]}"; do GEN_OBJS+=("$WORK/gen/$(basename "$g" .cc).o"); done
NOLINK=("${CXXFLAGS[@]/-fsanitize=fuzzer,address,undefined/-fsanitize=fuzzer-no-link,address,undefined}")
for i in "${!GEN[@]}"; do
  printf '%q ' clang++ "${NOLINK[@]}" -c "${GEN[$i]}" -o "${GEN_OBJS[$i]}"; echo
done | compile_all
echo "== building ${TARGETS[*]}"
for t in "${TARGETS[@]}"; do
  # shellcheck disable=SC2086
  printf '%q ' clang++ "${CXXFLAGS[@]}" tools/fuzz/${t}_fuzz.cc ${SRCS[$t]} "${GEN_OBJS[@]}" "${LIBS[@]}" -o "$WORK/${t}_fuzz"; echo
done | compile_all
failed=0
for t in "${TARGETS[@]}"; do
  bin=$WORK/${t}_fuzz
  corpus=$WORK/corpus-$t
  mkdir -p "$corpus"
  for s in ${SEEDS[$t]}; do
    if [ -d "$s" ]; then find "$s" -type f -size -1024k -exec cp {} "$corpus/" \; ; else cp "$s" "$corpus/"; fi
  done
  if [ -d "tools/fuzz/corpus/$t" ]; then cp tools/fuzz/corpus/$t/* "$corpus/"; fi
  echo "== $t: fuzzing ${SECONDS_PER}s (corpus $(ls "$corpus" | wc -l) files)"
  if ! (cd "$WORK" && "$bin" -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$WORK/crash-$t-" "$corpus" > "$WORK/$t.log" 2>&1); then
    echo "== $t: FAILED, see $WORK/$t.log and $WORK/crash-$t-*" >&2
    failed=1
  fi
  grep -E "^#[0-9]+.*(DONE|pulse)" "$WORK/$t.log" | tail -1 || true
done
echo "work dir: $WORK"
exit $failed
