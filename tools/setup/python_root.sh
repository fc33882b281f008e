#!/usr/bin/env bash
# Unpacks a newer Debian CPython and what it needs to run into a private
# root, .deps/python3.X/, for the cp313 and cp314 wheels (docs/PACKAGE.md,
# "Install"): 3.13 from Debian 13 (trixie), 3.14 from sid, fetched with
# `apt-get download` through a private sources list (tools/setup/apt_private.sh)
# and unpacked with `dpkg-deb -x`; nothing is installed. They need a newer
# glibc than Debian 12's, so the root carries that suite's libc6 and the
# libraries the interpreter and its stdlib modules load, and it runs only
# through its own loader (tools/pyroot.sh). Also in the root: the suite's
# libpython3.X-dev headers and Debian 13's pybind11-dev 2.13 for both (Debian
# 12's 2.10 predates 3.13; sid's 3.x changes types the extension's code
# deduces), which the Bazel build of the extension for that ABI uses.
#
#   tools/setup/python_root.sh 3.13 3.14        # fetch what is missing; one line and exit 0 if it cannot
#   tools/setup/python_root.sh --check 3.14     # exit 0 if the root is complete, else 1
#
# Safe to rerun: a root is complete once its .complete file (the package list
# it was made from, written last) matches the list below.
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)

suite_of() { case "$1" in 3.13) echo trixie ;; 3.14) echo sid ;; *) return 1 ;; esac; }

# The interpreter's own packages, then what it and its stdlib modules load
# (ssl, sqlite3, ctypes, decimal, readline, lzma, bz2, zlib, uuid).
packages() {
  echo "python$1 python$1-minimal libpython$1 libpython$1-minimal libpython$1-stdlib libpython$1-dev"
  echo "libc6 libssl3t64 libffi8 libexpat1 zlib1g libbz2-1.0 liblzma5 libzstd1 libsqlite3-0"
  echo "libreadline8t64 libncursesw6 libtinfo6 libuuid1 libgcc-s1 libmpdec4 libstdc++6"
  # pip as a self-contained wheel (what ensurepip uses): the root's own pip
  # installs the rsslab wheel, checking its tag and Requires-Python.
  echo "python3-pip-whl"
  # That suite's grpcio (1.51, built for its CPython) and what it links, so
  # that the package's grpcio parts are tested on 3.13 and 3.14 too; the
  # Abseil soname is the one each suite's python3-grpcio depends on.
  case "$1" in
    3.13) echo "python3-grpcio python3-protobuf libabsl20240722 libcares2 libre2-11" ;;
    3.14) echo "python3-grpcio python3-protobuf libabsl20260526 libcares2 libre2-11" ;;
  esac
}

# Complete: unpacked from the package list this script names now.
complete() {
  [ -x "$ROOT/.deps/python$1/usr/bin/python$1" ] \
    && [ "$(cat "$ROOT/.deps/python$1/.complete" 2>/dev/null)" = "$(packages "$1" | paste -sd' ')" ]
}

# unpack APT_DIR DEST: every .deb downloaded into APT_DIR/debs/, listed in DEST/.packages.
unpack() {
  local deb
  for deb in "$1"/debs/*.deb; do
    dpkg-deb -x "$deb" "$2" || return 1
    dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >>"$2/.packages"
  done
  rm -f "$1"/debs/*.deb
}

fetch() {
  local v=$1 suite dest apt
  suite=$(suite_of "$v") || { echo "rsslab: python_root.sh: no suite for Python '$v' (3.13 or 3.14)" >&2; return 1; }
  complete "$v" && return 0
  dest=$ROOT/.deps/python$v
  # Debian 13's lists are shared with tools/mimalloc3.sh's.
  apt=$ROOT/.deps/apt
  [ "$suite" = trixie ] || apt=$ROOT/.deps/apt-$suite
  skip() { echo "rsslab: Python $v not fetched ($*); the cp${v/./} wheel and its tests are skipped" >&2; }
  apt_private_init "$suite" "$apt" || { skip "$APT_PRIVATE_ERROR"; return 0; }
  # shellcheck disable=SC2046
  apt_private_download "$apt" $(packages "$v") || { skip "$APT_PRIVATE_ERROR"; return 0; }
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp" || { skip "cannot create $dest.tmp"; return 0; }
  unpack "$apt" "$dest.tmp" || { skip "dpkg-deb -x failed"; return 0; }
  apt_private_init trixie "$ROOT/.deps/apt" || { skip "$APT_PRIVATE_ERROR"; return 0; }
  apt_private_download "$ROOT/.deps/apt" pybind11-dev || { skip "$APT_PRIVATE_ERROR"; return 0; }
  unpack "$ROOT/.deps/apt" "$dest.tmp" || { skip "dpkg-deb -x failed"; return 0; }
  packages "$v" | paste -sd' ' >"$dest.tmp/.complete"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  echo "rsslab: Python $v ($suite) unpacked into .deps/python$v ($(du -sm "$dest" | cut -f1) MB)" >&2
}

. "$ROOT/tools/setup/apt_private.sh"
if [ "${1:-}" = --check ]; then
  shift
  for v in "$@"; do complete "$v" || exit 1; done
  exit 0
fi
rc=0
for v in "$@"; do fetch "$v" || rc=2; done
exit $rc
