#!/usr/bin/env bash
# tools/setup/python_root.sh against an archive whose sid Release has
# expired (it is a snapshot), and ./rsslab test's bookkeeping of what setup
# could not make. No network: a copy of the setup scripts in a temporary
# tree, with apt-get, apt-cache, dpkg and dpkg-deb stubs first on PATH that
# record every call. The apt-get stub fails `update` as a real one does on
# an expired Release unless the call carries Acquire::Check-Valid-Until=false.
set -uo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }

SRC=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
T=${TEST_TMPDIR:-$(mktemp -d)}/setup_test
rm -rf "$T" && mkdir -p "$T/tree/tools/setup" "$T/bin" && T=$(cd "$T" && pwd -P)
cp "$SRC/tools/mimalloc3.sh" "$T/tree/tools/"
cp "$SRC"/tools/setup/{python_root.sh,apt_private.sh,mimalloc3.env,promised.sh} "$T/tree/tools/setup/"
# This machine's archive and key, whatever its sources say.
printf '#!/bin/sh\necho http://archive.invalid/debian /usr/share/keyrings/none.gpg\n' \
  >"$T/tree/tools/setup/apt_source.sh"
CALLS=$T/calls
: >"$CALLS"

cat >"$T/bin/apt-get" <<'EOF'
#!/bin/bash
echo "apt-get $*" >>"$CALLS"
case " $* " in
  *" update "*)
    if [[ " $* " != *" Acquire::Check-Valid-Until=false "* ]]; then
      echo "E: Release file for http://archive.invalid/debian/dists/sid/InRelease is expired (invalid since 30d 2h 5min 1s). Updates for this repository will not be applied." >&2
      exit 100
    fi ;;
  *" download "*)
    seen=0
    for a in "$@"; do
      [ "$seen" = 1 ] && touch "${a%%=*}_1_amd64.deb"
      [ "$a" = download ] && seen=1
    done ;;
esac
exit 0
EOF
cat >"$T/bin/apt-cache" <<'EOF'
#!/bin/bash
echo "apt-cache $*" >>"$CALLS"
EOF
cat >"$T/bin/dpkg" <<'EOF'
#!/bin/sh
[ "$1" = --print-architecture ] && echo amd64
EOF
cat >"$T/bin/dpkg-deb" <<'EOF'
#!/bin/sh
case "$1" in
  -x) mkdir -p "$3/usr/bin" && for v in 3.13 3.14; do touch "$3/usr/bin/python$v"; chmod +x "$3/usr/bin/python$v"; done ;;
  -W) basename "$3" .deb ;;
esac
EOF
chmod +x "$T"/bin/* "$T/tree/tools/setup/apt_source.sh"
export CALLS PATH="$T/bin:$PATH"

# 1. The private sid root is made in spite of the expired Release.
out=$("$T/tree/tools/setup/python_root.sh" 3.14 2>&1) || fail "python_root.sh 3.14 exited $?: $out"
"$T/tree/tools/setup/python_root.sh" --check 3.14 \
  || fail "no complete .deps/python3.14 after setup (setup said: $out)"
grep -q "apt-get .* update" "$CALLS" || fail "apt-get update was never called: $(cat "$CALLS")"
# 2. Every apt call is a private one, and carries the option.
while read -r line; do
  [[ $line == *"Dir::Etc::sourcelist=$T/tree/.deps/apt"* ]] || fail "an apt call not on the private lists: $line"
  [[ $line == *"Acquire::Check-Valid-Until=false"* ]] || fail "an apt call without Check-Valid-Until=false: $line"
done <"$CALLS"
echo "ok: python_root.sh 3.14 made its root through $(wc -l <"$CALLS") private apt calls, each with the option"

# 3. ./rsslab test's bookkeeping: 3.13 and mimalloc 3 are missing here.
summary() { (cd "$T/tree" && . tools/setup/promised.sh; check_setup_parts "$T/tree" 2>/dev/null; skip_summary); }
out=$(summary)
rc=$?
[ "$rc" = 3 ] || fail "skip_summary exited $rc with two parts missing, not 3: $out"
grep -q "2 promised part(s) SKIPPED" <<<"$out" || fail "summary: $out"
grep -q "CPython 3.13 (.deps/python3.13)" <<<"$out" || fail "3.13 not named: $out"
grep -q "mimalloc 3 (.deps/mimalloc3)" <<<"$out" || fail "mimalloc 3 not named: $out"
if grep -q "CPython 3.14" <<<"$out"; then fail "3.14 named though its root is complete: $out"; fi
out=$(RSSLAB_ALLOW_SKIP=1 summary) || fail "RSSLAB_ALLOW_SKIP=1 still exited $?: $out"
grep -q "RSSLAB_ALLOW_SKIP=1: exit 0" <<<"$out" || fail "summary with RSSLAB_ALLOW_SKIP=1: $out"
# A step skipped inside the run counts the same way; nothing skipped is a pass.
out=$(cd "$T/tree" && . tools/setup/promised.sh && skipped "//python:interps_test" "a root is missing" 2>/dev/null && skip_summary)
[ $? = 3 ] && grep -q "//python:interps_test" <<<"$out" || fail "a skipped step: $out"
out=$(cd "$T/tree" && . tools/setup/promised.sh && skipped_on_request "the ASan/UBSan step" "RSSLAB_SANITIZE=0" && skip_summary) \
  || fail "nothing skipped but on request exited $?: $out"
grep -q "every part ran" <<<"$out" && grep -q "skipped on request: the ASan/UBSan step" <<<"$out" || fail "$out"
echo "ok: skipped parts named in the summary, exit 3 unless RSSLAB_ALLOW_SKIP=1"
echo "PASS"
