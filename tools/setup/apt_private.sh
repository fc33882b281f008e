# Sourced (bash): `apt-get download` from one Debian suite through a private
# sources list built from the archive URI this machine's own apt sources
# name (tools/setup/apt_source.sh), with private lists and caches, so no
# suite is ever added to the system's sources and nothing is installed.
# Used by tools/mimalloc3.sh and tools/setup/python_root.sh.
#
#   . tools/setup/apt_private.sh
#   apt_private_init trixie "$ROOT/.deps/apt" || fail "$APT_PRIVATE_ERROR"
#   apt_private_download "$ROOT/.deps/apt" libmimalloc3=3.0.1+ds-2.1 || fail "$APT_PRIVATE_ERROR"
#
# Both return 1 with one line in APT_PRIVATE_ERROR; the .debs land in
# DIR/debs/ (emptied by each download), the logs in DIR/*.log.

APT_PRIVATE_OPTS=()
APT_PRIVATE_ERROR=

# apt_private_init SUITE DIR: the private sources list for SUITE under DIR
# and `apt-get update` of it (sets APT_PRIVATE_OPTS).
apt_private_init() {
  local suite=$1 dir=$2 here line uri key
  [[ $dir == /* ]] || dir=$PWD/$dir  # apt reads relative Dir:: paths under /etc/apt
  here=$(dirname "${BASH_SOURCE[0]}")
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
    || { APT_PRIVATE_ERROR="no apt-get/dpkg-deb"; return 1; }
  [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || { APT_PRIVATE_ERROR="not amd64"; return 1; }
  line=$("$here/apt_source.sh" 2>&1) || { APT_PRIVATE_ERROR=$line; return 1; }
  read -r uri key <<<"$line"
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/empty.d" "$dir/debs" \
    || { APT_PRIVATE_ERROR="cannot create $dir"; return 1; }
  echo "deb [signed-by=$key] $uri $suite main" >"$dir/sources.list"
  APT_PRIVATE_OPTS=(
    -o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::Etc::sourceparts=$dir/empty.d"
    -o "Dir::Etc::preferences=$dir/empty.d/none" -o "Dir::Etc::preferencesparts=$dir/empty.d"
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
    -o "Dir::Cache::pkgcache=$dir/cache/pkgcache.bin" -o "Dir::Cache::srcpkgcache=$dir/cache/srcpkgcache.bin"
    -o "APT::Sandbox::User=root" -q
    # The archive these machines reach is a snapshot: a suite whose Release
    # carries Valid-Until (sid does) reads as expired once the snapshot is
    # older than that ("Release file ... is expired"), and update fails.
    # Accepted for these private lists only (the signature is still
    # checked); the system's apt and its sources are never given this.
    -o "Acquire::Check-Valid-Until=false"
  )
  apt-get "${APT_PRIVATE_OPTS[@]}" update >"$dir/update.log" 2>&1 \
    || { APT_PRIVATE_ERROR="apt-get update of $suite failed, see $dir/update.log"; return 1; }
}

# apt_private_download DIR PKG[=VERSION]...: the .debs into DIR/debs/; fails
# naming the first package the suite does not have.
apt_private_download() {
  local dir=$1 p missing
  shift
  for p in "$@"; do
    if ! apt-cache "${APT_PRIVATE_OPTS[@]}" show "$p" >/dev/null 2>&1; then
      missing=$p
      break
    fi
  done
  [ -z "${missing:-}" ] || { APT_PRIVATE_ERROR="the mirror has no package $missing"; return 1; }
  rm -f "$dir"/debs/*.deb
  ( cd "$dir/debs" && apt-get "${APT_PRIVATE_OPTS[@]}" download "$@" ) >"$dir/download.log" 2>&1 \
    || { APT_PRIVATE_ERROR="apt-get download failed: $(grep -m1 '^E:' "$dir/download.log" | cut -c4-) ($dir/download.log)"
         return 1; }
}
