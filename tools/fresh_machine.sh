#!/usr/bin/env bash
# Runs the README's promise on a fresh Debian 12: a minimal bookworm chroot
# (debootstrap --variant=minbase, cached as a tarball under .deps/fresh/), a
# clean clone of this checkout's HEAD commit in it (cloned from the host: the
# chroot has no git), and `./rsslab test` (or COMMAND) run there as root with
# a clean environment, in a private mount namespace. Prints one final line
# (command, exit code, commit, time), also written to .deps/fresh/last-result,
# and exits with the command's exit code. Needs root. docs/TESTING.md says more.
#
#   tools/fresh_machine.sh                          # ./rsslab test, cold (over 30 minutes on 2 cores)
#   tools/fresh_machine.sh -- bash -c './rsslab build && bazel test //tests:two_hosts_test'
#   tools/fresh_machine.sh --disk_cache=$HOME/.cache/bazel-disk -- ./rsslab build   # not a cold run
#   tools/fresh_machine.sh --keep -- bash          # a shell in it; the root is kept afterwards
#
# Options:
#   --rebuild_base     debootstrap again instead of using .deps/fresh/base-bookworm-minbase.tar.gz
#   --keep             keep the unpacked root (/var/tmp/rsslab-fresh.XXXXXX) after the run
#   --disk_cache=DIR   bind the host's Bazel disk cache DIR into the chroot (quicker, not cold)
#   --ci               set CI=true in the command's environment
#
# Uncommitted changes are not in the clone: commit first. The Debian archive
# is the one this machine's own apt sources name (tools/setup/apt_source.sh).
set -euo pipefail
# One compound command, read whole before it runs: a run takes half an hour,
# and editing this file or checking out another commit meanwhile must not
# change what the running copy does.
{
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
FRESH=$ROOT/.deps/fresh
SUITE=bookworm
BASE=$FRESH/base-$SUITE-minbase.tar.gz
PARENT=/var/tmp
IN_ROOT=/root/rsslab          # where the clone sits inside the chroot
CACHE_IN_ROOT=/var/cache/rsslab-bazel-disk-cache
PATH_IN_ROOT=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

die() { echo "fresh_machine: $*" >&2; exit 1; }
# Notes carry the seconds since the start, so a slow step shows.
note() { echo "fresh_machine: [$(( $(date +%s) - ${START:-$(date +%s)} )) s] $*" >&2; }
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }

ARGS=("$@")
REBUILD=0 KEEP=0 DISK_CACHE="" CI_ENV=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rebuild_base) REBUILD=1 ;;
    --keep) KEEP=1 ;;
    --disk_cache=*) DISK_CACHE=${1#--disk_cache=} ;;
    --ci) CI_ENV=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (try --help)" ;;
  esac
  shift
done
CMD=("$@")
[ ${#CMD[@]} -gt 0 ] || CMD=(./rsslab test)

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts): run it with sudo"

# Everything below runs in a private mount namespace: the chroot's mounts are
# never seen by the host and go away with the namespace whatever happens.
if [ -z "${RSSLAB_FRESH_IN_NAMESPACE:-}" ]; then
  command -v unshare >/dev/null || die "unshare (util-linux) missing"
  RSSLAB_FRESH_IN_NAMESPACE=1 exec unshare --mount --propagation private -- "$0" "${ARGS[@]}"
fi
unset RSSLAB_FRESH_IN_NAMESPACE

START=$(date +%s)
command -v git >/dev/null || die "git missing on the host (the clone is made from the host side)"
COMMIT=$(git -C "$ROOT" rev-parse --verify HEAD 2>/dev/null) || die "$ROOT is not a git checkout with a HEAD commit"
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  note "uncommitted changes in $ROOT are not tested: the clone is of HEAD ${COMMIT:0:12}"
fi
if [ -n "$DISK_CACHE" ]; then
  [ -d "$DISK_CACHE" ] || die "--disk_cache=$DISK_CACHE: no such directory"
  DISK_CACHE=$(readlink -f "$DISK_CACHE")
fi
mkdir -p "$FRESH"

# uri and key: the Debian archive this machine's own apt sources name.
apt_source() {
  local out
  out=$("$ROOT/tools/setup/apt_source.sh" 2>&1) \
    || die "no apt source: $out (tools/setup/apt_source.sh reads this machine's apt sources)"
  read -r uri key <<<"$out"
}

ensure_debootstrap() {
  command -v debootstrap >/dev/null && return 0
  note "installing debootstrap on the host"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1; } \
    || die "debootstrap is missing and apt-get install -y debootstrap failed"
  command -v debootstrap >/dev/null || die "debootstrap is still missing after apt-get install -y debootstrap"
}

