#!/usr/bin/env bash
# Prints "URI KEYRING" of the Debian archive this machine's own apt sources
# name for its release (not the security archive), for the scripts that
# fetch from it without touching the system's sources: tools/mimalloc3.sh,
# tools/fresh_machine.sh. Exit 1 with one line on stderr when there is none.
#
#   read -r uri key < <(tools/setup/apt_source.sh) || exit 1
set -uo pipefail
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || { echo "no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }
entries() {
  # deb822 .sources: one "URI|Signed-By" per URI of an enabled deb stanza listing $codename.
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk -v cn="$codename" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " cn " "))
          for (i = 1; i <= nu; i++) print uris[i] "|" key
        types = ""; suites = ""; enabled = ""; key = ""; nu = 0
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      {
        k = tolower($1); sub(/:$/, "", k); v = $0; sub(/^[^:]*:[ \t]*/, "", v)
        if (k == "types") types = v
        else if (k == "suites") suites = v
        else if (k == "enabled") enabled = tolower(v)
        else if (k == "signed-by") key = v
        else if (k == "uris") { nu = split(v, uris, /[ \t]+/) }
      }
      END { flush() }' "$f"
  done
  # One-line format: deb [opts] URI suite components...
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk -v cn="$codename" '
      $1 != "deb" { next }
      {
        key = ""; i = 2
        if ($2 ~ /^\[/) {
          while (i <= NF) { if ($i ~ /^signed-by=/) { key = $i; sub(/^signed-by=/, "", key); sub(/\]$/, "", key) }
                            if ($i ~ /\]$/) { i++; break } ; i++ }
        }
        if ($(i + 1) == cn) print $i "|" key
      }' "$f"
  done
}
line=$(entries | grep -v -i security | head -1)
uri=${line%%|*}
key=${line#*|}
[ -n "$uri" ] || { echo "no Debian archive URI for $codename in /etc/apt/sources.list*" >&2; exit 1; }
case "$key" in /*) [ -r "$key" ] || key= ;; *) key= ;; esac
[ -n "$key" ] || key=/usr/share/keyrings/debian-archive-keyring.gpg
echo "$uri $key"
