#!/usr/bin/env bash
# Brings Debian 13's mimalloc 3 (package, version and path pinned in
# tools/setup/mimalloc3.env) into the project
# without touching the system: `apt-get download` through a private sources
# list for suite trixie, built from the archive URI this machine's own apt
# sources already name, with private lists and caches under .deps/apt/; then
# `dpkg-deb -x` into MIMALLOC3_DIR (.deps/mimalloc3/). No suite is added to the system and
# nothing is installed. Run by `./rsslab setup`; safe to rerun (does nothing
# once the pinned version is unpacked).
#
#   tools/mimalloc3.sh           # fetch if missing; one line and exit 0 if it cannot
#   tools/mimalloc3.sh --check   # exit 0 if the library is in place, else 1
#
# The profiles mimalloc3 and mimalloc3-purge0 (agent/profiles.textproto) name
# the unpacked library as "$MIMALLOC3_LIB", which the profile loader reads
# from the same file; without it they are listed as unavailable and nothing
# else changes.
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
# MIMALLOC3_PKG, _VERSION, _SUITE, _DIR and _LIB (relative to the project's top).
. "$ROOT/tools/setup/mimalloc3.env"
PKG=$MIMALLOC3_PKG
VERSION=$MIMALLOC3_VERSION
SUITE=$MIMALLOC3_SUITE
DEST=$ROOT/$MIMALLOC3_DIR
APT=$ROOT/.deps/apt
LIB=$ROOT/$MIMALLOC3_LIB

have() { [ -r "$LIB" ] && [ "$(cat "$DEST/.version" 2>/dev/null)" = "$VERSION" ]; }

if [ "${1:-}" = --check ]; then have; exit; fi
have && exit 0

skip() {
  echo "rsslab: mimalloc $VERSION not fetched ($*); profiles mimalloc3, mimalloc3-purge0 unavailable" >&2
  exit 0
}

. "$ROOT/tools/setup/apt_private.sh"
apt_private_init "$SUITE" "$APT" || skip "$APT_PRIVATE_ERROR"
apt_private_download "$APT" "$PKG=$VERSION" || skip "$APT_PRIVATE_ERROR"
deb=$(ls "$APT"/debs/"${PKG}"_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || skip "no .deb after apt-get download"
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp" && dpkg-deb -x "$deb" "$DEST.tmp" || skip "dpkg-deb -x failed"
echo "$VERSION" >"$DEST.tmp/.version"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
have || skip "unpacked, but $LIB is missing"
echo "rsslab: mimalloc $VERSION unpacked into ${DEST#"$ROOT"/}" >&2