# The base: a bare debootstrap of $SUITE, tarred. Built under a lock into a
# temporary file and renamed, so a concurrent run never reads half of one.
build_base() {
  local uri key tmp
  apt_source
  ensure_debootstrap
  tmp=$(mktemp -d "$PARENT/rsslab-fresh-base.XXXXXX")
  note "debootstrap --variant=minbase $SUITE from $uri (a few minutes)"
  if ! debootstrap --variant=minbase --keyring="$key" "$SUITE" "$tmp" "$uri" >"$FRESH/debootstrap.log" 2>&1; then
    rm -rf --one-file-system "$tmp"
    die "debootstrap failed (last lines of $FRESH/debootstrap.log: $(tail -2 "$FRESH/debootstrap.log" | tr '\n' ' '))"
  fi
  chmod 0755 "$tmp"
  tar --numeric-owner -C "$tmp" -czpf "$BASE.tmp" . || { rm -rf --one-file-system "$tmp"; die "could not write $BASE"; }
  mv "$BASE.tmp" "$BASE"
  rm -rf --one-file-system "$tmp"
  note "base cached in $BASE ($(du -h "$BASE" | cut -f1))"
}
exec 9>"$FRESH/base.lock"
flock 9
if [ "$REBUILD" = 1 ] || [ ! -s "$BASE" ]; then
  build_base
else
  note "using the cached base $BASE (--rebuild_base to debootstrap again)"
fi
flock -u 9

R=$(mktemp -d "$PARENT/rsslab-fresh.XXXXXX")

# Every process whose root is the chroot: `-ef` compares device and inode
# through /proc/PID/root without a fork (hundreds of processes, polled).
chroot_pids() {
  local p
  for p in /proc/[0-9]*; do
    [ "$p/root" -ef "$R" ] && echo "${p#/proc/}"
  done
  return 0
}

# Up to $1 seconds for the chroot's processes to be gone.
wait_gone() {
  local end=$(( SECONDS + $1 ))
  while [ $SECONDS -lt $end ]; do
    [ -n "$(chroot_pids)" ] || return 0
    sleep 0.2
  done
  [ -z "$(chroot_pids)" ]
}

