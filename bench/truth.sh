#!/usr/bin/env bash
# rsslab_server against a plain Python process doing the same work, at seed
# 000's full size, over the whole matrix: tools/truth/truth.py for the
# allocator families glibc, glibc-arena2, jemalloc, mimalloc (2.0.9),
# mimalloc3, mimalloc3-purge0 and tcmalloc x 1, 4, 16 and 64 worker threads
# (2,000 warm-up requests and a release before both sides' start record,
# 96,000 fill requests at 100 MiB, 48,000 shrink requests at 10 MiB, 12 s
# idle), each cell the plain /usr/bin/python3 reference and the server side by
# side, under the same profile. Writes the Markdown table (every cell's host,
# reference and deviation, fill and after idle; the command and the
# machine's load) to FILE, every cell's logs and records under OUT.
#
#   bench/truth.sh docs/TRUTH.md                   # the full matrix: about 1 h on 2 cores
#   OUT=/tmp/truth bench/truth.sh /tmp/TRUTH.md --threads=1,4 --fill_requests=2000 \
#       --shrink_requests=1000 --fill_limit_mb=2 --shrink_limit_mb=1 --idle_s=1
#                                                  # any truth.py flag after FILE wins
#   BIN=/tmp/mybin bench/truth.sh /tmp/TRUTH.md    # binaries from elsewhere
#
# Exit status: truth.py's (0: every cell within 25 %; 1: a cell deviates
# or failed; 2: bad input). The table is written either way.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ] || [[ "$1" == -* ]]; then
  echo "usage: bench/truth.sh FILE.md [truth.py flags...]" >&2
  exit 2
fi
MD=$1
shift
[ -d "$(dirname "$MD")" ] || { echo "bench/truth.sh: $(dirname "$MD") is not a directory" >&2; exit 2; }
. "$ROOT/bench/lib.sh"
RUN_BIN=$(find_bin rsslab_run agent) || exit 2
SERVER=$(find_bin rsslab_server server) || exit 2
LOADGEN=$(find_bin rsslab_loadgen loadgen) || exit 2
OUT=${OUT:-$(mktemp -d /tmp/rsslab-truth-XXXXXX)}
export RSSLAB_HOME=$ROOT
echo "bench/truth.sh: cells under $OUT" >&2
exec /usr/bin/python3 "$ROOT/tools/truth/truth.py" --rsslab_run="$RUN_BIN" --rsslab_server="$SERVER" --rsslab_loadgen="$LOADGEN" \
  --profiles=glibc,glibc-arena2,jemalloc,mimalloc,mimalloc3,mimalloc3-purge0,tcmalloc \
  --threads=1,4,16,64 --fill_requests=96000 --shrink_requests=48000 \
  --fill_limit_mb=100 --shrink_limit_mb=10 --idle_s=12 --warm_requests=2000 --bound=0.25 \
  --out="$OUT" --markdown="$MD" "$@"
