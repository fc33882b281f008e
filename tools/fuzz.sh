#!/usr/bin/env bash
# Fuzzes the parsers of untrusted text with libFuzzer (clang from Debian),
# each for a bounded time: /proc content, malloc_info XML, scenario files,
# profile files. Seeds come from the captured fixtures and shipped files.
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
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(procfs malloc_info scenario profiles)
command -v clang++ >/dev/null && [ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] || {
  echo "fuzz: needs clang and libFuzzer: apt-get install clang libclang-rt-14-dev" >&2; exit 2; }
WORK=${FUZZ_WORK:-$(mktemp -d /tmp/rsslab-fuzz-XXXXXX)}
mkdir -p "$WORK/gen"
protoc -I. --cpp_out="$WORK/gen" proto/snapshot.proto proto/control.proto proto/scenario.proto proto/profile.proto
CXXFLAGS=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
          -I. -I"$WORK/gen" $(pkg-config --cflags protobuf))
LIBS=($(pkg-config --libs protobuf absl_status absl_statusor absl_strings absl_str_format absl_synchronization) -ldl -lpthread)
GEN=("$WORK/gen/proto/snapshot.pb.cc" "$WORK/gen/proto/control.pb.cc" "$WORK/gen/proto/scenario.pb.cc" "$WORK/gen/proto/profile.pb.cc")
declare -A SRCS=(
  [procfs]="common/procfs/procfs.cc"
  [malloc_info]="server/alloc/malloc_info.cc"
  [scenario]="loadgen/scenario.cc"
  [profiles]="agent/profiles.cc common/procfs/procfs.cc"
)
declare -A SEEDS=(
  [procfs]="common/procfs/testdata"
  [malloc_info]="server/alloc/testdata"
  [scenario]=""
  [profiles]="agent/profiles.textproto"
)
failed=0
for t in "${TARGETS[@]}"; do
  [ -n "${SRCS[$t]+x}" ] || { echo "fuzz: unknown target $t (${!SRCS[*]})" >&2; exit 2; }
  bin=$WORK/${t}_fuzz
  echo "== $t: building"
  # shellcheck disable=SC2086
  clang++ "${CXXFLAGS[@]}" tools/fuzz/${t}_fuzz.cc ${SRCS[$t]} "${GEN[@]}" "${LIBS[@]}" -o "$bin"
  corpus=$WORK/corpus-$t
  mkdir -p "$corpus"
  for s in ${SEEDS[$t]}; do
    if [ -d "$s" ]; then find "$s" -type f -size -1024k -exec cp {} "$corpus/" \; ; else cp "$s" "$corpus/"; fi
  done
  if [ "$t" = scenario ]; then
    for b in seed quick; do bin/rsslab_loadgen --print_builtin=$b > "$corpus/$b.textproto" 2>/dev/null || true; done
  fi
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
