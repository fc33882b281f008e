#!/bin/sh
# //memory/alloc:name_dispatch_test: the allocator backend is chosen once, at
# detection (memory/alloc/alloc.cc, its NewBackend); no other code that runs inside the
# measured process decides by comparing the allocator's name (it asks the
# backend). control/ is not searched: its inspect rules read another
# process's report, for which there is no backend. Comments and tests are
# left out. Tagged "external": never a cached pass after the tree changed.
set -eu
here="$TEST_SRCDIR/$TEST_WORKSPACE"
root=$(dirname "$(readlink -f "$here/README.md")")
cd "$root"
hits=$(grep -rnE --include='*.cc' --include='*.h' \
  '(==|!=) *"(glibc|jemalloc|mimalloc|tcmalloc)"' \
  server python/native memory exporter common |
  grep -vE '^[^:]+_test\.cc:|^memory/alloc/alloc\.cc:[0-9]+: *if \(id\.name ==|^[^:]+:[0-9]+: *//' || true)
if [ -n "$hits" ]; then
  echo "allocator chosen by name outside detection (memory/alloc/alloc.cc NewBackend); ask the Allocator backend instead:"
  echo "$hits"
  exit 1
fi
echo "ok: only detection (memory/alloc/alloc.cc) compares allocator names"