stop_processes() {
  local pids names
  # The Bazel servers first, politely: the workspace's and the sanitizer
  # step's own output base (./rsslab test's OUTPUT_BASE-asan), any other too.
  if [ -x "$R/usr/bin/bazel" ] && [ -d "$R$IN_ROOT" ]; then
    local pidfile base
    for pidfile in "$R"/root/.cache/bazel/_bazel_root/*/server/server.pid.txt; do
      [ -e "$pidfile" ] || continue
      base=${pidfile#"$R"}; base=${base%/server/server.pid.txt}
      timeout 120 chroot "$R" /usr/bin/env -i HOME=/root PATH="$PATH_IN_ROOT" LANG=C.UTF-8 \
        /bin/sh -c 'cd "$1" && exec bazel --output_base="$2" shutdown' sh "$IN_ROOT" "$base" \
        </dev/null >/dev/null 2>&1 || true
    done
  fi
  pids=$(chroot_pids)
  [ -n "$pids" ] || return 0
  names=$(for p in $pids; do cat "/proc/$p/comm" 2>/dev/null; done | sort | uniq -c | awk '{printf "%s%s(%d)", s, $2, $1; s=" "}')
  note "stopping processes left in the chroot: $names"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  wait_gone 5 && return 0
  # shellcheck disable=SC2046
  kill -KILL $(chroot_pids) 2>/dev/null || true
  wait_gone 10 && return 0
  pids=$(chroot_pids)
  note "processes still in the chroot after SIGKILL: $pids"
}

mounts_under() { awk -v r="$R" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo; }

# Stop what is left, unmount, remove the root (unless --keep). Idempotent:
# run once after the command, and by the EXIT trap on every other way out.
TORN_DOWN=0
teardown() {
  local left
  [ "$TORN_DOWN" = 0 ] || return 0
  TORN_DOWN=1
  note "tearing down: Bazel servers, processes left, mounts, the root"
  stop_processes
  if [ -n "$(mounts_under)" ]; then
    umount -R "$R" 2>/dev/null || umount -R -l "$R" 2>/dev/null || true
  fi
  left=$(mounts_under)
  if [ -n "$left" ]; then
    note "still mounted, $R not removed: $(echo "$left" | tr '\n' ' ')"
  elif [ "$KEEP" = 1 ]; then
    note "kept the root: $R (remove it with rm -rf --one-file-system $R)"
  else
    rm -rf --one-file-system "$R"
    note "removed $R"
  fi
}
# shellcheck disable=SC2154  # rc is assigned in the trap itself
trap 'rc=$?; trap - EXIT; teardown; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

note "unpacking the base into $R"
tar --numeric-owner -C "$R" -xzpf "$BASE" || die "could not unpack $BASE into $R"
# mktemp made it 0700: a real / is 0755, which _apt and the tests'
# unprivileged users rely on.
chmod 0755 "$R"

# The archive as the host reaches it: the URI of its own apt sources (the
# release and its updates), and the host's apt settings for reaching it: a
# proxy, a snapshot mirror's dates (Acquire::Check-Valid-Until).
apt_source
rm -f "$R/etc/apt/sources.list"
cat >"$R/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $uri
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt-config dump 2>/dev/null | grep -E '^Acquire::(Check-Valid-Until|Check-Date|(https?|ftp)::Proxy) ' \
  >"$R/etc/apt/apt.conf.d/99host-acquire" || rm -f "$R/etc/apt/apt.conf.d/99host-acquire"
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
# A fresh install has these two lines; debootstrap writes no /etc/hosts.
[ -s "$R/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$R/etc/hosts"

note "cloning ${COMMIT:0:12} into $IN_ROOT"
{ git clone -q --no-hardlinks --no-checkout "$ROOT" "$R$IN_ROOT" \
  && git -C "$R$IN_ROOT" fetch -q "$ROOT" "$COMMIT" \
  && git -C "$R$IN_ROOT" checkout -q --detach "$COMMIT"; } >"$FRESH/clone.log" 2>&1 \
  || die "git clone of $ROOT at ${COMMIT:0:12} failed: $(tail -1 "$FRESH/clone.log")"

# `/` inside must be a mount point: ip netns exec runs `mount --make-rslave /`,
# which fails with EINVAL in a plain chroot.
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
# A booted machine has its cgroup hierarchies mounted (slurmd refuses to
# start without them: "No filesystem mounted on /sys/fs/cgroup").
if mountpoint -q /sys/fs/cgroup; then mount --rbind /sys/fs/cgroup "$R/sys/fs/cgroup"; fi
mount --bind /dev "$R/dev"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$R/dev/pts"
mount --bind "$R/dev/pts/ptmx" "$R/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/dev/shm"
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$R/run"
mkdir -m 1777 "$R/run/lock"

KIND="cold: no Bazel cache"
if [ -n "$DISK_CACHE" ]; then
  mkdir -p "$R$CACHE_IN_ROOT"
  mount --bind "$DISK_CACHE" "$R$CACHE_IN_ROOT"
  echo "build --disk_cache=$CACHE_IN_ROOT" >"$R/root/.bazelrc"
  KIND="NOT a cold run: host disk cache $DISK_CACHE"
  note "--disk_cache: the host's Bazel disk cache $DISK_CACHE is bound in; this is NOT a cold run"
fi

ENV=(HOME=/root PATH="$PATH_IN_ROOT" LANG=C.UTF-8)
[ "$CI_ENV" = 1 ] && ENV+=(CI=true)
# Skipped parts fail `./rsslab test` unless this says they may (docs/TESTING.md).
[ -n "${RSSLAB_ALLOW_SKIP:-}" ] && ENV+=(RSSLAB_ALLOW_SKIP="$RSSLAB_ALLOW_SKIP")
# Only a proxy the host itself goes through, so that apt-get reaches the archive.
for v in http_proxy https_proxy no_proxy; do [ -n "${!v:-}" ] && ENV+=("$v=${!v}"); done
note "running '${CMD[*]}' in $IN_ROOT as root"
T0=$(date +%s)
# Not a plain chroot: the command gets a mount namespace of its own whose
# root is the new root (pivot_root, the host's tree detached), as on a real
# machine. In a chroot the kernel refuses user namespaces, and Bazel falls
# back from its linux-sandbox to the processwrapper sandbox.
set +e
unshare --mount --propagation private -- /bin/sh -c '
  cd "$1" && mkdir .host-root && pivot_root . .host-root && cd / && umount -l /.host-root && rmdir /.host-root \
    || { echo "fresh_machine: could not pivot_root into $1" >&2; exit 125; }
  shift; exec /usr/bin/env -i "$@"' sh "$R" "${ENV[@]}" \
  /bin/bash -c 'cd "$1" && shift && exec "$@"' bash "$IN_ROOT" "${CMD[@]}"
RC=$?
set -e
CMD_SECONDS=$(( $(date +%s) - T0 ))

teardown
mins() { printf '%d min %02d s' $(( $1 / 60 )) $(( $1 % 60 )); }
LINE="fresh_machine: '${CMD[*]}' exited $RC at commit $COMMIT in $(mins "$CMD_SECONDS") ($(mins $(( $(date +%s) - START ))) in all; $KIND)"
echo "$LINE" >"$FRESH/last-result"
echo "$LINE"
exit "$RC"
}
